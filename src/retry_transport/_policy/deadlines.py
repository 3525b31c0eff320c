"""The ambient deadline: a time limit for every request made inside a ``with`` block.

``deadline(seconds)`` sets it in a :mod:`contextvars` variable, so it holds in the thread or
task that entered the block and in every task (asyncio, trio) and worker thread
(``anyio.to_thread.run_sync``, ``asyncio.to_thread``) started inside it, which copy the
context. A thread started with ``threading.Thread`` does not copy it and runs without one.

Scopes nest the way cancel scopes do: an inner scope can only shorten the time of the ones
around it. Each scope measures its time with its own clock, so the time left is the least of
each scope's end minus its clock's reading. The retry transports read :func:`current` when a
request starts, and ask the scope for the time left whenever they decide (``_core``).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Final

from .._base.validate import MAX_SECONDS, is_number, is_real

__all__ = ["Scope", "current", "deadline", "fresh", "time_left"]


class Scope:
    """One scope in force: its end on its clock, the scopes around it on other clocks
    (``outer``), and what was in force before it was entered (``previous``)."""

    __slots__ = ("clock", "end", "outer", "previous")

    end: float
    clock: Callable[[], float]
    outer: Scope | None
    previous: Scope | None

    def __init__(self, end: float, clock: Callable[[], float], outer: Scope | None) -> None:
        self.previous = outer
        if outer is not None and outer.clock is clock:  # one clock: keep the earlier end
            end = min(end, outer.end)
            outer = outer.outer
        self.end = end
        self.clock = clock
        self.outer = outer

    def left(self) -> float:
        """Seconds left of the earliest end in force (negative once it has passed)."""
        left = self.end - self.clock()
        outer = self.outer
        while outer is not None:
            left = min(left, outer.end - outer.clock())
            outer = outer.outer
        return left


#: The innermost scope in force, or ``None``.
_SCOPE: Final[contextvars.ContextVar[Scope | None]] = contextvars.ContextVar(
    "retry_transport.deadline", default=None
)

#: The innermost scope in force in this context, or ``None`` (what a transport reads).
current: Final = _SCOPE.get


def time_left() -> float | None:
    """Seconds left of the ambient deadline (the earliest of the :class:`deadline` scopes in
    force), ``None`` outside every scope; never negative: 0.0 once it has passed."""
    scope = _SCOPE.get()
    if scope is None:
        return None
    return max(scope.left(), 0.0)


def _seconds(seconds: object) -> float:
    if not is_real(seconds):
        raise TypeError(f"seconds must be a number (an int or a float), got {seconds!r} "
                        f"(a {type(seconds).__name__})")
    if not is_number(seconds) or not 0 < seconds <= MAX_SECONDS:
        raise ValueError(
            f"seconds must be a finite number > 0 and at most {MAX_SECONDS:g}, got {seconds!r}"
        )
    return float(seconds)


class deadline:  # a context manager named as a function, like contextlib's
    """A deadline for every request any retry transport makes inside the ``with`` block.

    ``with retry_transport.deadline(2.5): ...`` gives every request made in the block, in
    this thread or task and in the tasks and worker threads it starts, at most the time left
    of 2.5 seconds counted from entering the block: waits, attempts and their timeouts all
    end by then. Each request's deadline is the earlier of this and its policy's
    ``deadline``. Nested blocks only shorten it. Works in sync and async code alike (a plain
    ``with`` in both); the same object may be entered again, each time from the start, and
    by several threads or tasks at once (each block is its own scope, in its own context).

    Args:
        seconds: the time allowed, in seconds: a finite number > 0 (at most 1e9).
        clock: the monotonic clock it is measured with. Default ``time.monotonic``. A
            transport measures an ambient deadline with the scope's own clock, so a test in
            virtual time passes the same clock here and to the transport.

    Raises:
        ValueError: ``seconds`` is not a finite number > 0 (and at most 1e9).
        TypeError: ``seconds`` is no number (a string, ``None``, a bool), or ``clock`` is
            not callable.
    """

    __slots__ = ("clock", "seconds")

    def __init__(self, seconds: float, *, clock: Callable[[], float] | None = None) -> None:
        self.seconds = _seconds(seconds)
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning seconds, got {clock!r}")
        self.clock: Callable[[], float] = clock if clock is not None else time.monotonic

    def __enter__(self) -> deadline:
        clock = self.clock
        _SCOPE.set(Scope(clock() + self.seconds, clock, _SCOPE.get()))
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        # What this context had before its innermost block: the object keeps no state of a
        # block, so threads and tasks may use one object at once.
        scope = _SCOPE.get()
        _SCOPE.set(None if scope is None else scope.previous)

    def __repr__(self) -> str:
        return f"deadline({self.seconds!r})"


@contextmanager
def fresh(seconds: float | None, clock: Callable[[], float] | None = None) -> Iterator[None]:
    """A context with this deadline only (``None``: none at all), whatever scopes are in
    force around it: what a server-side middleware runs its application in."""
    clock = clock if clock is not None else time.monotonic
    scope = None if seconds is None else Scope(clock() + seconds, clock, None)
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)
