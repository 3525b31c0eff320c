"""The I/O of a hedged try: attempts on worker threads (sync) or tasks (async).

The decisions are :class:`~._call.hedged_call.HedgedCall`'s. A try runs until one attempt's
outcome is final (its response is handed over, or its exception raised) or every attempt
has failed retryably (the driver then goes on with ordinary retries). Whatever happens, no
response of the try is left open: an attempt that answers after the try is over has its
response closed unread, by its worker (sync) or after the task group (async).

The hedging delay is waited on the event loop's timer (async: virtual under trio's
``MockClock``) or in real time (sync, ``queue.Queue.get(timeout=...)``); the transport's
``clock`` times each attempt's latency.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextvars
import functools
import math
import queue
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, cast

import anyio
import anyio.lowlevel

from .._base.flavour import Flavour, Response
from .._base.fork import track
from .._call.hedged_call import HedgedCall, Slot
from .._wire.http import origin as origin_of

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._call.controller import Controller
    from .._call.hedging import Hedging

__all__ = ["HEDGE_WORKERS", "AsyncHedger", "Ended", "Plainly", "Raced", "SyncHedger", "Workers",
           "sync_try"]

#: The most attempts of hedged requests a sync transport runs at once, each on a worker
#: thread of its own (started as needed, idle ones reused). While every one is busy, a new
#: request goes unhedged on the caller's thread and no new hedge starts: nothing queues.
HEDGE_WORKERS: Final = 64

#: Whether an asyncio task's own cancellation can be told from one sent to it and taken
#: back (``Task.uncancel``, new in 3.11): a hedged try's first attempt may then run in the
#: caller's task (:class:`_Race`); before it, tries run in a task group.
_UNCANCEL: Final = sys.version_info >= (3, 11)

#: What a try ends with: ``(response, None)`` to hand over, or ``(None, wait)`` to retry
#: after ``wait`` seconds (an exception to hand over is raised).
Ended = tuple[Response | None, float | None]


class _Worker:
    """One worker thread: it waits on its own queue for the next job (``None``: stop).

    A queue, not a lock released to wake it: handing a job over is one call, and
    :meth:`Workers.close` can tell every worker to stop by putting ``None`` in its queue,
    whatever state an interrupted caller left it in (taken from the idle list and given no
    job yet, a job given and not yet taken): each one stops once it has run what it was
    given, and none waits for a job that will never come."""

    __slots__ = ("jobs", "thread")

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None


def _serve(owner: weakref.ref[Workers], worker: _Worker) -> None:
    """A worker thread's loop: run each job handed over, until told to stop. It holds its
    :class:`Workers` only while it files itself back, so that a transport dropped without
    ``close()`` is collected and its idle threads stopped (``_stop_idle``)."""
    jobs = worker.jobs
    while True:
        job = jobs.get()
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
        worker.jobs.put(None)


class Workers:
    """A sync transport's worker threads for hedged attempts, started when first needed
    (at most :data:`HEDGE_WORKERS`), idle ones reused.

    A worker is reserved before an attempt is made ready for it (:meth:`reserve`), so that
    an attempt never waits in a queue of jobs: each is handed to an idle worker (or a new
    one) of its own, through the worker's queue, with no future. :meth:`close` waits for
    the attempts still running and stops the threads; the tries under way then start no
    more attempts, and a request made afterwards (httpx's own transports may be used
    again) starts new threads.
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

    def submit(self, fn: Callable[[Any], None], slot: Any, generation: int, *,
               reserve: bool = False) -> bool:
        """Run ``fn(slot)`` on the worker reserved for it in ``generation`` (``reserve``:
        on a worker reserved now, if one is free), in the caller's context (its trace span,
        its deadline); the worker is free again once it returns. False, the reservation
        given back: :meth:`close` stopped the workers since it was made (or none is free)."""
        job = functools.partial(contextvars.copy_context().run, fn, slot)
        with self._lock:
            if reserve:
                if generation != self.generation or self._busy >= HEDGE_WORKERS:
                    return False
                self._busy += 1
            elif generation != self.generation:  # closed since the reservation
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
            worker.jobs.put(job)
        if thread is not None:
            thread.start()
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
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self.generation += 1
        for worker in workers:  # an idle one stops now; a busy one after its job
            worker.jobs.put(None)
        current = threading.current_thread()
        for worker in workers:
            thread = worker.thread  # never started: a caller interrupted as it started it
            if thread is not None and thread is not current and thread.is_alive():
                thread.join()

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


