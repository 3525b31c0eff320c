"""Counting on the success path without a lock, and forgetting old entries in amortised O(1):
the package's fast-path tricks, stated once and used by the breaker, the budget, the
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

**A bucket changed without a lock.** A count that one path adds to, clipped at a capacity,
and that another takes from only when it holds enough, is a :class:`Bucket`: a ``deque`` of
at most that many tokens. Putting tokens back is one ``extend`` (a full deque drops what does
not fit: the clip); taking ``n`` is one ``next()`` of a chain of C-level iterators that
looks for the ``n``-th token and then pops ``n``, with no Python code in between, so no
thread sees it half done. Every change is one such C call and the count is ``len()``: exact
at every read, with no lock and nothing to fold in.

**Forgetting in amortised O(1).** A table keyed by origin looks for entries to forget when it
holds :data:`PRUNE_AT` of them, and next when it holds twice what remained
(:func:`next_prune_at`): each look walks the table once, paid for by the entries added since
the last one.
"""

from __future__ import annotations

import functools
import itertools
import operator
import sysconfig
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

from .fork import track

__all__ = ["LOCK_FREE", "PRUNE_AT", "Bucket", "Tally", "counter", "next_prune_at"]

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


class Bucket:
    """Whole tokens, from none to ``capacity``, put back and taken without a lock (only while
    :data:`LOCK_FREE`): a ``deque`` of at most ``capacity`` tokens, full at first.

    Each change is one C call that no other thread interrupts: a :meth:`putter` extends the
    deque (what does not fit is dropped: the bucket clips at ``capacity``); a :meth:`taker`'s
    ``next()`` reads the deque's ``n``-th token (``IndexError``, nothing taken, if there is
    none) and then pops ``n``, through ``operator.getitem``, ``deque.pop`` and the iterators
    that call them, with no Python code in between (the one allocation, ``zip``'s tuple, is
    made before its items are drawn). So the changes happen one at a time, in some order,
    each as if it were alone, and ``len()`` reads the tokens exactly at any time.
    """

    __slots__ = ("_tokens",)

    def __init__(self, capacity: int) -> None:
        self._tokens: deque[None] = deque(itertools.repeat(None, capacity), maxlen=capacity)

    def __len__(self) -> int:
        return len(self._tokens)

    def putter(self, n: int) -> Callable[[], object]:
        """A callable that puts ``n`` tokens back, those that do not fit dropped (one C
        call: the quick path may count a success with it)."""
        if n == 1:
            return functools.partial(self._tokens.append, None)
        return functools.partial(self._tokens.extend, (None,) * n)

    def taker(self, n: int) -> Iterator[object]:
        """An endless iterator whose ``next()`` takes ``n`` tokens, or takes none and raises
        ``IndexError`` when the bucket holds fewer (one C call)."""
        if n == 0:
            return itertools.repeat(None)
        tokens = self._tokens
        enough = map(operator.getitem, itertools.repeat(tokens), itertools.repeat(n - 1))
        pop = itertools.starmap(tokens.pop, itertools.repeat(()))
        return zip(enough, *([pop] * n), strict=False)


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
