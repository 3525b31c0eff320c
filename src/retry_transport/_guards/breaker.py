"""A circuit breaker per origin: stop calling a dependency that is down, find out when it is
back.

Retries ride out short blips; a dependency that is down for minutes needs the opposite:
stop sending, fail fast, and probe now and then. One :class:`CircuitBreaker` keeps one state
per origin (``scheme://host:port``):

- **closed**: requests flow; every attempt's outcome is counted over a sliding time window.
  With at least ``min_requests`` outcomes in the window and ``failures / outcomes >=
  failure_ratio`` (equality opens, as in Polly and Resilience4j), it opens.
- **open**: nothing is sent; requests fail at once with ``CircuitOpenError``. After
  ``break_duration`` seconds it is half-open.
- **half-open**: up to ``half_open_probes`` requests at a time go through as probes. A probe
  that succeeds closes the breaker; one that fails opens it again for twice the last break
  (up to ``max_break_duration``). A probe that ends without a verdict (cancelled, or an error
  that says nothing of the server's health) frees its slot.

Every transition starts a fresh window. Sans-I/O like the core: the clock is injected (the
simulator passes its virtual one), nothing sleeps, and the lock is never held across a wait,
so one breaker may serve several transports, sync and async, of both flavours.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final, Literal

from .._base.counting import LOCK_FREE, PRUNE_AT, Tally, next_prune_at
from .._base.fork import track
from .._base.models import CIRCUIT_OPEN, RetryEvent
from .._base.validate import (
    check_callable,
    check_count,
    check_hooks,
    check_instance,
    check_number,
    check_seconds,
)
from .._policy.observe import Observer, learned
from .._stores.memory import MemoryStore
from .._wire.http import normalise, origin as origin_of
from .seam import AttemptKind, CallView, Guard, Refusal, Waking

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._policy.rules import Outcome

__all__ = ["BreakerGuard", "BreakerState", "CircuitBreaker"]

BreakerState = Literal["closed", "open", "half_open"]

#: The sliding window is kept as this many buckets: an outcome leaves the window at most
#: ``window / _BUCKETS`` seconds late, and recording one costs O(1).
_BUCKETS: Final = 10

#: What :meth:`CircuitBreaker.admit` answers: ``None`` lets the request through, a number
#: refuses it (seconds until a probe may go, 0.0 while every probe slot is taken).
Admission = float | None

#: Seconds a breaker refused a probe slot by its store waits before asking the store again.
_RECHECK: Final = 1.0

_NO_TRANSITIONS: Final[list[str]] = []  # shared, never mutated: the common answer

_NEVER: Final = float("-inf")

_PASS: Final[tuple[Admission, int, list[str]]] = (None, 0, _NO_TRANSITIONS)


class _Origin:
    """One origin's state. Guarded by the breaker's lock."""

    __slots__ = ("break_for", "failures", "fleet_busy_until", "index", "mark", "now_failures",
                 "now_outcomes", "opened_until", "outcomes", "period", "probes", "quick_until",
                 "ring", "state", "successes")

    def __init__(self, break_for: float) -> None:
        self.state: BreakerState = "closed"
        self.opened_until = 0.0
        self.break_for = break_for  # the next break's length: doubles after a failed probe
        self.probes = 0  # probes in flight (half-open)
        # With a store: until when (clock time) every probe slot was taken elsewhere, so
        # that requests are refused without asking the store again.
        self.fleet_busy_until = 0.0
        # Counts the half-open periods: a probe belongs to the period that admitted it, and
        # one that outlives it (the breaker opened again meanwhile) decides nothing.
        self.period = 0
        # The sliding window: the current bucket's counts, the older buckets in a ring
        # (index, outcomes, failures), and the totals over all of them.
        self.index = -1
        self.now_outcomes = self.now_failures = 0
        self.ring: deque[tuple[int, int, int]] = deque()
        self.outcomes = self.failures = 0
        # Successes counted without the lock (``next(successes)``), folded into the window
        # under the lock (``take_successes``) before anything reads it.
        # Allowed while the clock is below ``quick_until``: the end of the current bucket,
        # while the breaker is closed and no success could open it. A thread that loses
        # the CPU between that check and its count, as the bucket ends, counts in the next
        # bucket: kept one bucket longer.
        self.successes = Tally()
        self.quick_until = _NEVER

    def take_successes(self) -> int:
        """The successes counted without the lock since the last fold (under the lock)."""
        return self.successes.take()

    def fresh_window(self) -> None:
        self.take_successes()  # successes of the old window are dropped with it
        self.index = -1
        self.now_outcomes = self.now_failures = 0
        self.ring.clear()
        self.outcomes = self.failures = 0
        self.quick_until = _NEVER


class CircuitBreaker:
    """A circuit breaker per origin, shared by any number of transports.

    Args:
        failure_ratio: the share of failed outcomes in the window that opens the breaker,
            in (0, 1]. Default 0.5, Resilience4j's: an HTTP client already retries the odd
            failure away, so a breaker should only open when most calls fail (Polly's
            standard HTTP pipeline opens at 0.1, which trips on a merely degraded service).
        min_requests: outcomes the window must hold before the ratio counts. Default 20:
            Polly and Resilience4j ask for 100, which a client making a few calls a second
            would take most of a minute to reach while a dependency is down.
        window: seconds over which outcomes are counted (sliding). Default 30.0 (Polly's
            sampling duration).
        break_duration: seconds the breaker stays open before the first probe. Default 5.0
            (Polly's break). It doubles after each failed probe...
        max_break_duration: ... up to this many seconds. Default 60.0 (Resilience4j's open
            time): a dependency back after a long outage is found within a minute.
        half_open_probes: probes allowed through at a time while half-open. Default 1 (Polly;
            a recovering service should not meet a crowd).
        clock: a monotonic clock in seconds. Default ``time.monotonic``; the simulator passes
            its virtual clock.
        hooks: callables given a ``RetryEvent`` of kind ``breaker_open``,
            ``breaker_half_open`` or ``breaker_close`` for every transition (the transport
            whose request caused it tells its own hooks too).
        store: a :class:`~retry_transport.MemoryStore` or
            :class:`~retry_transport.RedisStore` to share transitions through: an opening
            or closing here is applied by every breaker of the store (with this one's break
            length; they log it at INFO and tell their own hooks, with ``learned=True``),
            and half-open probes are elected among them all, so that a recovering
            dependency sees ``half_open_probes`` probes in all. Default ``None``: this
            breaker alone. With a store, ``clock`` is also called from the store's thread.

    What counts as a failure: a transient transport error, or a status in the policy's
    ``retry_statuses`` or >= 500. Other answers (a 404, a 401) are healthy ones. An error
    that says nothing of the origin counts as neither: one no retry can fix, or a pool
    timeout (the client's own pool was full, nothing was sent). Every attempt counts,
    retries included. The breaker is exact under threads and tasks; its lock is held only
    for a few counter updates, never across a wait.
    """

    def __init__(
        self,
        *,
        failure_ratio: float = 0.5,
        min_requests: int = 20,
        window: float = 30.0,
        break_duration: float = 5.0,
        max_break_duration: float = 60.0,
        half_open_probes: int = 1,
        clock: Callable[[], float] | None = None,
        hooks: Iterable[Callable[[RetryEvent], object]] | Callable[[RetryEvent], object]
        | None = None,
        store: MemoryStore | None = None,
    ) -> None:
        self.failure_ratio = check_number("failure_ratio", failure_ratio, low=0.0, high=1.0,
                                          open_low=True)
        self.min_requests = check_count("min_requests", min_requests)
        self.window = check_seconds("window", window)
        self.break_duration = check_seconds("break_duration", break_duration)
        self.max_break_duration = check_seconds("max_break_duration", max_break_duration)
        if self.max_break_duration < self.break_duration:
            raise ValueError(
                f"max_break_duration ({self.max_break_duration:g}) must be >= "
                f"break_duration ({self.break_duration:g})"
            )
        self.half_open_probes = check_count("half_open_probes", half_open_probes)
        self.clock: Callable[[], float] = check_callable("clock", clock) or time.monotonic
        self.hooks = check_hooks(hooks)
        self._bucket = self.window / _BUCKETS
        self._origins: dict[str, _Origin] = {}
        self._prune_at = PRUNE_AT
        # Origins whose breaker is open or half-open (changed under the lock): while none
        # is, every request is let through without asking (each guard's ``idle``).
        self._waking = Waking()
        self._lock = threading.Lock()
        track(self, "_lock")  # a forked child gets a new lock
        self.store: MemoryStore | None = check_instance(
            "store", store, MemoryStore, "a MemoryStore, a RedisStore")
        # Transitions made under the lock, for the store: (origin, kind, until, break).
        self._outgoing: deque[tuple[str, str, float, float]] = deque()
        if store is not None:
            store._join_breaker(self)

    @property
    def unclosed(self) -> int:
        """Origins whose breaker is open or half-open now."""
        return self._waking.count

    # -- what users ask ------------------------------------------------------------------

    def state(self, origin: object) -> BreakerState:
        """``"closed"``, ``"open"`` or ``"half_open"`` for an origin: a URL (str, httpx or
        httpx2 URL) or an origin string, normalised as the transport does (default ports
        spelt out). ``"half_open"`` as soon as the break has elapsed."""
        entry = self._origins.get(normalise(origin))
        if entry is None:
            return "closed"
        if entry.state == "open" and self.clock() >= entry.opened_until:
            return "half_open"
        return entry.state

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(failure_ratio={self.failure_ratio:g}, "
            f"min_requests={self.min_requests}, window={self.window:g}, "
            f"break_duration={self.break_duration:g}, "
            f"max_break_duration={self.max_break_duration:g}, "
            f"half_open_probes={self.half_open_probes})"
        )

    # -- what the core asks ----------------------------------------------------------------

    def admit(self, origin: str) -> tuple[Admission, int, list[str]]:
        """May a request to ``origin`` be sent now? Returns (refusal, probe, transitions):
        ``refusal`` is ``None`` to let it through, else the seconds until a probe may go
        (0.0 while every probe slot is taken); ``probe`` is 0, or the half-open period the
        request goes through as a probe of (its verdict must come back through
        :meth:`record` or :meth:`release`, with that number)."""
        entry = self._origins.get(origin)
        if entry is None or entry.state == "closed":
            return _PASS  # the usual case: no lock, nothing to count yet
        now = self.clock()
        transitions: list[str] = []
        with self._lock:
            if entry.state == "closed":  # type: ignore[comparison-overlap]  # another thread
                return _PASS
            if entry.state == "open":
                if now < entry.opened_until:
                    return entry.opened_until - now, 0, []
                entry.state = "half_open"
                entry.period += 1
                entry.probes = 0
                entry.fresh_window()
                transitions.append("breaker_half_open")
            if entry.probes >= self.half_open_probes:
                return 0.0, 0, transitions
            if self.store is not None and now < entry.fleet_busy_until:
                return 0.0, 0, transitions  # every slot is taken elsewhere: don't ask again
            entry.probes += 1
            period = entry.period
        if self.store is None:
            return None, period, transitions
        busy = self.store._elect(origin, self.half_open_probes, self, period)  # unlocked
        if busy is None:
            return None, period, transitions
        with self._lock:
            if entry.period == period and entry.probes > 0:
                entry.probes -= 1
            # Ask again within a second: a probe elsewhere may end without a verdict, and
            # give its slot back, long before its lease would end.
            entry.fleet_busy_until = now + min(busy, _RECHECK)
        return 0.0, 0, transitions

    def record(self, origin: str, failure: bool, probe: int = 0) -> list[str]:
        """An attempt's verdict: ``failure`` (the dependency looked unhealthy) or not;
        ``probe``: what :meth:`admit` said. Returns the transitions it caused
        (``breaker_open``, ``breaker_close``)."""
        now = self.clock()
        entry = self._origins.get(origin)
        if entry is not None and not failure and not probe and now < entry.quick_until:
            # The usual case: one more success in the current bucket of a closed breaker
            # that no success could open. No lock: folded in by the next outcome that
            # takes it.
            next(entry.successes)
            return _NO_TRANSITIONS
        with self._lock:
            entry = self._origins.get(origin)
            transitions = self._decide(origin, entry, now, failure, probe)
        if self.store is not None:
            if transitions:
                self._flush()
            if probe:  # the fleet's slot, whatever happened here; after the reopening is
                self.store._release(origin, self, probe)  # shared, so none probes between
        return transitions

    def _decide(self, origin: str, entry: _Origin | None, now: float, failure: bool,
                probe: int) -> list[str]:
        """:meth:`record` beyond the usual case (under the lock)."""
        if entry is None:
            entry = self._new(origin, now)
        if probe:
            if probe == entry.period and entry.state == "half_open":
                entry.probes = max(0, entry.probes - 1)
            else:
                probe = 0  # it outlived its half-open period: an ordinary outcome
        if entry.state == "half_open":
            if not probe:
                return []  # a request admitted before the breaker opened
            if failure:
                self._open(entry, now, min(entry.break_for * 2, self.max_break_duration))
                return self._shared(origin, entry, "breaker_open")
            entry.state = "closed"
            self._waking.change(-1)
            entry.break_for = self.break_duration
            entry.fresh_window()
            return self._shared(origin, entry, "breaker_close")
        if entry.state == "open":
            return []  # in flight when it opened: already counted against it
        self._count(entry, now, failure)
        if (
            entry.outcomes >= self.min_requests
            # a quotient, not failure_ratio * outcomes: 0.28 * 25 is 7.000000000000001
            and entry.failures / entry.outcomes >= self.failure_ratio
        ):
            self._open(entry, now, entry.break_for)
            return self._shared(origin, entry, "breaker_open")
        self._quicken(entry)
        return []

    def release(self, origin: str, probe: int | None = None) -> None:
        """A probe (of the half-open period ``probe``, default: the current one) ended
        without a verdict: free its slot, unless that period is over."""
        if self.store is not None:
            with self._lock:
                entry = self._origins.get(origin)
                period = probe if probe is not None else entry.period if entry else 0
            self.store._release(origin, self, period)
        with self._lock:
            entry = self._origins.get(origin)
            if (
                entry is not None
                and entry.state == "half_open"
                and (probe is None or entry.period == probe)
                and entry.probes > 0
            ):
                entry.probes -= 1

    def is_open(self, origin: str | None) -> bool:
        """Whether ``origin``'s breaker is open now (a retry would be refused)."""
        entry = self._origins.get(origin) if origin is not None else None
        return entry is not None and entry.state == "open" and self.clock() < entry.opened_until

    def opened_for(self, origin: str) -> float:
        """Seconds the current (or last) break of ``origin`` lasts."""
        entry = self._origins.get(origin)
        return 0.0 if entry is None else entry.break_for

    # -- with a store -----------------------------------------------------------------------

    def _shared(self, origin: str, entry: _Origin, kind: str) -> list[str]:
        """A transition here (under the lock): hand it to the store, on the lock's way
        out (the store tells other breakers, which take their own locks)."""
        if self.store is not None:
            self._outgoing.append((origin, kind, entry.opened_until, entry.break_for))
        return [kind]

    def _flush(self) -> None:
        """Hand the transitions made here to the store (outside the lock)."""
        store, outgoing = self.store, self._outgoing
        if store is None:  # only called with a store
            return
        while outgoing:
            try:
                origin, kind, until, break_for = outgoing.popleft()
            except IndexError:  # another thread took the last one
                return
            if kind == "breaker_open":
                store._opened(self, origin, until - self.clock(), break_for)
            else:
                store._closed(self, origin)

    def _learn(self, origin: str, kind: Literal["open", "close"], remaining: float,
               break_for: float) -> None:
        """Another breaker of the store opened (for ``remaining`` seconds, a break of
        ``break_for``) or closed ``origin``'s breaker: apply it, log it at INFO, tell this
        breaker's hooks. Any thread may call this."""
        now = self.clock()
        with self._lock:
            entry = self._origins.get(origin)
            if kind == "open":
                until = now + remaining
                if entry is None:
                    entry = self._new(origin, now)
                elif entry.state == "open" and entry.opened_until >= until:
                    return
                opened = entry.state != "open" or now >= entry.opened_until
                self._open(entry, now, break_for)
                entry.opened_until = until
                if not opened:
                    return  # lengthened: no transition to tell
            else:
                if entry is None or entry.state == "closed":
                    return
                entry.state = "closed"
                self._waking.change(-1)
                entry.break_for = self.break_duration
                entry.fleet_busy_until = 0.0
                entry.fresh_window()
        learned(kind, origin, remaining, break_for, self.hooks)

    # -- inside the lock ----------------------------------------------------------------

    def _new(self, origin: str, now: float) -> _Origin:
        """A new origin's state; first, now and then, forget the origins with nothing left
        to remember, so that memory follows the origins active in the last window."""
        if len(self._origins) >= self._prune_at:
            self._prune(now)
        entry = self._origins[origin] = _Origin(self.break_duration)
        return entry

    def _prune(self, now: float) -> None:
        """Drop the origins that would behave as unknown ones: closed, with every outcome
        out of the window (those counted without the lock are in the bucket of the last
        one), and open with a break that ended a window ago and no probe since (learned
        from a store, most of them: an origin this breaker never calls)."""
        current = int(now // self._bucket)
        origins = self._origins
        for origin, entry in list(origins.items()):
            state = entry.state
            if state == "closed":
                if current - entry.index > _BUCKETS:
                    del origins[origin]
            elif state == "open" and now >= entry.opened_until + self.window:
                del origins[origin]
                self._waking.change(-1)
        self._prune_at = next_prune_at(len(origins))

    def _open(self, entry: _Origin, now: float, duration: float) -> None:
        if entry.state == "closed":
            self._waking.change(1)
        entry.state = "open"
        entry.break_for = duration
        entry.opened_until = now + duration
        entry.probes = 0
        entry.fleet_busy_until = 0.0
        entry.fresh_window()

    def _count(self, entry: _Origin, now: float, failure: bool) -> None:
        pending = entry.take_successes()  # in the current bucket: allowed only while in it
        entry.now_outcomes += pending
        entry.outcomes += pending
        index = int(now // self._bucket)
        if index != entry.index:  # a new bucket: retire the current one, drop the old ones
            if entry.now_outcomes:
                entry.ring.append((entry.index, entry.now_outcomes, entry.now_failures))
            entry.index = index
            entry.now_outcomes = entry.now_failures = 0
            # The current bucket and the _BUCKETS before it: an outcome counts for at least
            # ``window`` seconds, and at most one bucket longer.
            oldest = index - _BUCKETS
            ring = entry.ring
            while ring and ring[0][0] < oldest:
                _, outcomes, failures = ring.popleft()
                entry.outcomes -= outcomes
                entry.failures -= failures
        entry.now_outcomes += 1
        entry.outcomes += 1
        if failure:
            entry.now_failures += 1
            entry.failures += 1

    def _quicken(self, entry: _Origin) -> None:
        """After an outcome was counted in a closed window: whether the next successes may be
        counted without the lock, until the end of the current bucket. Not while one
        success could open the breaker (failures in a window short of ``min_requests``)."""
        if LOCK_FREE and (entry.failures == 0 or entry.outcomes >= self.min_requests):
            entry.quick_until = (entry.index + 1) * self._bucket
        else:
            entry.quick_until = _NEVER


def _breakers(call: CallView) -> str:
    testing = call.testing
    return "on" if testing is None else testing.breakers


class BreakerGuard(Guard):
    """A :class:`~retry_transport.CircuitBreaker` as a guard: it admits attempts (probes
    while half-open), counts their outcomes, and vetoes retries while open. Under
    ``retry_testing(breakers="off")`` it does nothing; with ``"open"`` it refuses all."""

    reason = CIRCUIT_OPEN
    health = True
    idle_ticket = 0  # no probe

    #: Every origin's breaker is closed: every request is let through (kept so by the
    #: breaker, under its lock, whichever transport's request opened or closed one).
    idle: bool

    def __init__(self, breaker: CircuitBreaker, observer: Observer) -> None:
        self.breaker = breaker
        self.observer = observer  # the transport's: it tells of the transitions it causes
        with breaker._lock:
            breaker._waking.join(self)

    def admit(self, call: CallView, kind: AttemptKind, paid: object) -> object:
        """The ticket is the half-open period the attempt probes (0: no probe), or ``None``
        when testing mode turns breakers off."""
        breaker = self.breaker
        mode = _breakers(call)
        if mode == "off":
            return None
        origin = call.origin
        if mode == "open":
            remaining: float | None = breaker.break_duration
            probe = 0
        else:
            remaining, probe, transitions = breaker.admit(origin)
            if transitions:
                self._tell(transitions, call.request, origin, call.attempt, None, None)
        if remaining is None:
            return probe
        return Refusal(
            CIRCUIT_OPEN, "circuit_open",
            f"{origin}: circuit breaker open"
            + (f", next probe in {remaining:.3f} s" if remaining else ", every probe slot taken")
            + ": not sent",
            origin=origin, remaining=remaining,
        )

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        if ticket is None:
            return
        if outcome is None or outcome.failure is None:
            if ticket:  # a probe without a verdict: its slot goes back
                self.breaker.release(call.origin, ticket)  # type: ignore[arg-type]
            return
        origin = call.origin
        transitions = self.breaker.record(origin, outcome.failure, ticket)  # type: ignore[arg-type]
        if transitions:
            self._tell(transitions, call.request, origin, call.attempt, outcome.status,
                       outcome.error)

    def settle_idle(self, request: Request, outcome: Outcome) -> None:
        """Most often a success of a closed breaker in its current bucket: counted without
        the lock or a call (:meth:`CircuitBreaker.record`'s usual case, written out)."""
        origin = origin_of(request.url)
        breaker = self.breaker
        failure = outcome.failure is True
        if not failure:
            try:
                entry = breaker._origins[origin]
            except KeyError:  # the origin's first outcome, or its first since it was forgotten
                pass
            else:
                if breaker.clock() < entry.quick_until:
                    next(entry.successes)
                    return
        transitions = breaker.record(origin, failure)
        if transitions:
            self._tell(transitions, request, origin, 1, outcome.status, None)


    def veto(self, call: CallView, outcome: Outcome) -> object:
        if _breakers(call) != "off" and self.breaker.is_open(call.origin):
            return CIRCUIT_OPEN
        return None


    def _tell(self, transitions: list[str], request: Request, origin: str, attempt: int,
              status: int | None, error: str | None) -> None:
        breaker = self.breaker
        self.observer.breaker(transitions, request, origin, attempt, breaker.opened_for(origin),
                              status, error, breaker.hooks)
