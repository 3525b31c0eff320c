"""Counting on the success path without a lock, and forgetting old entries in amortised O(1):
the package's two fast-path tricks, stated once and used by the breaker, the budget, the
throttle, the latency table, the controller, the observer and the stores.

**Counting without a lock.** While a GIL serialises bytecode, ``next()`` of an
``itertools.count`` is one C call that no other thread interrupts, so an increment is never
lost (``x += 1`` is three bytecodes, and whether a thread may switch between them is up to
the interpreter's version). So a count that a success path adds to is an ``itertools.count``
called, and its owner reads it under its own lock by advancing it too: the value drawn, minus
the draws the reads made. :class:`Tally` is such a count (``next()`` on the hot path,
``take()`` under the lock: what was added since the last take); the latency table keeps one
per histogram bucket, with the reads made so far. An interpreter without a GIL
(:data:`LOCK_FREE` false) takes the owner's lock on every count instead, and :func:`counter`
gives it a counter that locks.

**Forgetting in amortised O(1).** A table keyed by origin looks for entries to forget when it
holds :data:`PRUNE_AT` of them, and next when it holds twice what remained
(:func:`next_prune_at`): each look walks the table once, paid for by the entries added since
the last one.
"""

from __future__ import annotations

import itertools
import sysconfig
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from .fork import track

__all__ = ["LOCK_FREE", "PRUNE_AT", "Tally", "counter", "next_prune_at"]

#: Whether ``next()`` of an ``itertools.count`` is atomic: a GIL serialises it.
LOCK_FREE: Final = not sysconfig.get_config_var("Py_GIL_DISABLED")

#: Entries a table keeps before it first looks for some to forget.
PRUNE_AT: Final = 1024


if TYPE_CHECKING:
    _Count = itertools.count[int]
else:  # not subscriptable at run time
    _Count = itertools.count


def next_prune_at(kept: int) -> int:
    """When a table that kept ``kept`` entries after a look looks again."""
    return max(PRUNE_AT, 2 * kept)


class Tally(_Count):
    """A count added to without a lock (``next(tally)``: one C call) and read by its owner
    under the owner's lock (:meth:`take`: how much was added since the last take)."""

    __slots__ = ("_mark",)

    def __init__(self) -> None:
        self._mark = -1  # the number the last take drew

    def take(self) -> int:
        """What was added since the last take (call it under the owner's lock)."""
        mark = next(self)
        added = mark - self._mark - 1
        self._mark = mark
        return added


class _LockedCount(Iterator[int]):
    """``itertools.count`` with a lock, for interpreters without a GIL to make it atomic."""

    def __init__(self, start: int) -> None:
        self._value = start
        self._lock = threading.Lock()
        track(self, "_lock")

    def __iter__(self) -> _LockedCount:
        return self

    def __next__(self) -> int:
        with self._lock:
            value = self._value
            self._value += 1
        return value


def counter(start: int = 0) -> Iterator[int]:
    """Numbers from ``start`` up, one per ``next()``, safe from any number of threads."""
    return itertools.count(start) if LOCK_FREE else _LockedCount(start)
