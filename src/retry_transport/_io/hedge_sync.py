"""A sync transport's hedged tries, on worker threads (``hedge_workers``).

A quick first attempt runs on a worker while the caller waits for it, for the hedging delay
at most (:meth:`SyncHedger.first`); once the delay is over, a :class:`SyncTry` takes the
attempt over, sends the hedges and judges every outcome. A call that is not plain runs its
try in a :class:`SyncTry` from the start. The delay is waited in real time (a queue's
timeout); the transport's ``clock`` times each attempt's latency.

The workers hand each outcome to the caller's thread through one queue per try
(:class:`Inbox`), which does all the rest: no lock is taken between them.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .._base.flavour import Response
from .._call.hedged_call import HedgedCall, Slot
from .._wire.http import origin as origin_of
from .hedge_shared import Ended, Hedger, Raced, Ran, ended

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._call.controller import Controller
    from .hedge_workers import Workers

__all__ = ["Inbox", "SyncHedger", "SyncRace", "SyncTry"]

#: What an attempt's worker hands over: the attempt (``None``: a race's first, which the try
#: knows as ``Inbox.first``) and its outcome (an interrupt in it included).
Item = tuple[Slot | None, Response | BaseException]


class Inbox(queue.SimpleQueue[Item]):
    """Where the attempts of one try hand their outcomes over, from the workers that ran
    them, read by the caller's thread: a queue of ``(slot, outcome)`` pairs.

    Once the try is over (:attr:`over`), an outcome that comes later goes to no one: it is
    closed unread, and its attempt's tickets settled with it (a probe's slot goes back),
    by whichever thread finds it: the caller's as the try ends, or the worker that put it
    there after that (a worker puts, then looks at :attr:`over`; the caller sets it, then
    empties the queue: each outcome is taken out once, and none is left).

    It has no ``__init__`` (a race, an inbox itself, is made for each request): who makes
    one sets :attr:`over`, :attr:`call` and :attr:`first`."""

    __slots__ = ("call", "first", "over")

    over: bool
    #: The call judging the try, once one took it over, and its first attempt.
    call: HedgedCall | None
    first: Slot | None

    def discard(self) -> None:
        """Close every outcome in the queue, unread; once a try took them over (its losers
        run on to their end), settle each attempt's tickets with its outcome."""
        while True:
            try:
                slot, result = self.get_nowait()
            except queue.Empty:
                return
            if not isinstance(result, BaseException):
                result.close()
            call = self.call
            if call is not None and call.losers_run:
                call.late(slot or self.first, result)  # type: ignore[arg-type]


class SyncRace(Inbox, Raced):
    """A quick first attempt of a hedged request, sent on a worker thread, which hands its
    outcome over in the race, an :class:`Inbox` (as ``(None, outcome)``); the caller waits
    there, for the hedging delay at most (:meth:`SyncHedger.first`, which makes the race).
    When the delay is over first, a call takes the attempt over (``HedgedCall.adopt``) and
    a :class:`SyncTry` goes on with it, reading the same inbox; when the caller stops
    waiting (an interrupt), the outcome is closed whenever it comes."""

    __slots__ = ("_ended",)

    def abandon(self) -> None:
        """The caller stopped waiting (an interrupt): the first's answer is closed whenever
        it comes, and the call, if one was made, is settled as any request ended outside
        the decisions."""
        self.over = True
        self.discard()
        if self.call is not None:
            self.call.abandon()