class SyncHedger:
    """A sync transport's hedged tries: what they need of the transport, kept once.

    A quick first attempt (``QuickPath.first``) runs on a worker thread while the
    caller waits for it on a lock, for the hedging delay at most (:class:`SyncRace`): an
    answer before it costs the hand-over to the worker. Once the delay is over, the try
    goes on in :func:`sync_try`, which sends the hedges and takes the first's outcome as
    theirs. A call that is not plain (a deadline, an override, a guard's say) runs its
    try in :func:`sync_try` from the start."""

    __slots__ = ("clock", "controller", "flavour", "hedging", "record", "timed", "workers")

    def __init__(self, controller: Controller, workers: Workers,
                 record: Callable[[str, float, float], None],
                 clock: Callable[[], float]) -> None:
        self.controller = controller
        self.hedging: Hedging = controller.hedging  # type: ignore[assignment]
        self.flavour = controller.flavour
        self.workers = workers
        self.record = record
        self.clock = clock
        self.timed = controller.timed

    def start(self, transport: Any, request: Request, closes: int, stream: object
              ) -> tuple[HedgedCall | None, SyncRace | Plainly | None]:
        """A quick first attempt of ``request``, which may be hedged: the race that runs it
        on a worker (``(None, race)``), or with no worker free, one that sends it plainly on
        the caller's thread (nothing queues); ``(call, None)`` when the transport was
        closed meanwhile (the call's first attempt then says so)."""
        controller = self.controller
        workers = self.workers
        generation = workers.generation
        race = SyncRace(self, transport, request, closes, stream, generation)
        race.delay = controller.hedge_delays.get(self.hedging, controller.latency,
                                                 request.url, self.clock)
        if self.timed():  # handed to the worker: its latency runs from now
            race.sent = self.clock()
        if workers.submit(race.work, None, generation, reserve=True):
            return None, race
        if workers.generation == generation:  # no worker free: it goes plainly
            return None, Plainly(self, transport, request, race.sent)
        # Closed meanwhile: the call's first attempt says so, if the request began before.
        return HedgedCall(controller, request, self.hedging, closes, quick=True,
                          stream=stream), None


class Raced:
    """What a race of either kind keeps of a hedged try's end, once its first attempt was
    taken over: an outcome to hand over, or the exception to raise."""

    _ended: Ended | BaseException
    #: The call that took the first attempt over, once the try was hedged.
    call: HedgedCall | None

    def outcome(self) -> Ended:
        """How a hedged try ended: ``(response, None)`` to hand over, ``(None, wait)`` to
        retry after ``wait``; an exception to hand over is raised."""
        ended = self._ended
        if isinstance(ended, BaseException):
            raise ended
        return ended


class Plainly(Raced):
    """A quick first attempt of a hedged request that no worker is free to run: sent on
    the caller's thread, unhedged (its latency timed from ``sent``, when sampled). Its
    :meth:`attempt` never answers ``None``: no try is raced."""

    call: HedgedCall | None = None

    def __init__(self, hedger: SyncHedger, transport: Any, request: Request,
                 sent: float | None) -> None:
        self.hedger = hedger
        self.transport = transport
        self.request = request
        self.sent = sent

    def attempt(self) -> Response:
        """Send the attempt: its response, or its exception raised."""
        response: Response = self.transport.handle_request(self.request)
        sent = self.sent
        if sent is not None:
            hedger = self.hedger
            end = hedger.clock()
            hedger.record(origin_of(self.request.url), end - sent, end)
        return response


