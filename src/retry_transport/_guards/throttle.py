"""Client-side adaptive throttling per origin: refuse some attempts locally while a service
turns most of them away, so that an overloaded backend is not also handed the cost of
rejecting them.

The rule is the one of *Site Reliability Engineering* (O'Reilly, 2016), chapter 21,
"Handling Overload", section "Client-Side Throttling". Over the trailing ``window`` seconds,
each origin (``scheme://host:port``) counts

- ``requests``: the attempts the transport was about to send, those refused here included
  (an attempt let through is counted when its outcome comes back, so that attempts still in
  flight do not count as turned away: a burst to a new origin is not refused before anything
  has answered);
- ``accepts``: the attempts the service answered with a status outside ``reject_statuses``.

Before each attempt, the probability of refusing it locally is::

    max(0, (requests - k * accepts) / (requests + 1))

While the service accepts at least one attempt in ``k``, nothing is refused and nothing is
drawn. Past that, the share refused grows with the share the service turns away; since the
refused attempts are counted as requests, a client keeps sending about ``k`` times what the
service accepts, enough to notice at once when it recovers. ``k`` (2 in the book) trades
backend load for reaction time: a larger one sends more doomed requests, a smaller one
starts refusing earlier.

Sans-I/O like the breaker: the clock is injected, nothing sleeps, the one lock is held for a
few counter updates only, so one throttle may serve several transports, sync and async, of
both flavours.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from .._base.counting import LOCK_FREE, PRUNE_AT, Tally, counter, next_prune_at
from .._base.fork import track
from .._base.models import THROTTLED, RetryEvent
from .._base.validate import (
    check_callable,
    check_hooks,
    check_instance,
    check_number,
    check_seconds,
    check_statuses,
)
from .._policy.observe import Observer
from .._wire.http import normalise, origin as origin_of
from .seam import FIRST, RETRY, AttemptKind, CallView, Guard, Refusal, Waking

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._policy.rules import Outcome

__all__ = ["AdaptiveThrottle", "ThrottleGuard"]

#: The window is kept as this many buckets (plus the current one): a count leaves it at
#: least ``window`` seconds after it was made and at most one bucket (``window / 20``, 6 s
#: of the default two minutes, 5 %) later. Twenty makes the forgetting after an outage
#: smooth (the probability falls in steps of a twentieth of the window, not in a few coarse
#: drops) while an origin's state stays small (two rings of twenty counts) and a bucket
#: change, once per bucket and origin, touches at most twenty slots.
_BUCKETS: Final = 20

_NEVER: Final = float("-inf")


class _Origin:
    """One origin's counts over the window. Guarded by the throttle's lock, but for
    ``accepted``."""

    __slots__ = ("accepted", "accepts", "index", "over", "past_accepts", "past_requests",
                 "quick_until", "requests", "ring", "until")

    def __init__(self, index: int, until: float) -> None:
        self.index = index  # the current bucket: int(clock // bucket)
        self.until = until  # when it ends (clock time): the next count starts a new one
        # The totals over the window, the current bucket included (an attempt adds to them
        # alone), then those of the buckets before it: the current bucket's counts are the
        # difference.
        self.requests = self.accepts = 0
        self.past_requests = self.past_accepts = 0
        # The _BUCKETS buckets before the current one, bucket ``i`` at ``i % _BUCKETS``:
        # its requests there, its accepts at ``_BUCKETS + i % _BUCKETS``.
        self.ring = [0] * (2 * _BUCKETS)
        self.over = False  # requests > k * accepts: an attempt may be refused
        # Accepts (each also a request) counted without the lock (``next(accepted)``),
        # folded into the current bucket under the lock (``_fold``) before anything reads
        # the counts. Allowed while the clock is below ``quick_until``: the end of the
        # current bucket, while the origin is not over (an accept never tips it over, k
        # being >= 1). A thread that loses the CPU between that check and its count, as
        # the bucket ends, counts in the next bucket: kept one bucket longer.
        self.accepted = Tally()
        self.quick_until = until if LOCK_FREE else _NEVER


class AdaptiveThrottle:
    """Client-side adaptive throttling per origin, shared by any number of transports.

    Args:
        k: how many times what the service accepts a client may send before it starts
            refusing attempts locally: a finite number >= 1. Default 2.0, the book's.
        window: seconds over which requests and accepts are counted (trailing). Default
            120.0, the book's two minutes.
        reject_statuses: the statuses that count as the service turning an attempt away
            (not as an accept). Default 429 and 503, the answers of an overloaded service.
            Any other status is an accept (a 404 or a 500 was handled by the backend); a
            transient transport error is a request without an accept; a pool timeout (the
            client's own pool was full, nothing was sent) counts as nothing.
        rng: a ``random.Random`` to draw from when a probability is above 0. Default: a new
            one (a seeded one makes decisions reproducible).
        clock: a monotonic clock in seconds. Default ``time.monotonic``; the simulator passes
            its virtual clock.
        hooks: callables given a ``RetryEvent`` for what the throttle does (the transport
            whose attempt it refused tells its own hooks too).

    Every attempt counts, retries included. The counts are exact under threads and tasks:
    an accept while the origin is not over is counted without the lock (one C-level
    increment), and added to the counts, under the lock, before anything reads them; other
    counts take the lock, held only for a few counter updates, never across a wait.
    """

    __slots__ = ("__weakref__", "_bucket", "_lock", "_origins", "_prune_at", "_waking", "clock",
                 "hooks", "k", "reject_statuses", "rng", "window")

    def __init__(
        self,
        k: float = 2.0,
        window: float = 120.0,
        *,
        reject_statuses: Iterable[int] = (429, 503),
        rng: random.Random | None = None,
        clock: Callable[[], float] | None = None,
        hooks: Iterable[Callable[[RetryEvent], object]] | Callable[[RetryEvent], object]
        | None = None,
    ) -> None:
        self.k = check_number("k", k, low=1.0)
        self.window = check_seconds("window", window)
        self.reject_statuses = _statuses(reject_statuses)
        self.rng: random.Random = check_instance(
            "rng", rng, random.Random, "a random.Random") or random.Random()
        self.clock: Callable[[], float] = check_callable("clock", clock) or time.monotonic
        self.hooks = check_hooks(hooks)
        self._bucket = self.window / _BUCKETS
        self._origins: dict[str, _Origin] = {}
        # Origins whose counts could refuse an attempt (requests > k * accepts): while none
        # does, a transport sends first attempts without asking (each guard's ``idle``).
        self._waking = Waking()
        self._prune_at = PRUNE_AT
        self._lock = threading.Lock()
        track(self, "_lock")  # a forked child gets a new lock

    def __repr__(self) -> str:
        return (
            f"AdaptiveThrottle(k={self.k:g}, window={self.window:g}, "
            f"reject_statuses={sorted(self.reject_statuses)})"
        )

    @property
    def hot(self) -> int:
        """Origins whose counts could refuse an attempt now (requests > k * accepts), as
        of the last count taken under the lock: while none is, first attempts go without
        asking (read without the lock; an attempt that races with an origin tipping over
        is judged by the next). An accept counted without the lock on an origin that
        tipped over meanwhile cools it only when the counts are next read."""
        return self._waking.count

    # -- what users ask ------------------------------------------------------------------

    def probability(self, url_or_origin: object) -> float:
        """The probability that an attempt to an origin would be refused now: a URL (str,
        httpx or httpx2 URL) or an origin string, normalised as the transport does (default
        ports spelt out). 0.0 for an origin with nothing in the window."""
        requests, accepts = self.counts(url_or_origin)
        return max(0.0, (requests - self.k * accepts) / (requests + 1))

    def counts(self, url_or_origin: object) -> tuple[int, int]:
        """``(requests, accepts)`` counted for an origin (spelt as for :meth:`probability`)
        over the window now: the attempts refused and those whose outcome came back, and
        those the service accepted."""
        origin = normalise(url_or_origin)
        now = self.clock()
        with self._lock:
            entry = self._origins.get(origin)
            if entry is None:
                return 0, 0
            self._fold(entry, now)
            return entry.requests, entry.accepts

    def accepts_status(self, status: int) -> bool:
        """Whether an answer with ``status`` counts as an accept (see :meth:`record`)."""
        return status not in self.reject_statuses

    # -- what the transports ask -----------------------------------------------------------

    def decide(self, origin: str, forced: float | None = None) -> float | None:
        """One attempt to ``origin`` (spelt as ``_http.origin`` spells it) that the transport
        is about to send: ``None`` to let it go, else the probability it was refused with.

        The probability comes from the counts before this attempt. A refused attempt is
        counted as a request at once; one let through is counted when its outcome comes
        back (:meth:`record`). Above 0, ``rng.random()`` is drawn once and the attempt is
        refused when the draw is below it; at 0 nothing is drawn. ``forced`` (testing
        mode), in [0, 1], is used instead of the computed probability: 0.0 never refuses,
        1.0 always.
        """
        now = self.clock()
        with self._lock:
            entry = self._origins.get(origin)
            if entry is None:
                entry = self._new(origin, now)
            else:
                self._fold(entry, now)
            requests = entry.requests
            if forced is None:
                excess = requests - self.k * entry.accepts
                if excess <= 0:
                    return None  # the usual case: the service accepts enough
                chance = excess / (requests + 1)
            elif forced > 0:
                chance = forced
            else:
                return None
            if self.rng.random() < chance:
                entry.requests = requests + 1
                self._mark(entry)
                return chance
            return None

    def record(self, origin: str, accepted: bool) -> None:
        """The outcome of an attempt :meth:`decide` let go: a request, and with
        ``accepted`` (an answer whose status :meth:`accepts_status` accepts) an accept; a
        status in ``reject_statuses`` or a transient transport error is a request alone.

        The usual case, an accept in the current bucket of an origin that is not over, is
        counted without the lock."""
        now = self.clock()
        if accepted:
            entry = self._origins.get(origin)
            if entry is not None and now < entry.quick_until:
                next(entry.accepted)
                return
        with self._lock:
            entry = self._origins.get(origin)
            if entry is None:  # its request left the window, and the origin was forgotten
                entry = self._new(origin, now)
            else:
                self._fold(entry, now)
            entry.requests += 1
            if accepted:
                entry.accepts += 1
            self._mark(entry)

    # -- inside the lock ----------------------------------------------------------------

    def _fold(self, entry: _Origin, now: float) -> None:
        """Bring ``entry`` up to ``now``: the accepts counted without the lock go into its
        current bucket (they were counted before its end), then the window moves on if
        that bucket is over."""
        pending = entry.accepted.take()
        if pending:
            entry.requests += pending
            entry.accepts += pending
            self._mark(entry)
        if now >= entry.until:
            self._advance(entry, now)

    def _new(self, origin: str, now: float) -> _Origin:
        """A new origin's counts; first, now and then, forget the origins with nothing left
        in the window, so that memory follows the origins active in the last window."""
        if len(self._origins) >= self._prune_at:
            self._prune(now)
        index = int(now // self._bucket)
        entry = self._origins[origin] = _Origin(index, (index + 1) * self._bucket)
        return entry

    def _prune(self, now: float) -> None:
        """Drop the origins whose every count is out of the window (they would behave as
        unknown ones)."""
        current = int(now // self._bucket)
        origins = self._origins
        for origin, entry in list(origins.items()):
            if current - entry.index > _BUCKETS:
                if entry.over:
                    self._waking.change(-1)
                del origins[origin]
        self._prune_at = next_prune_at(len(origins))

    def _advance(self, entry: _Origin, now: float) -> None:
        """Start the bucket ``now`` falls in: the current one joins the ring, and the
        buckets that left the window are taken off the totals."""
        index = int(now // self._bucket)
        gap = index - entry.index
        if gap > _BUCKETS:  # even the current bucket is out: nothing is left
            entry.requests = entry.accepts = entry.past_requests = entry.past_accepts = 0
            ring = entry.ring
            for slot in range(2 * _BUCKETS):
                ring[slot] = 0
        elif gap > 0:
            ring = entry.ring
            current_requests = entry.requests - entry.past_requests
            current_accepts = entry.accepts - entry.past_accepts
            # Each of the buckets entry.index .. index - 1 takes the slot of the bucket
            # _BUCKETS before it, which has left the window.
            for step in range(gap):
                slot = (entry.index + step) % _BUCKETS
                entry.requests -= ring[slot]
                entry.accepts -= ring[_BUCKETS + slot]
                if step:
                    ring[slot] = ring[_BUCKETS + slot] = 0
                else:
                    ring[slot] = current_requests
                    ring[_BUCKETS + slot] = current_accepts
            # The new current bucket is empty: everything counted is in the ring.
            entry.past_requests = entry.requests
            entry.past_accepts = entry.accepts
        if gap > 0:
            entry.index = index
        # A clock that went back stays in the current bucket; one where now // bucket
        # rounds below the bucket's end asks again next time, harmlessly.
        entry.until = (entry.index + 1) * self._bucket
        self._mark(entry)

    def _mark(self, entry: _Origin) -> None:
        """Keep ``hot`` and whether an accept may be counted without the lock in step with
        ``entry``'s counts (under the lock)."""
        over = entry.requests > self.k * entry.accepts
        if over is not entry.over:
            entry.over = over
            self._waking.change(1 if over else -1)
        entry.quick_until = _NEVER if over or not LOCK_FREE else entry.until


def _statuses(value: object) -> frozenset[int]:
    """``reject_statuses``: an iterable of HTTP status codes (ints in 100..599)."""
    return check_statuses("reject_statuses", value)


#: The ticket of an attempt a throttle let through: its outcome is counted.
_SENT: Final = object()


class ThrottleGuard(Guard):
    """An :class:`~retry_transport.AdaptiveThrottle` as a guard: every attempt (first
    attempts, retries, hedges, with retries on or off) is judged before it is sent, a retry
    when it is decided (its veto, before the wait and the budget); the outcome of each one
    let through is counted. Under ``retry_testing(throttles="off")`` it does nothing; with a
    number, that is the probability of every refusal."""

    reason = THROTTLED
    health = True
    idle_ticket = _SENT  # a first attempt let through: its outcome is counted

    #: No origin's counts could refuse an attempt: first attempts go without asking (kept
    #: so by the throttle, under its lock, whichever transport's attempt tipped one over).
    idle: bool

    def __init__(self, throttle: AdaptiveThrottle, observer: Observer) -> None:
        self.throttle = throttle
        self.observer = observer
        self.refused = counter()  # refusals, for the stats
        with throttle._lock:
            throttle._waking.join(self)

    def _judge(self, call: CallView, attempt: int) -> float | None:
        """The probability attempt ``attempt`` was refused with, or ``None`` (it goes)."""
        testing = call.testing
        forced = None if testing is None else testing.throttles
        if forced == "off":
            return None
        chance = self.throttle.decide(call.origin, None if forced == "on" else forced)
        if chance is not None:
            next(self.refused)
            self.observer.throttled(call.request, attempt, self.throttle.hooks)
        return chance

    def admit(self, call: CallView, kind: AttemptKind, paid: object) -> object:
        if kind is RETRY:
            return paid  # judged by the veto (_SENT, or None: not judged)
        chance = self._judge(call, call.attempt)
        if chance is None:
            return _SENT
        origin = call.origin
        return Refusal(THROTTLED, "throttled" if kind is FIRST else None,
                       f"{origin}: adaptive throttle refused the attempt locally "
                       f"(probability {chance:.3f}): not sent",
                       origin=origin, probability=chance)

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        if ticket is _SENT and outcome is not None:
            self._count(call.origin, outcome)

    def settle_idle(self, request: Request, outcome: Outcome) -> None:
        """Most often an accept in the current bucket of an origin that is not over:
        counted without the lock or a call (:meth:`AdaptiveThrottle.record`'s usual case,
        written out)."""
        origin = origin_of(request.url)
        throttle = self.throttle
        status = outcome.status
        if status is not None and status not in throttle.reject_statuses:
            try:
                entry = throttle._origins[origin]
            except KeyError:  # the origin's first count, or its first since it was forgotten
                pass
            else:
                if throttle.clock() < entry.quick_until:
                    next(entry.accepted)
                    return
        self._count(origin, outcome)

    def _count(self, origin: str, outcome: Outcome) -> None:
        """A response counts (an accept unless its status is a reject status); so does a
        transient error (never an accept); an error that says nothing of the server (no
        verdict: ``outcome.failure`` is ``None``, as for a pool timeout) not."""
        status = outcome.status
        if status is not None:
            self.throttle.record(origin, self.throttle.accepts_status(status))
        elif outcome.failure:
            self.throttle.record(origin, False)


    def veto(self, call: CallView, outcome: Outcome) -> object:
        # the retry of the attempt just judged
        return _SENT if self._judge(call, call.attempt + 1) is None else THROTTLED
