"""Response bodies inside the retry loop: buffering a body to hand over, draining a
discarded one so its connection can be reused, closing one even while cancelled; and a
streamed body handed over with a hint (:func:`noted`)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, ClassVar

import anyio

from .._base.flavour import Flavour, Response
from .._call.drain import DRAIN_MAX_SECONDS
from .._call.hints import BodyHint

__all__ = ["abuffer", "aclose", "adrain", "buffer", "drain", "noted"]


def buffer(response: Response, limit: int, flavour: Flavour) -> bool:
    """Read the raw body into memory, up to ``limit`` bytes; True if it was all read.

    A longer body stays a stream: what was read is put back in front of the rest.
    """
    stream = response.stream  # any iterable of bytes with close(), as the library's
    if limit <= 0:
        return False
    head: list[bytes] = []
    size = 0
    chunks = iter(stream)
    for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size > limit:
            response.stream = flavour.sync_tail(head, chunks, stream)
            return False
    stream.close()
    response.stream = flavour.byte_stream(b"".join(head))
    return True


async def abuffer(response: Response, limit: int, flavour: Flavour) -> bool:
    """The async twin of :func:`_buffer`."""
    stream = response.stream  # any async iterable of bytes with aclose()
    if limit <= 0:
        return False
    head: list[bytes] = []
    size = 0
    chunks = aiter(stream)
    async for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size > limit:
            response.stream = flavour.async_tail(head, chunks, stream)
            return False
    await stream.aclose()
    response.stream = flavour.byte_stream(b"".join(head))
    return True


def drain(response: Response, clock: Callable[[], float]) -> None:
    """Read a discarded response's small body so its connection can be reused, for at most
    ``DRAIN_MAX_SECONDS``: a sync read cannot be interrupted, so the time is checked between
    chunks (each chunk is bounded by the read timeout). Past it, the connection is dropped."""
    end = clock() + DRAIN_MAX_SECONDS
    for _ in response.iter_raw():
        if clock() >= end:
            return


async def adrain(response: Response) -> None:
    """The async twin of :func:`_drain`: the read itself is cut off at the time limit."""
    with anyio.move_on_after(DRAIN_MAX_SECONDS):
        async for _ in response.aiter_raw():
            pass


async def aclose(response: Response, flavour: Flavour) -> None:
    """Close a response even while the task is being cancelled. A body already in memory
    (a mock's, an ASGI app's) is closed without awaiting anything that could be
    cancelled, so it needs no shield (a cancel scope costs as much as a short request)."""
    if isinstance(response.stream, flavour.byte_stream):
        await response.aclose()
        return
    with anyio.CancelScope(shield=True):
        await response.aclose()


class _SyncNoted:
    """A streamed body that ``retry_body_errors`` or ``resume`` would have saved, handed
    over as it is: the stream's chunks, re-yielded; a break gets what the hint says
    (:meth:`BodyHint.notice`). Mixed into the flavour's stream class by :func:`noted`."""

    __slots__ = ("_hint", "_stream")
    _flavour: ClassVar[Flavour]

    def __init__(self, stream: Any, hint: BodyHint) -> None:
        self._stream = stream
        self._hint = hint

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except Exception as exc:
            self._hint.notice(exc, self._flavour)
            raise

    def close(self) -> None:
        self._stream.close()


class _AsyncNoted:
    """The async twin of :class:`_SyncNoted`."""

    __slots__ = ("_hint", "_stream")
    _flavour: ClassVar[Flavour]

    def __init__(self, stream: Any, hint: BodyHint) -> None:
        self._stream = stream
        self._hint = hint

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._stream:
                yield chunk
        except Exception as exc:
            self._hint.notice(exc, self._flavour)
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()


@functools.cache
def noted(flavour: Flavour, sync: bool) -> type[_SyncNoted] | type[_AsyncNoted]:
    """The wrapper of a streamed body handed over with a hint, as a stream of ``flavour``'s
    own class (a response's ``iter_raw()`` / ``aiter_raw()`` accepts no other)."""
    mixin, base = ((_SyncNoted, flavour.sync_byte_stream) if sync
                   else (_AsyncNoted, flavour.async_byte_stream))
    return type(mixin.__name__.lstrip("_"), (mixin, base), {"_flavour": flavour})
