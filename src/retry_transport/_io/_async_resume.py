"""A response body that resumes itself after a break (``Resume``): the I/O, written once.

``_async_resume.py`` is the source and ``_sync_resume.py`` is generated from it by
``python scripts/unasync.py`` (CI checks it is current). The decisions are the
:class:`~._call.resume.Resumption`'s: this module reads, sleeps, sends and splices.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._base.flavour import Flavour, Request, Response
    from .._call.resumption import Resumption

__all__ = ["AsyncResuming", "async_resuming"]


class _Driver(Protocol):
    """What a resumable body uses of its driver (``_async_loop.py``'s loop)."""

    _transport: Any

    async def _pause(self, seconds: float, closes: int) -> None: ...
    async def _close(self, response: Response) -> None: ...
    def _watch(self, timeout: float, request: Request, response: Response,
               record: bool) -> None: ...


class AsyncResuming:
    """The body handed to the caller: the chunks of the response's own stream, and after
    a break, those of each resumption taken, as one stream (an event stream's one whole
    event at a time). Mixed into the flavour's stream class by :func:`async_resuming`."""

    def __init__(self, loop: _Driver, state: Resumption, stream: Any) -> None:
        self._loop = loop
        self._state = state
        self._stream = stream  # the body being read: the response's, then a resumption's
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        state = self._state
        ranges, scanner = state.ranges, state.scanner
        while True:
            over = short = False  # by ranges: the body brought more, or fewer, bytes
            try:
                if ranges is not None:
                    # The raw bytes the bodies must bring in all (None: not known yet): each
                    # body's are counted against it, and never a byte past it handed on.
                    size = ranges.size()
                    mark = state.mark  # where the resumption taken has brought data enough
                    chunks = self._stream.__aiter__()
                    async for chunk in chunks:
                        read = ranges.read + len(chunk)
                        if size is not None and read > size:
                            over = True
                            break
                        ranges.read = read
                        if read >= mark:
                            state.progressed()
                            mark = state.mark
                        yield chunk
                    short = size is not None and ranges.read < size
                else:
                    assert scanner is not None  # an event stream
                    pending = state.pending  # the resumption taken has yet to hand on an event
                    async for chunk in self._stream:
                        pieces = scanner.feed(chunk)
                        if pending and pieces:
                            pending = state.handed(pieces)
                        for piece in pieces:  # noqa: UP028 (the sync twin's)
                            yield piece
            except Exception as exc:
                if self._closed or not state.breaks(exc):
                    raise
                await self._resume(exc)
                continue
            if over:  # the rest is not read: the iteration left mid-way is closed first
                finish = getattr(chunks, "aclose", None)
                if finish is not None:
                    await finish()
                await self._stream.aclose()
                state.overran()
            if short and not self._closed:
                await self._resume(None)  # a body that ended short of its range: a break
                continue
            state.ended()
            if scanner is not None:
                rest = scanner.rest()
                if rest:
                    yield rest
            return

    async def _resume(self, exc: Exception | None) -> None:
        """Go on after ``exc`` broke the body (``None``: it ended short of its range):
        returns once a resumption's body is in place; raises the break (noted) when there
        is none."""
        loop, state = self._loop, self._state
        try:
            await self._stream.aclose()
            wait = state.on_break(exc)
            while True:
                await loop._pause(wait, state.closes)
                if self._closed:  # by the caller, meanwhile
                    state.closed()
                request = state.attempt_request()
                try:
                    response = await loop._transport.handle_async_request(request)
                except Exception as error:
                    wait = state.on_error(error)
                    continue
                try:
                    if self._closed:
                        state.closed()
                    taken = state.on_response(response)
                except BaseException:
                    await loop._close(response)
                    raise
                if taken is None:
                    timeout = state.call.policy.idle_timeout
                    if timeout is not None:  # a stall of this body is a break too
                        loop._watch(timeout, state.call.request, response, False)
                    self._stream = response.stream
                    return
                wait = taken
                await loop._close(response)
        except BaseException:
            state.abandon()  # cancelled or interrupted: the attempt in flight ends unjudged
            raise

    async def aclose(self) -> None:
        self._closed = True
        await self._stream.aclose()


@functools.cache
def async_resuming(flavour: Flavour) -> type[AsyncResuming]:
    """:class:`AsyncResuming` as a stream of ``flavour``'s own class (a response's
    ``aiter_raw()`` accepts no other)."""
    return type("AsyncResuming", (AsyncResuming, flavour.async_byte_stream), {})
