"""The circuit breaker alone: its state machine in virtual time (admit / record / release /
state), origin normalisation and argument validation. No transport, no flavour fixture: the
breaker is the same object for httpx and httpx2 (the transport-level tests are in
``test_breaker_transport.py``)."""

from __future__ import annotations

import math
from typing import Any

import httpx
import pytest

import retry_transport
from retry_transport import CircuitBreaker, RetryEvent
from tests.flavour import MODULES
from tests.harness import FakeClock
from tests.locks import CountingLock

A = "https://a.example:443"  # an origin as the transports spell it
OTHER = "https://b.example:443"


def breaker(clock: FakeClock, **kwargs: Any) -> CircuitBreaker:
    kwargs.setdefault("min_requests", 4)
    kwargs.setdefault("failure_ratio", 0.5)
    kwargs.setdefault("window", 10.0)
    kwargs.setdefault("break_duration", 5.0)
    kwargs.setdefault("max_break_duration", 60.0)
    return CircuitBreaker(clock=clock, **kwargs)


def feed(b: CircuitBreaker, failures: int, successes: int = 0, origin: str = A) -> list[str]:
    """Record ``failures`` failures then ``successes`` successes; the transitions seen."""
    seen: list[str] = []
    for _ in range(failures):
        seen += b.record(origin, True, False)
    for _ in range(successes):
        seen += b.record(origin, False, False)
    return seen


def trip(b: CircuitBreaker, origin: str = A) -> None:
    """Open ``origin``'s breaker with one full window of failures."""
    assert feed(b, b.min_requests, origin=origin) == ["breaker_open"]
    assert b.state(origin) == "open"


# -- defaults and repr -------------------------------------------------------------------


def test_defaults() -> None:
    b = CircuitBreaker()
    assert (b.failure_ratio, b.min_requests, b.window, b.break_duration,
            b.max_break_duration, b.half_open_probes) == (0.5, 20, 30.0, 5.0, 60.0, 1)
    assert b.hooks == ()
    assert repr(b) == (
        "CircuitBreaker(failure_ratio=0.5, min_requests=20, window=30, break_duration=5, "
        "max_break_duration=60, half_open_probes=1)"
    )
    assert b.state(A) == "closed"  # an origin never seen is closed
    refused, probe, transitions = b.admit(A)
    assert (refused, bool(probe), list(transitions)) == (None, False, [])


# -- closed -> open: the ratio and min_requests ------------------------------------------


@pytest.mark.parametrize(
    ("ratio", "outcomes", "failures"),
    [
        (0.5, 20, 10),
        (1.0, 5, 5),
        (0.25, 4, 1),
        (0.1, 30, 3),
        (0.75, 8, 6),
        # ratios whose product with the outcome count rounds up in binary floating point
        # (0.28 * 25 == 7.000000000000001): equality must open them all the same
        (0.28, 25, 7),
        (0.14, 50, 7),
        (0.55, 100, 55),
    ],
)
def test_equality_opens(ratio: float, outcomes: int, failures: int) -> None:
    """failures / outcomes == failure_ratio opens (as in Polly and Resilience4j); one
    failure fewer does not."""
    clock = FakeClock()
    b = breaker(clock, failure_ratio=ratio, min_requests=outcomes)
    # the successes first: the last failure is the min_requests-th outcome
    assert feed(b, 0, outcomes - failures) == []
    assert feed(b, failures) == ["breaker_open"]
    assert b.state(A) == "open"

    below = breaker(clock, failure_ratio=ratio, min_requests=outcomes)
    assert feed(below, 0, outcomes - failures + 1) == []
    assert feed(below, failures - 1) == []
    assert below.state(A) == "closed"


@pytest.mark.parametrize(("ratio", "outcomes", "failures"),
                         [(0.5, 20, 10), (0.5, 4, 2), (0.25, 4, 1), (0.75, 8, 7)])