class SyncRace(Raced):
    """A quick first attempt of a hedged request, on a worker thread: the caller waits on
    :attr:`done` for the hedging delay at most. When the delay is over first, a call takes
    the attempt over (``HedgedCall.adopt``) and :func:`sync_try` goes on with it: the
    worker hands its outcome to :attr:`arrive` then, under :attr:`mutex`. When the caller
    stops waiting (an interrupt), the outcome goes to :func:`_discard` instead, or to the
    try that took it over, which closes it."""

    # Most races end before their delay: what only a hedged one needs starts as these.
    call: HedgedCall | None = None
    first: Slot | None = None
    result: Response | BaseException | None = None  # the first's outcome, once it came
    arrive: Callable[[Response | BaseException], None] | None = None

    def __init__(self, hedger: SyncHedger, transport: Any, request: Request, closes: int,
                 stream: object, generation: int) -> None:
        self.hedger = hedger
        self.transport = transport
        self.request = request
        self.closes = closes
        self.stream = stream
        self.generation = generation
        self.delay = 0.0
        self.sent: float | None = None  # when it was handed over, if it is timed
        self.mutex = threading.Lock()
        self.done = threading.Lock()
        self.done.acquire()  # released when the first's outcome is in (before the delay)

    def work(self, _: object) -> None:
        """The first attempt, on the worker."""
        result: Response | BaseException
        try:
            result = self.transport.handle_request(self.request)
        except BaseException as exc:  # KeyboardInterrupt too: the caller raises it
            result = exc
        with self.mutex:
            arrive = self.arrive
            if arrive is None:  # the caller reads the clock, if it times the attempt
                self.result = result
                self.done.release()
                return
        arrive(result)

    def attempt(self) -> Response | None:
        """Wait for the first attempt. Its response, or its exception raised, when it came
        before the delay was over: the driver goes on as with any quick attempt. ``None``:
        the try was hedged, and :meth:`outcome` says how it ended (:attr:`call`)."""
        hedger = self.hedger
        try:
            came = self.done.acquire(True, self.delay)
        except BaseException:  # interrupted while waiting: the answer goes to no one
            self._abandon()
            raise
        if came:
            result = self.result
            if not isinstance(result, Exception):
                if isinstance(result, BaseException):
                    raise result  # an interrupt in the attempt: the request ends with it
                sent = self.sent
                if sent is not None:
                    end = hedger.clock()
                    hedger.record(origin_of(self.request.url), end - sent, end)
                return result
            raise result
        try:  # until sync_try takes the first's outcome over, an interrupt leaves it here
            call = self.call = HedgedCall(hedger.controller, self.request, hedger.hedging,
                                          self.closes, quick=True, stream=self.stream)
            sent = self.sent  # not read when untimed: the delay has run since the hand-over
            self.first = call.adopt(self.request, self.delay,
                                    hedger.clock() - self.delay if sent is None else sent)
            self._ended = cast(Ended, sync_try(call, self.transport, hedger.workers,
                                               hedger.record, hedger.clock, self))
        except Exception as exc:
            self._ended = exc
        except BaseException:
            self._abandon()
            raise
        return None

    def _abandon(self) -> None:
        """The caller stopped waiting (an interrupt): the first's answer is closed whenever
        it comes, unless a try took it over (which closes it), and the call, if one was
        made, is settled as any request ended outside the decisions."""
        with self.mutex:
            came, taken = self.result, self.arrive is not None
            if not taken and came is None:
                self.arrive = _discard
        if not taken and came is not None and not isinstance(came, BaseException):
            came.close()
        if self.call is not None:
            self.call.abandon()


def _discard(result: Response | BaseException) -> None:
    """The outcome of a first attempt whose caller stopped waiting: closed, unread."""
    if not isinstance(result, BaseException):
        result.close()


def sync_try(call: HedgedCall, transport: Any, workers: Workers,
             record: Callable[[str, float, float], None], clock: Callable[[], float],
             race: SyncRace | None = None) -> Ended | None:
    """Run ``call``'s hedged try on ``workers``; ``None``: no worker is free, so the
    request goes unhedged on the caller's thread (nothing was started). With ``race``, the
    try's first attempt is already running on a worker (a plain one whose delay is over):
    its outcome comes in as the hedges' do."""
    generation = workers.generation if race is None else race.generation
    if race is None and not workers.reserve(generation):
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
        arrive(slot, result, start, clock())

    def arrive(slot: Slot, result: Response | BaseException, start: float, end: float
               ) -> None:
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
        if not results.empty():  # an answer came meanwhile (its worker freed): judge it first
            workers.release()
            return False
        try:
            hedge = call.hedge()
        except BaseException:  # an interrupt in a guard's admission: the worker goes back
            workers.release()
            raise
        if hedge is None:
            workers.release()
            return False
        if not workers.submit(work, hedge, generation):  # closed meanwhile: no verdict
            call.done_unsent(hedge)
            return False
        call.sent(hedge, clock())  # a worker was free: it goes now
        return True

    try:
        if race is not None:  # the first is on a worker: from now on it arrives here
            first = cast(Slot, race.first)
            sent = cast(float, first.sent)
            with race.mutex:
                came = race.result
                race.arrive = lambda result: arrive(first, result, sent, clock())
                if came is None:
                    on_the_wire[first] = sent
            if came is not None:  # just before the hand-over
                results.put((first, came))
            next_at = time.monotonic()
        else:
            try:
                first = call.begin()
            except BaseException:
                workers.release()
                raise
            if not workers.submit(work, first, generation):  # the workers were stopped
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
            try:
                verdict, wait = call.done(slot, result)
            except BaseException:  # the policy's retry_if raised: the answer goes to no one
                if not isinstance(result, BaseException):
                    result.close()
                raise
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
    extensions = slot.request.extensions  # the slot's own copy (``RetryCall._label_attempt``)
    theirs = extensions.get("trace")

    async def trace(name: str, info: dict[str, Any]) -> None:
        if slot.sent is None:
            call.sent(slot, clock())
            report((slot, _SENT))
        if theirs is not None:
            await theirs(name, info)

    extensions["trace"] = trace


