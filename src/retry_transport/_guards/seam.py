"""The guard seam: everything that may admit or refuse an attempt, learn from its outcome,
or veto a retry.

A transport holds a tuple of guards (today the circuit breaker, the origin cooldowns and the
retry budget). For every attempt of a request, the core (``_core.RetryCall``):

1. asks each guard, in the tuple's order, to **admit** the attempt: it answers with a ticket
   (any object, handed back when the attempt is settled; ``None``: nothing to settle), a
   :class:`Refusal` (the attempt is not made; the request ends with the refusal's stop
   reason and error), or a :class:`Hold` (before a first attempt only: wait that long, then
   go);
2. **settles** each ticket with the attempt's :class:`~._meaning.rules.Outcome`, or with ``None``
   when the attempt ended without a verdict (cancelled, interrupted, refused by a later
   guard); and lets the guards that ``learns`` **learn** from a response that is not final
   at once (one that may carry signals: an origin asking for quiet);
3. when the outcome is retryable and the request's own rules allow a retry, asks each guard
   that has a ``reason`` (in the order of :data:`~._meaning.rules.ORDER`) to **veto** the retry: it
   answers with that stop reason (no retry), or with anything else, which is carried to its
   ``admit`` of the next attempt (the budget carries what the retry cost). The budget is
   asked last, so no veto after it can leave a retry paid for and not made.

A guard that is ``quiet`` (it would only answer its ``plain`` ticket) is not asked to admit a
first attempt; when every guard is quiet, the drivers send the first attempt without a call
at all (``_plain.plain_first``), and an answer final at once is settled by ``settle_plain``,
told the request alone, or for a success by the guard's ``tally``, a lock-free counter.

Per-attempt state lives in the tickets, never in the guard or in fields of the call, so two
attempts of one request may be in flight at once. A guard reads the request through the
:class:`CallView` it is given and writes nothing on it. Adding a guard: a module with a class
that has these three methods and a ``reason``; the transport's keyword in ``_options``; its
stop reason, if new, in ``StopReason`` and ``_rules.RULES``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal, Protocol

from .._leaves.counting import counter
from .._leaves.models import StopReason
from .._meaning.observe import Observer
from .._wire.http import origin as origin_of

if TYPE_CHECKING:
    from .._leaves.flavour import Request
    from .._meaning.policy import RetryPolicy
    from .._meaning.rules import Outcome
    from .._meaning.testmode import TestingLog
    from .breaker import CircuitBreaker
    from .budget import RetryBudget
    from .throttle import AdaptiveThrottle

__all__ = ["FIRST", "HEDGE", "BreakerGuard", "BudgetGuard", "CallView", "Guard", "Hold",
           "Refusal", "ThrottleGuard"]

#: What ``admit`` is given as ``carried`` for a request's first attempt.
FIRST: Final = object()
#: ... and for a hedge: another attempt of a try while an earlier one is in flight. A guard
#: admits it as it would a retry, or refuses it (a :class:`Refusal` that is never raised: the
#: request goes on with the attempts in flight).
HEDGE: Final = object()

_CIRCUIT_OPEN: Final = StopReason.CIRCUIT_OPEN
_THROTTLED: Final = StopReason.THROTTLED
_BUDGET_EXHAUSTED: Final = StopReason.BUDGET_EXHAUSTED


class CallView(Protocol):
    """What a guard may read of the request it judges (``_core.RetryCall`` provides it)."""

    @property
    def request(self) -> Request: ...
    @property
    def policy(self) -> RetryPolicy: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def testing(self) -> TestingLog | None: ...
    @property
    def rng(self) -> random.Random: ...
    @property
    def observer(self) -> Observer: ...
    @property
    def origin(self) -> str: ...
    @property
    def retries(self) -> int:
        """Attempts already made (0 before the first attempt is admitted)."""
    @property
    def attempt(self) -> int:
        """The number of the attempt being admitted or settled (1 for the first)."""
    @property
    def time_left(self) -> float | None:
        """Seconds left of the request's deadline (the policy's or the ambient one), or
        ``None`` without one."""


class Refusal:
    """A guard refuses an attempt: the request ends with ``reason``, raising the flavour's
    ``CooldownError``, ``CircuitOpenError`` or ``ThrottledError`` (``error``) with this
    message (for ``ThrottledError``, ``remaining`` is the probability); a hedge's refusal is
    never raised (``error`` may be ``None``)."""

    __slots__ = ("error", "message", "origin", "reason", "remaining")

    def __init__(self, reason: StopReason,
                 error: Literal["cooldown", "circuit_open", "throttled"] | None,
                 origin: str, remaining: float, message: str) -> None:
        self.reason = reason
        self.error = error
        self.origin = origin
        self.remaining = remaining
        self.message = message


class Hold:
    """A guard holds a first attempt for ``wait`` seconds (``signal``: the header that asked)."""

    __slots__ = ("signal", "wait")

    def __init__(self, wait: float, signal: str) -> None:
        self.wait = wait
        self.signal = signal


class Guard(Protocol):
    """The protocol every guard implements (see the module docstring)."""

    @property
    def reason(self) -> StopReason | None:
        """The stop reason its veto gives, placing it in the rule order; ``None``: no veto."""

    @property
    def quiet(self) -> bool:
        """True while :meth:`admit` of a first attempt would only answer :attr:`plain`:
        the core then gives the first attempt ``plain`` without asking (read without a
        lock). A class attribute ``quiet = True`` says it always is."""

    def plain_for(self, request: Request) -> bool:
        """While not :attr:`quiet`: whether ``request``'s first attempt would still only be
        given :attr:`plain` (a cheap look; False when unsure). The drivers then send it
        without a call, as when the guard is quiet."""

    @property
    def plain(self) -> object:
        """The ticket of a first attempt while :attr:`quiet` (``None``: no ticket)."""

    def admit(self, call: CallView, carried: object) -> object:
        """A ticket for this attempt, a :class:`Refusal`, or a :class:`Hold`; ``carried``
        is :data:`FIRST` for a first attempt, :data:`HEDGE` for a hedge (no hold), else
        what this guard's veto answered before this retry."""

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        """The attempt this guard admitted with ``ticket`` is over (``None``: no verdict)."""

    def settle_plain(self, request: Request, outcome: Outcome) -> None:
        """A first attempt given :attr:`plain` without asking ended with an answer final at
        once: what :meth:`settle` would do with that ticket, told the request alone (the
        quick path makes no call view)."""

    @property
    def tally(self) -> Callable[[], object] | None:
        """``None``, or what the quick path calls, with no argument, in place of
        :meth:`settle_plain` when that answer was a success: best a C-level callable (such
        as an ``itertools.count``'s ``__next__``) that counts without a lock."""

    #: Whether :meth:`learn` is to be called.
    learns: bool

    #: Whether the guard judges the origin's health from outcomes (its tickets are settled
    #: with the outcome of a sync hedge that lost the race but ran on to its end; a guard
    #: that only accounts for the request, such as the budget, is settled without a
    #: verdict when the race ends).
    health: bool

    def learn(self, call: CallView, outcome: Outcome) -> None:
        """A response outcome that was not final at once (it may carry the server's
        signals), whatever the ticket."""

    def veto(self, call: CallView, outcome: Outcome) -> object:
        """``reason`` to stop the retry that ``outcome`` calls for; anything else lets it be
        and is carried to the next :meth:`admit`."""

    def refund(self, call: CallView, carried: object) -> None:
        """The retry this guard's veto answered ``carried`` for is not sent after all (an
        earlier guard refused it): give back what the veto took."""


