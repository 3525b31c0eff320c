"""Latency percentiles per origin: their accuracy against the exact nearest-rank ones, the
sliding window, clamping, bounded memory, exact counts under threads. Fake clock, no
sleeping."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
import random
import sys
import threading
import tracemalloc
from bisect import bisect_left
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from retry_transport._base import fork as _fork
from retry_transport._call.latency import (
    _BOUNDS,
    _VALUES,
    GAMMA,
    HIGH,
    LOW,
    SUBWINDOWS,
    WINDOW,
    LatencySummary,
    LatencyTable,
)
from tests.harness import FakeClock

A = "https://a.example:443"
B = ("https", "b.example", 443)  # a URL's parsed origin serves as well
ALPHA = (GAMMA - 1) / (GAMMA + 1)  # the histogram's relative error: 1/21
SUB = WINDOW / SUBWINDOWS


def table(start: float = 1000.0, **kwargs: float) -> tuple[LatencyTable, FakeClock]:
    clock = FakeClock(start)
    return LatencyTable(clock, **kwargs), clock


def nearest_rank(samples: list[float], q: float) -> float:
    """The exact ``q``-quantile, nearest rank: the ceil(q * n)-th smallest sample, with q
    read as the decimal it is written as."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(Fraction(str(q)) * len(ordered)))
    return ordered[rank - 1]


def close(reported: float, exact: float) -> bool:
    return abs(reported - exact) <= ALPHA * exact * (1 + 1e-9)


def lognormal(rng: random.Random, n: int) -> list[float]:
    return [rng.lognormvariate(math.log(0.05), 1.0) for _ in range(n)]


def bimodal(rng: random.Random, n: int) -> list[float]:
    """95% around 10 ms, 5% around 1 s."""
    return [rng.lognormvariate(math.log(0.010), 0.2) if rng.random() < 0.95
            else rng.lognormvariate(0.0, 0.1) for _ in range(n)]


def constant(rng: random.Random, n: int) -> list[float]:
    return [0.0375] * n


def pareto(rng: random.Random, n: int) -> list[float]:
    """Heavy-tailed: from 5 ms, tail index 1.5."""
    return [0.005 * rng.paretovariate(1.5) for _ in range(n)]


# -- accuracy ----------------------------------------------------------------------------


@pytest.mark.parametrize("draw", [lognormal, bimodal, constant, pareto])
@pytest.mark.parametrize("n", [1, 7, 100, 1000, 20_000])
def test_percentiles_are_within_5_percent_of_the_exact_ones(
    draw: Callable[[random.Random, int], list[float]], n: int
) -> None:
    latencies, _ = table()
    samples = draw(random.Random(f"{draw.__name__}-{n}"), n)
    for seconds in samples:
        latencies.record(A, seconds)
    summary = latencies.summary(A)
    assert summary is not None
    assert summary.count == n
    for q, reported in zip((0.5, 0.95, 0.99, 0.999),
                           (summary.p50, summary.p95, summary.p99, summary.p999), strict=True):
        assert close(reported, nearest_rank(samples, q)), (q, reported)
    for q in (0.01, 0.07, 0.1, 0.25, 0.333, 0.75, 0.9, 0.95, 0.9999):
        count, value = latencies.quantile(A, q)
        assert count == n
        assert value is not None and close(value, nearest_rank(samples, q)), (q, value)


def test_the_rank_of_a_decimal_quantile_is_the_decimal_one() -> None:
    """0.07 is a little more than 7/100 as a float: of 100 samples, its nearest rank is the
    7th all the same."""
    latencies, _ = table()
    samples = [float(i) for i in range(1, 101)]  # one per bucket, well apart
    for seconds in samples:
        latencies.record(A, seconds)
    assert close(latencies.quantile(A, 0.07)[1] or 0.0, 7.0)
    assert not close(latencies.quantile(A, 0.07)[1] or 0.0, 8.0)
    assert close(latencies.quantile(A, 0.5)[1] or 0.0, 50.0)
    assert close(latencies.quantile(A, 0.999)[1] or 0.0, 100.0)


@given(st.floats(min_value=LOW, max_value=HIGH))
def test_any_value_in_the_range_is_reported_within_the_bound(seconds: float) -> None:
    latencies, _ = table()
    latencies.record(A, seconds)
    summary = latencies.summary(A)
    assert summary is not None and close(summary.p50, seconds)