def test_the_outcome_that_reaches_min_requests_may_be_a_success(
    ratio: float, outcomes: int, failures: int
) -> None:
    """Failures first, then successes up to min_requests: once the window holds
    min_requests outcomes at or above the ratio, the breaker opens, whatever the last
    outcome was."""
    clock = FakeClock()
    b = breaker(clock, failure_ratio=ratio, min_requests=outcomes)
    assert feed(b, failures) == []
    assert feed(b, 0, outcomes - failures) == ["breaker_open"], (
        f"{failures} failures in {outcomes} outcomes (failure_ratio {ratio}, min_requests "
        f"{outcomes}) left the breaker closed"
    )
    assert b.state(A) == "open"


def test_not_one_outcome_below_min_requests() -> None:
    """min_requests - 1 failures (a ratio of 1.0) never open; the min_requests-th does."""
    clock = FakeClock()
    b = breaker(clock, min_requests=5)
    assert feed(b, 4) == []
    assert b.state(A) == "closed"
    assert b.record(A, True, False) == ["breaker_open"]
    assert b.state(A) == "open"


def test_exactly_at_min_requests_the_ratio_counts() -> None:
    """At min_requests outcomes the ratio decides, whichever order the outcomes came in."""
    clock = FakeClock()
    first = breaker(clock, min_requests=4)
    assert feed(first, 0, 2) == []
    assert feed(first, 2) == ["breaker_open"]  # 2 / 4 == 0.5 at the 4th outcome
    second = breaker(clock, min_requests=4)
    assert feed(second, 1, 3) == []  # 1 / 4 < 0.5
    assert second.state(A) == "closed"


def test_below_the_ratio_with_many_outcomes_stays_closed() -> None:
    clock = FakeClock()
    b = breaker(clock, min_requests=4)
    # 1 failure, 3 successes: 0.25; then 1 more failure: 2 / 5 = 0.4 < 0.5
    assert feed(b, 1, 3) == []
    assert b.record(A, True, False) == []
    assert b.state(A) == "closed"
    # a third failure: 3 / 6 = 0.5, opens
    assert b.record(A, True, False) == ["breaker_open"]


def test_origins_are_independent() -> None:
    clock = FakeClock()
    b = breaker(clock)
    trip(b)
    assert b.state(OTHER) == "closed"
    assert b.admit(OTHER)[0] is None
    assert feed(b, 3, origin=OTHER) == []
    assert b.state(OTHER) == "closed"


# -- the sliding window ------------------------------------------------------------------


def test_a_failure_leaves_the_window_after_window_seconds() -> None:
    """min_requests=2, ratio 1.0: a second failure opens only if the first still counts."""
    clock = FakeClock(1000.0)
    b = breaker(clock, min_requests=2, failure_ratio=1.0, window=10.0)
    assert b.record(A, True, False) == []
    clock.now = 1011.0  # a window and one bucket later: the first failure has left
    assert b.record(A, True, False) == []
    assert b.state(A) == "closed"
    clock.now = 1019.0  # the second is still inside (8 s old)
    assert b.record(A, True, False) == ["breaker_open"]


def test_a_failure_inside_the_window_still_counts() -> None:
    clock = FakeClock(1000.0)
    b = breaker(clock, min_requests=2, failure_ratio=1.0, window=10.0)
    assert b.record(A, True, False) == []
    clock.now = 1009.0
    assert b.record(A, True, False) == ["breaker_open"]


def test_successes_leave_the_window_too() -> None:
    """Old successes stop diluting the ratio once they are out of the window."""
    clock = FakeClock(1000.0)
    b = breaker(clock, min_requests=4, failure_ratio=0.5, window=10.0)
    assert feed(b, 0, 10) == []
    clock.now = 1005.0
    assert feed(b, 3) == []  # 3 / 13
    clock.now = 1011.0  # the successes (at 1000) have left, the failures (at 1005) stay
    assert b.record(A, False, False) == ["breaker_open"]  # 3 / 4
    assert b.state(A) == "open"


