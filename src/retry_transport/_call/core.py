"""The per-request state machine, shared by the sync and async transports of both flavours.

Sans-I/O: nothing here sends, sleeps or reads a clock or a random source of its own; the
drivers (``_io/drivers.py``) do the I/O and the sleeping, and the clock, wall clock and random
generator are injected. No HTTP library is imported either: what the decisions need from
httpx or httpx2 comes from the transport's :class:`~._base.flavour.Flavour`. A driver runs one
:class:`RetryCall` per request:

    call = RetryCall(controller, request)   # may raise ValueError (bad override),
                                            # DeadlineExceeded (the ambient time limit has
                                            # passed), or CooldownError (a guard refused)
    wait = call.wait                        # a guard's hold before the first attempt
    loop:
        sleep(wait) if wait is not None
        request = call.ready or call.attempt_request()  # may raise CircuitOpenError,
                                                        # DeadlineExceeded, or the flavour's
                                                        # TransportError (after a close)
        send request
        wait = call.on_response(response)   # or call.on_error(exc)
        None -> hand the response over (or re-raise the exception): metadata attached
        else -> close the response, sleep ``wait`` seconds, try again

What an outcome means and the order of the stop reasons are stated once, in ``_rules``:
success, not_retryable, server_declined; disabled, unsafe_method, body_not_replayable;
max_attempts; retry_after_too_long, deadline (and idle_timeout, which ends a body handed
over: ``_io/idle.py``); then the guards' vetoes: circuit_open, throttled, budget_exhausted;
and closed, before any attempt of a request whose transport was closed meanwhile. The
guards (``_guards``) admit each attempt, settle its ticket with its outcome, and veto
retries; this module only runs them, in the controller's order.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

from .._base.flavour import Request, Response
from .._base.models import (
    DEADLINE,
    NOT_RETRYABLE,
    RETRY_AFTER_TOO_LONG,
    SERVER_DECLINED,
    Attempt,
    StopReason,
    held_first,
    new_attempt,
    new_retry_info,
)
from .._base.validate import check_attempt_header
from .._guards.seam import FIRST, HEDGE, RETRY, AttemptKind, Guard, Hold, Refusal
from .._policy import testmode
from .._policy.deadlines import current as ambient_scope
from .._policy.observe import Observer, display
from .._policy.policy import compute_backoff
from .._policy.rules import (
    Outcome,
    asked,
    classify_error,
    classify_response,
    final_at_once,
    may_retry,
    refused,
)
from .._wire.http import attach, clipped_timeouts, length, origin as origin_of, remember
from .controller import Controller
from .drain import worth_draining
from .progress import Progress
from .timeleft import MIN_ATTEMPT, TimeLeft

__all__ = ["REFUSED", "Refused", "RetryCall"]

#: What ``_admit`` answers when a guard refuses a hedge.
REFUSED: Final = -1.0

_NO_TICKETS: Final[tuple[tuple[Guard, object], ...]] = ()


class Refused(Exception):
    """A guard refused an attempt admitted with ``raising=False``: its :class:`Refusal`."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


