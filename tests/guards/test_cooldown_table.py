"""The origin cooldown table on its own, driven by a fake clock: starting a cooldown, what is
left of it, which of two wins, expiry, the bounds on what it keeps, and its guard answers.
Nothing sleeps and no request is sent."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest

from retry_transport import RetryPolicy, StopReason
from retry_transport._guards.cooldowns import INBOX_LIMIT, CooldownTable
from retry_transport._guards.seam import FIRST, HEDGE, RETRY, AttemptKind, Hold, Refusal
from retry_transport._policy.rules import Outcome

A = "https://a.example.com:443"
B = "https://b.example.com:443"
START = 1000.0


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeStore:
    """Just what a table asks of its store: a wall clock, and where its cooldowns go."""

    def __init__(self, wall: float) -> None:
        self.wallclock = FakeClock(wall)
        self.members: list[CooldownTable] = []
        self.shared: list[tuple[str, float, str]] = []

    def _join_cooldowns(self, member: CooldownTable) -> None:
        self.members.append(member)

    def _cooldown(self, source: CooldownTable, origin: str, remaining: float,
                  signal: str) -> None:
        self.shared.append((origin, remaining, signal))


class Call:
    """The few things of a request the table reads (a CallView)."""

    def __init__(self, origin: str = A, *, enabled: bool = True,
                 policy: RetryPolicy | None = None, time_left: float | None = None,
                 testing: object = None) -> None:
        self.origin = origin
        self.enabled = enabled
        self.policy = policy or RetryPolicy(jitter="none", base_delay=0.5)
        self.time_left = time_left
        self.testing = testing
        self.rng = random.Random(0)


def table(clock: FakeClock | None = None, store: FakeStore | None = None) -> CooldownTable:
    """A table on ``clock`` (a fresh fake clock at ``START`` by default)."""
    return CooldownTable(clock or FakeClock(), store)  # type: ignore[arg-type]


def admit(cooldowns: CooldownTable, call: Call, kind: AttemptKind = FIRST) -> object:
    """The table's answer to an attempt of ``kind`` (the table takes nothing as ``paid``)."""
    return cooldowns.admit(call, kind, None)  # type: ignore[arg-type]


# -- what is left as the clock advances ------------------------------------------------------


@pytest.mark.parametrize(("elapsed", "left"),
                         [(0.0, 10.0), (2.5, 7.5), (9.75, 0.25), (10.0, 0.0), (60.0, 0.0)],
                         ids=["at-once", "partway", "nearly-over", "at-the-end", "long-after"])
def test_what_is_left_as_the_clock_advances(elapsed: float, left: float) -> None:
    """A cooldown until t+10 leaves exactly 10 - elapsed seconds, never less than 0."""
    clock = FakeClock()
    cooldowns = table(clock)
    cooldowns.start(A, START + 10.0)
    clock.now += elapsed
    assert cooldowns.left(A, clock()) == pytest.approx(left)


def test_a_cooldown_is_per_origin() -> None:
    """Another origin, even of the same host on another port or scheme, has no cooldown."""
    cooldowns = table()
    cooldowns.start(A, START + 10.0)
    for other in (B, "https://a.example.com:8443", "http://a.example.com:80"):
        assert cooldowns.left(other, START) == 0.0
    assert cooldowns.left(A, START) == 10.0


@pytest.mark.parametrize(
    ("first", "second", "until", "signal"),
    [((20.0, "retry-after"), (30.0, "x-ratelimit-reset"), 30.0, "x-ratelimit-reset"),
     ((30.0, "retry-after"), (20.0, "x-ratelimit-reset"), 30.0, "retry-after"),
     ((20.0, "retry-after"), (20.0, "ratelimit"), 20.0, "retry-after")],
    ids=["later-lengthens", "earlier-ignored", "equal-keeps-the-first"],
)
def test_the_longer_of_two_cooldowns_wins(first: tuple[float, str], second: tuple[float, str],
                                          until: float, signal: str) -> None:
    """A second cooldown replaces the first (and its signal) only when it ends later."""
    cooldowns = table()
    cooldowns.start(A, START + first[0], first[1])
    cooldowns.start(A, START + second[0], second[1])
    assert cooldowns.left(A, START) == until
    assert cooldowns.signals[A] == signal


