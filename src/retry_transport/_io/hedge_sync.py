"""A sync transport's hedged tries, on worker threads (``hedge_workers``).

A quick first attempt runs on a worker while the caller waits for it, for the hedging delay
at most (:class:`SyncRace`); once the delay is over, a :class:`SyncTry` takes the attempt
over, sends the hedges and judges every outcome. A call that is not plain runs its try in a
:class:`SyncTry` from the start. The delay is waited in real time (a lock's or a queue's
timeout); the transport's ``clock`` times each attempt's latency.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .._base.flavour import Response
from .._call.hedged_call import HedgedCall, Slot
from .._wire.http import origin as origin_of
from .hedge_shared import Ended, Raced, ended

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._call.controller import Controller
    from .._call.hedging import Hedging
    from .hedge_workers import Workers

__all__ = ["Plainly", "SyncHedger", "SyncRace", "SyncTry"]


class SyncHedger:
    """A sync transport's hedged tries: what they need of the transport, kept once.

    A quick first attempt (``QuickPath.first``) runs on a worker thread while the
    caller waits for it on a lock, for the hedging delay at most (:class:`SyncRace`): an
    answer before it costs the hand-over to the worker. Once the delay is over, the try
    goes on in a :class:`SyncTry`, which sends the hedges and takes the first's outcome
    as theirs. A call that is not plain (a deadline, an override, a guard's say) runs its
    try in a :class:`SyncTry` from the start."""

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
    the attempt over (``HedgedCall.adopt``) and :class:`SyncTry` goes on with it: the
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
        try:  # until the try takes the first's outcome over, an interrupt leaves it here
            call = self.call = HedgedCall(hedger.controller, self.request, hedger.hedging,
                                          self.closes, quick=True, stream=self.stream)
            sent = self.sent  # not read when untimed: the delay has run since the hand-over
            self.first = call.adopt(self.request, self.delay,
                                    hedger.clock() - self.delay if sent is None else sent)
            self._ended = cast(Ended, SyncTry(call, self.transport, hedger.workers,
                                              hedger.record, hedger.clock,
                                              self.generation).run(self))
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



class SyncTry:
    """A hedged try on a sync transport's workers: the first attempt and its hedges, each
    on a worker thread of its own, and the caller's thread waiting for their outcomes on
    :attr:`results`, for the hedging delay at most, then starting the next hedge.

    The workers hand each outcome over through :meth:`arrive`, under :attr:`lock`: while
    the try runs, into :attr:`results` (its latency recorded); once it is over
    (:meth:`finish`), a loser that ran on closes its own answer and settles its tickets
    (``HedgedCall.late``). The losers still on the wire when it ends have the time they
    took so far recorded (a lower bound), as the async try records a cancelled one."""

    __slots__ = ("call", "clock", "generation", "lock", "on_the_wire", "origin", "over",
                 "record", "results", "transport", "workers")

    def __init__(self, call: HedgedCall, transport: Any, workers: Workers,
                 record: Callable[[str, float, float], None], clock: Callable[[], float],
                 generation: int) -> None:
        self.call = call
        self.transport = transport
        self.workers = workers
        self.record = record
        self.clock = clock
        self.generation = generation  # the workers' when the try began
        self.results: queue.SimpleQueue[tuple[Slot, Response | BaseException]] = \
            queue.SimpleQueue()
        self.lock = threading.Lock()
        self.over = False
        self.origin = call.origin
        self.on_the_wire: dict[Slot, float] = {}  # attempts under way, by when they were sent
        call.losers_run = True

    def work(self, slot: Slot) -> None:
        """Send attempt ``slot`` (on a worker) and hand its outcome over."""
        clock = self.clock
        start = clock()
        with self.lock:
            self.on_the_wire[slot] = start
        result: Response | BaseException
        try:
            result = self.transport.handle_request(slot.request)
        except BaseException as exc:  # KeyboardInterrupt too: the caller raises it
            result = exc
        self.arrive(slot, result, start, clock())

    def arrive(self, slot: Slot, result: Response | BaseException, start: float,
               end: float) -> None:
        """Attempt ``slot``, sent at ``start``, ended at ``end`` with ``result``: judged by
        the try if it still runs, else closed unread and its tickets settled."""
        with self.lock:
            if not self.over:
                del self.on_the_wire[slot]
                if not isinstance(result, BaseException):
                    self.record(self.origin, end - start, end)
                self.results.put((slot, result))
                return
        # A loser that ran on: its latency was recorded when the try ended; no one will
        # read its answer; its tickets (a probe slot) are settled with its own outcome.
        if not isinstance(result, BaseException):
            result.close()
        self.call.late(slot, result)

    def finish(self) -> None:
        """The try is over: the losers still on the wire have their time so far recorded,
        and the answers that came in, unread, are closed."""
        with self.lock:
            self.over = True
            # The losers still on the wire: as the async try records a cancelled one, the
            # time they have taken so far (a lower bound), not the whole of a slow answer
            # that hedging exists to cut (it would lift the quantile the delay is read from).
            now = self.clock()
            for start in self.on_the_wire.values():
                self.record(self.origin, now - start, now)
            self.on_the_wire.clear()
        results = self.results
        while True:  # answers that came in before the end, unread
            try:
                slot, late = results.get_nowait()
            except queue.Empty:
                return
            if not isinstance(late, BaseException):
                late.close()
            self.call.late(slot, late)

    def start_hedge(self) -> bool:
        """Start a hedge, if a worker is free and the call admits one: whether it went."""
        workers, call = self.workers, self.call
        if not workers.reserve(self.generation):
            return False
        if not self.results.empty():  # an answer came meanwhile (its worker freed): judge it first
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
        if not workers.submit(self.work, hedge, self.generation):  # closed meanwhile: no verdict
            call.done_unsent(hedge)
            return False
        call.sent(hedge, self.clock())  # a worker was free: it goes now
        return True

    def take_over(self, race: SyncRace) -> None:
        """The try's first attempt is ``race``'s, already running on a worker (a quick one
        whose delay is over): from now on its outcome arrives here, as the hedges' do."""
        first = cast(Slot, race.first)
        sent = cast(float, first.sent)
        clock = self.clock
        with race.mutex:
            came = race.result
            race.arrive = lambda result: self.arrive(first, result, sent, clock())
            if came is None:  # no hedge runs yet: no worker reads the table
                self.on_the_wire[first] = sent
        if came is not None:  # just before the hand-over
            self.results.put((first, came))

    def run(self, race: SyncRace | None = None) -> Ended | None:
        """Run the try (with ``race``: from its first attempt, on a worker already); how it
        ended. ``None``: no worker is free, so the request goes unhedged on the caller's
        thread (nothing was started)."""
        call, workers = self.call, self.workers
        if race is None and not workers.reserve(self.generation):
            return None
        try:
            if race is not None:
                self.take_over(race)
                next_at = time.monotonic()
            else:
                try:
                    first = call.begin()
                except BaseException:
                    workers.release()
                    raise
                if not workers.submit(self.work, first, self.generation):  # stopped
                    call.done_unsent(first)
                    call.check_open()  # a close since the request began: nothing is sent
                    return None  # begun after the close: it goes unhedged
                next_at = time.monotonic() + call.delay
            return self._judge(next_at)
        finally:
            self.finish()

    def _judge(self, next_at: float) -> Ended:
        """Wait for each outcome, starting a hedge whenever the delay is over first (at
        ``next_at`` for the next), until the call's verdict ends the try."""
        call, results = self.call, self.results
        while True:
            timeout = None
            if call.can_hedge():
                timeout = max(next_at - time.monotonic(), 0.0)
            try:
                slot, result = results.get(timeout=timeout)
            except queue.Empty:
                self.start_hedge()
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
                if self.start_hedge():  # a retryable outcome starts the next at once
                    next_at = time.monotonic() + call.delay
                continue
            self.finish()
            if verdict == "retry" and not isinstance(result, Exception):
                result.close()
            return ended(verdict, result, wait)