@pytest.mark.parametrize("offset", [0.0, 0.25, 0.5, 0.9])
@pytest.mark.parametrize("age", [9.0, 9.5, 9.95])
def test_an_outcome_counts_for_the_whole_window(offset: float, age: float) -> None:
    """Bucket granularity (window / 10) may keep an outcome up to one bucket late, never
    drop it early: a failure younger than ``window`` still counts wherever in its bucket
    it fell."""
    clock = FakeClock(1000.0 + offset)
    b = breaker(clock, min_requests=2, failure_ratio=1.0, window=10.0)
    assert b.record(A, True, False) == []
    clock.now += age
    assert b.record(A, True, False) == ["breaker_open"], (
        f"a failure {age} s old (window 10 s, recorded {offset} s into its bucket) "
        "no longer counted"
    )


@pytest.mark.parametrize("offset", [0.0, 0.25, 0.5, 0.9])
def test_an_outcome_is_gone_one_bucket_after_the_window(offset: float) -> None:
    """... and at most one bucket late: window + window / 10 seconds on, it is gone."""
    clock = FakeClock(1000.0 + offset)
    b = breaker(clock, min_requests=2, failure_ratio=1.0, window=10.0)
    assert b.record(A, True, False) == []
    clock.now += 11.0
    assert b.record(A, True, False) == []
    assert b.state(A) == "closed"


# -- open -> half-open -------------------------------------------------------------------
#
# admit() answers (refusal, probe, transitions); ``probe`` is a token (truthy for a probe)
# that goes back to record(), whatever its exact value.


def passes(b: CircuitBreaker, origin: str = A) -> None:
    """admit() lets the request through as an ordinary one (closed)."""
    refusal, probe, transitions = b.admit(origin)
    assert (refusal, bool(probe), list(transitions)) == (None, False, [])


def refusal(b: CircuitBreaker, origin: str = A) -> float:
    """admit() refuses: the seconds it says until a probe may go."""
    answer, probe, transitions = b.admit(origin)
    assert answer is not None and not probe and list(transitions) == [], (answer, probe)
    return answer


def probe(b: CircuitBreaker, *transitions: str, origin: str = A) -> Any:
    """admit() lets the request through as a probe: its token."""
    answer, token, seen = b.admit(origin)
    assert answer is None and token, (answer, token)
    assert list(seen) == list(transitions)
    return token


def test_open_refuses_with_the_time_left_then_half_open_as_the_break_ends() -> None:
    clock = FakeClock(1000.0)
    b = breaker(clock, break_duration=5.0)
    trip(b)
    assert refusal(b) == 5.0
    assert b.is_open(A)
    clock.now = 1004.0
    assert refusal(b) == 1.0
    assert b.state(A) == "open"
    clock.now = 1005.0  # exactly when the break elapses
    assert b.state(A) == "half_open"  # without anybody asking admit()
    assert not b.is_open(A)
    assert b.state(A) == "half_open"  # state() changes nothing
    probe(b, "breaker_half_open")
    assert b.state(A) == "half_open"


@pytest.mark.parametrize("probes", [1, 3])
def test_half_open_admits_exactly_half_open_probes(probes: int) -> None:
    clock = FakeClock()
    b = breaker(clock, half_open_probes=probes)
    trip(b)
    clock.now += 5.0
    probe(b, "breaker_half_open")
    for _ in range(probes - 1):
        probe(b)
    for _ in range(3):
        assert refusal(b) == 0.0  # every probe slot taken: remaining 0.0
    assert b.state(A) == "half_open"


def test_non_probe_outcomes_are_ignored_while_half_open_and_open() -> None:
    """Requests admitted before the breaker opened come back late: they change nothing."""
    clock = FakeClock()
    b = breaker(clock)
    trip(b)
    assert feed(b, 10, 10) == []  # open: ignored
    assert b.state(A) == "open"
    clock.now += 5.0
    probe(b, "breaker_half_open")
    assert feed(b, 10, 10) == []  # half-open, not probes: ignored
    assert b.state(A) == "half_open"
    assert refusal(b) == 0.0  # the probe slot is still taken