class SyncHedger(Hedger):
    """A sync transport's hedged tries: what they need of the transport, kept once.

    A quick first attempt (``QuickPath.first``) runs on a worker thread while the caller
    waits for it in its race's inbox, for the hedging delay at most (:meth:`first`): an
    answer before it costs the hand-over to the worker. Once the delay is over, the try
    goes on in a :class:`SyncTry`, which sends the hedges and takes the first's outcome as
    theirs. A call that is not plain (a deadline, an override, a guard's say) runs its try
    in a :class:`SyncTry` from the start (:meth:`run`)."""

    __slots__ = ("workers",)

    def __init__(self, controller: Controller, workers: Workers,
                 record: Callable[[str, float, float], None],
                 clock: Callable[[], float]) -> None:
        super().__init__(controller, record, clock)
        self.workers = workers

    def first(self, transport: Any, request: Request, closes: int, stream: object,
              timed: bool) -> Response | Exception | Raced:
        """A quick first attempt of ``request``, which may be hedged (``timed``: its latency
        is recorded, as the quick path's sample says), run on a worker while the caller
        waits for the hedging delay at most: its outcome, a response or its exception
        (returned), when it came before the delay was over (the driver goes on as with any
        quick attempt). Else the race, whose try took the attempt over and ended
        (``Raced.outcome``, its call ``Raced.call``). With no worker free, the attempt is
        sent on the caller's thread (nothing queues); when the transport was closed
        meanwhile, a call's try is run whole (its first attempt then says so). Raises
        what is no outcome of the attempt: an interrupt, an error of the race's."""
        workers = self.workers
        generation = workers.generation
        delay = self.delay
        if delay is None:
            controller = self.controller
            delay = controller.hedge_delays.get(self.hedging, controller.latency,
                                                request.url, self.clock)
        sent = self.clock() if timed else None  # handed over: its latency from now
        race = SyncRace()  # its fields, set here (a race is made for each request)
        race.over = False
        race.call = race.first = None
        if not workers.submit(transport.handle_request, request, race, None):
            if workers.generation == generation:  # no worker free: it goes plainly
                return self._plainly(transport, request, sent)
            # Closed meanwhile: the call's first attempt says so, if the request began before.
            return self._whole(transport, HedgedCall(self.controller, request, self.hedging,
                                                     closes, quick=True, stream=stream))
        try:
            _, result = race.get(True, delay)
        except queue.Empty:
            return self._hedge(race, transport, request, closes, stream, delay, sent,
                               generation)
        except BaseException:  # interrupted while waiting: the answer goes to no one
            race.abandon()
            raise
        if not isinstance(result, self.response) and isinstance(result, BaseException):
            if isinstance(result, Exception):
                return result
            raise result  # an interrupt in the attempt: the request ends with it
        if sent is not None:
            end = self.clock()
            self.record(origin_of(request.url), end - sent, end)
        return result

    def _plainly(self, transport: Any, request: Request, sent: float | None
                 ) -> Response | Exception:
        """Send the quick first attempt on the caller's thread, unhedged: no worker is free
        (its latency timed from ``sent``, when sampled). Its exception is returned."""
        try:
            response: Response = transport.handle_request(request)
        except Exception as exc:
            return exc
        if sent is not None:
            end = self.clock()
            self.record(origin_of(request.url), end - sent, end)
        return response

    def _hedge(self, race: SyncRace, transport: Any, request: Request, closes: int,
               stream: object, delay: float, sent: float | None, generation: int
               ) -> SyncRace:
        """The delay is over, the first attempt still out: a call takes it over and a
        :class:`SyncTry` goes on with it; the race keeps how the try ended."""
        try:  # until the try takes the first's outcome over, an interrupt leaves it here
            call = race.call = HedgedCall(self.controller, request, self.hedging, closes,
                                          quick=True, stream=stream)
            # ``sent`` is not read when untimed: the delay has run since the hand-over.
            race.first = call.adopt(request, delay,
                                    self.clock() - delay if sent is None else sent)
            race._ended = cast(Ended, SyncTry(call, transport, self.workers, self.record,
                                              self.clock, generation,
                                              race).run())  # never None with a race
        except Exception as exc:
            race._ended = exc
        except BaseException:
            race.abandon()
            raise
        return race

    def _whole(self, transport: Any, call: HedgedCall) -> Ran:
        """``call``'s try run whole here, where a race would have run: how it ended."""
        try:
            return Ran(call, self.run(transport, call))
        except Exception as exc:
            return Ran(call, exc)
        except BaseException:
            call.abandon()
            raise

    def run(self, transport: Any, call: HedgedCall) -> Ended:
        """Run the first try of a hedged ``call`` on the workers: how it ended, or
        ``(None, None)`` when no worker is free (its attempts then go unhedged, at once)."""
        workers = self.workers
        return SyncTry(call, transport, workers, self.record, self.clock,
                       workers.generation).run() or (None, None)


