"""The adaptive throttle alone: the rule at its boundaries, the draw, the trailing window in
virtual time, origin normalisation, argument validation, exact counts under threads and
tasks, and the memory it keeps. No transport: the throttle is the same object for httpx and
httpx2."""

from __future__ import annotations

import math
import os
import random
import sys
import threading
import time
from typing import Any

import anyio
import httpx
import pytest

from retry_transport._base.counting import PRUNE_AT as _PRUNE_AT
from retry_transport._guards.throttle import _BUCKETS, AdaptiveThrottle
from tests.flavour import MODULES
from tests.locks import CountingLock

A = "https://a.example:443"  # an origin as the transports spell it
OTHER = "https://b.example:443"


class Clock:
    """A monotonic clock that moves only when a test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingRandom(random.Random):
    """A seeded Random that counts its draws."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed)
        self.draws = 0

    def random(self) -> float:
        self.draws += 1
        return super().random()


class FixedRandom(random.Random):
    """A Random whose every draw is ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value
        self.draws = 0

    def random(self) -> float:
        self.draws += 1
        return self.value


def throttle(clock: Clock | None = None, **kwargs: Any) -> AdaptiveThrottle:
    kwargs.setdefault("rng", CountingRandom())
    return AdaptiveThrottle(clock=clock or Clock(), **kwargs)


def fill(t: AdaptiveThrottle, requests: int, accepts: int, origin: str = A) -> None:
    """Count ``requests`` more attempts whose outcome came back, ``accepts`` of them
    accepted (``accepts <= requests``)."""
    assert accepts <= requests
    before_requests, before_accepts = t.counts(origin)
    for _ in range(accepts):
        t.record(origin, True)
    for _ in range(requests - accepts):
        t.record(origin, False)
    assert t.counts(origin) == (before_requests + requests, before_accepts + accepts)


def send(t: AdaptiveThrottle, origin: str = A, accepted: bool = True,
         forced: float | None = None) -> float | None:
    """One attempt as a transport makes it: decided, and if let through, its outcome."""
    refused = t.decide(origin, forced)
    if refused is None:
        t.record(origin, accepted)
    return refused


# -- defaults, repr, small pieces ---------------------------------------------------------


def test_defaults() -> None:
    t = AdaptiveThrottle()
    assert (t.k, t.window, t.reject_statuses, t.hooks) == (2.0, 120.0, frozenset({429, 503}),
                                                           ())
    assert isinstance(t.rng, random.Random)
    assert callable(t.clock)
    assert repr(t) == "AdaptiveThrottle(k=2, window=120, reject_statuses=[429, 503])"
    assert t.probability(A) == 0.0
    assert t.counts(A) == (0, 0)


def test_the_arguments_are_kept() -> None:
    rng, clock = random.Random(1), Clock()

    def hook(event: object) -> None:
        pass

    t = AdaptiveThrottle(1.5, 30, reject_statuses=[429], rng=rng, clock=clock, hooks=hook)
    assert (t.k, t.window, t.reject_statuses) == (1.5, 30.0, frozenset({429}))
    assert (t.rng, t.clock, t.hooks) == (rng, clock, (hook,))
    assert repr(t) == "AdaptiveThrottle(k=1.5, window=30, reject_statuses=[429])"


def test_accepts_status() -> None:
    t = AdaptiveThrottle()
    assert not t.accepts_status(429)
    assert not t.accepts_status(503)
    for status in (200, 204, 301, 404, 500, 502, 504):
        assert t.accepts_status(status), status
    custom = AdaptiveThrottle(reject_statuses={500, 502})
    assert custom.accepts_status(429) and custom.accepts_status(503)
    assert not custom.accepts_status(500) and not custom.accepts_status(502)
    assert AdaptiveThrottle(reject_statuses=()).accepts_status(503)


# -- the rule ----------------------------------------------------------------------------------


def test_nothing_is_refused_or_drawn_while_accepts_keep_up() -> None:
    rng = CountingRandom()
    t = throttle(rng=rng)  # k = 2
    for _ in range(1000):  # every attempt accepted: requests == accepts
        assert t.decide(A) is None
        t.record(A, True)
    assert t.counts(A) == (1000, 1000)
    t2 = throttle(rng=rng)
    fill(t2, 10, 10)
    for _ in range(10):  # turned away, up to requests == k * accepts before the attempt
        assert t2.probability(A) == 0.0
        assert send(t2, accepted=False) is None
    assert rng.draws == 0
    assert t2.counts(A) == (20, 10)
    assert send(t2, accepted=False) is None and rng.draws == 0  # 20 - 2 * 10 = 0: no draw
    assert t2.probability(A) == 1 / 22  # one past the boundary: (21 - 20) / (21 + 1)
    t2.decide(A)
    assert rng.draws == 1


def test_the_books_example() -> None:
    t = throttle()
    fill(t, 100, 20)
    assert t.probability(A) == 60 / 101  # (100 - 2 * 20) / (100 + 1)
    rng = FixedRandom(0.0)
    t.rng = rng
    assert t.decide(A) == 60 / 101  # computed before this attempt is counted...
    assert t.counts(A) == (101, 20)  # ... which is counted, although refused
    assert t.probability(A) == 61 / 102
    assert rng.draws == 1


def test_the_probability_is_never_negative() -> None:
    t = throttle()
    fill(t, 50, 50)
    assert t.probability(A) == 0.0
    fill(t, 0, 0, origin=OTHER)
    assert t.probability(OTHER) == 0.0
    t.record(OTHER, True)
    assert t.counts(OTHER) == (1, 1)
    assert t.probability(OTHER) == 0.0


def test_k_one() -> None:
    rng = CountingRandom()
    t = throttle(k=1, rng=rng)
    fill(t, 10, 10)
    assert t.probability(A) == 0.0
    assert send(t, accepted=False) is None and rng.draws == 0
    assert t.probability(A) == 1 / 12  # (11 - 10) / (11 + 1)


def test_a_fractional_k() -> None:
    t = throttle(k=1.5)
    fill(t, 40, 20)
    assert t.probability(A) == (40 - 30) / 41


def test_with_no_accept_every_attempt_after_the_first_may_be_refused() -> None:
    t = throttle(rng=FixedRandom(0.0))
    assert send(t, accepted=False) is None  # nothing counted yet
    assert t.decide(A) == 1 / 2  # refused: counted at once
    assert t.decide(A) == 2 / 3
    assert t.counts(A) == (3, 0)


def test_attempts_in_flight_do_not_count_as_turned_away() -> None:
    """A burst to a new origin: nothing has answered yet, so nothing is refused."""
    rng = CountingRandom()
    t = throttle(rng=rng)
    assert all(t.decide(A) is None for _ in range(100))  # all in flight at once
    assert t.counts(A) == (0, 0) and rng.draws == 0
    for _ in range(100):
        t.record(A, True)
    assert t.counts(A) == (100, 100)


# -- the draw -------------------------------------------------------------------------------


@pytest.mark.parametrize(("requests", "accepts"), [(100, 20), (21, 10), (5, 0), (1000, 1)])
def test_refused_exactly_when_the_draw_is_below_the_probability(requests: int,
                                                               accepts: int) -> None:
    expected = (requests - 2 * accepts) / (requests + 1)
    below = FixedRandom(math.nextafter(expected, 0.0))
    t = throttle(rng=below)
    fill(t, requests, accepts)
    assert t.decide(A) == expected
    assert below.draws == 1

    at = FixedRandom(expected)
    t = throttle(rng=at)
    fill(t, requests, accepts)
    assert t.decide(A) is None
    assert at.draws == 1
    assert t.counts(A) == (requests, accepts)  # let through: counted when it ends
    t.record(A, False)
    assert t.counts(A) == (requests + 1, accepts)


def test_a_seeded_rng_refuses_about_the_probability() -> None:
    t = throttle(rng=random.Random(7))
    fill(t, 100, 20)
    refused = 0
    for _ in range(10_000):
        p = t.probability(A)
        if t.decide(A) is not None:  # nothing accepted: the service is down
            refused += 1
        assert p < 1.0
    assert refused > 9_000  # the probability climbs towards 1 as refusals are counted


def test_forced_probabilities() -> None:
    rng = CountingRandom()
    t = throttle(rng=rng)
    fill(t, 100, 0)  # a computed probability close to 1
    for _ in range(50):
        assert send(t, accepted=False, forced=0.0) is None
    assert rng.draws == 0
    assert t.counts(A) == (150, 0)
    t.record(A, True)
    for _ in range(50):
        assert t.decide(OTHER, forced=1.0) == 1.0  # always, even with nothing counted
    assert t.counts(OTHER) == (50, 0)
    assert rng.draws == 50
    fixed = FixedRandom(0.5)
    t.rng = fixed
    assert t.decide(A, forced=0.25) is None
    assert t.decide(A, forced=0.75) == 0.75
    assert fixed.draws == 2


# -- the window -------------------------------------------------------------------------------


def test_the_window_forgets_old_outcomes() -> None:
    clock = Clock()
    t = throttle(clock, window=60.0)
    fill(t, 100, 10)
    assert t.probability(A) > 0.5
    clock.now += 60.0 + 60.0 / _BUCKETS  # past the window and its one bucket of slack
    assert t.counts(A) == (0, 0)
    assert t.probability(A) == 0.0
    assert send(t, accepted=False) is None
    assert t.counts(A) == (1, 0)


def test_a_long_silence_forgets_everything() -> None:
    clock = Clock()
    t = throttle(clock, window=10.0)
    fill(t, 100, 10)
    clock.now += 1e6
    assert t.decide(A) is None
    t.record(A, True)
    assert t.counts(A) == (1, 1)


def test_the_window_expires_bucket_by_bucket() -> None:
    """A count is kept for at least ``window`` seconds and at most one bucket longer."""
    bucket = 1.0
    clock = Clock(1000.0)  # the start of a bucket
    t = throttle(clock, window=bucket * _BUCKETS)
    fill(t, 3, 1)  # in the bucket [1000, 1001)
    clock.now = 1000.5
    fill(t, 1, 1)  # same bucket
    clock.now = 1005.5
    for _ in range(2):  # in [1005, 1006)
        send(t, forced=0.0)
    clock.now = 1010.0
    send(t, accepted=False, forced=0.0)  # in [1010, 1011)
    assert t.counts(A) == (7, 4)
    window = bucket * _BUCKETS
    clock.now = 1000.5 + window  # 20 s after the last count of the first bucket: still in
    assert t.counts(A) == (7, 4)
    clock.now = 1001.0 + window - 1e-9
    assert t.counts(A) == (7, 4)
    clock.now = 1001.0 + window  # the first bucket has left
    assert t.counts(A) == (3, 2)
    clock.now = 1006.0 + window - 1e-9
    assert t.counts(A) == (3, 2)
    clock.now = 1006.0 + window
    assert t.counts(A) == (1, 0)
    clock.now = 1011.0 + window
    assert t.counts(A) == (0, 0)


def test_a_steady_rate_is_counted_over_the_window() -> None:
    clock = Clock()
    t = throttle(clock, window=10.0)
    for _ in range(1000):  # one accepted request every 0.1 s for 100 s
        assert t.decide(A) is None
        t.record(A, True)
        clock.now += 0.1
    requests, accepts = t.counts(A)
    assert requests == accepts
    assert 100 <= requests <= 100 + 10 / _BUCKETS / 0.1 + 1  # the window, one bucket more


def test_a_clock_that_goes_back_stays_in_the_current_bucket() -> None:
    clock = Clock()
    t = throttle(clock, window=10.0)
    fill(t, 5, 5)
    clock.now -= 100.0
    fill(t, 0, 0)
    send(t, accepted=False, forced=0.0)
    assert t.counts(A) == (6, 5)


# -- origins -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "https://a.example",
        "https://a.example:443",
        "https://a.example/x/y?q=1#frag",
        "HTTPS://A.Example/path",
        "https://user:secret@a.example/x",
        httpx.URL("https://a.example/x?q=1"),
        httpx.URL("https://a.example:443/x"),
    ],
)
def test_probability_and_counts_normalise_urls_and_origins(spelling: object) -> None:
    t = throttle()
    fill(t, 100, 20)
    assert t.probability(spelling) == 60 / 101
    assert t.counts(spelling) == (100, 20)


def test_httpx2_urls() -> None:
    if "httpx2" not in MODULES:
        pytest.skip("httpx2 is not installed")
    httpx2 = MODULES["httpx2"][0]
    t = throttle()
    fill(t, 100, 20)
    assert t.probability(httpx2.URL("https://a.example/x?q=1")) == 60 / 101
    assert t.probability(httpx2.URL("https://a.example:8443/x")) == 0.0


def test_origins_are_counted_apart() -> None:
    t = throttle()
    fill(t, 100, 20)
    assert t.probability(OTHER) == 0.0
    assert t.counts("http://a.example") == (0, 0)  # another scheme and port
    assert t.decide(OTHER) is None


def test_a_bad_origin_is_refused() -> None:
    t = throttle()
    with pytest.raises(ValueError, match="origin"):
        t.probability("not a url")
    with pytest.raises(TypeError, match="origin"):
        t.counts(42)


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [
        ("k", 0.5, ValueError), ("k", 0, ValueError), ("k", -2, ValueError),
        ("k", math.nan, ValueError), ("k", math.inf, ValueError), ("k", True, TypeError),
        ("k", "2", TypeError), ("k", None, TypeError),
        ("window", 0, ValueError), ("window", -1, ValueError), ("window", math.inf, ValueError),
        ("window", math.nan, ValueError), ("window", False, TypeError),
        ("window", "120", TypeError),
        ("reject_statuses", [700], ValueError), ("reject_statuses", [99], ValueError),
        ("reject_statuses", [429.0], TypeError), ("reject_statuses", [True], TypeError),
        ("reject_statuses", "429", TypeError), ("reject_statuses", 429, TypeError),
        ("reject_statuses", None, TypeError), ("reject_statuses", [[429]], TypeError),
        ("rng", object(), TypeError), ("rng", 5, TypeError), ("rng", random, TypeError),
        ("clock", 5, TypeError), ("clock", "monotonic", TypeError),
        ("hooks", 5, TypeError), ("hooks", "hook", TypeError), ("hooks", [print, 5], TypeError),
    ],
)
def test_invalid_arguments_name_themselves(name: str, value: object,
                                           error: type[Exception]) -> None:
    """A wrong value is a ValueError, a value of the wrong kind (no number, a string or a
    number where a set of statuses goes, no random.Random, something not callable where a
    function belongs) a TypeError; each names the argument."""
    with pytest.raises(error, match=name):
        AdaptiveThrottle(**{name: value})


def test_async_hooks_are_refused() -> None:
    async def hook(event: object) -> None:
        pass

    with pytest.raises(TypeError, match="hooks"):
        AdaptiveThrottle(hooks=[hook])


def test_valid_edges_are_taken() -> None:
    assert AdaptiveThrottle(k=1).k == 1.0
    assert AdaptiveThrottle(window=0.001).window == 0.001
    assert AdaptiveThrottle(reject_statuses=[100, 599]).reject_statuses == {100, 599}
    assert isinstance(AdaptiveThrottle(rng=random.SystemRandom()).rng, random.SystemRandom)


# -- concurrency ---------------------------------------------------------------------------------


def test_exact_counts_under_threads() -> None:
    t = AdaptiveThrottle(rng=random.Random(3), clock=Clock())
    per_thread, threads = 2000, 16
    sent = [0] * threads
    barrier = threading.Barrier(threads)

    def work(number: int) -> None:
        barrier.wait()
        for _ in range(per_thread):
            if t.decide(A) is None:
                sent[number] += 1
                t.record(A, True)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often, inside the throttle's methods too
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)
    assert t.counts(A) == (threads * per_thread, sum(sent))
    assert sum(sent) == threads * per_thread  # every attempt accepted: none refused


def test_accepts_in_the_current_bucket_take_no_lock() -> None:
    clock = Clock(1000.0)  # the start of a bucket of 1 s
    t = throttle(clock, window=_BUCKETS * 1.0)
    t.record(A, True)  # the origin's first count makes its entry, under the lock
    lock = CountingLock()
    t._lock = lock  # type: ignore[assignment]
    for _ in range(1000):
        t.record(A, True)
    assert lock.taken == 0
    t.record(A, False)  # a request alone takes the lock, the accepts counted first
    assert lock.taken == 1
    assert t.counts(A) == (1002, 1001)
    clock.now += 1.0  # the next bucket: its first accept takes the lock
    t.record(A, True)
    t.record(A, True)
    assert lock.taken == 3


def test_an_accept_that_may_cool_an_origin_takes_the_lock() -> None:
    """While an origin could refuse, an accept is counted at once: the one that brings it
    back under the ratio lets first attempts go without asking from then on."""
    t = throttle(Clock(), window=10.0)
    fill(t, 3, 1)  # 3 > 2 * 1: over
    assert t.hot == 1
    lock = CountingLock()
    t._lock = lock  # type: ignore[assignment]
    t.record(A, True)  # 4 <= 2 * 2
    assert (lock.taken, t.hot) == (1, 0)
    t.record(A, True)  # no longer over: without the lock
    assert lock.taken == 1
    assert t.counts(A) == (5, 3)


def test_accepts_without_the_lock_and_counts_under_it_from_many_threads() -> None:
    """Accepts counted without the lock while another thread's rejections fold them in under
    it: none is lost or counted twice."""
    clock = Clock()
    t = throttle(clock, window=10.0)
    t.record(A, True)
    per_thread, threads = 2500, 4
    barrier = threading.Barrier(threads + 1)

    def accept() -> None:
        barrier.wait()
        for _ in range(per_thread):
            t.record(A, True)

    def reject() -> None:
        barrier.wait()
        for _ in range(per_thread):
            t.record(A, False)

    workers = [threading.Thread(target=accept) for _ in range(threads)]
    workers.append(threading.Thread(target=reject))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often, inside the throttle's methods too
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(interval)
    accepts = 1 + threads * per_thread
    assert t.counts(A) == (accepts + per_thread, accepts)
    assert t.hot == 0


@pytest.mark.anyio
async def test_exact_counts_under_tasks() -> None:
    t = AdaptiveThrottle(rng=random.Random(5), clock=Clock())
    sent = 0

    async def one() -> None:
        nonlocal sent
        for n in range(10):
            if t.decide(A) is None:
                await anyio.sleep(0)  # the attempt in flight while the others decide
                sent += 1
                t.record(A, n % 4 == 0)  # a quarter accepted: k = 2 refuses some
            await anyio.sleep(0)

    async with anyio.create_task_group() as group:
        for _ in range(200):
            group.start_soon(one)
    requests, accepts = t.counts(A)
    assert requests == 2000  # every attempt counted once: refused, or ended
    assert 0 < sent < 2000  # some refused once the refusals outnumbered the accepts
    assert accepts <= sent


# -- memory -------------------------------------------------------------------------------------


def test_memory_follows_the_origins_of_the_last_window() -> None:
    """200,000 distinct origins, a thousand a second: the table never holds much more
    than the origins of the last window and a pruning threshold's worth."""
    clock = Clock()
    window = 1.0
    t = AdaptiveThrottle(window=window, rng=random.Random(0), clock=clock)
    active = 1000  # origins per window
    largest = 0
    for n in range(200_000):  # 200 windows of new origins
        origin = f"https://h{n}.example:443"
        t.decide(origin)
        if n % 7 == 0:
            t.record(origin, True)
        clock.now += window / active
        if n % 1000 == 0:
            largest = max(largest, len(t._origins))
    assert largest <= 2 * max(_PRUNE_AT, 2 * active)
    assert len(t._origins) <= 2 * max(_PRUNE_AT, 2 * active)


