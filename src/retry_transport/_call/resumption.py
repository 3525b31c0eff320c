"""Resumable bodies: a body that breaks while the caller reads it goes on where it stopped.

Every retry layer stops at the response's headers: a download that loses its connection
near its end starts again from zero, and an event stream that drops simply ends. HTTP has
long had the means to go on: a byte range with ``If-Range`` for a representation with a
strong validator (RFC 9110 sections 14 and 13.1.5), and ``Last-Event-ID`` for server-sent
events (the HTML standard). With a ``Resume`` (``resume.py``), a final response to a
``GET`` whose body allows it (``_wire/resumable.py``) is handed over with a body that
resumes itself; with ``post_events_by_get``, so is a ``POST``'s event stream, resumed by a
``GET`` as MCP's streamable HTTP does.

Each resumption is an attempt of the request, decided here (sans-I/O, like the core) through
the request's :class:`~._call.core.RetryCall`: the guards admit it (an open breaker refuses
it), the budget pays for it as for a retry (and gets it back when the body then ends
cleanly, or as soon as the caller received new data after it), the request's deadline
bounds it, and the wait before it is the policy's backoff for the resumptions since the
last progress (an event stream's ``retry`` time added to it), raised to the server's
``Retry-After``. The drivers' bodies (``_io/_async_resume.py`` and its generated sync twin)
do the reading, the sleeping and the sending.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Final, NoReturn

from .._base.models import (
    BUDGET_EXHAUSTED,
    CIRCUIT_OPEN,
    CLOSED,
    DEADLINE,
    IDLE_TIMEOUT,
    MAX_ATTEMPTS,
    NOT_RETRYABLE,
    RETRY_AFTER_TOO_LONG,
    THROTTLED,
    Attempt,
    RetryInfo,
    StopReason,
    new_attempt,
    new_retry_info,
)
from .._guards.seam import RETRY
from .._policy.policy import compute_backoff
from .._policy.rules import Outcome, classify_error
from .._wire.events import EventScanner
from .._wire.http import attach, remember, retry_info
from .._wire.resumable import Ranges, is_event_stream, plan
from .core import Refused, RetryCall
from .timeleft import MIN_ATTEMPT

if TYPE_CHECKING:
    from .._base.flavour import Request, Response
    from .._guards.seam import Guard

__all__ = ["Resumption", "resumption"]


#: The request headers a resumption sets (replacing the caller's).
_REPLACED: Final = frozenset({b"range", b"if-range", b"last-event-id"})
#: The headers of a request's body, left off a ``POST``'s event stream resumed by ``GET``.
_BODY: Final = frozenset({b"content-type", b"content-length", b"content-encoding",
                          b"transfer-encoding"})

#: By ranges, the new bytes the caller must receive after a resumption for it to have
#: succeeded (by event ID: one event).
PROGRESS_BYTES: Final = 64 * 1024
#: :attr:`Resumption.mark` while no resumption awaits its progress.
_NEVER: Final = sys.maxsize
#: A data field, at the start of a line of whole events: the event is dispatched.
_DATA: Final = re.compile(rb"(?:\A|[\r\n])data[:\r\n]")

#: Why a resumption was not made, for the note on the error, by stop reason.
_WHY: Final[dict[StopReason, str]] = {
    BUDGET_EXHAUSTED: "the retry budget is spent",
    CIRCUIT_OPEN: "the origin's circuit breaker is open",
    THROTTLED: "the origin's adaptive throttle refused it",
    CLOSED: "the transport was closed",
}


def resumption(call: RetryCall, response: Response) -> Resumption | None:
    """The resumption state of ``response``, the final answer of ``call``, or ``None``
    when its body is not to be resumed: no ``Resume``, not a ``GET`` (nor a ``POST``'s event
    stream with ``post_events_by_get``), retries disabled for the request, a body already in
    memory, or headers that do not allow it."""
    controller = call._controller
    resume = controller.resume
    if (resume is None or not call.enabled
            or isinstance(response.stream, controller.flavour.byte_stream)):
        return None
    method = call.request.method
    if method == "GET":
        how = plan(response, ranges=resume.ranges, events=resume.events)
        if how is None:
            return None
        return Resumption(call, response, resume.max_resumes, None if how is True else how)
    if (method == "POST" and resume.post_events_by_get and resume.events
            and is_event_stream(response)):
        return Resumption(call, response, resume.max_resumes, None, by_get=True)
    return None


class Resumption:
    """The decisions for one response's body, from its first break on."""

    __slots__ = ("_attempt", "_dropped", "_error", "_history", "_info", "_kept", "_method",
                 "_previous", "_response", "_since", "_success", "call", "closes", "mark",
                 "max_resumes", "pending", "ranges", "resumes", "scanner", "total_wait")

    def __init__(self, call: RetryCall, response: Response, max_resumes: int,
                 ranges: Ranges | None, *, by_get: bool = False) -> None:
        self.call = call
        # What each resumption is sent as: the request again with the headers it replaces,
        # or (a POST's event stream) a GET without the headers of the POST's body or its key.
        self._method = "GET" if by_get else call.request.method
        dropped = _REPLACED
        if by_get:
            dropped = dropped | _BODY
            key = call.policy.idempotency_header
            if key is not None:
                dropped = dropped | {key.lower().encode("latin-1")}
        self._dropped = dropped
        self._response = response
        self.max_resumes = max_resumes
        #: Byte ranges (``None``: an event stream, read by :attr:`scanner`).
        self.ranges = ranges
        self.scanner = None
        if ranges is None:  # an ID the caller sent is where the stream went on from
            self.scanner = EventScanner(call.request.headers.get("last-event-id") or None)
        info = retry_info(response)
        assert info is not None  # a final answer always carries its metadata
        self._info = info
        self._history: list[Attempt] = list(info.history)
        self.total_wait = info.total_wait
        self.resumes = 0
        self._since = 0  # the resumptions since the caller last received new data
        #: By ranges: the bytes read (``ranges.read``) at which the resumption taken last has
        #: brought the caller new data enough (``_NEVER`` while none awaits it).
        self.mark = _NEVER
        #: By event ID: whether the resumption taken last has yet to hand on an event.
        self.pending = False
        self.closes = call.closes
        self._previous = call.policy.base_delay  # the last backoff (decorrelated jitter)
        self._error: Exception | None = None  # the break being resumed
        self._attempt: int | str | None = None  # where the resumption in flight asked to go on
        # The accepted resumption's tickets of guards that account for the request (the
        # budget), settled when the body ends: cleanly (a success), or with a break.
        self._kept: list[tuple[Guard, object]] = []
        self._success: Outcome | None = None  # the accepted resumption's outcome

    # -- while the body is read ------------------------------------------------------------

    def breaks(self, exc: Exception) -> bool:
        """Whether ``exc``, raised while the body was read, is a break a resumption may
        mend: a transport error a retry may fix."""
        return classify_error(exc, self.call._controller.flavour).stop is None

    def progressed(self) -> None:
        """The resumption taken last brought the caller new data: it has succeeded. Its
        cost goes back to the budget now, and ``max_resumes`` and the backoff count from
        zero again."""
        self.mark = _NEVER
        self.pending = False
        self._settle_kept(self._success)
        self._since = 0
        self._previous = self.call.policy.base_delay

    def handed(self, pieces: list[bytes]) -> bool:
        """By event ID, while a resumption awaits its progress: ``pieces``, whole events,
        are handed on; whether it still awaits it (none of them was dispatched: a comment,
        a block of only ``id`` or ``retry`` fields)."""
        if _DATA.search(b"".join(pieces)) is None:
            return True
        self.progressed()
        return False

    def ended(self) -> None:
        """The body ended cleanly: the last resumption's cost goes back to the budget."""
        self._settle_kept(self._success)

    def overran(self) -> NoReturn:
        """By ranges, the body went on past the last byte its headers declared: resumption
        ends (the bytes before that one were handed on, none after it), and the break being
        resumed is raised, noted; in the first body, with no break yet, the flavour's
        protocol error."""
        error = self._miscounted(over=True)
        if self._error is None:
            self._error = error
        last = self._history[-1]
        self._history[-1] = replace(last, error=type(error).__name__)
        self._end(NOT_RETRYABLE, str(error))

    def _miscounted(self, *, over: bool) -> Exception:
        """The flavour's protocol error for a body (by ranges) that went on past the last
        byte its headers declared (``over``), or ended before it."""
        ranges = self.ranges
        size = None if ranges is None else ranges.size()
        assert ranges is not None and size is not None
        last = ranges.start + size - 1
        message = (f"the body went on past byte {last}, the last its headers declared" if over
                   else f"the body ended before byte {ranges.start + ranges.read}; its headers "
                        f"declared bytes up to {last}")
        error: Exception = self.call._controller.flavour.protocol_error(
            message, request=self.call.request)
        return error

    # -- a break -------------------------------------------------------------------------

    def on_break(self, exc: Exception | None) -> float:
        """The body broke with ``exc``: the wait before the resumption; raises the break
        (noted, with the request's metadata) when there is to be none.

        ``exc`` is ``None`` for a body that ended cleanly short of the bytes its range
        declared: a break too, recorded as the flavour's protocol error (what its own
        reading raises for a body shorter than its ``Content-Length``). The error raised
        when resumption ends is then still the break being resumed, when there is one."""
        self._settle_kept(None)  # the resumption's body broke: its cost is not given back
        if exc is None:
            exc = self._miscounted(over=False)
            if self._error is None:
                self._error = exc
        else:
            self._error = exc
        last = self._history[-1]
        self._history[-1] = replace(last, error=type(exc).__name__)
        scanner = self.scanner
        if scanner is not None and scanner.last_id is None:
            flavour = self.call._controller.flavour  # a stall not resumed: idle_timeout
            self._end(IDLE_TIMEOUT if isinstance(exc, flavour.idle_error) else NOT_RETRYABLE,
                      "no event ID to resume from")
        return self._next(classify_error(exc, self.call._controller.flavour))

    def _next(self, outcome: Outcome) -> float:
        """The wait before the next resumption, decided as a retry is, within
        ``max_resumes``; raises the break when a rule stops it."""
        call = self.call
        policy = call.policy
        if self._since >= self.max_resumes:
            self._end(MAX_ATTEMPTS, f"max_resumes ({self.max_resumes}) reached")
        floor = outcome.floor
        if floor is not None and floor > policy.max_retry_after:
            self._end(RETRY_AFTER_TOO_LONG, f"the server asked for {floor:g} s, over "
                      f"max_retry_after ({policy.max_retry_after:g} s)")
        backoff = compute_backoff(policy, self._since, self._previous, call.rng)
        wait = backoff
        scanner = self.scanner
        if scanner is not None and scanner.retry_ms is not None:
            # The server's time is a floor, and the jitter on top of it spreads the clients
            # that lost it at once (the larger of the two brought them all back together).
            wait += min(scanner.retry_ms / 1000, policy.max_retry_after)
        if floor is not None and floor > wait:
            wait = floor
        left = call.time_left
        if left is not None and wait >= left - MIN_ATTEMPT:
            self._end(DEADLINE, "the deadline has passed" if left <= 0 else
                      f"the next wait of {wait:.3f} s would end past the deadline "
                      f"({left:.3f} s left)")
        paid: list[object] | None = None
        if call._controller.vetoes:
            reason, paid = call._veto(outcome)
            if reason is not None:
                self._end(reason, _WHY.get(reason, reason.value))
        call._state().paid = paid
        self._previous = backoff
        self.resumes += 1
        self._since += 1
        self.total_wait += wait
        last = self._history[-1]
        self._history[-1] = replace(last, wait=wait)
        at = self._attempt = (self.scanner.last_id if self.scanner is not None
                              else self.ranges.start + self.ranges.read)  # type: ignore[union-attr]
        call._controller.note_resume(call.request, len(self._history) + 1, wait, last.status,
                                     last.error, at)
        self._publish()
        return call._to_sleep(wait)

    # -- a resumption attempt ----------------------------------------------------------

    def attempt_request(self) -> Request:
        """The resumption to send now, admitted by the guards; raises the break (noted)
        when the transport was closed, the deadline passed or a guard refused it."""
        call = self.call
        controller = call._controller
        if controller.closes != self.closes:
            self._end(CLOSED, _WHY[CLOSED])
        left = call.time_left
        if left is not None and left <= 0.0:
            self._end(DEADLINE, "the deadline has passed")
        progress = call._state()
        call.number = len(self._history) + 1  # what the guards are told, to its end
        if controller.guards:
            try:
                call._admit(RETRY, progress.paid, raising=False)
            except Refused as refused:
                reason = refused.refusal.reason
                self._end(reason, _WHY.get(reason, refused.refusal.message))
        progress.paid = None
        original = call.request
        dropped = self._dropped
        headers = [(name, value) for name, value in original.headers.raw
                   if name.lower() not in dropped]
        if self.ranges is not None:
            headers.append((b"Range", self.ranges.range_header().encode("ascii")))
            headers.append((b"If-Range", self.ranges.etag.encode("latin-1")))
        else:  # as EventSource sends it: the ID's UTF-8 bytes
            headers.append((b"Last-Event-ID", str(self._attempt).encode("utf-8")))
        request: Request = controller.flavour.request(self._method, original.url,
                                                      headers=headers)
        call._label_attempt(request, len(self._history) + 1, left, dict(original.extensions))
        return request

    def on_response(self, response: Response) -> float | None:
        """A resumption's answer: ``None`` when it is taken (its body goes on where the
        break was), or the wait before the next resumption (an answer a retry may fix);
        raises the break (noted) when resumption ends. The answer not taken is the
        driver's to close."""
        call = self.call
        if self.ranges is not None:
            why = self.ranges.accepts(response)
        elif is_event_stream(response):
            why = None
        else:
            why = f"the server answered {response.status_code}, not an event stream"
        # The guards that judge health learn from the answer now; those that account for
        # the request (the budget) are settled when the body ends if it is taken (cleanly:
        # the resumption's cost goes back), and without a verdict if it is not.
        pairs = call._tickets
        accounts: list[tuple[Guard, object]] = []
        if pairs:
            accounts = [pair for pair in pairs if not pair[0].health]
            call._tickets = [pair for pair in pairs if pair[0].health]
        outcome = call._outcome_of(response, response.status_code)
        self._history.append(new_attempt(response.status_code, None, outcome.floor, 0.0,
                                         outcome.signal, resumed_at=self._attempt))
        call._attempt_over()
        if why is None:
            self._kept = accounts
            self._success = outcome
            if self.scanner is not None:
                self.scanner.restart()
                self.pending = True
            else:
                self.mark = self.ranges.read + PROGRESS_BYTES  # type: ignore[union-attr]
            self._publish()
            return None
        for guard, ticket in accounts:
            guard.settle(call, ticket, None)
        if outcome.stop is None:  # 503, 429...: another resumption, as a retry would be
            return self._next(outcome)
        self._end(NOT_RETRYABLE, why)

    def on_error(self, exc: Exception) -> float:
        """A resumption attempt raised ``exc``: the wait before the next one, or the break
        is raised (noted) when resumption ends."""
        call = self.call
        call._attempt_over()
        outcome = call._outcome_of_error(exc)
        name = type(exc).__name__
        self._history.append(new_attempt(None, name, None, 0.0, None,
                                         resumed_at=self._attempt))
        if outcome.stop is not None:
            self._end(NOT_RETRYABLE, f"the resumption failed with {name}")
        return self._next(outcome)

    def closed(self) -> NoReturn:
        """The caller closed the response while its body was being resumed: the attempt in
        flight is settled without a verdict, and resumption ends (stop reason ``closed``)."""
        self.call.abandon()
        self._end(CLOSED, "the response was closed while its body was resumed")

    def abandon(self) -> None:
        """The read was cancelled or interrupted mid-resumption: the attempt in flight and
        the kept tickets are settled without a verdict."""
        call = self.call
        call.abandon()
        self._settle_kept(None)

    # -- bookkeeping ---------------------------------------------------------------------

    def _settle_kept(self, outcome: Outcome | None) -> None:
        kept, self._kept = self._kept, []
        for guard, ticket in kept:
            guard.settle(self.call, ticket, outcome)

    def _record(self, reason: StopReason) -> RetryInfo:
        info = self._info
        history = tuple(self._history)
        return new_retry_info(len(history), info.retries, history, self.total_wait, reason,
                              info.body_buffered, info.hedges, self.resumes)

    def _publish(self) -> None:
        """``retry_info(response)`` kept current while the body is read."""
        attach(self._response, self._record(self._info.stop_reason))

    def _end(self, reason: StopReason, detail: str) -> NoReturn:
        """Resumption ends: the break is raised, the same object, with a note saying why
        and the request's metadata. What the guards' vetoes took for a resumption that is
        not sent goes back."""
        self._settle_kept(None)
        progress = self.call._progress
        if progress is not None and progress.paid is not None:
            paid, progress.paid = progress.paid, None
            self.call._give_back(paid, 0)
        error = self._error
        assert error is not None
        info = self._record(reason)
        remember(error, info, f"retry-transport: not resumed after {self.resumes} "
                              f"resumption(s) ({reason.value}): {detail}")
        self._publish()
        call = self.call
        call._controller.note_resume_end(call.request, info, detail)
        raise error