class SyncTry:
    """A hedged try on a sync transport's workers: the first attempt and its hedges, each
    on a worker thread of its own, and the caller's thread waiting for their outcomes in
    the try's :class:`Inbox`, for the hedging delay at most, then starting the next hedge.

    The caller's thread records each attempt's latency as it reads its outcome; the losers
    still on the wire when the try ends have the time they took so far recorded (a lower
    bound), as the async try records a cancelled one, and run on to their end: what they
    answer then is closed unread (see :class:`Inbox`)."""

    __slots__ = ("call", "clock", "generation", "inbox", "origin", "out", "record",
                 "transport", "workers")

    def __init__(self, call: HedgedCall, transport: Any, workers: Workers,
                 record: Callable[[str, float, float], None], clock: Callable[[], float],
                 generation: int, inbox: Inbox | None = None) -> None:
        self.call = call
        self.transport = transport
        self.workers = workers
        self.record = record
        self.clock = clock
        self.generation = generation  # the workers' when the try began
        if inbox is None:
            inbox = Inbox()
            inbox.over, inbox.first = False, None
        inbox.call = call
        self.inbox = inbox
        self.origin = call.origin
        self.out: list[Slot] = []  # the attempts on the wire whose outcome is not read
        call.losers_run = True

    def _sent(self, slot: Slot) -> None:
        """Attempt ``slot`` was handed to a worker: on the wire from now."""
        self.call.sent(slot, self.clock())
        self.out.append(slot)

    def _came(self, slot: Slot, result: Response | BaseException) -> None:
        """The outcome of ``slot`` was read: its latency recorded (an interrupt's is not)."""
        self.out.remove(slot)
        sent = slot.sent
        if sent is not None and not isinstance(result, BaseException):
            end = self.clock()
            self.record(self.origin, end - sent, end)

    def finish(self) -> None:
        """The try is over: the answers that came in, unread, are closed, and the losers
        still on the wire have their time so far recorded (a lower bound), not the whole
        of a slow answer that hedging exists to cut (it would lift the quantile the delay
        is read from)."""
        inbox = self.inbox
        inbox.over = True
        call, first = self.call, inbox.first
        while True:  # answers that came in before the end, unread
            try:
                slot, late = inbox.get_nowait()
            except queue.Empty:
                break
            slot = slot or first
            assert slot is not None
            if slot in self.out:
                self._came(slot, late)
            if not isinstance(late, BaseException):
                late.close()
            call.late(slot, late)
        if self.out:
            now = self.clock()
            for slot in self.out:
                if slot.sent is not None:
                    self.record(self.origin, now - slot.sent, now)
            self.out = []

    def start_hedge(self) -> bool:
        """Start a hedge, if a worker is free and the call admits one: whether it went."""
        workers, call = self.workers, self.call
        worker = workers.reserve(self.generation)
        if worker is None:
            return False
        if not self.inbox.empty():  # an answer came meanwhile (its worker freed): judged first
            workers.release(worker)
            return False
        try:
            hedge = call.hedge()
        except BaseException:  # an interrupt in a guard's admission: the worker goes back
            workers.release(worker)
            raise
        if hedge is None:
            workers.release(worker)
            return False
        if not workers.submit(self.transport.handle_request, hedge.request, self.inbox,
                              hedge, worker):  # closed meanwhile: no verdict
            call.done_unsent(hedge)
            return False
        self._sent(hedge)  # a worker was free: it goes now
        return True

    def run(self) -> Ended | None:
        """Run the try (from a race's first attempt, on a worker already, when the inbox is
        the race's); how it ended. ``None``: no worker is free, so the request goes
        unhedged on the caller's thread (nothing was started)."""
        call, workers, inbox = self.call, self.workers, self.inbox
        if inbox.first is not None:  # the race's: from now on its outcome is read here
            self.out.append(inbox.first)
            try:
                return self._judge(time.monotonic())  # its delay is over: a hedge is due
            finally:
                self.finish()
        worker = workers.reserve(self.generation)
        if worker is None:
            return None
        try:
            try:
                first = inbox.first = call.begin()
            except BaseException:
                workers.release(worker)
                raise
            if not workers.submit(self.transport.handle_request, first.request, inbox,
                                  first, worker):  # the workers were stopped
                call.done_unsent(first)
                call.check_open()  # a close since the request began: nothing is sent
                return None  # begun after the close: it goes unhedged
            self._sent(first)
            return self._judge(time.monotonic() + call.delay)
        finally:
            self.finish()

    def _judge(self, next_at: float) -> Ended:
        """Wait for each outcome, starting a hedge whenever the delay is over first (at
        ``next_at`` for the next), until the call's verdict ends the try."""
        call, inbox = self.call, self.inbox
        first = inbox.first
        while True:
            timeout = None
            if call.can_hedge():
                timeout = max(next_at - time.monotonic(), 0.0)
            try:
                slot, result = inbox.get(True, timeout)
            except queue.Empty:
                self.start_hedge()
                next_at = time.monotonic() + call.delay
                continue
            slot = slot or first
            assert slot is not None
            self._came(slot, result)
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