# -- half-open -> closed -----------------------------------------------------------------


def test_probe_success_closes_with_a_fresh_window() -> None:
    clock = FakeClock()
    b = breaker(clock, min_requests=4)
    trip(b)
    clock.now += 5.0
    token = probe(b, "breaker_half_open")
    assert b.record(A, False, token) == ["breaker_close"]
    assert b.state(A) == "closed"
    passes(b)
    # A fresh window: one failure right after does not reopen, nor do min_requests - 1.
    assert b.record(A, True, False) == []
    assert feed(b, 2) == []
    assert b.state(A) == "closed"
    assert b.record(A, True, False) == ["breaker_open"]  # the min_requests-th


def test_other_probes_after_the_close_change_nothing_they_should_not() -> None:
    """With two probes, the first success closes; the second's outcome, whatever the
    breaker makes of it, cannot reopen a fresh window of min_requests=2 on its own."""
    clock = FakeClock()
    b = breaker(clock, half_open_probes=2, min_requests=2, failure_ratio=1.0)
    trip(b)
    clock.now += 5.0
    first, second = probe(b, "breaker_half_open"), probe(b)
    assert b.record(A, False, first) == ["breaker_close"]
    assert b.record(A, True, second) == []
    assert b.state(A) == "closed"
    passes(b)


def test_probe_slots_are_whole_after_a_close() -> None:
    """Probes still in flight when the breaker closed leave no slot taken for the next
    half-open period."""
    clock = FakeClock()
    b = breaker(clock, half_open_probes=3, min_requests=1, failure_ratio=0.5)
    trip(b)
    clock.now += 5.0
    tokens = [probe(b, "breaker_half_open"), probe(b), probe(b)]
    assert b.record(A, False, tokens[0]) == ["breaker_close"]
    assert b.record(A, False, tokens[1]) == []
    b.release(A)  # the third ends without a verdict
    trip(b)
    clock.now += 5.0
    probe(b, "breaker_half_open")
    probe(b)
    probe(b)
    assert refusal(b) == 0.0


# -- half-open -> open: the break doubles, capped, reset after a close -------------------


def test_probe_failure_reopens_for_twice_the_break_capped_and_reset_on_close() -> None:
    clock = FakeClock(1000.0)
    b = breaker(clock, break_duration=5.0, max_break_duration=30.0)
    trip(b)
    assert b.opened_for(A) == 5.0
    breaks = []
    for _ in range(5):
        remaining = refusal(b)
        breaks.append(remaining)
        clock.now += remaining
        assert b.state(A) == "half_open"
        token = probe(b, "breaker_half_open")
        assert b.record(A, True, token) == ["breaker_open"]
        assert b.state(A) == "open"
    assert breaks == [5.0, 10.0, 20.0, 30.0, 30.0]
    assert b.opened_for(A) == 30.0
    assert refusal(b) == 30.0
    clock.now += 30.0
    token = probe(b, "breaker_half_open")
    assert b.record(A, False, token) == ["breaker_close"]
    trip(b)  # the next outage starts again from break_duration
    assert refusal(b) == 5.0
    assert b.opened_for(A) == 5.0


def test_a_reopened_breaker_is_refused_until_its_new_break_ends() -> None:
    clock = FakeClock(1000.0)
    b = breaker(clock, break_duration=5.0)
    trip(b)
    clock.now = 1005.0
    token = probe(b, "breaker_half_open")
    clock.now = 1006.0
    assert b.record(A, True, token) == ["breaker_open"]  # open until 1016
    clock.now = 1015.5
    assert refusal(b) == 0.5
    assert b.state(A) == "open"
    clock.now = 1016.0
    assert b.state(A) == "half_open"


def test_break_duration_equal_to_the_cap_never_grows() -> None:
    clock = FakeClock()
    b = breaker(clock, break_duration=7.0, max_break_duration=7.0)
    trip(b)
    for _ in range(3):
        clock.now += 7.0
        token = probe(b, "breaker_half_open")
        assert b.record(A, True, token) == ["breaker_open"]
        assert refusal(b) == 7.0


