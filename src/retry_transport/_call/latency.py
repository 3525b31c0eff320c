"""Latency percentiles per origin over the last minute, in bounded memory, cheap enough to
record on every request.

A :class:`LatencyTable` keeps, for each origin, how long its attempts took to answer (from
sending an attempt to its response's headers) and reports the count, p50, p95, p99 and
p99.9 of the samples of the last :data:`WINDOW` seconds (:class:`LatencySummary`), or any
quantile (what a hedged request waits before it sends a second attempt).

**The histogram.** Log-bucketed, as in DDSketch: the bucket boundaries ``LOW * GAMMA**k``
grow by the constant factor ``GAMMA = 1.1`` from ``LOW = 1e-6`` (one microsecond) to the
first one at or above ``HIGH = 3600.0`` (3645.1 seconds): 232 boundaries, 233 buckets.
A value ``x`` with ``b[k-1] < x <= b[k]`` is reported as ``2 * b[k-1] * b[k] / (b[k-1] +
b[k])``, which is within ``(GAMMA - 1) / (GAMMA + 1) = 1/21``, 4.8%, of every value of the
bucket; so every reported percentile is within 4.8% of the exact one (the nearest-rank
sample, below) when that sample is in the range. Values outside it are clamped into the end
buckets: anything at or below one microsecond (zero, a negative duration from a clock that
went backwards, NaN) counts in the bottom bucket and is reported as ``1e-6``; anything above
the top boundary counts in the top bucket and is reported as the top boundary. No number is
refused.

**The window.** :data:`SUBWINDOWS` = 6 sub-windows of ``window / 6`` seconds (10 s by
default), aligned on multiples of that length of the clock's time. A summary counts the
current sub-window and the five before it: a sample is dropped once it is more than
``window`` seconds old, and may be dropped up to one sub-window earlier (it counts for
between 50 and 60 seconds by default: the window's edge error is one sub-window). The
sub-windows are kept as marks: each origin counts its samples per bucket since it was
first seen, and marks what its counters held at its first sample in each sub-window (the
last six marks, a ring); the window's histogram is the counters now minus the mark of the
oldest sub-window still in the window (there was no sample between its start and its
mark). An origin's expired marks are dropped lazily, at its first sample in a new
sub-window; the current sub-window is found by comparing the clock's time against a
stored boundary, without a division.

**Memory.** Per origin: a counter per bucket it has had a sample in, at most 233, and six
marks of one 8-byte integer per counter: bounded whatever the number of samples, and
measured at about 34 KiB at worst (samples in every bucket of every sub-window), 9 KiB for
a lognormal spread over two decades, 1.5 KiB for latencies in a single bucket. Overall, the
origins with nothing left in the window are forgotten: whenever the table holds twice the
origins it kept after its last look (and at least 1024), it looks again (amortised O(1) per
new origin, as the circuit breaker does).

**The cost of a record.** No lock and no allocation in the steady state: one dict lookup for
the origin's counters, a ``bisect`` over the boundaries for the bucket (one C call, which
clamps too), and ``next()`` on the bucket's ``itertools.count``: one C call that no other
thread interrupts while a GIL serialises them, so that no increment is ever lost under
threads (``list[i] += 1`` is three bytecodes, and whether a thread may switch between them
is up to the interpreter's version). The first sample of an origin in a sub-window, and the
first of a bucket, take the lock. Readers take it and read a counter by advancing it too,
minus the reads already made. An interpreter without a GIL takes the lock on every record.

Why not a sketch library (``ddsketch``, a t-digest, HdrHistogram)? None is a dependency of
the package, and none would fit as it is: they keep a sketch since the start (the window is
still to build around them), their insertion is Python code that costs microseconds, and
they are not safe to update from several threads. The histogram this needs is a few dozen
lines.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from operator import sub
from typing import Final

from .._base.counting import LOCK_FREE, PRUNE_AT, next_prune_at
from .._base.fork import track
from .._base.validate import check_callable, check_seconds

__all__ = ["GAMMA", "HIGH", "LOW", "SUBWINDOWS", "WINDOW", "LatencySummary", "LatencyTable"]

#: Seconds of samples a summary covers (see the module's docstring for its edge).
WINDOW: Final = 60.0
#: Sub-windows the window is kept as.
SUBWINDOWS: Final = 6
#: The growth factor of the bucket boundaries: relative error (GAMMA - 1) / (GAMMA + 1).
GAMMA: Final = 1.1
#: The range kept without clamping, in seconds (the top boundary is the first at or above HIGH).
LOW: Final = 1e-6
HIGH: Final = 3600.0


def _boundaries() -> list[float]:
    bounds = [LOW]
    while bounds[-1] < HIGH:
        bounds.append(LOW * GAMMA ** len(bounds))
    return bounds


#: The bucket of ``x`` is ``bisect_left(_BOUNDS, x)``: the number of boundaries below it.
_BOUNDS: Final = _boundaries()
#: What each bucket reports: the end buckets their boundary, the others the value within
#: (GAMMA - 1) / (GAMMA + 1) of both their ends.
_VALUES: Final = (
    [LOW]
    + [2 * low * high / (low + high) for low, high in itertools.pairwise(_BOUNDS)]
    + [_BOUNDS[-1]]
)
#: A relative tolerance on q * count, so that 0.07 of 100 samples is the 7th, not the 8th
#: (0.07 is a little more than 7/100 as a float).
_ROUNDING: Final = 1 - 1e-12
_PERCENTILES: Final = (0.5, 0.95, 0.99, 0.999)
#: A new origin's first mark: it had no sample before (shared, never mutated).
_NOTHING: Final = array("Q")


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """An origin's latencies over the last window: how long its attempts took from being
    sent to their response's headers.

    Attributes:
        count: samples in the window (at least 1).
        p50: the median, in seconds.
        p95: the 95th percentile, in seconds.
        p99: the 99th percentile, in seconds.
        p999: the 99.9th percentile, in seconds.

    Each percentile is the nearest-rank one (the ``ceil(q * count)``-th smallest sample), as
    the histogram reports it: within 4.8% of the sample's value when that lies between one
    microsecond and an hour (values outside are clamped to those ends).
    """

    count: int
    p50: float
    p95: float
    p99: float
    p999: float


def _rank(q: float, count: int) -> int:
    """The nearest rank of the ``q``-quantile among ``count`` samples: ``ceil(q * count)``
    (up to a relative 1e-12, for the rounding of ``q``), between 1 and ``count``."""
    return min(count, max(1, math.ceil(q * count * _ROUNDING)))


class _Origin:
    """One origin's counts. Guarded by the table's lock, except ``next()`` on a counter."""

    __slots__ = ("counters", "marks", "reads")

    def __init__(self, index: int) -> None:
        #: bucket -> its counter since the origin was first seen, created with the bucket's
        #: first sample: ``next()`` counts one sample, and one read.
        self.counters: dict[int, itertools.count[int]] = {}
        #: How many times readers advanced every counter (one created later starts at this
        #: number, so that the same number is subtracted from all).
        self.reads = 0
        #: For each sub-window the origin recorded in (the last SUBWINDOWS at most, oldest
        #: first): its number and what the counters held at its first sample, in the order
        #: of ``counters`` (a counter created since held 0).
        self.marks: list[tuple[int, array[int]]] = [(index, _NOTHING)]

    def totals(self) -> list[int]:
        """Samples per counter since the origin was first seen, in the order of
        ``counters``."""
        reads = self.reads
        self.reads = reads + 1
        return [next(counter) - reads for counter in self.counters.values()]


class LatencyTable:
    """Latency histograms per origin over a sliding window.

    Args:
        clock: a monotonic clock in seconds; the window's time. Default ``time.monotonic``;
            the transports pass theirs.
        window: seconds a summary covers (see the module's docstring for its edge). Default
            :data:`WINDOW`.

    An origin is identified by any hashable key: the table only hashes it and compares it.
    A key whose hash is cached (a ``str``, such as ``"https://api.example.com:443"``) costs
    the least; a tuple such as a URL's ``(scheme, host, port)`` is hashed again on every
    record (some 10 to 20 nanoseconds more), and passing the same tuple object each time
    spares the comparison of its items. The same origin must always be given the same key.

    :meth:`record` may be called from any number of threads and tasks at once, and counts
    exactly.
    """

    def __init__(self, clock: Callable[[], float] | None = None, *,
                 window: float = WINDOW) -> None:
        self.clock: Callable[[], float] = check_callable("clock", clock) or time.monotonic
        self.window = check_seconds("window", window)
        self._sub = self.window / SUBWINDOWS
        self._origins: dict[Hashable, _Origin] = {}
        #: The current sub-window (the latest a record was made in) and its end...
        self._index = -(2**62)
        self._until = -math.inf
        #: ... and the counters of each origin that recorded in it (the others have to
        #: mark their first sample in it).
        self._current: dict[Hashable, dict[int, itertools.count[int]]] = {}
        self._prune_at = PRUNE_AT
        self._lock = threading.Lock()
        track(self, "_lock")  # a forked child gets a new lock

    @property
    def origins(self) -> int:
        """How many origins the table keeps now (some may have nothing left in the window
        until it next looks)."""
        return len(self._origins)

    def __repr__(self) -> str:
        return f"LatencyTable(window={self.window:g})"

    # -- recording ---------------------------------------------------------------------------

    if LOCK_FREE:

        def record(self, key: Hashable, seconds: float, now: float | None = None) -> None:
            """One sample: an attempt to the origin ``key`` took ``seconds`` to answer.

            ``now``: the clock's time, if the caller has just read it (as it has to time
            the attempt): it spares a read. Never raises for a number: one out of range,
            zero or negative is clamped (see the module's docstring).
            """
            if now is None:
                now = self.clock()
            if now < self._until:
                try:
                    next(self._current[key][bisect_left(_BOUNDS, seconds)])
                    return
                except KeyError:  # the origin's or the bucket's first sample in this one
                    pass
            self._record(key, seconds, now)

    else:  # pragma: no cover - an interpreter without a GIL

        def record(self, key: Hashable, seconds: float, now: float | None = None) -> None:
            """One sample: an attempt to the origin ``key`` took ``seconds`` to answer.

            ``now``: the clock's time, if the caller has just read it (as it has to time
            the attempt): it spares a read. Never raises for a number: one out of range,
            zero or negative is clamped (see the module's docstring).
            """
            self._record(key, seconds, self.clock() if now is None else now)

    def _record(self, key: Hashable, seconds: float, now: float) -> None:
        """:meth:`record` beyond the usual case, under the lock."""
        bucket = bisect_left(_BOUNDS, seconds)
        with self._lock:
            if now >= self._until:
                self._turn(now)
            counters = self._current.get(key)
            if counters is None:
                counters = self._enter(key)
            counter = counters.get(bucket)
            if counter is None:
                counter = counters[bucket] = itertools.count(self._origins[key].reads)
            next(counter)

    def _turn(self, now: float) -> None:
        """The clock went past the current sub-window: start the one ``now`` is in (never
        one before: a late caller's sample counts in the current one)."""
        index = self._subwindow(now)
        if index > self._index:
            self._index = index
            self._current = {}  # so that each origin marks its first sample in it
        self._until = (self._index + 1) * self._sub

    def _subwindow(self, now: float) -> int:
        index = int(now // self._sub)
        return index + 1 if (index + 1) * self._sub <= now else index  # rounded down

    def _enter(self, key: Hashable) -> dict[int, itertools.count[int]]:
        """The origin's first sample in the current sub-window: mark what its counters
        hold, forget its marks that left the window; first, now and then, forget the
        origins with nothing left in it, so that memory follows the origins active in the
        last window."""
        index = self._index
        origin = self._origins.get(key)
        if origin is None:
            if len(self._origins) >= self._prune_at:
                self._prune()
            origin = self._origins[key] = _Origin(index)
        else:
            marks = origin.marks
            marks.append((index, array("Q", origin.totals())))
            while marks[0][0] <= index - SUBWINDOWS:  # no reader needs it any more
                del marks[0]
        counters = self._current[key] = origin.counters
        return counters

    def _prune(self) -> None:
        oldest = self._index - SUBWINDOWS + 1
        origins = self._origins
        for key, origin in list(origins.items()):
            if origin.marks[-1][0] < oldest:
                del origins[key]
        self._prune_at = next_prune_at(len(origins))

    # -- reading -----------------------------------------------------------------------------

    def _cumulative(self, key: Hashable) -> list[int] | None:
        """The running totals of the origin's buckets over the window (the last one is the
        count), or ``None`` when it has no sample there."""
        oldest = self._subwindow(self.clock()) - SUBWINDOWS + 1
        with self._lock:
            origin = self._origins.get(key)
            if origin is None:
                return None
            # The window starts at the first sample of the first sub-window the origin
            # recorded in since ``oldest``: there was none between.
            mark = next((mark for index, mark in origin.marks if index >= oldest), None)
            if mark is None:
                return None
            totals = origin.totals()
            buckets = list(origin.counters)
        if mark:
            totals[: len(mark)] = list(map(sub, totals, mark))
        counts = [0] * len(_VALUES)
        for bucket, samples in zip(buckets, totals, strict=True):
            counts[bucket] = samples
        cumulative = list(itertools.accumulate(counts))
        return cumulative if cumulative[-1] else None

    def summary(self, key: Hashable) -> LatencySummary | None:
        """The origin's count and percentiles over the window; ``None`` when it has no
        sample there (or was never seen)."""
        cumulative = self._cumulative(key)
        if cumulative is None:
            return None
        count = cumulative[-1]
        p50, p95, p99, p999 = (_VALUES[bisect_left(cumulative, _rank(q, count))]
                               for q in _PERCENTILES)
        return LatencySummary(count, p50, p95, p99, p999)

    def quantile(self, key: Hashable, q: float, *, upper: bool = False
                 ) -> tuple[int, float | None]:
        """The origin's samples in the window and their ``q``-quantile in seconds (``q`` in
        (0, 1), nearest rank, as in :class:`LatencySummary`); ``(0, None)`` without one.
        ``upper``: the top of the quantile's bucket instead (at most 10% above it, never
        below the sample: a hedging delay that has surely passed the quantile)."""
        if not 0.0 < q < 1.0:  # NaN too
            raise ValueError(f"q must be a number in (0, 1), got {q!r}")
        cumulative = self._cumulative(key)
        if cumulative is None:
            return 0, None
        count = cumulative[-1]
        bucket = bisect_left(cumulative, _rank(q, count))
        if upper:
            return count, _BOUNDS[min(bucket, len(_BOUNDS) - 1)]
        return count, _VALUES[bucket]
