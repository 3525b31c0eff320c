"""The guard seam: everything that may admit or refuse an attempt, learn from its outcome,
or veto a retry.

A transport holds a tuple of guards (the circuit breaker, the origin cooldowns, the adaptive
throttle and the retry budget, each beside its component in this folder). For every attempt
of a request, the core (``_call/core.py``, ``RetryCall``):

1. asks each guard, in the tuple's order, to **admit** the attempt, telling it the attempt's
   :class:`AttemptKind` (first, retry or hedge) and, for a retry, what that guard's veto
   answered (``paid``): it answers with a ticket (any object, handed back when the attempt
   is settled; ``None``: nothing to settle), a :class:`Refusal` (the attempt is not made;
   the request ends with the refusal's stop reason and the flavour's error of its kind), or
   a :class:`Hold` (before a first attempt only: wait that long, then go; the attempt's
   record shows the wait as ``held`` and the hold's ``holder`` as ``held_by``);
2. **settles** each ticket with the attempt's ``Outcome`` (``_policy/rules.py``), or with
   ``None`` when the attempt ended without a verdict (cancelled, interrupted, refused by a
   later guard); and lets the guards that ``learns`` **learn** from a response whose
   outcome asks the origin for quiet (``Outcome.quiet``: a server's time to wait);
3. when the outcome is retryable and the request's own rules allow a retry, asks each guard
   that has a ``reason`` (in the rule order, ``_policy/rules.py``'s ``ORDER``) to **veto**
   the retry: it answers with that stop reason (no retry), or with anything else, which is
   handed to its ``admit`` of the retry as ``paid`` (the budget: what the retry cost). The
   budget is asked last, so no veto after it can leave a retry paid for and not made.

A guard that is ``idle`` (it has nothing to check: it would only answer its ``idle_ticket``)
is not asked to admit a first attempt; when every guard is idle, the drivers send the first
attempt without a call at all (``_call/quick.py``), and an answer final at once is settled by
``settle_idle``, told the request alone, or for a success by the guard's ``count_success``, a
lock-free counter. ``idle`` is read as one attribute: a component that several transports
share (a breaker, a throttle) keeps its guards' ``idle`` in step through :class:`Waking`.

Per-attempt state lives in the tickets, never in the guard or in fields of the call, so two
attempts of one request may be in flight at once. A guard reads the request through the
:class:`CallView` it is given and writes nothing on it. Adding a guard: a module in this
folder with a :class:`Guard` subclass (it writes only the methods it needs); the
transport's keyword in ``_call/options.py`` and where the controller builds the guards; its
stop reason, if new, in ``StopReason`` and the rules; its error, if new, in the flavours'
``errors``.
"""

from __future__ import annotations

import enum
import random
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Literal, Protocol

from .._base.models import StopReason
from .._policy.observe import Observer

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._policy.policy import RetryPolicy
    from .._policy.rules import Outcome
    from .._policy.testmode import TestingLog

__all__ = ["FIRST", "HEDGE", "RETRY", "AttemptKind", "CallView", "ErrorKind", "Guard", "Hold",
           "Refusal", "Waking"]


class AttemptKind(enum.Enum):
    """What an attempt is, to the guards asked to admit it."""

    #: A request's first attempt.
    FIRST = "first"
    #: A retry the guards' vetoes let be: each guard is given what its veto answered.
    RETRY = "retry"
    #: Another attempt of a hedged try while an earlier one is in flight. A guard admits it
    #: as it would a retry, or refuses it (a :class:`Refusal` that is never raised: the
    #: request goes on with the attempts in flight).
    HEDGE = "hedge"


FIRST: Final = AttemptKind.FIRST
RETRY: Final = AttemptKind.RETRY
HEDGE: Final = AttemptKind.HEDGE

#: The errors a refusal raises, by kind: each flavour maps them to its own classes
#: (``Flavour.errors``).
ErrorKind = Literal["cooldown", "circuit_open", "throttled"]


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
    error of kind ``error`` (:data:`ErrorKind`) with ``message`` and ``fields``, that
    error's own keyword arguments (``origin`` and ``remaining``, or ``probability``). A
    hedge's refusal is never raised (``error`` may be ``None``)."""

    __slots__ = ("error", "fields", "message", "reason")

    def __init__(self, reason: StopReason, error: ErrorKind | None, message: str,
                 **fields: object) -> None:
        self.reason = reason
        self.error = error
        self.message = message
        self.fields = fields