def test_the_buckets() -> None:
    """Boundaries growing by GAMMA from LOW to the first at or above HIGH; each inner
    bucket's value within 1/21 of both its ends."""
    assert GAMMA == 1.1 and (GAMMA - 1) / (GAMMA + 1) <= 0.05
    assert _BOUNDS[0] == LOW and _BOUNDS[-2] < HIGH <= _BOUNDS[-1]
    assert len(_VALUES) == len(_BOUNDS) + 1 == 233
    for k, (low, high) in enumerate(itertools.pairwise(_BOUNDS), start=1):
        assert high / low == pytest.approx(GAMMA)
        value = _VALUES[k]
        assert (value - low) / low <= ALPHA * (1 + 1e-9)
        assert (high - value) / high <= ALPHA * (1 + 1e-9)


# -- clamping ------------------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [1e-6, 1e-7, 1e-300, 5e-324, 0.0, -0.0, -1.0, -math.inf,
                                     math.nan])
def test_values_at_or_below_a_microsecond_count_in_the_bottom_bucket(seconds: float) -> None:
    """Zero and negative durations (a clock that went backwards) and NaN too: never an
    error, reported as one microsecond."""
    latencies, _ = table()
    latencies.record(A, seconds)
    assert latencies.summary(A) == LatencySummary(1, LOW, LOW, LOW, LOW)


@pytest.mark.parametrize("seconds", [3700.0, 86400.0, 1e300, math.inf])
def test_values_above_the_range_count_in_the_top_bucket(seconds: float) -> None:
    latencies, _ = table()
    latencies.record(A, seconds)
    top = _BOUNDS[-1]
    assert latencies.summary(A) == LatencySummary(1, top, top, top, top)


def test_an_hour_is_in_the_range() -> None:
    latencies, _ = table()
    latencies.record(A, 3600.0)
    summary = latencies.summary(A)
    assert summary is not None and close(summary.p50, 3600.0)


def test_a_value_that_is_no_number_is_refused() -> None:
    latencies, _ = table()
    with pytest.raises(TypeError):
        latencies.record(A, "0.1")  # type: ignore[arg-type]
    assert latencies.summary(A) is None


# -- the window ------------------------------------------------------------------------


def test_samples_leave_the_window_sub_window_by_sub_window() -> None:
    """One sample per sub-window, of 1..6 seconds (the clock starts on a sub-window's
    start): each leaves the window 60 s after its sub-window began."""
    latencies, clock = table(start=600.0)
    for k in range(SUBWINDOWS):
        latencies.record(A, float(k + 1))
        clock.now += SUB
    # now 660.0: the first sample's sub-window [600, 610) has left the window
    for k in range(1, SUBWINDOWS):
        count, lowest = latencies.quantile(A, 0.01)
        assert count == SUBWINDOWS - k
        assert lowest is not None and close(lowest, float(k + 1))
        clock.now += SUB
    assert latencies.summary(A) is None
    assert latencies.quantile(A, 0.5) == (0, None)


def test_a_sample_counts_for_between_50_and_60_seconds() -> None:
    latencies, clock = table(start=1000.0)
    latencies.record(A, 0.1)  # at the start of [1000, 1010)
    clock.now = 1059.999
    assert latencies.quantile(A, 0.5)[0] == 1
    clock.now = 1060.0
    assert latencies.summary(A) is None
    latencies, clock = table(start=1009.999)
    latencies.record(A, 0.1)  # at the end of [1000, 1010)
    clock.now = 1059.999  # 50 s later
    assert latencies.quantile(A, 0.5)[0] == 1
    clock.now = 1060.0  # 50.001 s
    assert latencies.quantile(A, 0.5)[0] == 0


def test_the_count_is_the_windows() -> None:
    """10 samples a second for three minutes: the window holds 50 to 60 seconds of them,
    and the percentiles are those of the samples in it."""
    latencies, clock = table(start=0.0)
    recent: list[tuple[float, float]] = []
    for tick in range(1800):
        clock.now = tick / 10
        seconds = 0.01 if tick < 1200 else 0.5  # the origin slows down after 120 s
        latencies.record(A, seconds)
        recent.append((clock.now, seconds))
    clock.now = 179.95
    kept = [s for at, s in recent if at >= 120.0]  # the six sub-windows [120, 180)
    summary = latencies.summary(A)
    assert summary is not None
    assert summary.count == len(kept) == 600
    assert close(summary.p50, 0.5)
    clock.now = 180.0  # [130, 190): [120, 130) has left, [180, 190) has nothing yet
    assert latencies.quantile(A, 0.5)[0] == 500
    clock.now = 195.0
    assert latencies.quantile(A, 0.5)[0] == 400


def test_a_shorter_window() -> None:
    latencies, clock = table(start=0.0, window=6.0)
    latencies.record(A, 0.2)
    clock.now = 5.999
    assert latencies.quantile(A, 0.5)[0] == 1
    clock.now = 6.0
    assert latencies.summary(A) is None