class AsyncHedger:
    """An async transport's hedged tries: what they need of the transport, kept once.

    On asyncio a try's first attempt runs in the caller's own task under a timer of the
    event loop (:class:`_Race`): a try answered before its hedging delay costs the timer,
    and a task group starts only when a hedge is due. Trio has no timer of that kind: its
    tries run in a task group from the start (:func:`_grouped_try`).

    ``pooled``: the inner transport keeps a pool of connections and traces each request
    (httpx's own): an attempt still waiting for a connection of the client's own pool is
    not on the wire, so no hedge's delay runs for it, its latency is timed from when it
    leaves the pool, and a hedge that never left it is no hedge (not counted, its cost
    given back). Other transports send at once."""

    __slots__ = ("_due", "_handle", "_loop", "aclose", "clock", "controller", "flavour",
                 "hedging", "loop_clock", "pooled", "record", "timed")

    def __init__(self, controller: Controller,
                 record: Callable[[str, float, float], None], clock: Callable[[], float],
                 aclose: Callable[[Response, Flavour], Awaitable[None]],
                 pooled: bool) -> None:
        self.controller = controller
        self.hedging: Hedging = controller.hedging  # type: ignore[assignment]
        self.flavour = controller.flavour
        self.record = record
        self.clock = clock
        self.aclose = aclose
        self.pooled = pooled
        self.timed = controller.timed  # whether to time an attempt (every one, or a sample)
        #: Whether ``clock`` reads the event loop's own time (the transport's default).
        self.loop_clock = controller.settings.clock is None
        # One timer of the event loop for all the races' hedging delays: the races in the
        # order they are due, each left in place when its first attempt ends before it
        # (a timer of its own per request would cost more than the rest of the race).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._due: collections.deque[_Race] = collections.deque()
        self._handle: asyncio.TimerHandle | None = None

    def arm(self, race: _Race) -> None:
        """Escalate ``race`` once its delay is over, if its first attempt is still out."""
        loop = race.loop
        if loop is not self._loop:
            old = self._loop
            if old is not None and not old.is_closed():  # another loop's, in use
                race.context.run(loop.call_later, race.delay, race.escalate)
                return
            self._loop, self._due, self._handle = loop, collections.deque(), None
        due = self._due
        race.due = at = loop.time() + race.delay
        if not due or due[-1].due <= at:  # a delay that stays the same: in line (``start``)
            due.append(race)
        else:  # a shorter percentile delay than the last: its place in the line
            index = bisect.bisect_right([waiting.due for waiting in due], at)
            due.insert(index, race)
        if due[0] is race:  # first in line: the timer is set for it
            if self._handle is not None:
                self._handle.cancel()
            self._handle = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        """The timer: every race whose delay is over and whose first attempt is still out
        escalates, in its caller's context; the timer is set again for the next."""
        loop = cast(asyncio.AbstractEventLoop, self._loop)
        due = self._due
        now = loop.time()
        while due and (due[0].due <= now or not due[0].inside):
            race = due.popleft()
            if race.inside and race.runner is None:
                race.context.run(race.escalate)
        self._handle = loop.call_at(due[0].due, self._fire) if due else None

    def start(self, transport: Any, request: Request, closes: int, stream: object
              ) -> tuple[HedgedCall | None, _Race | None]:
        """A quick first attempt of ``request`` (``QuickPath.first``), which may be hedged:
        on asyncio, the race that sends it (``(None, race)``); on trio, the call whose try
        runs in a task group (``(call, None)``)."""
        controller = self.controller
        loop = asyncio._get_running_loop()
        caller = asyncio.current_task(loop) if loop is not None and _UNCANCEL else None
        if caller is None:
            return HedgedCall(controller, request, self.hedging, closes,
                              quick=True, stream=stream), None
        race = _Race(self, transport, request, closes, stream, loop,  # type: ignore[arg-type]
                     caller)
        race.delay = controller.hedge_delays.get(self.hedging,
                                                 controller.latency, request.url, self.clock)
        if self.pooled:  # a copy that says when it leaves the pool
            race.sending = _traced(race, self)
        else:  # on the wire at once (``_Race.on_the_wire`` and ``arm``'s usual case, inlined)
            race.sent = sent = self.clock()
            race.armed = True
            due = self._due
            if loop is self._loop and due and self.loop_clock:
                race.due = at = sent + race.delay
                if due[-1].due <= at:
                    due.append(race)
                    return None, race
            self.arm(race)
        return None, race

    async def run(self, transport: Any, call: HedgedCall) -> Ended:
        """Run the hedged try of ``call``, a request that is not plain (a deadline, an
        override, a guard's say): its first attempt is a copy, dressed (``begin``)."""
        loop = asyncio._get_running_loop()
        caller = asyncio.current_task(loop) if loop is not None and _UNCANCEL else None
        if caller is None:
            return await _grouped_try(self, call, transport)
        race = _Race(self, transport, call.request, call.closes, None,
                     loop, caller)  # type: ignore[arg-type]
        race.call = call
        race.dress()
        await race.attempt()
        return race.outcome()


