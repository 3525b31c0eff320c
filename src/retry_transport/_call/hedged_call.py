"""The decisions of a hedged try: several attempts of one request in flight at once.

See ``hedging`` for the rules. Sans-I/O: :class:`HedgedCall` says which attempt to start
and what an outcome means; ``_io/hedge_sync.py`` and ``_io/hedge_async.py`` do the I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .._base.models import NOT_RETRYABLE, SERVER_DECLINED, Attempt, new_attempt
from .._guards.seam import HEDGE, Guard
from .._policy.rules import classify_error, classify_response, final_at_once
from .._wire.http import attach
from .core import REFUSED, RetryCall
from .timeleft import MIN_ATTEMPT

if TYPE_CHECKING:
    from .._base.flavour import Request, Response
    from .._policy.policy import RetryPolicy
    from .controller import Controller
    from .hedging import Hedging

__all__ = ["HedgedCall", "Slot", "Verdict", "hedgeable", "hedged_methods"]


def hedgeable(policy: RetryPolicy, request: Request, flavour_stream: type) -> bool:
    """Whether ``request`` may be hedged under ``policy``: a method that may be sent again
    (or an idempotency key), a body held in memory, no ``retry_body_errors`` and no
    ``retry_event`` (either reads an answer before it is handed over)."""
    if policy.retry_body_errors or policy.retry_event is not None:
        return False
    if request.method not in policy.retry_methods:
        key = policy.idempotency_header
        if not key or not request.headers.get(key, "").strip():
            return False
    return isinstance(request.stream, flavour_stream)


def hedged_methods(policy: RetryPolicy) -> frozenset[str]:
    """The methods whose requests :func:`hedgeable` takes under ``policy`` whenever their
    body is held in memory, whatever their headers: read once, so that a transport tells
    most hedgeable requests at a glance (any other is asked of :func:`hedgeable`)."""
    if policy.retry_body_errors or policy.retry_event is not None:
        return frozenset()
    return policy.retry_methods


class Slot:
    """One attempt of a hedged try: what it sends and its own tickets."""

    __slots__ = ("hedge", "number", "record", "request", "running", "sent", "tickets")

    def __init__(self, number: int, request: Request, tickets: list[tuple[Guard, object]],
                 hedge: bool) -> None:
        self.number = number  # 1-based, in the order the attempts started
        self.request = request  # a copy of the request, dressed for this attempt
        self.tickets = tickets
        self.hedge = hedge
        self.running = True  # no outcome judged yet
        self.record: Attempt | None = None  # a retryable outcome's record, while others run
        #: When it left the client's own pool for the wire (the transport's clock), or
        #: ``None`` while it waits for a connection (see ``HedgedCall.sent``).
        self.sent: float | None = None


#: What :meth:`HedgedCall.done` answers: hand this outcome over (``"win"``: the response is
#: returned or the exception raised), wait for the others (``"more"``), sleep and retry
#: (``"retry"``, with the wait), or hand this outcome over after all (``"stop"``).
Verdict = Literal["win", "more", "retry", "stop"]


class HedgedCall(RetryCall):
    """A :class:`~._call.core.RetryCall` whose first try may have several attempts in flight."""

    __slots__ = ("_current", "_slots", "_stopped", "delay", "hedged", "hedging",
                 "losers_run")

    def __init__(self, controller: Controller, request: Request, hedging: Hedging,
                 closes: int | None = None, *, quick: bool = False,
                 stream: object = None) -> None:
        self._slots: list[Slot] = []
        self._current: Slot | None = None
        self._stopped = False  # a guard refused a hedge: no more in this try
        self.hedging = hedging
        self.delay = 0.0
        #: Whether the attempts that lose the race run on to their end (sync: a worker
        #: thread cannot be stopped) rather than being cancelled (async): a loser then keeps
        #: its tickets (a half-open probe slot) until it ends, and :meth:`late` settles them.
        self.losers_run = False
        super().__init__(controller, request, quick=quick, stream=stream, closes=closes)
        #: Whether the first try is hedged (else the request goes as without hedging).
        self.hedged = self.enabled and hedgeable(self.policy, request,
                                                 controller.flavour.byte_stream)

    def can_hedge(self) -> bool:
        """Whether another attempt could join the try later (a hedge's delay to wait)."""
        return (not self._stopped and len(self._slots) < self.policy.max_attempts
                and self.running < self.hedging.max_attempts)

    @property
    def running(self) -> int:
        """Attempts of the try still in flight."""
        return sum(1 for slot in self._slots if slot.running)

    def begin(self) -> Slot:
        """The try's first attempt, with the tickets the call's admission gave it. Raises
        ``DeadlineExceeded`` when no time is left to send it."""
        controller = self._controller
        progress = self._state()
        left = self._check_deadline(progress)
        self.delay = controller.hedge_delays.get(self.hedging, controller.latency,
                                                 self.request.url, controller.clock)
        tickets, self._tickets = self._tickets, []
        return self._slot(1, list(tickets), left, hedge=False)

    def adopt(self, request: Request, delay: float, sent: float | None) -> Slot:
        """The try's first attempt, already under way as a quick one (``quick=True``):
        ``request`` is what it sent, ``delay`` the hedging delay it was given, ``sent``
        when it left the client's own pool. It keeps the plain tickets."""
        self.delay = delay
        tickets, self._tickets = self._tickets, []
        slot = Slot(1, request, list(tickets), hedge=False)
        slot.sent = sent
        self._slots.append(slot)
        return slot

    def _slot(self, number: int, tickets: list[tuple[Guard, object]], left: float | None,
              hedge: bool) -> Slot:
        request = self.request
        copy = self._controller.flavour.request(request.method, request.url,
                                                headers=request.headers, stream=request.stream)
        self._label_attempt(copy, number, left, request.extensions)
        slot = Slot(number, copy, tickets, hedge)
        self._slots.append(slot)
        return slot

    def hedge(self) -> Slot | None:
        """Another attempt, if one may start now: fewer than ``Hedging.max_attempts`` in
        flight, fewer than the policy's ``max_attempts`` in all, time left, and every guard
        admitting it (once one refuses, no more hedges in this try). ``None``: none starts
        (the try goes on with those in flight)."""
        slots = self._slots
        if (self._stopped or len(slots) >= self.policy.max_attempts
                or self.running >= self.hedging.max_attempts
                or self._controller.closes != self.closes):  # closed: nothing starts
            return None
        progress = self._state()
        left = self._left(progress)
        if left is not None and left < MIN_ATTEMPT:
            return None
        if self._controller.guards:
            self.number = len(slots) + 1
            try:
                refused = self._admit(HEDGE) is REFUSED
            finally:
                self.number = 0
            if refused:  # hedges stop when a guard refuses one (gRPC: with throttling)
                self._stopped = True
                return None
        tickets, self._tickets = self._tickets, []
        return self._slot(len(slots) + 1, list(tickets), left, hedge=True)

    def sent(self, slot: Slot, when: float) -> None:
        """Attempt ``slot`` left the client's own pool at ``when``: a hedge is counted (in
        ``RetryInfo.hedges``, the stats, a ``hedge`` event) only now, all three here. One
        still waiting for a connection when the try ends is no hedge: :meth:`_end_try`
        gives back what its admission took, and its leaving the pool after that (a pool
        hands a connection over before the cancellation is seen) counts nothing."""
        if not slot.running:  # the try is over for it: not on the wire for this call
            return
        slot.sent = when
        if slot.hedge:
            self._state().hedges += 1
            self._controller.note_hedge(self.request, slot.number, self.delay)

    def done_unsent(self, slot: Slot) -> None:
        """Attempt ``slot`` was made ready but never sent (the transport was closed before
        a worker took it): it leaves the try, and what its admission took goes back."""
        slot.running = False
        self._slots.remove(slot)
        self._unsent(slot)

    def _unsent(self, slot: Slot) -> None:
        """What the admission of ``slot``, never sent, took goes back (a hedge's cost to
        the budget), and its tickets are settled without a verdict."""
        tickets, slot.tickets = slot.tickets, []
        self.number = slot.number
        try:
            for guard, ticket in tickets:
                guard.refund(self, ticket)
                guard.settle(self, ticket, None)
        finally:
            self.number = 0

    def _settle_slot(self, slot: Slot, tickets: list[tuple[Guard, object]]) -> None:
        """Settle ``tickets``, what is left to settle of attempt ``slot``, without a
        verdict (cancelled, or the request ended outside the decisions)."""
        self._tickets = tickets
        self.number = slot.number
        try:
            self._settle(None)
        finally:
            self.number = 0

    def done(self, slot: Slot, result: Response | Exception) -> tuple[Verdict, float | None]:
        """Attempt ``slot`` ended with ``result``; see :data:`Verdict`."""
        slot.running = False
        if len(self._slots) == 1 and not isinstance(result, Exception):
            # The first attempt answered before any hedge: as an unhedged request's, an
            # answer final at once takes the shared metadata (``RetryCall.on_response``).
            controller = self._controller
            progress = self._progress
            status = result.status_code
            if ((progress is None or (not progress.history and not progress.total_wait))
                    and final_at_once(result, status, self.policy, controller.quick.reads_quotas)):
                info, outcome = controller.final(status)
                attach(result, info)
                tickets, slot.tickets = slot.tickets, []
                for guard, ticket in tickets:
                    guard.settle(self, ticket, outcome)
                if status >= 400:  # a failure handed back: an SDK above may retry it
                    controller.quick.failed(self.request)
                return "win", None
        self._tickets, slot.tickets = slot.tickets, []
        self._current = slot
        error = isinstance(result, Exception)
        self.number = slot.number  # the guards settle this attempt's tickets, as its own
        try:
            if isinstance(result, Exception):
                outcome = self._outcome_of_error(result)
            else:
                outcome = self._outcome_of(result, result.status_code)
        finally:
            self.number = 0
        stop = outcome.stop
        if stop is not None:
            self._end_try(slot)
            if error:
                self._finish(NOT_RETRYABLE, result, outcome, failed_retryable=False)
            else:
                self._finish(stop, result, outcome, failed_retryable=stop is SERVER_DECLINED)
            if slot.hedge:
                self._controller.note_hedge_win()
            return "win", None
        if self.running:
            slot.record = new_attempt(outcome.status, outcome.error, outcome.floor, 0.0,
                                      outcome.signal if outcome.floor is not None else None,
                                      hedge=slot.hedge)
            return "more", None
        self._end_try(slot)
        wait = self._retry_or_stop(result, outcome)
        self._slots = []  # the try is over: retries are single attempts
        if wait is None:  # this outcome is handed over: a hedge's wins, whatever it is
            if slot.hedge:
                self._controller.note_hedge_win()
            return "stop", None
        return "retry", wait

    def _end_try(self, current: Slot) -> None:
        """The try is over with ``current``'s outcome: the other attempts' records go into
        the history in the order they started (those still in flight cancelled, their
        tickets settled without a verdict), ``current``'s place kept for its own."""
        progress = self._state()
        history = progress.history
        for slot in self._slots:
            if slot is current:
                progress.place = len(history)
                continue
            if slot.running and slot.hedge and slot.sent is None:  # no hedge after all
                slot.running = False
                self._unsent(slot)
                continue
            if slot.running:
                slot.running = False
                # Cancelled: no verdict. A loser that runs on keeps the tickets of the guards
                # that judge the origin's health, for its own outcome (``late``).
                keep = self.losers_run
                tickets = slot.tickets
                slot.tickets = [pair for pair in tickets if keep and pair[0].health]
                self._settle_slot(slot, [pair for pair in tickets
                                         if not (keep and pair[0].health)])
                history.append(new_attempt(None, None, None, 0.0, None, hedge=slot.hedge,
                                           cancelled=True))
            elif slot.record is not None:
                history.append(slot.record)

    def _hedged(self, progress: object) -> bool:
        current = self._current
        self._current = None
        return current is not None and current.hedge

    def late(self, slot: Slot, result: Response | BaseException) -> None:
        """A loser that ran on (:attr:`losers_run`) ended after its try: its tickets are
        settled with its own outcome (a probe's slot goes back, its verdict counts). Called
        once per such attempt, from whichever thread saw it end; touches no state of the
        request's."""
        tickets, slot.tickets = slot.tickets, []
        if not tickets:
            return
        controller = self._controller
        if isinstance(result, Exception):
            outcome = classify_error(result, controller.flavour)
        elif isinstance(result, BaseException):
            outcome = None
        else:
            outcome = classify_response(result, result.status_code, self.policy,
                                        controller.wallclock, controller.cooldown)
        view = _Settling(self, slot.number)  # the call's own number may be another's now
        for guard, ticket in tickets:
            guard.settle(view, ticket, outcome)

    def abandon(self) -> None:
        """The request ended outside the decisions: every attempt in flight is settled
        without a verdict (one that runs on, :attr:`losers_run`, is settled by
        :meth:`late` when it ends)."""
        for slot in self._slots:
            if slot.running and slot.tickets and not self.losers_run:
                slot.running = False
                tickets, slot.tickets = slot.tickets, []
                self._settle_slot(slot, tickets)
        super().abandon()


class _Settling:
    """A hedged call as the guards read it while a loser that ran on is settled, from the
    thread that saw it end (:meth:`HedgedCall.late`): the call itself, but for
    ``attempt``, that attempt's own number (the call's may be another's meanwhile: its
    retries go on)."""

    __slots__ = ("_call", "attempt")

    def __init__(self, call: HedgedCall, attempt: int) -> None:
        self._call = call
        self.attempt = attempt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)
