"""A streamed body handed over whose server may fall silent: ``idle_timeout``, the I/O.

The decisions (what counts as progress, what the stall says) are
:class:`~._call.idle.IdleWatch`'s. Only the time spent waiting on the network for the
caller's reads counts: each read is bounded by what is left of the silence allowed since the
last progress, and the time the caller spends between reads is not counted.

* Async: each read of the inner stream runs in ``anyio.move_on_after`` (so a test's virtual
  clock, trio's ``MockClock``, runs it); once it runs out, the response is closed and the
  read raises the stall.
* Sync: a read blocks in the socket, so it arms an alarm of the process's watchdog thread
  (``watchdog.py``), which shuts the response's socket down when the silence runs out; the
  read then ends, and raises the stall once the response is closed.

Wrapped at the hand-over only when the request's policy sets ``idle_timeout``: the success
path of every other request is as it was.
"""

from __future__ import annotations

import functools
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio

from .._base.flavour import Flavour, Response
from .._call.idle import IdleWatch
from .watchdog import WATCHDOG, Alarm

__all__ = ["idle_body"]


class _SyncIdle:
    """The body, read under the watchdog's alarm (module docstring). Mixed into the
    flavour's stream class by :func:`idle_body`."""

    __slots__ = ("_alarm", "_stream", "_watch")

    def __init__(self, stream: Any, watch: IdleWatch, response: Response) -> None:
        self._stream = stream
        self._watch = watch
        self._alarm = Alarm(_ender(stream, response))

    def __iter__(self) -> Iterator[bytes]:
        watch, alarm, stream = self._watch, self._alarm, self._stream
        timeout = left = watch.timeout
        chunks = iter(stream)
        clock = time.monotonic
        while True:
            start = clock()
            WATCHDOG.arm(alarm, start + left)
            try:
                chunk = next(chunks)
            except StopIteration:
                if not WATCHDOG.disarm(alarm):
                    return
                chunk = b""
            except Exception:
                if not WATCHDOG.disarm(alarm):
                    raise
                stream.close()
                raise watch.stalled()  # noqa: B904 (the read's own error is its context)
            if WATCHDOG.disarm(alarm):  # it fired as the read returned: the stream is cut
                stream.close()
                raise watch.stalled()
            if watch.progress(chunk):
                left = timeout
            else:
                left -= clock() - start
            yield chunk

    def close(self) -> None:
        WATCHDOG.disarm(self._alarm)
        self._stream.close()


def _ender(stream: Any, response: Response) -> Callable[[], None]:
    """What the watchdog does to end a stalled read of ``response``'s body: shut its socket
    down (an HTTP/1 connection's, reached through the ``network_stream`` extension), or,
    without one to reach, close the body from the watchdog's thread."""
    extensions = response.extensions
    network = extensions.get("network_stream")
    sock = None
    if network is not None and extensions.get("http_version") != b"HTTP/2":
        try:
            sock = network.get_extra_info("socket")
        except Exception:  # a network stream of another make
            sock = None
    if isinstance(sock, socket.socket):
        shut = sock

        def shut_down() -> None:
            # The base class's: an SSLSocket's own would drop its TLS state under the read.
            socket.socket.shutdown(shut, socket.SHUT_RDWR)

        return shut_down
    return stream.close  # type: ignore[no-any-return]


class _AsyncIdle:
    """The async twin of :class:`_SyncIdle`: each read in a cancel scope."""

    __slots__ = ("_stream", "_watch")

    def __init__(self, stream: Any, watch: IdleWatch, response: Response) -> None:
        self._stream = stream
        self._watch = watch

    async def __aiter__(self) -> AsyncIterator[bytes]:
        watch, stream = self._watch, self._stream
        timeout = left = watch.timeout
        chunks = stream.__aiter__()
        clock = anyio.current_time
        while True:
            start = clock()
            with anyio.move_on_after(left) as scope:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
            if scope.cancelled_caught:
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
                raise watch.stalled()
            if watch.progress(chunk):
                left = timeout
            else:
                left -= clock() - start
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


@functools.cache
def idle_body(flavour: Flavour, sync: bool) -> type[_SyncIdle] | type[_AsyncIdle]:
    """The wrapper of a streamed body bounded by ``idle_timeout``, as a stream of
    ``flavour``'s own class (a response's ``iter_raw()`` / ``aiter_raw()`` accepts no
    other)."""
    mixin, base = ((_SyncIdle, flavour.sync_byte_stream) if sync
                   else (_AsyncIdle, flavour.async_byte_stream))
    return type(mixin.__name__.lstrip("_"), (mixin, base), {"_flavour": flavour})
