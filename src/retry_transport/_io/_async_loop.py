"""A driver's loop and the I/O it runs, written once: ``_async_loop.py`` is the source, and
``_sync_loop.py`` is generated from it by ``python scripts/unasync.py`` (a table of token
replacements: ``await`` dropped, each async name replaced by its sync twin), which CI runs
with ``--check`` so that the two cannot drift. Edit the source, then run the script.

What the table cannot translate is each driver's own, in ``drivers.py``: the hooks the loop
class declares (the first request's checks, the wait between attempts, a hedged first try,
draining and closing a response).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .._call.hedged_call import HedgedCall
from .._call.hints import body_hint
from .._call.resumption import resumption
from .._wire.http import origin as origin_of
from ._async_resume import AsyncResuming, async_resuming
from ._common import _Common
from .bodies import abuffer, noted

if TYPE_CHECKING:
    from .._base.flavour import Request, Response
    from .._call.core import RetryCall
    from .hedge_loops import AsyncHedger

__all__ = ["AsyncLoop"]


class AsyncLoop(_Common):
    """The loop of each ``AsyncRetryTransport``, and the I/O it runs."""

    _hedger: AsyncHedger  # when hedging (made by the driver's ``__init__`` or ``_first``)

    if TYPE_CHECKING:  # the hooks: each driver's own (``drivers.py``)
        def _first(self, request: Request) -> None: ...
        async def _pause(self, seconds: float, closes: int) -> None: ...
        async def _hedged_try(self, call: HedgedCall) -> tuple[Response | None, float | None]: ...
        async def _drain(self, response: Response) -> None: ...
        async def _close(self, response: Response) -> None: ...

    async def handle_async_request(self, request: Request) -> Response:
        """Send ``request`` until an outcome is final, and hand that over. It decides nothing:
        ``QuickPath`` and the ``RetryCall`` do. It only executes: it waits, sends, reads a
        body, drains and closes as told, and gives the request back when stopped mid-attempt."""
        if self._untried:
            self._first(request)
        controller = self._controller
        closes = controller.closes
        # None while the first attempt goes as it is (the usual case: the quick path).
        call = None if controller.quick.counted_first(request) else self._call(request, closes)
        stream = request.stream
        race = None  # a quick first attempt that a hedge may join
        if call is None and controller.hedging is not None:
            call, race = self._hedger.start(self._transport, request, closes, stream)
        lap, timed, transport = self._lap, controller.timed, self._transport
        try:
            wait = None if call is None else call.wait
            if call is not None and call.hedged:  # the first try, hedged
                if wait is not None:
                    await self._pause(wait, closes)
                done, wait = await self._hedged_try(cast(HedgedCall, call))
                if done is not None:
                    if controller.resume is not None:
                        await self._resumable(call, done)
                    if type(done.stream) is not self._memory:
                        self._hint(call, request, stream, done)
                    return done
            while True:
                if wait is not None:
                    await self._pause(wait, closes)
                attempt = request if call is None else call.ready or call.attempt_request()
                try:
                    if race is None:
                        start = lap() if timed() else None
                        response = await transport.handle_async_request(attempt)
                        if start is not None:
                            end = lap()
                            self._record(origin_of(request.url), end - start, end)
                    else:  # timed by the race; None: it was hedged
                        response = await race.attempt()
                except Exception as exc:
                    race = None
                    if call is None:
                        call = self._begin(request, stream, closes)
                    wait = call.on_error(exc)
                    if wait is None:
                        self._check_failed(request, exc)
                        raise
                    continue
                if race is not None:  # the quick first attempt, sent by the race
                    hedged_race, race = race, None
                    if response is None:  # hedged: the try's outcome
                        call = hedged_race.call
                        done, wait = hedged_race.outcome()
                        if done is not None:
                            if controller.resume is not None:
                                await self._resumable(cast(HedgedCall, call), done)
                            if type(done.stream) is not self._memory:
                                self._hint(call, request, stream, done)
                            return done
                        continue
                if call is None:
                    if controller.quick.ends(request, response):
                        if type(response.stream) is not self._memory:  # streamed
                            self._hint(None, request, stream, response)
                        return response
                    call = self._begin(request, stream, closes)
                elif call.policy.retry_body_errors:
                    wait = await self._read_body(call, response)
                    if wait is not None:  # the body failed: retried after the wait
                        continue
                try:
                    wait = call.on_response(response)
                except BaseException:  # the policy's retry_if raised: the answer is no one's
                    await self._close(response)
                    raise
                if wait is None:
                    if controller.resume is not None:
                        await self._resumable(call, response)
                    if type(response.stream) is not self._memory:
                        self._hint(call, request, stream, response)
                    return response
                await self._discard(call, response)
        except BaseException:
            if call is not None:  # a cancel or an interrupt mid-attempt: the request back
                call.abandon()
            raise

    async def _resumable(self, call: RetryCall, response: Response) -> None:
        """With ``resume``: ``response``, the final answer of ``call``, gets a body that
        resumes itself after a break, when its request and headers allow it. Should that
        fail, the response is closed (its connection back in the pool) before the error
        goes on: it is no one's."""
        try:
            state = resumption(call, response)
        except BaseException:
            await self._close(response)
            raise
        if state is not None:
            response.stream = async_resuming(self._flavour)(self, state, response.stream)

    def _hint(self, call: RetryCall | None, request: Request, stream: object,
              response: Response) -> None:
        """A body handed over as a stream, whose break would reach the caller unretried:
        when ``retry_body_errors`` or ``resume`` would have saved it and neither does, it
        is wrapped, so that a break a retry could fix carries the request's metadata and a
        note naming the option (``_call/hints.py``). A body that resumes itself is left."""
        if isinstance(response.stream, AsyncResuming):
            return
        hint = body_hint(self._controller, call, request, stream, response)
        if hint is not None:
            response.stream = noted(self._flavour, self._sync)(response.stream, hint)

    async def _read_body(self, call: RetryCall, response: Response) -> float | None:
        """Read ``response``'s body into memory when ``call`` asks (``retry_body_errors``):
        ``None`` when it was read or is not to be; when the read fails, the response is
        closed and the error judged: the wait before the next attempt, or it is raised."""
        limit = call.body_limit(response)
        if limit is None:
            return None
        try:
            call.body_read(await abuffer(response, limit, self._flavour))
        except Exception as exc:
            await self._close(response)
            wait = call.on_error(exc)
            if wait is None:
                raise
            return wait
        except BaseException:
            await self._close(response)
            raise
        return None

    async def _discard(self, call: RetryCall, response: Response) -> None:
        """Drain a response that is not handed over when ``call`` says so, then close it."""
        try:
            if call.should_drain(response):
                await self._drain(response)
        except Exception:
            pass  # a broken body is as good as discarded
        finally:
            await self._close(response)
