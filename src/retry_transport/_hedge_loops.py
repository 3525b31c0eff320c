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
import functools
import math
import queue
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio

from ._flavour import Flavour, Response
from ._fork import track
from ._hedged_call import HedgedCall, Slot

__all__ = ["HEDGE_WORKERS", "Workers", "async_try", "sync_try"]

#: The most attempts of hedged requests a sync transport runs at once, each on a worker
#: thread of its own (started as needed, idle ones reused). While every one is busy, a new
#: request goes unhedged on the caller's thread and no new hedge starts: nothing queues.
HEDGE_WORKERS: Final = 64

#: What a try ends with: ``(response, None)`` to hand over, or ``(None, wait)`` to retry
#: after ``wait`` seconds (an exception to hand over is raised).
Ended = tuple[Response | None, float | None]


class _Worker:
    """One worker thread: it waits on its own lock for the next job (``None``: stop)."""

    __slots__ = ("job", "thread", "wake")

    def __init__(self) -> None:
        self.job: Callable[[], object] | None = None
        self.wake = threading.Lock()
        self.wake.acquire()  # released to hand it a job
        self.thread: threading.Thread | None = None


def _serve(owner: weakref.ref[Workers], worker: _Worker) -> None:
    """A worker thread's loop: run each job handed over, until told to stop. It holds its
    :class:`Workers` only while it files itself back, so that a transport dropped without
    ``close()`` is collected and its idle threads stopped (``_stop_idle``)."""
    wake = worker.wake
    while True:
        wake.acquire()
        job, worker.job = worker.job, None
        if job is None:
            return
        done = False
        try:
            job()
            done = True
        finally:  # a job that raised ends its thread (threading.excepthook reports it)
            job = None
            workers = owner()
            going_on = workers is not None and workers._back(worker, done)
            workers = None
        if not going_on:
            return


def _stop_idle(idle: list[_Worker], lock: threading.Lock) -> None:
    """Wake the idle workers with no job: each stops (their :class:`Workers` is gone)."""
    with lock:
        stopping, idle[:] = list(idle), []
    for worker in stopping:
        worker.wake.release()