def _breakers(call: CallView) -> str:
    testing = call.testing
    return "on" if testing is None else testing.breakers


class BreakerGuard:
    """A :class:`~retry_transport.CircuitBreaker` as a guard: it admits attempts (probes
    while half-open), counts their outcomes, and vetoes retries while open. Under
    ``retry_testing(breakers="off")`` it does nothing; with ``"open"`` it refuses all."""

    reason = _CIRCUIT_OPEN
    learns = False
    health = True
    plain = 0  # no probe
    tally = None

    def __init__(self, breaker: CircuitBreaker, observer: Observer) -> None:
        self.breaker = breaker
        self.observer = observer  # the transport's: it tells of the transitions it causes

    @property
    def quiet(self) -> bool:
        """Every origin's breaker is closed: every request is let through."""
        return self.breaker.unclosed == 0

    def plain_for(self, request: Request) -> bool:
        return False  # an origin is not worked out for this: the breaker is asked

    def admit(self, call: CallView, carried: object) -> object:
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
            _CIRCUIT_OPEN, "circuit_open", origin, remaining,
            f"{origin}: circuit breaker open"
            + (f", next probe in {remaining:.3f} s" if remaining else ", every probe slot taken")
            + ": not sent",
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

    def settle_plain(self, request: Request, outcome: Outcome) -> None:
        origin = origin_of(request.url)
        transitions = self.breaker.record(origin, outcome.failure is True)
        if transitions:
            self._tell(transitions, request, origin, 1, outcome.status, None)

    def learn(self, call: CallView, outcome: Outcome) -> None:
        pass

    def veto(self, call: CallView, outcome: Outcome) -> object:
        if _breakers(call) != "off" and self.breaker.is_open(call.origin):
            return _CIRCUIT_OPEN
        return None

    def refund(self, call: CallView, carried: object) -> None:
        pass

    def _tell(self, transitions: list[str], request: Request, origin: str, attempt: int,
              status: int | None, error: str | None) -> None:
        breaker = self.breaker
        self.observer.breaker(transitions, request, origin, attempt, breaker.opened_for(origin),
                              status, error, breaker.hooks)