# -- release: a probe without a verdict --------------------------------------------------


def test_release_frees_a_probe_slot() -> None:
    """A probe that ends without a verdict gives its slot back: the breaker cannot stay
    half-open for ever with nobody allowed to probe."""
    clock = FakeClock()
    b = breaker(clock, half_open_probes=1)
    trip(b)
    clock.now += 5.0
    probe(b, "breaker_half_open")
    assert refusal(b) == 0.0
    b.release(A)
    assert b.state(A) == "half_open"
    probe(b)  # no second half-open transition
    assert refusal(b) == 0.0
    b.release(A)
    token = probe(b)
    assert b.record(A, False, token) == ["breaker_close"]
    assert b.state(A) == "closed"


def test_release_never_goes_below_zero() -> None:
    clock = FakeClock()
    b = breaker(clock, half_open_probes=2)
    b.release(A)  # an unknown origin: nothing happens
    trip(b)
    clock.now += 5.0
    probe(b, "breaker_half_open")
    for _ in range(5):
        b.release(A)
    probe(b)  # two slots, not seven
    probe(b)
    assert refusal(b) == 0.0


def test_a_probe_that_outlives_its_reopening_frees_no_slot_of_the_next_period() -> None:
    clock = FakeClock()
    b = breaker(clock, half_open_probes=2)
    trip(b)
    clock.now += 5.0
    first, second = probe(b, "breaker_half_open"), probe(b)
    assert refusal(b) == 0.0
    assert b.record(A, True, first) == ["breaker_open"]
    assert b.record(A, False, second) == []  # came back after the reopening: ignored
    assert b.state(A) == "open"
    clock.now += 10.0
    probe(b, "breaker_half_open")
    probe(b)
    assert refusal(b) == 0.0


# -- state(): what it accepts ------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "https://a.example",
        "https://a.example:443",
        "https://a.example/",
        "https://a.example:443/x",
        "https://a.example/x/y?q=1&r=2#frag",
        "HTTPS://A.Example/path",
        "  https://a.example  ",
        "https://user:secret@a.example/x",
        httpx.URL("https://a.example/x?q=1"),
        httpx.URL("https://a.example:443/x"),
    ],
)
def test_state_normalises_urls_and_origins(spelling: object) -> None:
    clock = FakeClock()
    b = breaker(clock)
    trip(b, "https://a.example:443")
    assert b.state(spelling) == "open"


def test_state_accepts_httpx2_urls() -> None:
    if "httpx2" not in MODULES:
        pytest.skip("httpx2 is not installed")
    httpx2 = MODULES["httpx2"][0]
    clock = FakeClock()
    b = breaker(clock)
    trip(b, "https://a.example:443")
    assert b.state(httpx2.URL("https://a.example/x?q=1")) == "open"
    assert b.state(httpx2.URL("https://a.example:8443/x")) == "closed"
    trip(b, "http://[::1]:8080")
    assert b.state(httpx2.URL("http://[::1]:8080/y")) == "open"


@pytest.mark.parametrize(
    "spelling",
    [
        "http://a.example",  # another scheme
        "https://a.example:8443",  # another port
        "https://b.example",  # another host
        "http://a.example:443",  # another scheme, same port
        httpx.URL("https://a.example:8443/"),
    ],
)
def test_state_tells_origins_apart(spelling: object) -> None:
    clock = FakeClock()
    b = breaker(clock)
    trip(b, "https://a.example:443")
    assert b.state(spelling) == "closed"


def test_state_default_ports() -> None:
    clock = FakeClock()
    b = breaker(clock)
    trip(b, "http://a.example:80")
    assert b.state("http://a.example/") == "open"
    assert b.state("http://a.example:80/x") == "open"
    assert b.state(httpx.URL("http://a.example/x")) == "open"
    assert b.state("https://a.example/") == "closed"