def test_the_signal_defaults_to_retry_after() -> None:
    """A cooldown started without a signal header is recorded as Retry-After's."""
    cooldowns = table()
    cooldowns.start(A, START + 5.0, None)
    assert cooldowns.signals == {A: "retry-after"}


# -- expiry and the bound on what the table keeps ----------------------------------------------


def test_an_expired_cooldown_is_forgotten() -> None:
    """Once over, a cooldown leaves neither an entry, a signal, nor a heap entry behind."""
    clock = FakeClock()
    cooldowns = table(clock)
    cooldowns.start(A, START + 5.0, "x-ratelimit-reset")
    clock.now = START + 5.0
    assert cooldowns.left(A, clock()) == 0.0
    assert (cooldowns.until, cooldowns.signals, cooldowns._expiry) == ({}, {}, [])


def test_a_lengthened_cooldown_outlives_its_first_end() -> None:
    """The first end of a lengthened cooldown passes without expiring it."""
    clock = FakeClock()
    cooldowns = table(clock)
    cooldowns.start(A, START + 10.0)
    cooldowns.start(A, START + 20.0)
    clock.now = START + 15.0
    assert cooldowns.left(A, clock()) == 5.0
    assert A in cooldowns.until
    clock.now = START + 20.0
    assert cooldowns.left(A, clock()) == 0.0
    assert cooldowns.until == {} and cooldowns._expiry == []


@pytest.mark.parametrize(("elapsed", "kept"), [(0.5, 100), (50.5, 50), (99.5, 1), (100.0, 0)],
                         ids=["none-over", "half-over", "one-left", "all-over"])
def test_the_table_keeps_only_the_cooldowns_not_over(elapsed: float, kept: int) -> None:
    """Any look at the table drops every cooldown already over, so it holds live ones only."""
    clock = FakeClock()
    cooldowns = table(clock)
    for number in range(1, 101):
        cooldowns.start(f"https://host{number}.example:443", START + number)
    clock.now = START + elapsed
    cooldowns.left("https://elsewhere.example:443", clock())
    assert len(cooldowns.until) == len(cooldowns.signals) == kept
    assert len(cooldowns._expiry) == kept


@pytest.mark.parametrize(
    ("ends", "elapsed", "quiet"),
    [((), 0.0, True), ((5.0,), 0.0, False), ((5.0,), 5.0, True), ((5.0, 9.0), 5.0, False),
     ((5.0, 9.0), 9.0, True)],
    ids=["never-started", "cooling", "over", "one-of-two-over", "both-over"],
)
def test_the_table_is_quiet_only_without_cooldowns(ends: tuple[float, ...], elapsed: float,
                                                   quiet: bool) -> None:
    """``quiet`` (first attempts go without asking) holds exactly while nothing cools down."""
    clock = FakeClock()
    cooldowns = table(clock)
    for number, end in enumerate(ends):
        cooldowns.start(f"https://host{number}.example:443", START + end)
    clock.now = START + elapsed
    cooldowns.left(A, clock())
    assert cooldowns.idle is quiet