def test_pruning_keeps_the_origins_in_the_window() -> None:
    clock = Clock()
    window = 10.0
    t = AdaptiveThrottle(window=window, rng=random.Random(0), clock=clock)
    for n in range(_PRUNE_AT - 1):  # forgotten: a window and a bucket later
        t.decide(f"https://old{n}.example:443")
    clock.now += 1.0
    fill(t, 30, 3)  # kept: still in the window when the table is pruned
    clock.now += window + window / _BUCKETS - 1.0
    t.decide("https://new.example:443")  # the table is full: pruned first
    assert set(t._origins) == {A, "https://new.example:443"}
    assert t.counts(A) == (30, 3)


# -- fork ------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork only")
def test_a_forked_child_gets_a_new_lock_and_keeps_the_counts() -> None:
    t = AdaptiveThrottle(rng=random.Random(0), clock=Clock())
    fill(t, 10, 10)
    t._lock.acquire()  # as if another thread were inside the throttle at the fork
    try:
        pid = os.fork()
        if pid == 0:  # the child: exits 0 if the lock is free and the counts kept
            ok = False
            try:
                ok = send(t) is None and t.counts(A) == (11, 11)
            finally:
                os._exit(0 if ok else 1)
    finally:
        t._lock.release()
    deadline = time.monotonic() + 10.0
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child waited on the parent's lock")
        time.sleep(0.01)
    assert os.waitstatus_to_exitcode(status) == 0


