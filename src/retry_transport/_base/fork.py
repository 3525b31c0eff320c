"""A forked child starts with every lock of the package unlocked.

``os.fork()`` copies the memory of the whole process but only the thread that called it: a
lock another thread held at that instant stays held in the child, by a thread that does not
exist there, and the child's first request that needs it waits forever. So every object of
the package that owns a lock registers here with the names of its lock attributes
(:func:`track`), and one hook, run in each child right after a fork, puts a new lock in each
(then calls the object's ``_renew_locks()``, if it has more state to renew), as the
``logging`` module does for its handlers. Only then are the objects that run threads of their
own (a ``RedisStore``) restarted (``_restart_after_fork()``), so that no new thread can meet a
lock the hook has not renewed yet.

What the objects count (requests, tokens, a breaker's window) is kept as it was at the fork:
the child inherits the parent's view of the services it calls, as it inherits its memory. An
update that a lost thread left half done under its lock (a few integer fields) is as likely
as a fork between two statements of the parent, and harmless the same way.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Final

__all__ = ["module_locks", "renew", "track"]

#: Every live object of the package that owns a lock, with the names of its lock attributes.
_OWNERS: Final[weakref.WeakKeyDictionary[Any, tuple[str, ...]]] = weakref.WeakKeyDictionary()
#: The package's module-level locks, renewed by their modules' functions.
_MODULE_HOOKS: Final[list[Any]] = []


def track(owner: Any, *locks: str) -> None:
    """In a forked child, give ``owner`` a new ``threading.Lock`` in each attribute named in
    ``locks``, then call its ``_renew_locks()`` (if it has one: state beyond its locks) and
    its ``_restart_after_fork()`` (if it has one)."""
    _OWNERS[owner] = locks


def module_locks(renew: Any) -> None:
    """Call ``renew()`` in a forked child: it renews a module's own locks."""
    _MODULE_HOOKS.append(renew)


def renew(owner: Any) -> None:
    """Give ``owner`` new locks, as a forked child does (its ``_renew_locks()`` too)."""
    for name in _OWNERS.get(owner, ()):
        setattr(owner, name, threading.Lock())
    more = getattr(owner, "_renew_locks", None)
    if more is not None:
        more()


def _after_fork_in_child() -> None:
    owners = list(_OWNERS)
    for renew_module in _MODULE_HOOKS:
        renew_module()
    for owner in owners:
        renew(owner)
    for owner in owners:
        restart = getattr(owner, "_restart_after_fork", None)
        if restart is not None:
            restart()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