class _Race(Raced):
    """A hedged try on asyncio whose first attempt runs in the caller's own task.

    The hedging delay is a timer of the event loop (``loop.call_later``), started when the
    first attempt is on the wire. An answer before it costs the timer and nothing else.
    When the timer fires, :meth:`escalate` starts a task that runs the rest of the try
    (:func:`_grouped_try` with ``race=self``): it sends the hedges and judges every
    outcome, the first's included, which the caller hands it (:attr:`send`) once its
    attempt ends. When another attempt wins while the caller still waits for the first,
    the task cancels the caller's wait (:meth:`interrupt`, a native ``Task.cancel()``,
    taken back with ``Task.uncancel()``); the caller then takes the task's outcome."""

    # Most races end before their delay: what only a hedged one needs starts as these
    # class attributes, so that a race's making sets few of its own.
    call: HedgedCall | None = None  # given (a dressed first attempt), or made when due
    first: Slot | None = None  # the first attempt, once the call has one
    sent: float | None = None  # when the first attempt left the client's pool
    armed = False  # the hedging delay runs (``AsyncHedger.arm``)
    due = 0.0  # ... until then, on the event loop's clock
    runner: asyncio.Task[Ended] | None = None  # the rest of the try, once due
    send: Callable[[tuple[Slot, Any]], None] | None = None  # the runner's inbox
    inside = False  # the caller is waiting for the first attempt
    interrupted = False  # ... and the runner cancelled that wait

    def __init__(self, hedger: AsyncHedger, transport: Any, request: Request, closes: int,
                 stream: object, loop: asyncio.AbstractEventLoop,
                 caller: asyncio.Task[Any]) -> None:
        self.hedger = hedger
        self.transport = transport
        self.request = self.sending = request  # sending: what the first attempt sends
        self.closes = closes
        self.stream = stream
        self.loop = loop
        self.caller = caller
        self.delay = 0.0
        self.context = contextvars.copy_context()  # the caller's: a runner starts in it

    # -- the timer and the runner ------------------------------------------------------

    def on_the_wire(self, sent: float) -> None:
        """The first attempt left the client's own pool at ``sent``: the delay runs."""
        self.sent = sent
        if not self.armed:
            self.armed = True
            self.hedger.arm(self)

    def escalate(self) -> None:
        """The hedging delay is over and the first attempt still out: a hedge is due."""
        if not self.inside or self.runner is not None:
            return
        call = self.call
        if call is None:  # the quick first attempt: a call takes it over
            hedger = self.hedger
            call = self.call = HedgedCall(hedger.controller, self.request,
                                          hedger.hedging, self.closes,
                                          quick=True, stream=self.stream)
            self.first = call.adopt(self.request, self.delay, self.sent)
        if call.can_hedge():
            self.runner = self.loop.create_task(
                _grouped_try(self.hedger, call, self.transport, self))

    def interrupt(self) -> None:
        """Another attempt won: the caller's wait for the first ends (cancelled)."""
        if self.inside and not self.interrupted:
            self.interrupted = True
            self.caller.cancel()

    # -- the first attempt, in the caller's task ---------------------------------------

    def dress(self) -> None:
        """Make the first attempt of a call that is not plain ready: its first slot, a
        dressed copy. The hedging delay runs once it is on the wire."""
        hedger = self.hedger
        call = cast(HedgedCall, self.call)
        first = self.first = call.begin()  # a DeadlineExceeded as it is
        self.sending = first.request
        self.delay = call.delay
        if hedger.pooled:
            _on_the_wire(call, first, hedger.clock, self._sent_report)
        else:
            now = hedger.clock()
            call.sent(first, now)
            self.on_the_wire(now)

    def _sent_report(self, item: tuple[Slot, Any]) -> None:
        self.on_the_wire(cast(float, item[0].sent))

    async def attempt(self) -> Response | None:
        """Send the first attempt. A plain one's response, or its exception raised, when it
        came before a hedge was due: the driver goes on as with any quick attempt.
        ``None``: the try was judged here (a dressed first attempt) or hedged, and
        :meth:`outcome` says how it ended (:attr:`call` is its call)."""
        hedger = self.hedger
        self.inside = True
        try:
            result = await self.transport.handle_async_request(self.sending)
        except Exception as exc:
            result = exc
        except BaseException as exc:
            self.inside = False
            self._lower_bound()
            if self.interrupted and isinstance(exc, asyncio.CancelledError):
                self._ended = await self._taken_back(exc)
                return None
            await self._stop()  # the caller's own cancellation (or an interrupt)
            call = self.call
            if call is not None and self.first is not None:
                call.abandon()
            raise
        self.inside = False
        first = self.first
        sent = self.sent if first is None else first.sent
        if sent is not None and not isinstance(result, Exception) and hedger.timed():
            end = hedger.clock()
            hedger.record(origin_of(self.request.url), end - sent, end)
        if first is None:  # no hedge was due: a plain attempt's outcome
            if isinstance(result, Exception):
                raise result
            return result
        self._ended = await self._settle(result)
        return None

    async def _settle(self, result: Response | BaseException) -> Ended | BaseException:
        """The first attempt ended after the try was hedged: the runner's outcome (its
        exception returned, not raised)."""
        hedger = self.hedger
        runner = self.runner
        if self.interrupted:
            return await self._taken_back(result)
        if runner is None:  # hedged, but no hedge could start: the first's own outcome
            call, first = cast(HedgedCall, self.call), cast(Slot, self.first)
            try:
                verdict, wait = call.done(first, cast(Exception, result))
                if verdict == "retry" and not isinstance(result, Exception):
                    await _close_all([cast(Response, result)], hedger.flavour, hedger.aclose)
                return _over(verdict, cast(Exception, result), wait)
            except Exception as exc:
                if exc is not result and not isinstance(result, BaseException):
                    await _close_all([result], hedger.flavour, hedger.aclose)  # retry_if raised
                return exc
        if self.send is None:  # the runner has not started: the try is the first's
            runner.cancel()
            await self._reap(runner)
            self.runner = None
            return await self._settle(result)
        self.send((cast(Slot, self.first), result))
        try:
            return await runner
        except Exception as exc:
            return exc

    def _lower_bound(self) -> None:
        """The first attempt was cancelled: on the wire this long at least."""
        sent = self.sent if self.first is None else self.first.sent
        if sent is not None:
            hedger = self.hedger
            end = hedger.clock()
            hedger.record(origin_of(self.request.url), end - sent, end)

    async def _taken_back(self, answer: Response | BaseException) -> Ended | BaseException:
        """The runner cancelled the caller's wait for the first attempt (another attempt
        won): the cancellation is taken back, the first's late ``answer`` closed, and the
        runner's outcome is the try's. A cancellation of the caller's own that came at the
        same time is raised, the runner's answer closed."""
        caller, runner, hedger = self.caller, cast("asyncio.Task[Ended]", self.runner), self.hedger
        pending = 0  # cancellations of the caller's own, besides the interrupt
        if sys.version_info >= (3, 11):  # always so: _UNCANCEL
            caller.uncancel()
            pending = caller.cancelling()
        if not isinstance(answer, BaseException):
            await _close_all([answer], hedger.flavour, hedger.aclose)
        if pending:
            await self._reap(runner)
            cast(HedgedCall, self.call).abandon()
            raise asyncio.CancelledError
        try:
            ended = await runner
        except Exception as exc:
            return exc
        try:  # an anyio scope of the caller's cancelled meanwhile (held off by a shield)
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            if ended[0] is not None:
                await _close_all([ended[0]], hedger.flavour, hedger.aclose)
            raise
        return ended

    async def _stop(self) -> None:
        """The caller's wait for the first attempt ended by its own cancellation: the
        timer stops, and a runner is cancelled and waited for."""
        runner = self.runner
        if runner is not None:
            runner.cancel()
            await self._reap(runner)

    async def _reap(self, runner: asyncio.Task[Ended]) -> None:
        """Wait for ``runner`` to end, whatever cancels this task meanwhile, and close the
        response it ends with (it goes to no one)."""
        while not runner.done():
            try:
                await asyncio.wait((runner,))
            except asyncio.CancelledError:
                continue  # the caller's cancellation is raised once the runner has ended
        if runner.cancelled() or runner.exception() is not None:
            return
        answer, _ = runner.result()
        if answer is not None:
            hedger = self.hedger
            await _close_all([answer], hedger.flavour, hedger.aclose)