@pytest.mark.parametrize(
    "spelling",
    ["http://[::1]:8080", "http://[::1]:8080/x?q=1", "HTTP://[::1]:8080",
     httpx.URL("http://[::1]:8080/y")],
)
def test_state_ipv6_in_brackets(spelling: object) -> None:
    clock = FakeClock()
    b = breaker(clock)
    trip(b, "http://[::1]:8080")
    assert b.state(spelling) == "open"
    assert b.state("http://[::1]/") == "closed"  # port 80


def test_state_ipv6_default_port() -> None:
    clock = FakeClock()
    b = breaker(clock)
    trip(b, "https://[2001:db8::1]:443")
    assert b.state("https://[2001:db8::1]/x") == "open"
    assert b.state(httpx.URL("https://[2001:db8::1]/x")) == "open"


@pytest.mark.parametrize("bad", ["", "a.example", "not a url", "https://", "/just/a/path"])
def test_state_rejects_what_is_no_url(bad: str) -> None:
    with pytest.raises(ValueError, match="origin"):
        CircuitBreaker().state(bad)


@pytest.mark.parametrize("bad", [None, 42, object(), b"https://a.example"])
def test_state_rejects_what_is_no_url_object(bad: object) -> None:
    with pytest.raises(TypeError, match="origin"):
        CircuitBreaker().state(bad)


# -- construction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("failure_ratio", 0, ValueError),
        ("failure_ratio", 0.0, ValueError),
        ("failure_ratio", 1.5, ValueError),
        ("failure_ratio", -0.1, ValueError),
        ("failure_ratio", math.nan, ValueError),
        ("failure_ratio", math.inf, ValueError),
        ("failure_ratio", "0.5", TypeError),
        ("failure_ratio", True, TypeError),
        ("failure_ratio", None, TypeError),
        ("min_requests", 0, ValueError),
        ("min_requests", -1, ValueError),
        ("min_requests", 2.0, TypeError),
        ("min_requests", True, TypeError),
        ("min_requests", "20", TypeError),
        ("window", 0, ValueError),
        ("window", -1.0, ValueError),
        ("window", math.inf, ValueError),
        ("window", math.nan, ValueError),
        ("window", 1e10, ValueError),
        ("window", "30", TypeError),
        ("break_duration", 0, ValueError),
        ("break_duration", -5, ValueError),
        ("break_duration", math.inf, ValueError),
        ("break_duration", math.nan, ValueError),
        ("max_break_duration", 0, ValueError),
        ("max_break_duration", 4.9, ValueError),  # below break_duration (5.0)
        ("max_break_duration", math.inf, ValueError),
        ("max_break_duration", math.nan, ValueError),
        ("half_open_probes", 0, ValueError),
        ("half_open_probes", -1, ValueError),
        ("half_open_probes", 1.5, TypeError),
        ("half_open_probes", False, TypeError),
        ("clock", 123, TypeError),
        ("clock", "time.monotonic", TypeError),
        ("hooks", "print", TypeError),
        ("hooks", b"print", TypeError),
        ("hooks", 42, TypeError),
        ("hooks", [print, 42], TypeError),
        ("hooks", [None], TypeError),
    ],
)
def test_construction_validates_every_argument(name: str, value: object,
                                              error: type[Exception]) -> None:
    """A wrong value is a ValueError, a value of the wrong kind (a string or None where a
    number goes, a bool or a float where a count goes, something not callable where a
    function belongs) a TypeError; each names the argument."""
    with pytest.raises(error, match=name):
        CircuitBreaker(**{name: value})


def test_max_break_below_a_custom_break_is_refused() -> None:
    with pytest.raises(ValueError, match="max_break_duration"):
        CircuitBreaker(break_duration=10.0, max_break_duration=9.0)
    CircuitBreaker(break_duration=10.0, max_break_duration=10.0)  # equality is fine


def test_async_hooks_are_refused() -> None:
    async def hook(event: RetryEvent) -> None:
        pass

    with pytest.raises(TypeError, match="hooks"):
        CircuitBreaker(hooks=hook)
    with pytest.raises(TypeError, match="hooks"):
        CircuitBreaker(hooks=[print, hook])


