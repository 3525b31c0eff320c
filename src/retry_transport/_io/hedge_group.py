"""An async hedged try in a task group: each attempt a task of its own, the outcomes read
in the order they came (:class:`GroupedTry`). Trio runs every hedged try so, and asyncio the
rest of one whose first attempt was sent in the caller's task once a hedge is due
(``hedge_async``). An attempt that answers after the try is over has its response closed
after the task group.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, cast

import anyio

from .._base.flavour import Flavour, Response
from .._call.hedged_call import HedgedCall, Slot
from .hedge_shared import Ended, ended

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = ["SENT", "GroupedTry", "Hedger", "Race", "close_all", "on_the_wire"]


class Hedger(Protocol):
    """What a :class:`GroupedTry` reads of its transport's hedger (``AsyncHedger``)."""

    flavour: Flavour
    record: Callable[[str, float, float], None]
    clock: Callable[[], float]
    aclose: Callable[[Response, Flavour], Awaitable[None]]
    pooled: bool


class Race(Protocol):
    """What a :class:`GroupedTry` reads of the race whose first attempt it took over
    (``hedge_async._Race``)."""

    first: Slot | None
    send: Callable[[tuple[Slot, Any]], None] | None

    def interrupt(self) -> None: ...


async def close_all(responses: list[Response], flavour: Flavour,
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


#: What an async attempt's task reports when it leaves the client's own pool.
SENT: Final = object()


def on_the_wire(call: HedgedCall, slot: Slot, clock: Callable[[], float],
                 report: Callable[[tuple[Slot, Any]], None]) -> None:
    """Have ``slot`` tell ``call`` and ``report`` when it leaves the client's own pool for
    the wire: the inner transport's first trace event (httpcore sends none while a request
    waits for a connection); then the caller's own trace callback, if any, as before."""
    extensions = slot.request.extensions  # the slot's own copy (``RetryCall._label_attempt``)
    theirs = extensions.get("trace")

    async def trace(name: str, info: dict[str, Any]) -> None:
        if slot.sent is None:
            call.sent(slot, clock())
            report((slot, SENT))
        if theirs is not None:
            await theirs(name, info)

    extensions["trace"] = trace


class GroupedTry:
    """A hedged try in a task group: each attempt a task of its own (:meth:`work`), the
    outcomes and the attempts' leaving the client's pool reported on :attr:`send`, read by
    :meth:`run` in the order they came.

    With ``race``, the try's first attempt is already on the wire in the caller's task,
    which reports its outcome on ``race.send``: a hedge is due at once, and when another
    attempt wins while the caller still waits for the first, the caller is interrupted
    (``Race.interrupt``)."""

    __slots__ = ("aclose", "call", "clock", "first", "flavour", "origin", "pooled", "race",
                 "receive", "record", "send", "transport")

    def __init__(self, hedger: Hedger, call: HedgedCall, transport: Any,
                 race: Race | None = None) -> None:
        self.call = call
        self.transport = transport
        self.race = race
        self.flavour, self.record = hedger.flavour, hedger.record
        self.clock, self.aclose, self.pooled = hedger.clock, hedger.aclose, hedger.pooled
        self.origin = call.origin
        self.first = call.begin() if race is None else cast(Slot, race.first)  # a deadline

    async def work(self, slot: Slot) -> None:
        """Send attempt ``slot`` (a task of the group) and report its outcome."""
        call, clock, report = self.call, self.clock, self.send.send_nowait
        start = clock()
        if self.pooled:
            on_the_wire(call, slot, clock, report)
        else:
            call.sent(slot, start)
            report((slot, SENT))
        try:
            response = await self.transport.handle_async_request(slot.request)
        except Exception as exc:
            report((slot, exc))
            return
        except BaseException:  # cancelled: on the wire this long at least (a lower bound)
            sent = slot.sent
            if sent is not None:
                end = clock()
                self.record(self.origin, end - sent, end)
            raise
        end = clock()
        self.record(self.origin, end - (slot.sent if slot.sent is not None else start), end)
        report((slot, response))  # no checkpoint since the response came

    async def run(self) -> Ended:
        """Run the try (see the class): how it ended. Every answer handed to no one is
        closed, whatever ends the try. The reports' stream is made here, as the try starts
        (a task cancelled before it starts makes none, so leaves none open); a race hands
        its first attempt's outcome to it from then on."""
        self.send, self.receive = anyio.create_memory_object_stream[tuple[Slot, Any]](
            math.inf)
        if self.race is not None:
            self.race.send = self.send.send_nowait
        state = _Judged()
        try:
            async with anyio.create_task_group() as group:
                await self._judge(group, state)
        except BaseException:
            # Cancelled while the losers were being cancelled: the winner goes to no one.
            result = state.result
            if (result is not None and not isinstance(result, Exception)
                    and state.verdict != "more"):
                state.unread.append(result)
            raise
        finally:
            await self._close_unread(state.unread)
        if not state.ended:
            # The loop ended by an exception the task group absorbed: on asyncio, a native
            # cancellation (task.cancel(), asyncio.timeout) can be taken by anyio for the
            # group's own. It is the caller's: raise it again (asyncio.timeout turns it into
            # its TimeoutError). A retryable answer in hand was closed already.
            raise anyio.get_cancelled_exc_class()
        result = state.result
        if state.raised is not None:  # the answer in hand goes to no one
            if not isinstance(result, Exception) and result is not None:
                await close_all([result], self.flavour, self.aclose)
            raise state.raised
        if state.verdict == "retry" and not isinstance(result, Exception):
            await close_all([cast(Response, result)], self.flavour, self.aclose)
        return ended(state.verdict, cast("Response | Exception", result), state.wait)

    async def _judge(self, group: TaskGroup, state: _Judged) -> None:
        """Start the attempts in ``group`` and judge each outcome as it comes, starting a
        hedge whenever its delay is over first, until the call's verdict ends the try (or
        the policy's ``retry_if`` raised: kept in ``state``, raised after the group, since
        inside it trio would hand it over in an exception group)."""
        call, race, receive = self.call, self.race, self.receive
        first = self.first
        next_at: float | None = None
        if race is None:
            group.start_soon(self.work, first)
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
                        group.start_soon(self.work, hedge)
                        latest = hedge
                    else:
                        next_at = anyio.current_time() + call.delay
                    continue
            else:
                item = await receive.receive()
            slot, outcome = item
            if outcome is SENT:  # on the wire: a hedge's delay runs from now
                if slot is latest:
                    next_at = anyio.current_time() + call.delay
                continue
            state.result = outcome
            try:
                state.verdict, state.wait = call.done(slot, outcome)
            except Exception as exc:  # the policy's retry_if raised: raised after the group
                state.raised = exc
                group.cancel_scope.cancel()
                state.ended = True
                return
            if state.verdict == "more":
                if not isinstance(outcome, Exception):
                    await self.aclose(outcome, self.flavour)  # its connection goes back
                hedge = call.hedge()
                if hedge is not None:
                    group.start_soon(self.work, hedge)
                    latest, next_at = hedge, None
                continue
            group.cancel_scope.cancel()  # the others are not needed any more
            if race is not None and slot is not first:
                race.interrupt()  # the first, if still awaited in the caller's task
            state.ended = True
            return

    async def _close_unread(self, unread: list[Response]) -> None:
        """The try is over: the answers that came in unread are closed with ``unread``, and
        the reports' stream too (before any await: a native cancellation may interrupt
        one)."""
        receive = self.receive
        while True:
            try:
                _, outcome = receive.receive_nowait()
            except anyio.WouldBlock:
                break
            if outcome is not SENT and not isinstance(outcome, Exception):
                unread.append(outcome)
        self.send.close()
        receive.close()
        if unread:
            await close_all(unread, self.flavour, self.aclose)


class _Judged:
    """Where a :class:`GroupedTry` stands: the last outcome judged and its verdict, whether
    a verdict ended the try (else an exception did), what the call raised when asked, and
    the answers handed to no one (closed whatever happens)."""

    __slots__ = ("ended", "raised", "result", "unread", "verdict", "wait")

    def __init__(self) -> None:
        self.verdict: str = "stop"
        self.result: Response | Exception | None = None
        self.wait: float | None = None
        self.ended = False
        self.raised: Exception | None = None
        self.unread: list[Response] = []