class Hold:
    """A guard holds a first attempt for ``wait`` seconds (``signal``: the header that
    asked; ``holder``: who holds it, the name the attempt's record shows in
    ``Attempt.held_by``, such as ``"cooldown"``)."""

    __slots__ = ("holder", "signal", "wait")

    def __init__(self, wait: float, signal: str, holder: str) -> None:
        self.wait = wait
        self.signal = signal
        self.holder = holder


class Guard:
    """The base of every guard (see the module docstring), with the defaults of one that
    checks nothing: a guard writes only what it does."""

    #: The stop reason its veto gives, placing it in the rule order; ``None``: no veto.
    reason: StopReason | None = None

    #: The ticket of a first attempt while :attr:`idle` (``None``: no ticket).
    idle_ticket: object = None

    #: ``None``, or what the quick path calls, with no argument, in place of
    #: :meth:`settle_idle` when that answer was a success: best a C-level callable (such
    #: as an ``itertools.count``'s ``__next__``) that counts without a lock.
    count_success: Callable[[], object] | None = None

    #: Whether :meth:`learn` is to be called.
    learns: bool = False

    #: Whether the guard judges the origin's health from outcomes (its tickets are settled
    #: with the outcome of a sync hedge that lost the race but ran on to its end; a guard
    #: that only accounts for the request, such as the budget, is settled without a
    #: verdict when the race ends).
    health: bool = False

    if TYPE_CHECKING:  # a guard overrides it with a property or an attribute it sets
        @property
        def idle(self) -> bool:
            """True while :meth:`admit` of a first attempt would only answer :attr:`idle_ticket`:
            the core then gives the first attempt ``plain`` without asking (read without
            a lock)."""
    else:
        idle = False

    def idle_for(self, request: Request) -> bool:
        """While not :attr:`idle`: whether ``request``'s first attempt would still only be
        given :attr:`idle_ticket` (a cheap look; False when unsure). The drivers then send it
        without a call, as when the guard is idle."""
        return False

    def admit(self, call: CallView, kind: AttemptKind, paid: object) -> object:
        """A ticket for this attempt, a :class:`Refusal`, or a :class:`Hold` (before a
        first attempt only); ``paid``: for a retry, what this guard's veto answered."""
        return None

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        """The attempt this guard admitted with ``ticket`` is over (``None``: no verdict)."""

    def settle_idle(self, request: Request, outcome: Outcome) -> None:
        """A first attempt given :attr:`idle_ticket` without asking ended with an answer final at
        once: what :meth:`settle` would do with that ticket, told the request alone (the
        quick path makes no call view)."""

    def learn(self, call: CallView, outcome: Outcome) -> None:
        """A response outcome that asks the origin for quiet (``outcome.quiet`` is not
        ``None``), whatever the ticket; no other outcome is told."""

    def veto(self, call: CallView, outcome: Outcome) -> object:
        """``reason`` to stop the retry that ``outcome`` calls for; anything else lets it be
        and is handed to the next :meth:`admit` as ``paid``."""
        return None

    def refund(self, call: CallView, paid: object) -> None:
        """The retry this guard's veto answered ``paid`` for is not sent after all (an
        earlier guard refused it): give back what the veto took."""


class _Idles(Protocol):
    """A guard whose ``idle`` is an attribute (:class:`Waking` sets it)."""

    idle: bool


class Waking:
    """What keeps the guards of a shared component (a breaker, a throttle, which several
    transports may share, each with a guard of its own) from being idle: a count of its
    origins that could refuse an attempt (an open breaker, a throttle over its ratio). Each
    guard that :meth:`join` s has its ``idle`` attribute kept equal to ``count == 0``, so
    that the quick path reads one attribute, no property.

    Guarded by the component's lock: :meth:`join` and :meth:`change` are called under it;
    ``count`` and a guard's ``idle`` are read without it (one attribute each: a read that
    races with a change sees the value before it or after it)."""

    __slots__ = ("_guards", "count")

    def __init__(self) -> None:
        #: Origins that keep the guards from being idle (changed under the lock).
        self.count = 0
        self._guards: weakref.WeakSet[_Idles] = weakref.WeakSet()

    def join(self, guard: _Idles) -> None:
        """``guard``'s ``idle`` follows the count from now on (under the lock)."""
        self._guards.add(guard)
        guard.idle = self.count == 0

    def change(self, by: int) -> None:
        """The count moves ``by`` (under the lock): the guards are told when it leaves or
        reaches 0."""
        before = self.count
        self.count = after = before + by
        if (before == 0) is not (after == 0):
            for guard in self._guards:
                guard.idle = after == 0