def _traced(race: _Race, hedger: AsyncHedger) -> Request:
    """A copy of the race's plain first request whose trace callback starts the hedging
    delay when the attempt leaves the client's own pool (then calls the caller's own)."""
    request = race.request
    copy = hedger.flavour.request(request.method, request.url, headers=request.headers,
                                  stream=request.stream)
    extensions = copy.extensions = {**request.extensions}
    theirs = extensions.get("trace")

    async def trace(name: str, info: dict[str, Any]) -> None:
        if race.sent is None:
            race.on_the_wire(hedger.clock())
        if theirs is not None:
            await theirs(name, info)

    extensions["trace"] = trace
    return copy


async def _grouped_try(hedger: AsyncHedger, call: HedgedCall, transport: Any,
                       race: _Race | None = None
                       ) -> Ended:
    """Run ``call``'s hedged try in a task group (see :class:`AsyncHedger`). With ``race``,
    the try's first attempt is already on the wire in the caller's task, which reports its
    outcome on ``race.send``: a hedge is due at once, and when another attempt wins while
    the caller still waits for the first, the caller is interrupted (``_Race.interrupt``).
    """
    flavour, record = hedger.flavour, hedger.record
    clock, aclose, pooled = hedger.clock, hedger.aclose, hedger.pooled
    first = call.begin() if race is None else cast(Slot, race.first)  # DeadlineExceeded
    send, receive = anyio.create_memory_object_stream[tuple[Slot, Any]](math.inf)
    if race is not None:
        race.send = send.send_nowait
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
    raised: Exception | None = None  # what the call raised when asked about an outcome
    unread: list[Response] = []  # answers handed to no one: closed whatever happens
    try:
        async with anyio.create_task_group() as group:
            next_at: float | None = None
            if race is None:
                group.start_soon(work, first)
            else:  # the first is on the wire, its delay over: a hedge is due now
                next_at = anyio.current_time()
            latest = first  # the last attempt started: a hedge's delay runs once it is sent
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
                try:
                    verdict, wait = call.done(slot, result)
                except Exception as exc:  # the policy's retry_if raised: raised after the group
                    raised = exc  # (inside it, trio would hand it over in an exception group)
                    group.cancel_scope.cancel()
                    ended = True
                    break
                if verdict == "more":
                    if not isinstance(result, Exception):
                        await aclose(result, flavour)  # its connection goes back
                    hedge = call.hedge()
                    if hedge is not None:
                        group.start_soon(work, hedge)
                        latest, next_at = hedge, None
                    continue
                group.cancel_scope.cancel()  # the others are not needed any more
                if race is not None and slot is not first:
                    race.interrupt()  # the first, if still awaited in the caller's task
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
    if raised is not None:  # the answer in hand goes to no one
        if not isinstance(result, Exception) and result is not None:
            await _close_all([result], flavour, aclose)
        raise raised
    if verdict == "retry" and not isinstance(result, Exception):
        await _close_all([result], flavour, aclose)
    return _over(verdict, result, wait)
