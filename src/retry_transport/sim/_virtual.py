"""Running a coroutine in virtual time: trio with a ``MockClock`` that jumps, or an asyncio
event loop whose clock jumps the same way (:func:`run_jumping`: about a third of the CPU
time of a trio sleep under ``MockClock`` per sleep)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import selectors
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, TypeVar

import anyio
import httpx
import trio
import trio.testing

from retry_transport import testing as _testing

__all__ = ["EPSILON", "frozen_heap", "quiet_transport_log", "run_jumping", "run_virtual"]

T = TypeVar("T")

#: Two virtual times closer than this are the same instant. Virtual time is a float that
#: the clock advances by differences of deadlines, so it drifts by a few ulps from the sums
#: a model writes down (0.1 + 0.1 + ... is not 2.0): comparisons allow for that.
EPSILON: Final = 1e-9


def run_virtual(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` on trio under a ``MockClock(autojump_threshold=0)``.

    The clock jumps to the next deadline as soon as every task is blocked, so a run of
    seconds or minutes of virtual time takes only the CPU time its events need. anyio,
    which the transport sleeps and reads the clock with, finds trio running and uses it.
    """

    async def main() -> T:
        return await fn()

    _not_testing()
    with quiet_transport_log(), frozen_heap():
        return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _not_testing() -> None:
    if _testing.active is not None:
        raise RuntimeError(
            "the retry simulator cannot run inside retry_testing(): testing mode skips the "
            "waits the simulation measures"
        )


class _Jump(selectors.SelectSelector):
    """The selector of :class:`_JumpingLoop`: asked to wait for I/O until the next timer, it
    moves the virtual clock to that timer instead, at once (a simulation does no I/O)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:  # no timer, nothing ready: every task waits on something else
            raise RuntimeError("the simulation is deadlocked: no task can wake up")
        if timeout > 0:
            self.now += timeout
        return []


class _JumpingLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop on a virtual clock that jumps to the next timer whenever no
    task is ready: anyio (the transport's sleep and clock) finds asyncio running and reads
    this clock."""

    def __init__(self) -> None:
        self._jump = _Jump()
        super().__init__(self._jump)

    def time(self) -> float:
        return self._jump.now


class _Tasks:
    """A task group for :class:`_JumpingLoop`: its tasks are the loop's own, made at once
    (anyio's group makes each through its cancel scopes: a fifth of a run's CPU time); leaving
    it waits for them all, those they started included, and an error cancels the rest."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Future[Any]] = []

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        self._tasks.append(asyncio.ensure_future(fn(*args)))

    async def __aenter__(self) -> _Tasks:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        try:
            if kind is None:
                while self._tasks:
                    tasks, self._tasks = self._tasks, []
                    await asyncio.gather(*tasks)
        finally:
            for task in self._tasks:
                task.cancel()


#: The running simulation's clock, waits and task groups, for the scenarios' own code:
#: anyio's (which finds the running library on every call), or while :func:`run_jumping`
#: runs, its loop's own, which skip that look-up (together with :class:`_Tasks`, a third of
#: a run's CPU time).
now: Callable[[], float] = anyio.current_time
sleep: Callable[[float], Awaitable[None]] = anyio.sleep
sleep_until: Callable[[float], Awaitable[None]] = anyio.sleep_until
task_group: Callable[[], Any] = anyio.create_task_group

#: Requests by the URL object they were built for (kept here with them), built once:
#: :func:`get` copies them. By identity: hashing an ``httpx.URL`` builds its string, and
#: comparing two equal ones (several scenarios' URLs are equal) builds both.
_GETS: dict[int, tuple[httpx.URL, httpx.Request]] = {}


def get(url: httpx.URL, **extensions: Any) -> httpx.Request:
    """``httpx.Request("GET", url, extensions=extensions)``, as an ``httpx.AsyncClient``
    builds it for a GET, made quickly: a copy of one built per URL, sharing its headers (the
    transports of a simulation add none) and its empty body, with extensions of its own."""
    entry = _GETS.get(id(url))
    if entry is None:  # (an id is not reused while its URL is kept here)
        entry = _GETS[id(url)] = (url, httpx.Request("GET", url))
    built = entry[1]
    request: httpx.Request = object.__new__(httpx.Request)
    request.__dict__.update(built.__dict__)
    request.extensions = extensions
    return request


def run_jumping(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` on :class:`_JumpingLoop`, as :func:`run_virtual` runs it on trio."""
    global now, sleep, sleep_until, task_group
    _not_testing()
    loop = _JumpingLoop()
    clock = loop.time

    async def until(deadline: float) -> None:
        await asyncio.sleep(max(deadline - clock(), 0.0))

    outside = now, sleep, sleep_until, task_group  # anyio's
    try:
        now, sleep, sleep_until, task_group = clock, asyncio.sleep, until, _Tasks
        with quiet_transport_log(), frozen_heap():
            return loop.run_until_complete(fn())
    finally:
        now, sleep, sleep_until, task_group = outside
        loop.close()


@contextlib.contextmanager
def quiet_transport_log() -> Iterator[None]:
    """Silence the ``retry_transport`` logger while simulated clients retry.

    A storm makes thousands of retries and give-ups, each logged at INFO or ERROR: an
    application that shows those levels would print them all, and formatting them would
    slow the simulation down. The level is restored afterwards.
    """
    logger = logging.getLogger("retry_transport")
    previous = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(previous)


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the garbage collector off the objects that exist before a run, during it.

    A run allocates many short-lived objects, so the collector runs often, and each of its
    full passes would walk every object of the process (all the imported modules, a test
    session's whole heap), few of which become garbage meanwhile. ``gc.freeze()`` sets them
    aside and ``gc.unfreeze()`` puts them back afterwards (both take constant time), where
    any of them that did become garbage is collected as usual. Nothing is done if something
    else has frozen objects already. Measured: 7-10% of a storm run's time.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