def test_valid_hooks_and_clock() -> None:
    events: list[RetryEvent] = []
    assert CircuitBreaker(hooks=events.append).hooks == (events.append,)
    assert CircuitBreaker(hooks=[events.append, print]).hooks == (events.append, print)
    assert CircuitBreaker(hooks=(h for h in [print])).hooks == (print,)
    clock = FakeClock()
    assert CircuitBreaker(clock=clock).clock is clock
    b = CircuitBreaker(failure_ratio=1, min_requests=1, window=1, break_duration=1,
                       max_break_duration=1, half_open_probes=1)
    assert (b.failure_ratio, b.window) == (1.0, 1.0)


def test_the_breaker_is_the_same_object_for_both_flavours() -> None:
    for _, module in MODULES.values():
        assert module.CircuitBreaker is retry_transport.CircuitBreaker


def test_one_breaker_shared_by_an_httpx_and_an_httpx2_transport() -> None:
    """The state is the breaker's, whichever library's transport sent the request."""
    if "httpx2" not in MODULES:
        pytest.skip("httpx2 is not installed")
    import anyio

    httpx2, rt2 = MODULES["httpx2"]
    clock = FakeClock()
    b = CircuitBreaker(min_requests=2, failure_ratio=1.0, clock=clock)
    calls: list[str] = []
    status = [500]

    def answer(request: Any, module: Any) -> Any:
        calls.append(module.__name__)
        return module.Response(status[0])

    one = retry_transport.RetryTransport(
        httpx.MockTransport(lambda r: answer(r, httpx)), breaker=b, clock=clock,
        sleep=clock.sleep,
    )
    two = rt2.RetryTransport(
        httpx2.MockTransport(lambda r: answer(r, httpx2)), breaker=b, clock=clock,
        sleep=clock.sleep,
    )
    two_async = rt2.AsyncRetryTransport(
        httpx2.MockTransport(lambda r: answer(r, httpx2)), breaker=b, clock=clock,
        sleep=clock.asleep,
    )
    url = "https://api.example.com/items"
    with httpx.Client(transport=one) as c1, httpx2.Client(transport=two) as c2:
        assert c1.get(url).status_code == 500
        assert c2.get(url).status_code == 500  # the second failure, from the other library
        assert b.state(url) == "open"
        with pytest.raises(rt2.CircuitOpenError) as caught2:
            c2.get(url)
        assert isinstance(caught2.value, httpx2.TransportError)
        assert not isinstance(caught2.value, httpx.TransportError)
        with pytest.raises(retry_transport.CircuitOpenError) as caught1:
            c1.get(url)
        assert isinstance(caught1.value, httpx.TransportError)
        assert caught1.value.origin == caught2.value.origin == "https://api.example.com:443"
        assert calls == ["httpx", "httpx2"]
        clock.now += 5.0
        status[0] = 200

        async def probe() -> int:
            async with httpx2.AsyncClient(transport=two_async) as client:
                return (await client.get(url)).status_code

        assert anyio.run(probe) == 200  # an httpx2 async probe closes it for everybody
        assert b.state(url) == "closed"
        assert c1.get(url).status_code == 200
    assert calls == ["httpx", "httpx2", "httpx2", "httpx"]


# -- successes counted without the lock -------------------------------------------------------


def test_successes_in_the_current_bucket_take_no_lock() -> None:
    clock = FakeClock()
    b = breaker(clock)
    b.record(A, False)  # the origin's first outcome makes its entry, under the lock
    lock = CountingLock()
    b._lock = lock  # type: ignore[assignment]
    for _ in range(1000):
        assert b.record(A, False) == []
    assert lock.taken == 0
    clock.now += b.window / 10  # the next bucket: the first success there takes the lock
    b.record(A, False)
    b.record(A, False)
    assert lock.taken == 1