class Workers:
    """A sync transport's worker threads for hedged attempts, started when first needed
    (at most :data:`HEDGE_WORKERS`), idle ones reused.

    A worker is reserved before an attempt is made ready for it (:meth:`reserve`), so that
    an attempt never waits in a queue. A job is handed to an idle worker by releasing the
    lock it waits on: no future, no queue. :meth:`close` waits for the attempts still
    running and stops the threads; the tries under way then start no more attempts, and a
    request made afterwards (httpx's own transports may be used again) starts new threads.
    A transport dropped without ``close()`` leaves no thread behind either: once it is
    collected, its idle workers stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._busy = 0  # reserved, running or about to
        self.generation = 0  # one more at each close(): a try of an earlier one stops
        self._finalizer = weakref.finalize(self, _stop_idle, self._idle, self._lock)
        track(self)  # a forked child has none of the threads: it starts its own

    def reserve(self, generation: int) -> bool:
        """A worker for one attempt of a try begun in ``generation``, if one is free."""
        with self._lock:
            if generation != self.generation or self._busy >= HEDGE_WORKERS:
                return False
            self._busy += 1
            return True

    def release(self) -> None:
        """A reserved worker that was not used after all (a guard refused the hedge)."""
        with self._lock:
            self._busy -= 1

    def submit(self, fn: Callable[[Slot], None], slot: Slot, generation: int) -> bool:
        """Run ``fn(slot)`` on the worker reserved for it in ``generation``, in the
        caller's context (its trace span, its deadline); the worker is free again once it
        returns. False, the reservation given back: :meth:`close` stopped the workers since
        it was made."""
        job = functools.partial(contextvars.copy_context().run, fn, slot)
        with self._lock:
            if generation != self.generation:  # closed since the reservation
                self._busy -= 1
                return False
            worker = self._idle.pop() if self._idle else None
            thread = None
            if worker is None:
                worker = _Worker()
                self._all.append(worker)
                thread = worker.thread = threading.Thread(
                    target=_serve, args=(weakref.ref(self), worker), daemon=True,
                    name=f"retry-transport-hedge-{len(self._all)}")
            worker.job = job
        if thread is not None:
            thread.start()
        worker.wake.release()
        return True

    def _back(self, worker: _Worker, done: bool) -> bool:
        """``worker`` finished its job (``done``: without raising): whether it goes on,
        idle, or stops (close() stopped the workers while it ran, or its job raised)."""
        with self._lock:
            self._busy -= 1
            going_on = done and worker in self._all
            if going_on:
                self._idle.append(worker)
            elif worker in self._all:
                self._all.remove(worker)
            return going_on

    def close(self) -> None:
        """Stop the workers, once the attempts they run have ended."""
        with self._lock:
            workers, idle = list(self._all), list(self._idle)
            self._all.clear()
            self._idle.clear()
            self.generation += 1
        for worker in idle:  # no job: woken, it stops; a busy one stops after its job
            worker.wake.release()
        current = threading.current_thread()
        for worker in workers:
            if worker.thread is not None and worker.thread is not current:
                worker.thread.join()

    def _renew_locks(self) -> None:  # a forked child has none of the parent's threads
        self._lock = threading.Lock()
        self._idle, self._all = [], []
        self._busy = 0
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _stop_idle, self._idle, self._lock)


async def _close_all(responses: list[Response], flavour: Flavour,
                     aclose: Callable[[Response, Flavour], Awaitable[None]]) -> None:
    """Close every one of ``responses``, shielded from anyio's cancellation; a native
    asyncio cancellation reaches through the shield, so the rest are still closed and the
    first exception is raised again at the end."""
    error: BaseException | None = None
    for response in responses:
        try:
            with anyio.CancelScope(shield=True):
                await aclose(response, flavour)
        except BaseException as exc:
            if error is None:
                error = exc
    if error is not None:
        raise error


def _over(verdict: str, result: Response | BaseException, wait: float | None) -> Ended:
    if verdict == "retry":
        return None, wait
    if isinstance(result, BaseException):
        raise result
    return result, None


def sync_try(call: HedgedCall, transport: Any, workers: Workers,
             record: Callable[[str, float, float], None], clock: Callable[[], float]
             ) -> Ended | None:
    """Run ``call``'s hedged try on ``workers``; ``None``: no worker is free, so the
    request goes unhedged on the caller's thread (nothing was started)."""
    generation = workers.generation
    if not workers.reserve(generation):
        return None
    results: queue.SimpleQueue[tuple[Slot, Response | BaseException]] = queue.SimpleQueue()
    lock = threading.Lock()
    over = False
    origin = call.origin
    call.losers_run = True
    on_the_wire: dict[Slot, float] = {}  # attempts under way, by when they were sent

    def work(slot: Slot) -> None:
        start = clock()
        with lock:
            on_the_wire[slot] = start
        result: Response | BaseException
        try:
            result = transport.handle_request(slot.request)
        except BaseException as exc:  # KeyboardInterrupt too: the caller raises it
            result = exc
        end = clock()
        with lock:
            if not over:
                del on_the_wire[slot]
                if not isinstance(result, BaseException):
                    record(origin, end - start, end)
                results.put((slot, result))
                return
        # A loser that ran on: its latency was recorded when the try ended; no one will
        # read its answer; its tickets (a probe slot) are settled with its own outcome.
        if not isinstance(result, BaseException):
            result.close()
        call.late(slot, result)

    def finish() -> None:
        nonlocal over
        with lock:
            over = True
            # The losers still on the wire: as the async try records a cancelled one, the
            # time they have taken so far (a lower bound), not the whole of a slow answer
            # that hedging exists to cut (it would lift the quantile the delay is read from).
            now = clock()
            for start in on_the_wire.values():
                record(origin, now - start, now)
            on_the_wire.clear()
        while True:  # answers that came in before the end, unread
            try:
                slot, late = results.get_nowait()
            except queue.Empty:
                return
            if not isinstance(late, BaseException):
                late.close()
            call.late(slot, late)

    def start_hedge() -> bool:
        if not workers.reserve(generation):
            return False
        hedge = call.hedge()
        if hedge is None:
            workers.release()
            return False
        if not workers.submit(work, hedge, generation):  # closed meanwhile: no verdict
            call.done_unsent(hedge)
            return False
        call.sent(hedge, clock())  # a worker was free: it goes now
        return True

    try:
        try:
            first = call.begin()
        except BaseException:
            workers.release()
            raise
        if not workers.submit(work, first, generation):  # the workers were stopped meanwhile
            call.done_unsent(first)
            call.check_open()  # a close since the request began: nothing is sent
            return None  # begun after the close: it goes unhedged
        next_at = time.monotonic() + call.delay
        while True:
            timeout = None
            if call.can_hedge():
                timeout = max(next_at - time.monotonic(), 0.0)
            try:
                slot, result = results.get(timeout=timeout)
            except queue.Empty:
                start_hedge()
                next_at = time.monotonic() + call.delay
                continue
            if not isinstance(result, Exception) and isinstance(result, BaseException):
                raise result  # an interrupt in an attempt: the request ends with it
            verdict, wait = call.done(slot, result)
            if verdict == "more":
                if not isinstance(result, Exception):
                    result.close()  # a retryable answer: its connection goes back
                if start_hedge():  # a retryable outcome starts the next at once
                    next_at = time.monotonic() + call.delay
                continue
            finish()
            if verdict == "retry" and not isinstance(result, Exception):
                result.close()
            return _over(verdict, result, wait)
    finally:
        finish()


#: What an async attempt's task reports when it leaves the client's own pool.
_SENT: Final = object()


