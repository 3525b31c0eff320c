"""The I/O of a hedged try: attempts on worker threads (sync) or tasks (async).

The decisions are :class:`~._hedged_call.HedgedCall`'s. A try runs until one attempt's
outcome is final (its response is handed over, or its exception raised) or every attempt
has failed retryably (the driver then goes on with ordinary retries). Whatever happens, no
response of the try is left open: an attempt that answers after the try is over has its
response closed unread, by its worker (sync) or after the task group (async).

The hedging delay is waited on the event loop's timer (async: virtual under trio's
``MockClock``) or in real time (sync, ``queue.Queue.get(timeout=...)``); the transport's
``clock`` times each attempt's latency.
"""

from __future__ import annotations

import contextvars
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

import anyio

from ._flavour import Flavour, Response
from ._fork import track
from ._hedged_call import HedgedCall, Slot

__all__ = ["HEDGE_WORKERS", "Workers", "async_try", "sync_try"]

#: The most worker threads a sync transport runs hedged attempts on.
HEDGE_WORKERS: Final = 32

#: What a try ends with: ``(response, None)`` to hand over, or ``(None, wait)`` to retry
#: after ``wait`` seconds (an exception to hand over is raised).
Ended = tuple[Response | None, float | None]


class Workers:
    """A sync transport's worker threads for hedged attempts, started when first needed;
    :meth:`close` waits for the attempts still running and stops them (a transport used
    again after it, as httpx's own transports may be, starts new ones)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        track(self)  # a forked child has none of the threads: it starts its own

    def submit(self, fn: Callable[[Slot], None], slot: Slot) -> None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(HEDGE_WORKERS,
                                                thread_name_prefix="retry-transport-hedge")
            # The caller's context goes with the attempt (its trace span, its deadline).
            self._pool.submit(contextvars.copy_context().run, fn, slot)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _renew_locks(self) -> None:  # a forked child has none of the parent's threads
        self._lock = threading.Lock()
        self._pool = None


def _over(verdict: str, result: Response | Exception, wait: float | None) -> Ended:
    if verdict == "retry":
        return None, wait
    if isinstance(result, Exception):
        raise result
    return result, None


def sync_try(call: HedgedCall, transport: Any, workers: Workers,
             record: Callable[[str, float, float], None], clock: Callable[[], float]
             ) -> Ended:
    """Run ``call``'s hedged try on ``workers``."""
    results: queue.SimpleQueue[tuple[Slot, Response | Exception]] = queue.SimpleQueue()
    lock = threading.Lock()
    over = False
    origin = call.origin

    def work(slot: Slot) -> None:
        start = clock()
        try:
            response = transport.handle_request(slot.request)
        except Exception as exc:
            results.put((slot, exc))
            return
        end = clock()
        record(origin, end - start, end)
        with lock:
            if not over:
                results.put((slot, response))
                return
        response.close()  # the try is over: no one will read it

    def finish() -> None:
        nonlocal over
        with lock:
            over = True
        while True:  # answers that came in before the end, unread
            try:
                _, late = results.get_nowait()
            except queue.Empty:
                return
            if not isinstance(late, Exception):
                late.close()

    try:
        workers.submit(work, call.begin())
        next_at = time.monotonic() + call.delay
        while True:
            timeout = None
            if call.can_hedge():
                timeout = max(next_at - time.monotonic(), 0.0)
            try:
                slot, result = results.get(timeout=timeout)
            except queue.Empty:
                hedge = call.hedge()
                if hedge is not None:
                    workers.submit(work, hedge)
                next_at = time.monotonic() + call.delay
                continue
            verdict, wait = call.done(slot, result)
            if verdict == "more":
                hedge = call.hedge()  # a retryable outcome starts the next at once
                if hedge is not None:
                    workers.submit(work, hedge)
                    next_at = time.monotonic() + call.delay
                continue
            finish()
            if verdict == "retry" and not isinstance(result, Exception):
                result.close()
            return _over(verdict, result, wait)
    finally:
        finish()


async def async_try(call: HedgedCall, transport: Any, flavour: Flavour,
                    record: Callable[[str, float, float], None], clock: Callable[[], float],
                    aclose: Callable[[Response, Flavour], Awaitable[None]]) -> Ended:
    """Run ``call``'s hedged try in a task group (asyncio and trio alike)."""
    send, receive = anyio.create_memory_object_stream[tuple[Slot, Response | Exception]](
        math.inf)
    origin = call.origin

    async def work(slot: Slot) -> None:
        start = clock()
        try:
            response = await transport.handle_async_request(slot.request)
        except Exception as exc:
            send.send_nowait((slot, exc))
            return
        end = clock()
        record(origin, end - start, end)
        send.send_nowait((slot, response))  # no checkpoint since the response came

    verdict: str = "stop"
    result: Response | Exception | None = None
    wait: float | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(work, call.begin())
            next_at = anyio.current_time() + call.delay
            while True:
                item = None
                if call.can_hedge():
                    with anyio.move_on_after(max(next_at - anyio.current_time(), 0.0)):
                        item = await receive.receive()
                    if item is None:
                        hedge = call.hedge()
                        if hedge is not None:
                            group.start_soon(work, hedge)
                        next_at = anyio.current_time() + call.delay
                        continue
                else:
                    item = await receive.receive()
                slot, result = item
                verdict, wait = call.done(slot, result)
                if verdict == "more":
                    hedge = call.hedge()
                    if hedge is not None:
                        group.start_soon(work, hedge)
                        next_at = anyio.current_time() + call.delay
                    continue
                group.cancel_scope.cancel()  # the others are not needed any more
                break
    finally:
        if receive.statistics().current_buffer_used:  # answers that came in, unread
            with anyio.CancelScope(shield=True):
                while True:
                    try:
                        _, late = receive.receive_nowait()
                    except anyio.WouldBlock:
                        break
                    if not isinstance(late, Exception):
                        await aclose(late, flavour)
        send.close()
        receive.close()
    assert result is not None
    if verdict == "retry" and not isinstance(result, Exception):
        await aclose(result, flavour)
    return _over(verdict, result, wait)
