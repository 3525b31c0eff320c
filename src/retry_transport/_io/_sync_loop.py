# Generated from _async_loop.py by `python scripts/unasync.py`: do not edit. Edit the
# source, then run the command again (CI checks with `python scripts/unasync.py --check`).
"""A driver's loop and the I/O it runs, written once: ``_async_loop.py`` is the source, and
``_sync_loop.py`` is generated from it by ``python scripts/unasync.py`` (a table of token
replacements: ``await`` dropped, each async name replaced by its sync twin), which CI runs
with ``--check`` so that the two cannot drift. Edit the source, then run the script.

This is the loop of a transport without hedging: a first attempt on the quick path (see
``_call/quick.py``), then, when its outcome is not final at once, the attempts of a
:class:`~._call.core.RetryCall`. A transport with hedging runs ``_async_hedging.py``'s
loop, which shares the call's attempts (:meth:`SyncLoop._attempts`) and the hand-over.

What the table cannot translate is each driver's own, in ``drivers.py``: the hooks the loop
class declares (the first request's checks, the wait between attempts, draining and
closing a response).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._call.core import RetryCall
from .._call.hints import body_hint
from .._call.idle import IdleWatch
from .._call.inband import EventJudge, judged, label
from .._call.resumption import Resumption, resumption
from .._wire.http import origin as origin_of
from ._sync_resume import SyncResuming, sync_resuming
from ._common import _Common
from .bodies import buffer, noted
from .idle import idle_body

if TYPE_CHECKING:
    from .._base.flavour import Request, Response

__all__ = ["SyncLoop"]


class SyncLoop(_Common):
    """The loop of each ``RetryTransport`` without hedging, and the I/O it runs."""

    if TYPE_CHECKING:  # the hooks: each driver's own (``drivers.py``)
        def _pause(self, seconds: float, closes: int) -> None: ...
        def _drain(self, response: Response) -> None: ...
        def _close(self, response: Response) -> None: ...

    def handle_request(self, request: Request) -> Response:
        """Send ``request`` until an outcome is final, and hand that over. It decides nothing:
        the quick path and the ``RetryCall`` do. It only executes: it waits, sends, reads a
        body, drains and closes as told, and gives the request back when stopped mid-attempt."""
        closes = self._controller.closes  # before anything: a close from now on stops it
        quick = self._quick
        timed = quick.first(request)  # None: a call decides from the first attempt on
        if timed is None:
            call = self._call(request, closes)
            return self._attempts(call, None, call.wait)
        stream = request.stream  # as it is before it is sent (it may not be sent again)
        outcome: Response | Exception
        try:
            if timed:
                outcome = self._timed(request)
            else:
                outcome = self._transport.handle_request(request)
        except Exception as exc:
            outcome = exc  # judged outside the handler: no later error is chained to it
        else:
            if quick.ends(request, outcome):
                if type(outcome.stream) is not self._memory:  # streamed: may break later
                    self._streamed(request, stream, outcome)
                return outcome
        return self._attempts(self._begin(request, stream, closes), outcome)

    def _attempts(self, call: RetryCall, outcome: Response | Exception | None,
                        wait: float | None = None) -> Response:
        """The attempts of ``call`` until one's outcome is final, handed over (a response
        returned, an exception raised): from ``outcome``, the last attempt's (the first,
        sent on the quick path), or with ``outcome`` ``None`` from the next attempt, sent
        after ``wait`` seconds (``None``: at once)."""
        closes, request, send = call.closes, call.request, self._transport.handle_request
        try:
            while True:
                if outcome is None:
                    if wait is not None:
                        self._pause(wait, closes)
                    attempt = call.ready or call.attempt_request()  # raises when not to send
                    try:
                        outcome = (self._timed if self._controller.timed() else send)(attempt)
                    except Exception as exc:
                        outcome = exc
                if isinstance(outcome, Exception):
                    wait = call.on_error(outcome)
                    if wait is None:
                        self._check_failed(request, outcome)
                        raise outcome
                else:
                    policy = call.policy
                    if policy.retry_event is None and not policy.retry_body_errors:
                        wait = self._verdict(call, outcome)
                    else:  # its first events judged, or its body read, first
                        wait = self._read_first(call, outcome)
                    if wait is None:
                        if (self._controller.resume is None
                                and type(outcome.stream) is self._memory):
                            return outcome  # in memory, not to resume: nothing to wrap
                        return self._handed(call, outcome)
                outcome = None
        except BaseException:  # a cancel or an interrupt mid-attempt: the request back
            call.abandon()
            raise

    def _timed(self, request: Request) -> Response:
        """Send ``request``, its latency recorded for its origin."""
        lap = self._lap
        start = lap()
        response = self._transport.handle_request(request)
        end = lap()
        self._record(origin_of(request.url), end - start, end)
        return response

    def _read_first(self, call: RetryCall, response: Response) -> float | None:
        """``call``'s verdict on ``response`` when something of its body is read before:
        with ``retry_event``, a ``2xx`` event stream's first events (:meth:`_events`); with
        ``retry_body_errors``, its body (:meth:`_judge`)."""
        if call.policy.retry_event is not None and judged(response):
            return self._events(call, response)
        if call.policy.retry_body_errors:
            return self._judge(call, response)
        return self._verdict(call, response)

    def _judge(self, call: RetryCall, response: Response) -> float | None:
        """With ``retry_body_errors``: ``call``'s verdict on ``response``, its body read
        first; a body that broke is judged as the attempt's error (see :meth:`_verdict`)."""
        wait = self._read_body(call, response)
        if wait is not None:  # the body failed: retried after the wait
            return wait
        return self._verdict(call, response)

    def _events(self, call: RetryCall, response: Response) -> float | None:
        """With ``retry_event``, for a ``2xx`` event stream: ``call``'s verdict on
        ``response``, its first events judged first (``_call/inband.py``), each chunk held
        back until the verdict and then handed over, as it came, in front of the rest. An
        in-band refusal is the call's to judge: the response is closed, unless no further
        attempt is allowed. A body that breaks before the verdict is judged as the
        attempt's error (a stall past ``idle_timeout`` too: the body is watched from
        here on); what ``retry_event`` raises is raised, the response closed."""
        judge = EventJudge(call.policy.retry_event, call.request)  # type: ignore[arg-type]
        timeout = call.policy.idle_timeout
        if timeout is not None:  # the server's silence bounded while events are held too
            self._watch(timeout, call.request, response, self._controller.resume is None)
        stream = response.stream
        chunks = stream.__iter__()  # one iterator: what follows the held chunks is its rest
        verdict: bool | None = None
        try:
            for chunk in chunks:
                verdict = judge.feed(chunk)
                if verdict is not None:
                    break
        except Exception as exc:  # the body broke before the verdict
            self._close(response)
            wait = call.on_error(exc)
            if wait is None:
                raise
            return wait
        except BaseException:
            self._close(response)
            raise
        if judge.raised is not None:  # the policy's retry_event raised: no one's answer
            self._close(response)
            raise judge.raised
        flavour = self._flavour
        if verdict is None:  # the body ended first: handed over whole
            stream.close()
            response.stream = flavour.byte_stream(b"".join(judge.held))
        else:
            tail = flavour.sync_tail if self._sync else flavour.async_tail
            response.stream = tail(judge.held, chunks, stream)
        if verdict and judge.event is not None:  # an in-band refusal
            wait = call.on_refusal(response, label(judge.event))
            if wait is not None:
                self._close(response)
                end = getattr(chunks, "close", None)  # a generator's: ended now, not when
                if end is not None:  # collected (when its loop may be gone)
                    end()
            return wait  # None: no further attempt, handed over as it came
        if call.policy.retry_body_errors:
            return self._judge(call, response)
        return self._verdict(call, response)

    def _verdict(self, call: RetryCall, response: Response) -> float | None:
        """``call``'s verdict on ``response``: ``None`` to hand it over, else the wait
        before the next attempt (``response`` drained and closed). The response of a
        ``retry_if`` that raised is closed."""
        try:
            wait = call.on_response(response)
        except BaseException:  # the policy's retry_if raised: the answer is no one's
            self._close(response)
            raise
        if wait is not None:
            self._discard(call, response)
        return wait

    def _handed(self, call: RetryCall, response: Response) -> Response:
        """``response``, the final answer of ``call``, as it is handed over: with
        ``resume``, its body resumes itself after a break where it may; a streamed body
        whose break would reach the caller unretried carries a hint; with ``idle_timeout``,
        the server's silence while the caller reads a streamed body is bounded."""
        state = None
        if self._controller.resume is not None:
            state = self._resumable(call, response)
        timeout = call.policy.idle_timeout
        if (timeout is not None and type(response.stream) is not self._memory
                and not (call.policy.retry_event is not None and judged(response))):
            self._watch(timeout, call.request, response, state is None)  # (else watched)
        if state is not None:
            response.stream = sync_resuming(self._flavour)(self, state, response.stream)
        if type(response.stream) is not self._memory:
            self._hint(call, call.request, call.stream, response)
        return response

    def _resumable(self, call: RetryCall, response: Response) -> Resumption | None:
        """With ``resume``: the resumption state of ``response``, the final answer of
        ``call``, whose body is to resume itself after a break (``None``: its request and
        headers do not allow it). Should that fail, the response is closed (its connection
        back in the pool) before the error goes on: it is no one's."""
        try:
            return resumption(call, response)
        except BaseException:
            self._close(response)
            raise

    def _streamed(self, request: Request, stream: object, response: Response) -> None:
        """The quick path's final answer, with a streamed body, as it is handed over: its
        server's silence bounded with ``idle_timeout``, and a hint (:meth:`_hint`)."""
        timeout = self._controller.policy.idle_timeout
        if timeout is not None:
            self._watch(timeout, request, response, True)
        self._hint(None, request, stream, response)

    def _watch(self, timeout: float, request: Request, response: Response,
               record: bool) -> None:
        """``response``'s streamed body, its server's silence bounded by ``timeout``
        seconds while the caller reads it (``_io/idle.py``); ``record``: a stall ends the
        request (stop reason ``idle_timeout``), as no ``Resume`` goes on after it."""
        flavour = self._flavour
        response.stream = idle_body(flavour, self._sync)(
            response.stream, IdleWatch(timeout, flavour, request, response, record), response)

    def _hint(self, call: RetryCall | None, request: Request, stream: object,
              response: Response) -> None:
        """A body handed over as a stream, whose break would reach the caller unretried:
        when ``retry_body_errors`` or ``resume`` would have saved it and neither does, it
        is wrapped, so that a break a retry could fix carries the request's metadata and a
        note naming the option (``_call/hints.py``). A body that resumes itself is left."""
        if isinstance(response.stream, SyncResuming):
            return
        hint = body_hint(self._controller, call, request, stream, response)
        if hint is not None:
            response.stream = noted(self._flavour, self._sync)(response.stream, hint)

    def _read_body(self, call: RetryCall, response: Response) -> float | None:
        """Read ``response``'s body into memory when ``call`` asks (``retry_body_errors``):
        ``None`` when it was read or is not to be; when the read fails, the response is
        closed and the error judged: the wait before the next attempt, or it is raised."""
        limit = call.body_limit(response)
        if limit is None:
            return None
        try:
            call.body_read(buffer(response, limit, self._flavour))
        except Exception as exc:
            self._close(response)
            wait = call.on_error(exc)
            if wait is None:
                raise
            return wait
        except BaseException:
            self._close(response)
            raise
        return None

    def _discard(self, call: RetryCall, response: Response) -> None:
        """Drain a response that is not handed over when ``call`` says so, then close it."""
        try:
            if call.should_drain(response):
                self._drain(response)
        except Exception:
            pass  # a broken body is as good as discarded
        finally:
            self._close(response)
