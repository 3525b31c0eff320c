# Generated from _async_resume.py by `python scripts/unasync.py`: do not edit. Edit the
# source, then run the command again (CI checks with `python scripts/unasync.py --check`).
"""A response body that resumes itself after a break (``Resume``): the I/O, written once.

``_async_resume.py`` is the source and ``_sync_resume.py`` is generated from it by
``python scripts/unasync.py`` (CI checks it is current). The decisions are the
:class:`~._call.resume.Resumption`'s: this module reads, sleeps, sends and splices.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._base.flavour import Flavour, Request, Response
    from .._call.resumption import Resumption

__all__ = ["SyncResuming", "sync_resuming"]


class _Driver(Protocol):
    """What a resumable body uses of its driver (``_async_loop.py``'s loop)."""

    _transport: Any

    def _pause(self, seconds: float, closes: int) -> None: ...
    def _close(self, response: Response) -> None: ...
    def _watch(self, timeout: float, request: Request, response: Response,
               record: bool) -> None: ...


class SyncResuming:
    """The body handed to the caller: the chunks of the response's own stream, and after
    a break, those of each resumption taken, as one stream (an event stream's one whole
    event at a time). Mixed into the flavour's stream class by :func:`sync_resuming`."""

    def __init__(self, loop: _Driver, state: Resumption, stream: Any) -> None:
        self._loop = loop
        self._state = state
        self._stream = stream  # the body being read: the response's, then a resumption's
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
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
                    chunks = self._stream.__iter__()
                    for chunk in chunks:
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
                    for chunk in self._stream:
                        pieces = scanner.feed(chunk)
                        if pending and pieces:
                            pending = state.handed(pieces)
                        for piece in pieces:  # noqa: UP028 (the sync twin's)
                            yield piece
            except Exception as exc:
                if self._closed or not state.breaks(exc):
                    raise
                self._resume(exc)
                continue
            if over:  # the rest is not read: the iteration left mid-way is closed first
                finish = getattr(chunks, "close", None)
                if finish is not None:
                    finish()
                self._stream.close()
                state.overran()
            if short and not self._closed:
                self._resume(None)  # a body that ended short of its range: a break
                continue
            state.ended()
            if scanner is not None:
                rest = scanner.rest()
                if rest:
                    yield rest
            return

    def _resume(self, exc: Exception | None) -> None:
        """Go on after ``exc`` broke the body (``None``: it ended short of its range):
        returns once a resumption's body is in place; raises the break (noted) when there
        is none."""
        loop, state = self._loop, self._state
        try:
            self._stream.close()
            wait = state.on_break(exc)
            while True:
                loop._pause(wait, state.closes)
                if self._closed:  # by the caller, meanwhile
                    state.closed()
                request = state.attempt_request()
                try:
                    response = loop._transport.handle_request(request)
                except Exception as error:
                    wait = state.on_error(error)
                    continue
                try:
                    if self._closed:
                        state.closed()
                    taken = state.on_response(response)
                except BaseException:
                    loop._close(response)
                    raise
                if taken is None:
                    timeout = state.call.policy.idle_timeout
                    if timeout is not None:  # a stall of this body is a break too
                        loop._watch(timeout, state.call.request, response, False)
                    self._stream = response.stream
                    return
                wait = taken
                loop._close(response)
        except BaseException:
            state.abandon()  # cancelled or interrupted: the attempt in flight ends unjudged
            raise

    def close(self) -> None:
        self._closed = True
        self._stream.close()


@functools.cache
def sync_resuming(flavour: Flavour) -> type[SyncResuming]:
    """:class:`SyncResuming` as a stream of ``flavour``'s own class (a response's
    ``aiter_raw()`` accepts no other)."""
    return type("SyncResuming", (SyncResuming, flavour.sync_byte_stream), {})
