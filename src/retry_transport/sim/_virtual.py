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


def run_jumping(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` on :class:`_JumpingLoop`, as :func:`run_virtual` runs it on trio."""
    _not_testing()
    loop = _JumpingLoop()
    try:
        with quiet_transport_log(), frozen_heap():
            return loop.run_until_complete(fn())
    finally:
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