#: The ticket of a first attempt: a success puts back ``success_refund``.
_REFUND: Final = object()


class BudgetGuard:
    """A :class:`~retry_transport.RetryBudget` as a guard: a retry must be paid for; a
    request that succeeds puts back what its last retry took (``success_refund`` without
    a retry)."""

    reason = _BUDGET_EXHAUSTED
    learns = False
    health = False
    quiet = True  # a first attempt is never refused
    plain = _REFUND

    def __init__(self, budget: RetryBudget) -> None:
        self.budget = budget
        # A success at once puts back success_refund: counted, folded in at the next read.
        self.tally = budget._tally

    def plain_for(self, request: Request) -> bool:
        return True

    def admit(self, call: CallView, carried: object) -> object:
        if carried is HEDGE:  # paid for as a retry is; refunded if it wins
            cost = self.budget.acquire(timeout=False)
            if cost is None:
                return Refusal(_BUDGET_EXHAUSTED, None, call.origin, 0.0,
                               "no hedge: the retry budget cannot pay for one")
            return cost
        return _REFUND if carried is FIRST else carried

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        budget = self.budget
        if outcome is not None and outcome.success and budget._tokens < budget.capacity:
            if ticket is _REFUND:
                budget.release(budget.success_refund)
            elif isinstance(ticket, (int, float)):
                budget.release(ticket)

    def settle_plain(self, request: Request, outcome: Outcome) -> None:
        budget = self.budget
        if outcome.success and budget._tokens < budget.capacity:
            budget.release(budget.success_refund)

    def learn(self, call: CallView, outcome: Outcome) -> None:
        pass

    def veto(self, call: CallView, outcome: Outcome) -> object:
        cost = self.budget.acquire(timeout=outcome.timeout)
        return _BUDGET_EXHAUSTED if cost is None else cost

    def refund(self, call: CallView, carried: object) -> None:
        if isinstance(carried, (int, float)):  # the cost the veto took for the retry
            self.budget.release(carried)


#: The ticket of an attempt a throttle let through: its outcome is counted.
_SENT: Final = object()


class ThrottleGuard:
    """An :class:`~retry_transport.AdaptiveThrottle` as a guard: every attempt (first
    attempts, retries, hedges, with retries on or off) is judged before it is sent, a retry
    when it is decided (its veto, before the wait and the budget); the outcome of each one
    let through is counted. Under ``retry_testing(throttles="off")`` it does nothing; with a
    number, that is the probability of every refusal."""

    reason = _THROTTLED
    learns = False
    health = True
    plain = _SENT  # a first attempt let through: its outcome is counted
    tally = None

    def __init__(self, throttle: AdaptiveThrottle, observer: Observer) -> None:
        self.throttle = throttle
        self.observer = observer
        self.refused = counter()  # refusals, for the stats

    @property
    def quiet(self) -> bool:
        """No origin's counts could refuse an attempt: first attempts go without asking."""
        return self.throttle.hot == 0

    def plain_for(self, request: Request) -> bool:
        return False

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

    def admit(self, call: CallView, carried: object) -> object:
        if carried is not FIRST and carried is not HEDGE:
            return carried  # a retry: judged by the veto (_SENT, or None: not judged)
        chance = self._judge(call, call.attempt)
        if chance is None:
            return _SENT
        origin = call.origin
        return Refusal(_THROTTLED, "throttled" if carried is FIRST else None, origin, chance,
                       f"{origin}: adaptive throttle refused the attempt locally "
                       f"(probability {chance:.3f}): not sent")

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        if ticket is _SENT and outcome is not None:
            self._count(call.origin, outcome)

    def settle_plain(self, request: Request, outcome: Outcome) -> None:
        self._count(origin_of(request.url), outcome)

    def _count(self, origin: str, outcome: Outcome) -> None:
        """A response counts (an accept unless its status is a reject status); so does a
        transient error (never an accept); an error that says nothing of the server not."""
        status = outcome.status
        if status is not None:
            self.throttle.record(origin, self.throttle.accepts_status(status))
        elif outcome.failure:
            self.throttle.record(origin, False)

    def learn(self, call: CallView, outcome: Outcome) -> None:
        pass

    def veto(self, call: CallView, outcome: Outcome) -> object:
        # the retry of the attempt just judged
        return _SENT if self._judge(call, call.attempt + 1) is None else _THROTTLED

    def refund(self, call: CallView, carried: object) -> None:
        pass  # a retry let through is counted only once it is sent