def _on_the_wire(call: HedgedCall, slot: Slot, clock: Callable[[], float],
                 report: Callable[[tuple[Slot, Any]], None]) -> None:
    """Have ``slot`` tell ``call`` and ``report`` when it leaves the client's own pool for
    the wire: the inner transport's first trace event (httpcore sends none while a request
    waits for a connection); then the caller's own trace callback, if any, as before."""
    extensions = slot.request.extensions  # the slot's own copy (``RetryCall._dress``)
    theirs = extensions.get("trace")

    async def trace(name: str, info: dict[str, Any]) -> None:
        if slot.sent is None:
            call.sent(slot, clock())
            report((slot, _SENT))
        if theirs is not None:
            await theirs(name, info)

    extensions["trace"] = trace


async def async_try(call: HedgedCall, transport: Any, flavour: Flavour,
                    record: Callable[[str, float, float], None], clock: Callable[[], float],
                    aclose: Callable[[Response, Flavour], Awaitable[None]],
                    pooled: bool = False) -> Ended:
    """Run ``call``'s hedged try in a task group (asyncio and trio alike).

    ``pooled``: the inner transport keeps a pool of connections and traces each request
    (httpx's own): an attempt still waiting for a connection of the client's own pool is
    not on the wire, so no hedge's delay runs for it, its latency is timed from when it
    leaves the pool, and a hedge that never left it is no hedge (not counted, its cost
    given back). Other transports send at once."""
    first = call.begin()  # outside the group: a DeadlineExceeded is raised as it is
    send, receive = anyio.create_memory_object_stream[tuple[Slot, Any]](math.inf)
    origin = call.origin

    async def work(slot: Slot) -> None:
        start = clock()
        if pooled:
            _on_the_wire(call, slot, clock, send.send_nowait)
        else:
            call.sent(slot, start)
            send.send_nowait((slot, _SENT))
        try:
            response = await transport.handle_async_request(slot.request)
        except Exception as exc:
            send.send_nowait((slot, exc))
            return
        except BaseException:  # cancelled: on the wire this long at least (a lower bound)
            sent = slot.sent
            if sent is not None:
                end = clock()
                record(origin, end - sent, end)
            raise
        end = clock()
        record(origin, end - (slot.sent if slot.sent is not None else start), end)
        send.send_nowait((slot, response))  # no checkpoint since the response came

    verdict: str = "stop"
    result: Response | Exception | None = None
    wait: float | None = None
    ended = False  # the loop reached a verdict (else an exception ended it)
    unread: list[Response] = []  # answers handed to no one: closed whatever happens
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(work, first)
            latest = first  # the last attempt started: a hedge's delay runs once it is sent
            next_at: float | None = None
            while True:
                item = None
                if next_at is not None and call.can_hedge():
                    with anyio.move_on_after(max(next_at - anyio.current_time(), 0.0)):
                        item = await receive.receive()
                    if item is None:
                        next_at = None
                        hedge = call.hedge()
                        if hedge is not None:
                            group.start_soon(work, hedge)
                            latest = hedge
                        else:
                            next_at = anyio.current_time() + call.delay
                        continue
                else:
                    item = await receive.receive()
                slot, outcome = item
                if outcome is _SENT:  # on the wire: a hedge's delay runs from now
                    if slot is latest:
                        next_at = anyio.current_time() + call.delay
                    continue
                result = outcome
                verdict, wait = call.done(slot, result)
                if verdict == "more":
                    if not isinstance(result, Exception):
                        await aclose(result, flavour)  # its connection goes back
                    hedge = call.hedge()
                    if hedge is not None:
                        group.start_soon(work, hedge)
                        latest, next_at = hedge, None
                    continue
                group.cancel_scope.cancel()  # the others are not needed any more
                ended = True
                break
    except BaseException:
        # Cancelled while the losers were being cancelled: the winner is handed to no one.
        if result is not None and not isinstance(result, Exception) and verdict != "more":
            unread.append(result)
        raise
    finally:
        while True:  # answers that came in, unread
            try:
                _, outcome = receive.receive_nowait()
            except anyio.WouldBlock:
                break
            if outcome is not _SENT and not isinstance(outcome, Exception):
                unread.append(outcome)
        send.close()  # before any await: a native cancellation may interrupt one
        receive.close()
        if unread:
            await _close_all(unread, flavour, aclose)
    if not ended:
        # The loop ended by an exception the task group absorbed: on asyncio, a native
        # cancellation (task.cancel(), asyncio.timeout) can be taken by anyio for the group's
        # own. It is the caller's: raise it again (asyncio.timeout turns it into its
        # TimeoutError). A retryable answer in hand was closed already.
        raise anyio.get_cancelled_exc_class()
    if verdict == "retry" and not isinstance(result, Exception):
        await _close_all([result], flavour, aclose)
    return _over(verdict, result, wait)