def test_an_origin_comes_back_after_its_samples_expired() -> None:
    latencies, clock = table()
    latencies.record(A, 0.1)
    clock.now += 10 * WINDOW
    assert latencies.summary(A) is None
    latencies.record(A, 2.0)
    summary = latencies.summary(A)
    assert summary is not None and summary.count == 1 and close(summary.p50, 2.0)


def test_a_late_time_counts_in_the_current_sub_window() -> None:
    """A caller whose clock reading is older than the last record's (another thread read
    the clock later, or the clock went backwards): its sample counts in the current
    sub-window, never in one gone."""
    latencies, clock = table(start=1000.0)
    latencies.record(A, 0.1, now=1055.0)
    latencies.record(A, 0.2, now=990.0)
    latencies.record(A, 0.3, now=-5.0)
    clock.now = 1060.0
    assert latencies.quantile(A, 0.5)[0] == 3
    clock.now = 1110.0
    assert latencies.summary(A) is None


def test_now_is_the_clocks_time_when_given() -> None:
    latencies, clock = table(start=1000.0)
    latencies.record(A, 0.1, now=1100.0)  # the clock itself is not read
    clock.now = 1065.0  # recorded at 1000.0, it would have left the window
    assert latencies.quantile(A, 0.5)[0] == 1
    clock.now = 1160.0
    assert latencies.summary(A) is None


def test_origins_are_apart() -> None:
    latencies, _ = table()
    for _ in range(10):
        latencies.record(A, 0.01)
        latencies.record(B, 1.0)
    latencies.record(("https", "b.example", 443), 1.0)  # an equal tuple is the same origin
    a, b = latencies.summary(A), latencies.summary(B)
    assert a is not None and b is not None
    assert (a.count, b.count) == (10, 11)
    assert close(a.p999, 0.01) and close(b.p50, 1.0)
    assert latencies.summary("https://c.example:443") is None
    assert latencies.quantile("https://c.example:443", 0.95) == (0, None)


def test_reading_does_not_change_the_counts() -> None:
    """Readers advance the counters too: whatever they read in between, and counters made
    after a read, the counts stay exact."""
    latencies, clock = table()
    rng = random.Random(7)
    samples: list[float] = []
    for step in range(300):
        seconds = rng.lognormvariate(-4, 2)
        latencies.record(A, seconds)
        samples.append(seconds)
        if step % 7 == 0:
            assert latencies.quantile(A, 0.5)[0] == len(samples)
        if step % 100 == 99:
            clock.now += SUB
    summary = latencies.summary(A)
    assert summary is not None and summary.count == 300
    assert close(summary.p95, nearest_rank(samples, 0.95))


# -- memory --------------------------------------------------------------------------------


def test_many_origins_over_time_keep_the_table_bounded() -> None:
    """Origins with nothing left in the window are forgotten (amortised: when the table has
    doubled): the table follows the origins of the last minute, not all it has seen."""
    latencies, clock = table(start=0.0)
    record = latencies.record
    per_second = 100  # 6,000 origins a window
    largest = 0
    # What the table forgets is freed by reference counting (it makes no cycles); the
    # collector, walking the suite's live objects, would take most of the test's time.
    gc.disable()
    try:
        for key in range(200_000):  # 2,000 s: 33 windows of new origins
            if key % per_second == 0:
                clock.now += 1.0
                largest = max(largest, latencies.origins)
            record(key, 0.01, clock.now)
    finally:
        gc.enable()
    assert largest <= 2 * per_second * WINDOW + 1024
    assert len(latencies._current) <= per_second * SUB
    assert latencies.summary(199_999) is not None
    assert latencies.summary(0) is None


def feed(latencies: LatencyTable, samples: list[float]) -> None:
    for seconds in samples:
        latencies.record(A, seconds)


