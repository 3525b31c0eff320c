"""An async transport's hedged tries, in tasks.

On asyncio a try's first attempt runs in the caller's own task under a timer of the event
loop (:class:`_Race`); a task group starts only when a hedge is due (``hedge_group``). Trio
has no timer of that kind: its tries run in a task group from the start. The hedging delay
is waited on the event loop's timer (virtual under trio's ``MockClock``); the transport's
``clock`` times each attempt's latency.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextvars
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, cast

import anyio
import anyio.lowlevel

from .._base.flavour import Flavour, Response
from .._call.hedged_call import HedgedCall, Slot
from .._wire.http import origin as origin_of
from .hedge_group import GroupedTry, close_all, on_the_wire
from .hedge_shared import Ended, Hedger, Raced, Ran, ended

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._call.controller import Controller

__all__ = ["AsyncHedger"]

#: Whether an asyncio task's own cancellation can be told from one sent to it and taken
#: back (``Task.uncancel``, new in 3.11): a hedged try's first attempt may then run in the
#: caller's task (:class:`_Race`); before it, tries run in a task group.
_UNCANCEL: Final = sys.version_info >= (3, 11)

#: ``asyncio.current_task``, given the running loop. On 3.11 it is a Python function that
#: reads this dict of the running tasks by loop: read here without the call. (From 3.12
#: on, the function is asyncio's C one.)
_current_task: Callable[[asyncio.AbstractEventLoop], asyncio.Task[Any] | None] = (
    asyncio.tasks._current_tasks.get if sys.version_info[:2] == (3, 11)  # type: ignore[attr-defined]
    else asyncio.current_task)


class AsyncHedger(Hedger):
    """An async transport's hedged tries: what they need of the transport, kept once.

    On asyncio a try's first attempt runs in the caller's own task under a timer of the
    event loop (:class:`_Race`): a try answered before its hedging delay costs the timer,
    and a task group starts only when a hedge is due. Trio has no timer of that kind: its
    tries run in a task group from the start (:class:`GroupedTry`).

    ``pooled``: the inner transport keeps a pool of connections and traces each request
    (httpx's own): an attempt still waiting for a connection of the client's own pool is
    not on the wire, so no hedge's delay runs for it, its latency is timed from when it
    leaves the pool, and a hedge that never left it is no hedge (not counted, its cost
    given back). Other transports send at once."""

    __slots__ = ("_due", "_handle", "_loop", "aclose", "loop_clock", "pooled", "timed")

    def __init__(self, controller: Controller,
                 record: Callable[[str, float, float], None], clock: Callable[[], float],
                 aclose: Callable[[Response, Flavour], Awaitable[None]],
                 pooled: bool) -> None:
        super().__init__(controller, record, clock)
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

    async def first(self, transport: Any, request: Request, closes: int, stream: object,
                    timed: bool, call: HedgedCall | None = None
                    ) -> Response | Exception | Raced:
        """A quick first attempt of ``request`` (``QuickPath.first``), which may be hedged
        (with ``call``: the first attempt of a call that is not plain, a dressed copy);
        ``timed``: its latency is recorded (the quick path's sample, or the call's).

        On asyncio, it is sent in the caller's task under the timer (:class:`_Race`): a
        quick one's outcome, a response or its exception (returned), when it came before
        a hedge was due (the driver goes on as with any quick attempt); else the race,
        whose try ended (``Raced.outcome``, its call ``Raced.call``). On trio, a call's
        try runs whole in a task group: how it ended. Raises what is no outcome of the
        attempt (a cancellation, an error of the race's)."""
        loop = asyncio._get_running_loop()
        caller = _current_task(loop) if loop is not None and _UNCANCEL else None
        if caller is None:
            return await self._whole(transport, call or HedgedCall(
                self.controller, request, self.hedging, closes, quick=True, stream=stream))
        race = _Race()  # its own fields, set here (a race is made for each request)
        race.hedger = self
        race.transport = transport
        race.request = race.sending = request
        race.closes = closes
        race.stream = stream
        race.loop = loop  # type: ignore[assignment]
        race.caller = caller
        race.first = None
        race.context = contextvars.copy_context()
        if call is not None:
            race.call = call
            race.dress()
        else:
            delay = self.delay
            if delay is None:
                controller = self.controller
                delay = controller.hedge_delays.get(self.hedging, controller.latency,
                                                    request.url, self.clock)
            race.delay = delay
            if self.pooled:  # a copy that says when it leaves the pool
                race.sending = _traced(race, self)
            else:  # on the wire at once (``_Race.on_the_wire`` and ``arm``'s usual case)
                race.sent = sent = self.clock()
                race.armed = True
                due = self._due
                if (loop is self._loop and due and self.loop_clock
                        and due[-1].due <= sent + delay):
                    race.due = sent + delay
                    due.append(race)
                else:
                    self.arm(race)
        race.inside = True
        try:
            result = await transport.handle_async_request(race.sending)
        except Exception as exc:
            result = exc
        except BaseException as exc:
            race.inside = False
            return await race.stopped(exc)
        race.inside = False
        first = race.first
        began = race.sent if first is None else first.sent
        if timed and began is not None and not isinstance(result, Exception):
            end = self.clock()
            self.record(origin_of(request.url), end - began, end)
        if first is None:  # no hedge was due: a plain attempt's outcome
            return result
        race._ended = await race.settle(result)
        return race

    async def _whole(self, transport: Any, call: HedgedCall) -> Ran:
        """``call``'s try run whole in a task group, where a race would have run: how it
        ended."""
        try:
            return Ran(call, await GroupedTry(self, call, transport).run())
        except Exception as exc:
            return Ran(call, exc)
        except BaseException:
            call.abandon()
            raise

    async def run(self, transport: Any, call: HedgedCall) -> Ended:
        """Run the hedged try of ``call``, a request that is not plain (a deadline, an
        override, a guard's say): its first attempt is a copy, dressed (``begin``)."""
        raced = await self.first(transport, call.request, call.closes, None, self.timed(),
                                 call)
        return cast(Raced, raced).outcome()


class _Race(Raced):
    """A hedged try on asyncio whose first attempt runs in the caller's own task.

    The hedging delay is a timer of the event loop (``loop.call_later``), started when the
    first attempt is on the wire. An answer before it costs the timer and nothing else.
    When the timer fires, :meth:`escalate` starts a task that runs the rest of the try
    (a :class:`GroupedTry` with ``race=self``): it sends the hedges and judges every
    outcome, the first's included, which the caller hands it (:attr:`send`) once its
    attempt ends. When another attempt wins while the caller still waits for the first,
    the task cancels the caller's wait (:meth:`interrupt`, a native ``Task.cancel()``,
    taken back with ``Task.uncancel()``); the caller then takes the task's outcome."""

    # Most races end before their delay: what only a hedged one needs starts as these
    # class attributes, so that a race's making sets few of its own
    # (``AsyncHedger.first``: no ``__init__``).
    call: HedgedCall | None = None  # given (a dressed first attempt), or made when due
    first: Slot | None = None  # the first attempt, once the call has one
    sent: float | None = None  # when the first attempt left the client's pool
    delay = 0.0  # the hedging delay, once it is known
    armed = False  # the hedging delay runs (``AsyncHedger.arm``)
    due = 0.0  # ... until then, on the event loop's clock
    runner: asyncio.Task[Ended] | None = None  # the rest of the try, once due
    send: Callable[[tuple[Slot, Any]], None] | None = None  # the runner's inbox
    inside = False  # the caller is waiting for the first attempt
    interrupted = False  # ... and the runner cancelled that wait

    hedger: AsyncHedger
    transport: Any
    request: Request
    sending: Request  # what the first attempt sends
    closes: int
    stream: object
    loop: asyncio.AbstractEventLoop
    caller: asyncio.Task[Any]
    context: contextvars.Context  # the caller's: a runner starts in it

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
                GroupedTry(self.hedger, call, self.transport, self).run())

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
            on_the_wire(call, first, hedger.clock, self._sent_report)
        else:
            now = hedger.clock()
            call.sent(first, now)
            self.on_the_wire(now)

    def _sent_report(self, item: tuple[Slot, Any]) -> None:
        self.on_the_wire(cast(float, item[0].sent))

    async def stopped(self, exc: BaseException) -> _Race:
        """The caller's wait for the first attempt ended by ``exc``, a cancellation or an
        interrupt: the runner's outcome when it cancelled that wait (another attempt won:
        the race itself, :meth:`outcome`), else ``exc`` raised once the runner is
        stopped."""
        self._lower_bound()
        if self.interrupted and isinstance(exc, asyncio.CancelledError):
            self._ended = await self._taken_back(exc)
            return self
        await self._stop()  # the caller's own cancellation (or an interrupt)
        call = self.call
        if call is not None and self.first is not None:
            call.abandon()
        raise exc

    async def settle(self, result: Response | BaseException) -> Ended | BaseException:
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
                    await close_all([cast(Response, result)], hedger.flavour, hedger.aclose)
                return ended(verdict, cast(Exception, result), wait)
            except Exception as exc:
                if exc is not result and not isinstance(result, BaseException):
                    await close_all([result], hedger.flavour, hedger.aclose)  # retry_if raised
                return exc
        if self.send is None:  # the runner has not started: the try is the first's
            runner.cancel()
            await self._reap(runner)
            self.runner = None
            return await self.settle(result)
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
            await close_all([answer], hedger.flavour, hedger.aclose)
        if pending:
            await self._reap(runner)
            cast(HedgedCall, self.call).abandon()
            raise asyncio.CancelledError
        try:
            outcome = await runner
        except Exception as exc:
            return exc
        try:  # an anyio scope of the caller's cancelled meanwhile (held off by a shield)
            await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            if outcome[0] is not None:
                await close_all([outcome[0]], hedger.flavour, hedger.aclose)
            raise
        return outcome

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
            await close_all([answer], hedger.flavour, hedger.aclose)


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