def test_the_inbox_is_bounded_and_keeps_the_latest_ending() -> None:
    """Past INBOX_LIMIT origins, the inbox drops to half, keeping the cooldowns that end last."""
    cooldowns = table()
    for number in range(INBOX_LIMIT):
        cooldowns.receive_cooldown(f"https://h{number}.example:443", START + number, "retry-after")
    assert len(cooldowns.inbox) == INBOX_LIMIT
    cooldowns.receive_cooldown(B, START + 0.5, "retry-after")  # one more: the inbox is trimmed
    kept = sorted(until for origin, (until, _) in cooldowns.inbox.items() if origin != B)
    assert kept == [START + n for n in range(INBOX_LIMIT // 2, INBOX_LIMIT)]
    cooldowns.receive_cooldown(A, START + 1.0, "ratelimit")  # the trimmed inbox takes new ones
    assert cooldowns.inbox[A] == (START + 1.0, "ratelimit")
    assert len(cooldowns.inbox) <= INBOX_LIMIT // 2 + 2


@pytest.mark.parametrize(
    ("first", "second", "kept"),
    [(20.0, 30.0, 30.0), (30.0, 20.0, 30.0)],
    ids=["later-replaces", "earlier-ignored"],
)
def test_the_inbox_keeps_the_latest_cooldown_per_origin(first: float, second: float,
                                                        kept: float) -> None:
    """Two cooldowns received for one origin: the inbox keeps the one that ends later."""
    cooldowns = table()
    cooldowns.receive_cooldown(A, first, "retry-after")
    cooldowns.receive_cooldown(A, second, "ratelimit")
    assert cooldowns.inbox[A][0] == kept
    assert cooldowns.idle is False


# -- sharing through a store -------------------------------------------------------------------


def test_a_table_joins_its_store() -> None:
    """A table given a store becomes one of its members."""
    store = FakeStore(wall=5000.0)
    cooldowns = table(store=store)
    assert store.members == [cooldowns]


def test_a_started_cooldown_is_shared_only_when_it_lengthens() -> None:
    """The store hears of a cooldown in seconds left, once per lengthening, never when shorter."""
    store = FakeStore(wall=5000.0)
    cooldowns = table(store=store)
    cooldowns.start(A, START + 10.0, "retry-after")
    cooldowns.start(A, START + 5.0, "retry-after")
    cooldowns.start(A, START + 12.0, "ratelimit")
    cooldowns.start(B, START + 3.0, "retry-after", share=False)
    assert store.shared == [(A, 10.0, "retry-after"), (A, 12.0, "ratelimit")]


def test_a_received_cooldown_applies_in_the_table_clock() -> None:
    """Wall-clock ends from the store become the table's own clock at the next look."""
    clock = FakeClock(START)
    store = FakeStore(wall=5000.0)
    cooldowns = table(clock, store)
    cooldowns.receive_cooldown(A, 5008.0, "ratelimit")
    cooldowns.receive_cooldown(B, 5001.0, "retry-after")
    store.wallclock.now = 5002.0  # B's is over by the time the table looks
    cooldowns.take_inbox()
    assert cooldowns.inbox == {}
    assert cooldowns.until == {A: START + 6.0}
    assert cooldowns.signals == {A: "ratelimit"}
    assert store.shared == []  # what came from the store is not sent back to it


def test_a_received_cooldown_already_over_is_not_kept() -> None:
    """A cooldown that ended before it arrived leaves the inbox empty and the table quiet."""
    store = FakeStore(wall=5000.0)
    cooldowns = table(store=store)
    cooldowns.receive_cooldown(A, 5000.0, "retry-after")
    assert cooldowns.inbox == {}
    assert cooldowns.idle is True


# -- the guard: admitting first attempts, hedges and retries ------------------------------------

TOO_LONG = StopReason.RETRY_AFTER_TOO_LONG

#: (call, kind, seconds of cooldown on A (None: none), expected): expected is None, a
#: ("hold", wait) or a ("refuse", reason, error, remaining).
ADMIT: list[Any] = [
    pytest.param(Call(), FIRST, None, None, id="first-no-cooldown"),
    pytest.param(Call(), FIRST, 5.0, ("hold", 5.5), id="first-held-floor-plus-backoff"),
    pytest.param(Call(B), FIRST, 5.0, None, id="first-other-origin"),
    pytest.param(Call(enabled=False), FIRST, 5.0, None, id="first-retries-disabled"),
    pytest.param(Call(policy=RetryPolicy(respect_retry_after=False)), FIRST, 5.0, None,
                 id="first-retry-after-not-respected"),
    pytest.param(Call(), FIRST, 90.0, ("refuse", TOO_LONG, "cooldown", 90.0),
                 id="first-over-max-retry-after"),
    pytest.param(Call(), FIRST, 60.0, ("hold", 60.5), id="first-at-max-retry-after"),
    pytest.param(Call(time_left=5.5), FIRST, 5.0,
                 ("refuse", StopReason.DEADLINE, "cooldown", 5.0), id="first-wait-hits-deadline"),
    pytest.param(Call(time_left=5.6), FIRST, 5.0, ("hold", 5.5), id="first-within-deadline"),
    pytest.param(Call(), HEDGE, 5.0, ("refuse", TOO_LONG, None, None), id="hedge-refused"),
    pytest.param(Call(), HEDGE, None, None, id="hedge-no-cooldown"),
    pytest.param(Call(), RETRY, 5.0, None, id="retry-not-held"),
]


@pytest.mark.parametrize(("call", "kind", "cooling", "expected"), ADMIT)
def test_admit(call: Call, kind: AttemptKind, cooling: float | None, expected: Any) -> None:
    """A first attempt to a cooling origin waits its time plus one backoff step, or is refused."""
    cooldowns = table()
    if cooling is not None:
        cooldowns.start(A, START + cooling)
    answer = admit(cooldowns, call, kind)
    if expected is None:
        assert answer is None
    elif expected[0] == "hold":
        assert isinstance(answer, Hold)
        assert (answer.wait, answer.signal) == (pytest.approx(expected[1]), "retry-after")
    else:
        assert isinstance(answer, Refusal)
        assert (answer.reason, answer.error) == (expected[1], expected[2])
        if expected[3] is None:  # a hedge's refusal is never raised: no error fields
            assert answer.fields == {}
        else:
            assert answer.fields == {"origin": A, "remaining": pytest.approx(expected[3])}


def test_admit_after_the_cooldown_is_over() -> None:
    """A first attempt once the cooldown is over goes at once."""
    clock = FakeClock()
    cooldowns = table(clock)
    cooldowns.start(A, START + 5.0)
    clock.now = START + 5.0
    assert admit(cooldowns, Call()) is None


@pytest.mark.parametrize(("signal", "shown"),
                         [("retry-after", "(Retry-After)"), ("ratelimit", "(ratelimit)")],
                         ids=["retry-after", "ratelimit"])
def test_a_refusal_says_who_asked_and_why(signal: str, shown: str) -> None:
    """A refused first attempt names the origin, the header, the time left and the limit."""
    cooldowns = table()
    cooldowns.start(A, START + 90.0, signal)
    answer = admit(cooldowns, Call())
    assert isinstance(answer, Refusal)
    assert answer.message == (f"{A} asked for quiet {shown} for 90.000 s more, "
                              "more than max_retry_after=60 s: not sent")


def test_a_hold_carries_the_signal_that_started_the_cooldown() -> None:
    """A held first attempt says which header asked for the quiet, and who holds it."""
    cooldowns = table()
    cooldowns.start(A, START + 5.0, "x-ratelimit-reset")
    answer = admit(cooldowns, Call())
    assert isinstance(answer, Hold) and answer.signal == "x-ratelimit-reset"
    assert answer.holder == "cooldown"


def test_a_first_attempt_applies_the_inbox() -> None:
    """Admitting a first attempt turns received cooldowns into the table's own first."""
    store = FakeStore(wall=5000.0)
    cooldowns = table(store=store)
    cooldowns.receive_cooldown(A, 5004.0, "retry-after")
    answer = admit(cooldowns, Call())
    assert isinstance(answer, Hold) and answer.wait == pytest.approx(4.5)


# -- learning from outcomes ----------------------------------------------------------------------

#: (quiet, signal, testing, cooldown left on A)
LEARN: list[Any] = [
    pytest.param(7.0, "retry-after", None, 7.0, id="quiet-starts-a-cooldown"),
    pytest.param(3.0, "x-ratelimit-reset", None, 3.0, id="quota-reset"),
    pytest.param(None, None, None, 0.0, id="no-quiet"),
    pytest.param(7.0, "retry-after", object(), 0.0, id="testing-mode-keeps-time-still"),
]


@pytest.mark.parametrize(("quiet", "signal", "testing", "left"), LEARN)
def test_learn(quiet: float | None, signal: str | None, testing: object, left: float) -> None:
    """An outcome asking for quiet starts a cooldown, except in testing mode."""
    cooldowns = table()
    outcome = Outcome(503, None, True, quiet=quiet, signal=signal, floor=quiet)
    cooldowns.learn(Call(testing=testing), outcome)  # type: ignore[arg-type]
    assert cooldowns.left(A, START) == left
    if left:
        assert cooldowns.signals[A] == signal


def test_the_table_vetoes_no_retry() -> None:
    """The table only holds first attempts: it has no stop reason and vetoes nothing."""
    cooldowns = table()
    cooldowns.start(A, START + 5.0)
    assert cooldowns.reason is None
    assert cooldowns.veto(Call(), Outcome(503, None, True)) is None  # type: ignore[arg-type]


# -- idle_for: requests to hosts without a cooldown ----------------------------------------------

#: (origin cooling, request URL, plain)
SIGNAL_FREE: list[Any] = [
    pytest.param(None, "https://a.example.com/x", True, id="nothing-cools"),
    pytest.param(A, "https://a.example.com/x", False, id="cooling-host"),
    pytest.param(A, "https://A.EXAMPLE.COM/x", False, id="cooling-host-any-case"),
    pytest.param(A, "https://a.example.com:8443/x", False, id="same-host-other-port"),
    pytest.param(A, "https://b.example.com/x", True, id="other-host"),
    pytest.param("https://[::1]:443", "https://[::1]/x", False, id="ipv6-host"),
    pytest.param("https://[::1]:443", "https://b.example.com/x", True, id="ipv6-other-host"),
    pytest.param("https://b\u00fccher.example:443", "https://b.example.com/x", False,
                 id="non-ascii-origin-makes-every-host-unsure"),
]


@pytest.mark.parametrize(("cooling", "url", "plain"), SIGNAL_FREE)
def test_idle_for(cooling: str | None, url: str, plain: bool) -> None:
    """A request goes the quick way only when its host surely has no cooldown."""
    cooldowns = table()
    if cooling is not None:
        cooldowns.start(cooling, START + 5.0)
    assert cooldowns.idle_for(httpx.Request("GET", url)) is plain


def test_idle_for_again_once_the_cooldown_is_over() -> None:
    """When the host's cooldown ends, its requests go the quick way again."""
    clock = FakeClock()
    cooldowns = table(clock)
    cooldowns.start("https://b\u00fccher.example:443", START + 5.0)
    cooldowns.start(A, START + 5.0)
    request = httpx.Request("GET", "https://a.example.com/x")
    assert cooldowns.idle_for(request) is False
    clock.now = START + 5.0
    assert cooldowns.idle_for(request) is True


def test_idle_for_is_unsure_while_the_inbox_holds_anything() -> None:
    """A received cooldown not applied yet makes every request take the long way."""
    cooldowns = table()
    cooldowns.receive_cooldown(B, START + 5.0, "retry-after")
    assert cooldowns.idle_for(httpx.Request("GET", "https://a.example.com/x")) is False


def test_the_cooldown_that_fills_the_inbox_is_kept() -> None:
    """The cooldown whose arrival trims a full inbox is in the inbox afterwards."""
    cooldowns = table()
    for number in range(INBOX_LIMIT):
        cooldowns.receive_cooldown(f"https://h{number}.example:443", START + number, "retry-after")
    cooldowns.receive_cooldown(B, START + INBOX_LIMIT + 5.0, "retry-after")  # ends last of all
    assert cooldowns.inbox[B] == (START + INBOX_LIMIT + 5.0, "retry-after")
    assert len(cooldowns.inbox) == INBOX_LIMIT // 2 + 1