def _traced(action: Callable[[], object]) -> int:
    """Bytes ``action`` leaves allocated."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    action()
    gc.collect()
    return tracemalloc.get_traced_memory()[0] - before


def test_an_origins_memory_is_bounded_whatever_its_samples() -> None:
    """Samples in every bucket of every sub-window: the origin's memory reaches its bound
    within one window, and stays there however many more samples and windows come."""
    latencies, clock = table(start=0.0)
    everywhere = [LOW, *_VALUES[1:-1], 2 * _BOUNDS[-1]]  # one value in each bucket
    assert sorted({bisect_left(_BOUNDS, s) for s in everywhere}) == list(range(233))

    def windows(count: int, repeat: int = 1) -> None:
        for _ in range(count * SUBWINDOWS):
            for _ in range(repeat):
                for seconds in everywhere:
                    latencies.record(A, seconds)
            clock.now += SUB

    tracemalloc.start()
    try:
        first = _traced(lambda: windows(2))
        later = _traced(lambda: windows(5, repeat=3))
        same = _traced(lambda: feed(latencies, everywhere * 100))
    finally:
        tracemalloc.stop()
    assert first <= 40 * 1024  # the worst case: all 233 buckets in all six sub-windows
    assert abs(later) <= 1024
    assert same <= 256  # a list's free-list slot at most: nothing per sample
    summary = latencies.summary(A)
    assert summary is not None  # five sub-windows of `later`, the current one of `same`
    assert summary.count == 233 * (3 * (SUBWINDOWS - 1) + 100)


def test_recording_allocates_nothing_in_the_steady_state() -> None:
    latencies, _ = table()
    samples = [0.001 * (k + 1) for k in range(50)]
    for seconds in samples:
        latencies.record(A, seconds)
    tracemalloc.start()
    try:
        grown = _traced(lambda: feed(latencies, samples * 200))
    finally:
        tracemalloc.stop()
    assert grown <= 256  # 10,000 samples: nothing per sample


# -- threads, fork ---------------------------------------------------------------------


def test_counts_are_exact_under_16_threads() -> None:
    """16 threads record into two origins while the clock moves through the window's
    sub-windows (every first sample in one takes the slow path): not one sample is lost,
    and every bucket holds exactly what was put in it."""
    latencies, clock = table(start=0.0)
    per_thread = 20_000
    values = [_VALUES[k] for k in range(0, len(_VALUES), 3)]
    start = threading.Barrier(17)
    done = threading.Event()

    def work(index: int) -> None:
        key = A if index % 2 else B
        record = latencies.record
        start.wait()
        for i in range(per_thread):
            record(key, values[(i * 7 + index) % len(values)])

    def tick() -> None:
        start.wait()
        while not done.wait(0.0002):
            if clock.now < WINDOW - SUB - 1:
                clock.now += 1.0  # all within the window: [0, 50)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
        ticker = threading.Thread(target=tick)
        for thread in [*threads, ticker]:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        ticker.join()
    finally:
        sys.setswitchinterval(interval)
    assert clock.now > SUB  # the sub-windows did turn meanwhile
    expected = {A: [0] * len(_VALUES), B: [0] * len(_VALUES)}
    for index in range(16):
        for i in range(per_thread):  # values[j] is in bucket 3 * j
            expected[A if index % 2 else B][(i * 7 + index) % len(values) * 3] += 1
    for key in (A, B):
        cumulative = latencies._cumulative(key)
        assert cumulative is not None and cumulative[-1] == 8 * per_thread
        counts = [cumulative[0], *(b - a for a, b in itertools.pairwise(cumulative))]
        assert counts == expected[key]


def test_a_forked_child_gets_a_new_lock() -> None:
    latencies, _ = table()
    assert latencies in _fork._OWNERS
    held = latencies._lock
    held.acquire()  # as a thread of the parent may hold it at the fork
    try:
        _fork.renew(latencies)  # what the fork hook does in a child
        latencies.record(A, 0.1)  # the slow path: takes the new lock
        assert latencies.summary(A) is not None
    finally:
        held.release()


# -- the summary, arguments ----------------------------------------------------------------


def test_the_summary_is_frozen_and_equal_for_equal_content() -> None:
    one = LatencySummary(3, 0.01, 0.02, 0.03, 0.04)
    assert one == LatencySummary(3, 0.01, 0.02, 0.03, 0.04)
    assert one != LatencySummary(4, 0.01, 0.02, 0.03, 0.04)
    assert hash(one) == hash(LatencySummary(3, 0.01, 0.02, 0.03, 0.04))
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.p50 = 1.0  # type: ignore[misc]
    assert not hasattr(one, "__dict__")
    assert [field.name for field in dataclasses.fields(one)] == [
        "count", "p50", "p95", "p99", "p999"]
    first, _ = table()
    second, _ = table()
    for latencies in (first, second):
        for seconds in (0.01, 0.02, 0.5):
            latencies.record(A, seconds)
    assert first.summary(A) == second.summary(A)


@pytest.mark.parametrize("q", [0.0, 1.0, -0.5, 1.5, math.nan])
def test_a_quantile_is_in_the_open_unit_interval(q: float) -> None:
    latencies, _ = table()
    latencies.record(A, 0.1)
    with pytest.raises(ValueError, match="q must be"):
        latencies.quantile(A, q)


def test_arguments() -> None:
    with pytest.raises(ValueError, match="window"):
        LatencyTable(window=0.0)
    with pytest.raises(TypeError, match="clock"):
        LatencyTable(clock=1.0)  # type: ignore[arg-type]
    latencies = LatencyTable()
    assert latencies.window == WINDOW == 60.0
    assert repr(latencies) == "LatencyTable(window=60)"
    latencies.record(A, 0.25)  # the real clock
    assert latencies.quantile(A, 0.5)[0] == 1
    assert latencies.origins == 1