def test_lock_free_successes_count_in_the_ratio() -> None:
    """1,000 successes counted without the lock, then failures: it opens at 1,000 failures
    (1,000 of 2,000 is the ratio of 0.5), not before."""
    clock = FakeClock()
    b = breaker(clock, min_requests=20)
    assert feed(b, 0, 1000) == []
    assert feed(b, 999) == []
    assert b.state(A) == "closed"
    assert feed(b, 1) == ["breaker_open"]


def test_lock_free_successes_leave_the_window_with_their_bucket() -> None:
    """Successes counted without the lock belong to the bucket they were counted in: once
    it leaves the window, four failures alone open the breaker."""
    clock = FakeClock()
    b = breaker(clock)
    feed(b, 0, 500)
    clock.now += b.window + b.window / 10
    assert feed(b, 4) == ["breaker_open"]


def test_no_success_is_counted_without_the_lock_while_one_could_open_it() -> None:
    """With failures in a window short of min_requests, the success that fills it may open
    the breaker: that one must be decided under the lock."""
    clock = FakeClock()
    b = breaker(clock, min_requests=4, failure_ratio=0.5)
    feed(b, 2, 1)  # 3 outcomes, 2 failures: one more success makes 2 of 4
    assert feed(b, 0, 1) == ["breaker_open"]


def test_successes_from_many_threads_are_all_counted() -> None:
    import threading

    clock = FakeClock()
    b = breaker(clock, min_requests=20)
    b.record(A, False)

    def succeed() -> None:
        for _ in range(2500):
            b.record(A, False)

    threads = [threading.Thread(target=succeed) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # 10,001 successes: 10,000 failures keep the ratio just below 0.5, one more reaches it
    # (a success lost between threads would make it open one failure early).
    assert feed(b, 10_000) == []
    assert feed(b, 1) == ["breaker_open"]


def test_a_closed_breaker_keeps_no_memory_per_success() -> None:
    import tracemalloc

    clock = FakeClock()
    b = breaker(clock)
    feed(b, 0, 100)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        feed(b, 0, 10_000)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = [stat for stat in after.compare_to(before, "filename")
             if stat.traceback[0].filename.endswith("_guards/breaker.py") and stat.size_diff > 0]
    assert grown == []


# -- memory follows the origins active in the window -------------------------------------------


def test_the_breaker_forgets_origins_with_an_empty_window() -> None:
    """One success to each of 20,000 origins, 100 a second: the breaker keeps those of the
    last window (and at most twice them, or a floor), not all 20,000."""
    clock = FakeClock()
    b = breaker(clock, window=10.0)
    for i in range(20_000):
        if i % 100 == 0:
            clock.now += 1.0
        b.record(f"https://o{i}.example:443", False)
    active = 100 * 11  # the last window and its bucket
    assert len(b._origins) <= max(1024, 2 * active) + 100


def test_an_origin_in_the_window_is_never_forgotten() -> None:
    """Three failures of A, then thousands of other origins within the window: A keeps its
    failures, and its fourth opens it."""
    clock = FakeClock()
    b = breaker(clock, window=10.0, min_requests=4, failure_ratio=1.0)
    assert feed(b, 3) == []
    for i in range(5000):
        clock.now += 0.001
        b.record(f"https://o{i}.example:443", False)
    assert feed(b, 1) == ["breaker_open"]


def test_a_learned_opening_long_over_is_forgotten() -> None:
    """Openings learned for origins this breaker never calls leave once their break ended a
    window ago; the breaker counts no open origin any more."""
    clock = FakeClock()
    b = breaker(clock, window=10.0, break_duration=5.0)
    for i in range(3000):
        b._learn(f"https://o{i}.example:443", "open", 5.0, 5.0)
    assert b.unclosed == 3000
    clock.now += 5.0 + 10.0
    b.record(A, False)
    for i in range(3000, 3000 + 2000):  # new origins: the table is looked over
        b.record(f"https://o{i}.example:443", False)
    assert b.unclosed == 0
    assert all(entry.state == "closed" for entry in b._origins.values())
    assert b.state("https://o1.example:443") == "closed"