class RetryCall(TimeLeft):
    """The decisions for one request, from its first attempt to its final outcome.

    It is also what the guards read (``_guards.CallView``): ``request``, ``policy``,
    ``enabled``, ``testing``, ``rng``, ``observer``, ``origin``, ``retries``, ``attempt``.
    The tickets of the attempt in flight are its attempt record; each attempt gets its own.
    """

    __slots__ = ("_controller", "_origin", "_progress", "_tickets", "closes", "enabled",
                 "number", "policy", "ready", "request", "stream", "testing", "wait")

    #: Whether the first try is hedged (``_hedged_call.HedgedCall``).
    hedged = False

    def __init__(self, controller: Controller, request: Request, *, quick: bool = False,
                 stream: object = None, closes: int | None = None) -> None:
        """Start one request and admit its first attempt: ``wait`` is a guard's hold (seconds
        to wait before it) or ``None``; ``ready`` is the request to send as it is, or
        ``None`` when :meth:`attempt_request` has something to do first.

        ``quick``: the first attempt was already sent as the quick path allowed (the
        request counted, the guards' plain tickets given), with the body ``stream`` (the
        request's stream before it was sent): the call takes over from its outcome.
        ``closes``: the transport's close count when the request began (default: now).

        Raises ``ValueError`` for an invalid per-request override, the flavour's
        ``CooldownError`` or ``CircuitOpenError`` when a guard refuses the first attempt.
        """
        self._controller = controller
        self.request = request
        # The transport's close count when the request began: after another close, no
        # attempt of this request starts.
        self.closes = controller.closes if closes is None else closes
        # The body as it is before the first attempt: whether it can be sent again is
        # judged from this stream, whatever the inner transport does to the request.
        self.stream = stream if quick else request.stream
        self._progress: Progress | None = None
        self._origin: str | None = None
        # The attempt in flight's record: (guard, ticket) for each guard that gave one.
        self._tickets: list[tuple[Guard, object]] | tuple[tuple[Guard, object], ...]
        self.enabled = True
        #: The number of the attempt the guards are told of, when it is not the one after
        #: the history (a hedge's, a resumption's: they keep it up to date); 0 otherwise.
        self.number = 0
        self.wait: float | None = None
        self.ready: Request | None = None
        if quick:  # sent under the transport's own policy: whatever the request says now
            self.testing = None
            self.policy = controller.policy
            self._tickets = controller.quick.tickets
            return
        observer = controller.observer
        if not observer.layered:  # an SDK's retry above? Read before anything has started
            observer.sdk_retries(request)  # (on the quick path: see QuickPath.failed)
        policy = controller.policy
        override = request.extensions.get("retry")
        testing = self.testing = testmode.active
        if override is not None or testing is not None:
            if override is False:
                self.enabled = False
            elif override is not None and override is not True:
                policy = policy.with_override(override)
                if controller.attempt_header is not None:  # the override's key header
                    check_attempt_header(controller.attempt_header, policy.idempotency_header,
                                         "the request's extensions['retry']")
            if testing is not None:
                policy = testing.policy(policy)
        self.policy = policy
        if controller.prepares:
            controller.prepare(request, policy)
        next(controller.request_counter)
        # The first attempt's admission: the deadline first, then the guards.
        scope = ambient_scope()
        if policy.deadline is not None or scope is not None:
            progress = self._state()
            if policy.deadline is not None:
                progress.deadline_at = controller.clock() + policy.deadline
            progress.extensions = request.extensions
            if scope is not None:
                progress.ambient = scope
                self._tickets = _NO_TICKETS
                self._check_deadline(progress)
        if testing is None:
            for guard in controller.quick.wakers:
                if not guard.idle and not guard.idle_for(request):
                    self._tickets = _NO_TICKETS
                    self.wait = self._admit(FIRST)
                    return
            self._tickets = controller.quick.tickets  # every guard would let it through
            if self._progress is None and controller.attempt_header is None:
                self.ready = request
            return
        self._tickets = _NO_TICKETS
        if controller.guards:
            self.wait = self._admit(FIRST)

    def _state(self) -> Progress:
        progress = self._progress
        if progress is None:
            progress = self._progress = Progress(self.policy.base_delay)
        return progress

    # -- what the guards read ------------------------------------------------------------

    @property
    def origin(self) -> str:
        """The request's origin, ``scheme://host:port``."""
        origin = self._origin
        if origin is None:
            origin = self._origin = origin_of(self.request.url)
        return origin

    @property
    def retries(self) -> int:
        """Attempts made before the one being admitted or settled."""
        progress = self._progress
        return len(progress.history) if progress is not None else 0

    @property
    def attempt(self) -> int:
        """The number of the attempt being admitted or settled (1 for the first)."""
        return self.number or self.retries + 1

    @property
    def rng(self) -> Any:
        """The jitter's random source (testing mode's seeded one while it is on)."""
        testing = self.testing
        return self._controller.rng if testing is None else testing.rng

    @property
    def observer(self) -> Observer:
        return self._controller.observer

    # -- before an attempt -----------------------------------------------------------------

    def _admit(self, kind: AttemptKind, paid: list[object] | None = None, *,
               raising: bool = True) -> float | None:
        """Ask each guard to admit the next attempt (``paid``, for a retry: what each
        guard's veto answered, by guard index); raise the error of a refusal (a hedge's is
        not raised: the answer is then ``REFUSED``; with ``raising`` False, a retry's is
        raised as :class:`Refused`, for the caller to end the request its own way). The
        tickets are kept as (guard, ticket) pairs, ``None`` tickets left out. Returns a
        hold's wait."""
        pairs: list[tuple[Guard, object]] = []
        hold: Hold | None = None
        index = -1
        for guard in self._controller.guards:
            index += 1
            ticket = guard.admit(self, kind, None if paid is None else paid[index])
            if ticket is None:
                continue
            cls = ticket.__class__
            if cls is Refusal:
                self._tickets = pairs
                self._settle(None)  # the guards that admitted it so far: no verdict
                if kind is HEDGE:
                    return REFUSED
                if paid is not None:  # a retry not sent after all
                    self._give_back(paid, index + 1)
                    self._state().paid = None  # given back, once
                if not raising:
                    raise Refused(ticket)  # type: ignore[arg-type]
                self._refuse(ticket)  # type: ignore[arg-type]
            if cls is Hold:
                if hold is None or ticket.wait > hold.wait:  # type: ignore[attr-defined]
                    hold = ticket  # type: ignore[assignment]
                continue
            pairs.append((guard, ticket))
        self._tickets = pairs
        if hold is None or kind is not FIRST:
            return None
        wait = hold.wait
        progress = self._state()
        progress.total_wait += wait
        progress.hold = hold
        self._controller.observer.cooldown(self.request, self.origin, wait, hold.signal)
        return self._to_sleep(wait)

    def _refuse(self, refusal: Refusal) -> NoReturn:
        """Raise a guard's refusal, the flavour's error of its kind, with the request's
        metadata (before a retry, the retry waited for counts in ``retries``)."""
        error = self._controller.flavour.errors[refusal.error](  # type: ignore[index]
            refusal.message, request=self.request, **refusal.fields)
        self._not_sent(self._progress, refusal.reason, error, "refused, not sent")

    def attempt_request(self) -> Request:
        """The request to send now: with a deadline, its timeouts end within the time left;
        a retry carries its attempt number as ``extensions["retry_attempt"]`` (2 for the
        first retry; a first try carries nothing); with ``attempt_header``, every attempt
        carries its number in that header, and with ``deadline_header`` the milliseconds
        left. A retry is admitted by the guards first (a breaker may have opened while this
        request waited). Raises ``DeadlineExceeded`` when no time is left to send it, and
        the flavour's ``TransportError`` when the transport was closed since the request
        began (no attempt of it starts after a close)."""
        request = self.request
        controller = self._controller
        header = controller.attempt_header
        progress = self._progress
        if progress is None:
            if header is not None:
                request.headers[header] = "1"
            return request
        if controller.closes != self.closes:
            self._closed(progress)
        retry = len(progress.history) + 1 if progress.history else 0
        left = None
        if progress.deadline_at is not None or progress.ambient is not None:
            left = self._check_deadline(progress)
        if retry and controller.guards:
            self._admit(RETRY, progress.paid)
            progress.paid = None  # admitted: sent from now on, whatever ends it
        if left is None and not retry:
            if header is not None:
                request.headers[header] = "1"
            return request
        # The same request object every time (whatever the inner transport caches on it,
        # such as a body it read, stays with it); the caller's extensions come back after
        # each attempt.
        if progress.extensions is None:
            progress.extensions = request.extensions
        self._label_attempt(request, retry or 1, left, progress.extensions)
        return request

    def check_open(self) -> None:
        """Raise the flavour's ``TransportError`` (nothing sent) if the transport was closed
        since the request began."""
        if self._controller.closes != self.closes:
            self._closed(self._state())

    def _label_attempt(self, request: Request, number: int, left: float | None,
               extensions: dict[str, Any]) -> None:
        """What attempt ``number`` carries, on ``request``: its number in ``attempt_header``,
        the milliseconds ``left`` in ``deadline_header``, timeouts clipped to ``left``, and
        (a retry or a hedge) ``extensions["retry_attempt"]``, over the caller's
        ``extensions``."""
        controller = self._controller
        if controller.attempt_header is not None:
            request.headers[controller.attempt_header] = str(number)
        extensions = {**extensions}
        if left is not None:
            if controller.deadline_header is not None:
                request.headers[controller.deadline_header] = str(int(left * 1000))
            extensions["timeout"] = clipped_timeouts(extensions.get("timeout"), left)
        if number > 1:
            extensions["retry_attempt"] = number
        request.extensions = extensions

    # -- after an attempt --------------------------------------------------------------

    def body_limit(self, response: Response) -> int | None:
        """With ``retry_body_errors``: the most bytes of this response's body to read inside
        the retry loop before handing it over; ``None``: leave the body to the caller.

        Only a response that will be handed over is read (a retryable status is closed
        unread). When the declared length is over the limit, the answer is 0 and the body is
        handed over as a stream.
        """
        policy = self.policy
        if not policy.retry_body_errors or response.status_code in policy.retry_statuses:
            return None
        limit = policy.max_body_buffer
        declared = length(response)
        if declared is not None and declared > limit:
            self._state().body = False
            return 0
        return limit

    def should_drain(self, response: Response) -> bool:
        """Whether to read a discarded response's body before closing it (``drain.py``)."""
        return worth_draining(self._progress, response, self._controller.flavour.byte_stream)

    def body_read(self, complete: bool) -> None:
        """The driver read the body: whole (True), or only up to the limit (False)."""
        self._state().body = complete

    def _attempt_over(self) -> None:
        """The caller's own extensions (timeouts) go back on the request after each attempt."""
        progress = self._progress
        if progress is not None and progress.extensions is not None:
            self.request.extensions = progress.extensions

    def _settle(self, outcome: Outcome | None) -> None:
        """Hand the attempt's outcome (``None``: no verdict) to the guards that admitted it."""
        pairs, self._tickets = self._tickets, _NO_TICKETS
        for guard, ticket in pairs:
            guard.settle(self, ticket, outcome)

    def abandon(self) -> None:
        """Something ended the request outside the decisions (a cancellation, an interrupt,
        an error of the driver's own, a ``sleep`` that raised): the caller's extensions go
        back on the request, the attempt in flight is settled without a verdict (a probe's
        slot goes back), and a retry decided but not yet admitted (its wait cut short) is
        not sent: what the guards' vetoes took for it goes back."""
        self._attempt_over()
        if self._tickets:
            self._settle(None)
        progress = self._progress
        if progress is not None:
            self._unpaid(progress)

    def on_response(self, response: Response) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: hand ``response`` over."""
        status = response.status_code
        controller = self._controller
        progress = self._progress
        if progress is not None and progress.extensions is not None:
            self.request.extensions = progress.extensions  # the caller's own, back on it
        policy = self.policy
        if (status not in policy.retry_statuses  # (the first thing final_at_once asks)
                and final_at_once(response, status, policy, controller.quick.reads_quotas)):
            # Nothing to retry, no signal: the shared, immutable outcome of its status.
            info, outcome = controller.final(status)
            pairs = self._tickets
            if pairs:
                self._tickets = _NO_TICKETS
                for guard, ticket in pairs:
                    guard.settle(self, ticket, outcome)
            if progress is None:  # one attempt, nothing waited: the shared metadata too
                attach(response, info)
                if status >= 400:  # a failure handed back: an SDK above may retry it
                    controller.quick.failed(self.request)
                return None
            self._finish(outcome.stop, response, outcome,  # type: ignore[arg-type]
                         failed_retryable=False)
            return None
        outcome = self._outcome_of(response, status)
        stop = outcome.stop
        if stop is not None:
            self._finish(stop, response, outcome, failed_retryable=stop is SERVER_DECLINED)
            return None
        return self._retry_or_stop(response, outcome)

    def on_refusal(self, response: Response, event: str) -> float | None:
        """``response`` (a ``2xx`` event stream) refused by its event, labelled ``event``
        (``inband.label``): seconds to wait before the next attempt, or ``None``."""
        self._attempt_over()
        outcome = refused(response, self.policy, self._controller.wallclock, event)
        if self._tickets:
            self._settle(outcome)
        return self._retry_or_stop(response, outcome)

    def _outcome_of(self, response: Response, status: int) -> Outcome:
        """What a response means; the attempt's tickets settled with it, and the guards
        that learn told."""
        controller = self._controller
        outcome = classify_response(response, status, self.policy, controller.wallclock,
                                    controller.cooldown)
        if self._tickets:
            self._settle(outcome)
        if outcome.quiet is not None:
            for guard in controller.learners:
                guard.learn(self, outcome)
        if outcome.ignored is not None:
            controller.observer.ignored_retry_after(self.origin, outcome.ignored)
        if status >= 400 and self.policy.retry_if is not None:  # the guards had the built-in
            outcome = asked(outcome, response, self.policy, controller.wallclock,
                            controller.cooldown, controller.flavour)
        return outcome

    def on_error(self, exc: Exception) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: re-raise ``exc``."""
        self._attempt_over()
        outcome = self._outcome_of_error(exc)
        if outcome.stop is not None:
            self._finish(NOT_RETRYABLE, exc, outcome, failed_retryable=False)
            return None
        return self._retry_or_stop(exc, outcome)

    def _outcome_of_error(self, exc: Exception) -> Outcome:
        """What an attempt's exception means; the attempt's tickets settled with it."""
        controller = self._controller
        outcome = classify_error(exc, controller.flavour)
        if self._tickets:
            self._settle(outcome)
        if self.policy.retry_if is not None:  # the guards had the built-in outcome
            outcome = asked(outcome, exc, self.policy, controller.wallclock,
                            controller.cooldown, controller.flavour)
        return outcome

    # -- the decision ------------------------------------------------------------------

    def _retry_or_stop(self, result: Response | Exception, outcome: Outcome) -> float | None:
        """A retryable outcome: the wait before the retry, or ``None`` when a rule stops it."""
        policy = self.policy
        controller = self._controller
        progress = self._progress
        if progress is None:
            progress = self._progress = Progress(policy.base_delay)
        request = self.request
        history = progress.history
        attempt = len(history) + 1
        reason = may_retry(outcome, policy, self.enabled, request.method, request.headers,
                           self.stream, controller.flavour, attempt)
        wait = backoff = 0.0
        paid: list[object] | None = None
        if reason is None:
            testing = self.testing
            backoff = compute_backoff(policy, attempt - 1, progress.previous,
                                      controller.rng if testing is None else testing.rng)
            wait = backoff + (outcome.floor or 0.0)
            if progress.deadline_at is not None or progress.ambient is not None:
                left = self._left(progress)
                if left is not None and wait >= left - MIN_ATTEMPT:
                    self._finish(DEADLINE, result, outcome, failed_retryable=True,
                                 refused=(wait, left))
                    return None
            if controller.vetoes:
                reason, paid = self._veto(outcome)
        if reason is not None:
            detail = None
            if reason is RETRY_AFTER_TOO_LONG:
                detail = (f"{display(outcome.signal or 'retry-after')} of "
                          f"{outcome.floor:g} s is over max_retry_after "
                          f"({policy.max_retry_after:g} s)")
            self._finish(reason, result, outcome, failed_retryable=True, detail=detail)
            return None
        self.ready = None  # a retry goes through attempt_request()
        progress.previous = backoff
        progress.paid = paid
        progress.total_wait += wait
        status, error, signal = outcome.status, outcome.error, outcome.signal
        record = new_attempt(status, error, outcome.floor, wait, signal, event=outcome.event,
                             hedge=self.hedged and self._hedged(progress))
        if progress.place is None:
            history.append(record)
        else:
            self._record_attempt(progress, record)
        next(controller.retry_counter)
        controller.observer.retry(request, attempt, policy.max_attempts, wait, status, error,
                                  signal)
        return wait if self.testing is None else self._to_sleep(wait)

    @staticmethod
    def _record_attempt(progress: Progress, record: Attempt) -> None:
        """Add the record of the attempt just judged to the history (at ``place``)."""
        place = progress.place
        if place is None:
            progress.history.append(record)
        else:
            progress.history.insert(place, record)
            progress.place = None

    def _hedged(self, progress: Progress) -> bool:
        """Whether the attempt just judged was a hedge (see ``_hedging.HedgedCall``)."""
        return False

    def _veto(self, outcome: Outcome) -> tuple[StopReason | None, list[object] | None]:
        """Ask the guards that veto, in the rule order: the first reason given stops the
        retry; else what each answered, handed to its admission of the retry."""
        guards = self._controller.guards
        paid: list[object] = [None] * len(guards)
        for index in self._controller.vetoes:
            answer = guards[index].veto(self, outcome)
            if isinstance(answer, StopReason):
                return answer, None
            paid[index] = answer
        return None, paid

    def _to_sleep(self, wait: float) -> float:
        """What the driver sleeps: the wait, or nothing under testing mode (which logs it)."""
        testing = self.testing
        if testing is None:
            return wait
        testing.record(wait)
        self._state().skipped += wait
        return 0.0

    def _finish(self, reason: StopReason, result: Response | Exception, outcome: Outcome, *,
                failed_retryable: bool, refused: tuple[float, float] | None = None,
                detail: str | None = None) -> None:
        """End the request with ``reason``. ``refused``: stopped by the deadline, the wait
        that was not slept and the seconds that were left of the deadline; ``detail``: why
        a rule stopped it, for the log line."""
        progress = self._progress or self._state()
        floor = outcome.floor
        signal = outcome.signal if floor is not None else None
        refused_wait = None
        if refused is not None:
            refused_wait, left = refused
            detail = (f"the next wait of {refused_wait:.3f} s would end past the deadline "
                      f"({max(left, 0.0):.3f} s left)")
        record = new_attempt(outcome.status, outcome.error, floor, 0.0, signal, refused_wait,
                             self.hedged and self._hedged(progress), event=outcome.event)
        if progress.place is None:
            progress.history.append(record)
        else:
            self._record_attempt(progress, record)
        history = tuple(progress.history)
        if progress.hold is not None:
            history = held_first(history, progress.hold.wait, progress.hold.holder)
        info = new_retry_info(len(history), len(history) - 1, history, progress.total_wait,
                              reason, progress.body, progress.hedges)
        if isinstance(result, BaseException):
            note = None
            if failed_retryable:
                note = f"retry-transport: gave up after {info.attempts} attempt(s) ({reason.value})"
                if detail is not None:
                    note += f": {detail}"
            remember(result, info, note)
        else:
            attach(result, info)
        self._controller.note_finish(self.request, info, failed_retryable, detail)