def test_hot_counts_the_origins_that_could_refuse() -> None:
    """What lets a transport skip the throttle for first attempts: the origins whose counts
    could refuse one, kept in step through records, refusals, the window and pruning."""
    clock = Clock()
    t = throttle(clock, window=10.0, rng=FixedRandom(0.0))
    assert t.hot == 0
    fill(t, 20, 10)  # at the boundary: nothing could be refused
    assert t.hot == 0
    t.record(A, False)  # one past it
    assert t.hot == 1 and t.probability(A) > 0
    fill(t, 10, 0, origin=OTHER)
    assert t.hot == 2
    assert t.decide(OTHER) is not None  # a refusal keeps it hot
    assert t.hot == 2
    for _ in range(2):
        t.record(A, True)  # accepts catch up: 23 requests <= 2 * 12
    assert t.hot == 1
    clock.now += 10.0 + 10.0 / _BUCKETS  # the window forgets everything
    assert t.probability(OTHER) == 0.0
    assert t.hot == 0


def test_pruning_a_hot_origin_cools_the_count() -> None:
    clock = Clock()
    window = 10.0
    t = AdaptiveThrottle(window=window, rng=random.Random(0), clock=clock)
    t.record(A, False)  # 1 request, 0 accepts: hot
    assert t.hot == 1
    for n in range(_PRUNE_AT - 1):  # with A, the table is full
        t.record(f"https://h{n}.example:443", True)
    clock.now += window + window / _BUCKETS
    t.record("https://new.example:443", True)  # the table is full: A is forgotten
    assert A not in t._origins
    assert t.hot == 0
