"""Stores: where transports and breakers share what they learn about servers.

A cooldown (an origin asked for quiet until some time) and a breaker transition (an origin's
breaker opened, or closed again) are facts about a server, not about one client. A store
carries them between the transports and breakers given it: :class:`MemoryStore` within one
process, :class:`~retry_transport.RedisStore` across a fleet of processes.

Events travel, decisions stay local: each transport keeps its own cooldown table and each
breaker its own state, checked as without a store; a store only adds the events others
saw. Times travel as wall-clock seconds (the store's ``wallclock``) and are turned into each
member's own clock when they arrive, so members with different clocks (a virtual one
included) can share one store.

Sans-I/O like the core: this module imports no HTTP library and does no I/O. It knows its
members only through two protocols, :class:`CooldownMember` (a transport's cooldown table)
and :class:`BreakerMember` (a circuit breaker), and imports neither.

The backend interface, for a store that talks to a server (``RedisStore``):

- :meth:`MemoryStore._share`: override it to send one of this process's events;
- :meth:`MemoryStore._learn`: call it (or extend it) for each event that arrives;
- :meth:`MemoryStore._elect` and :meth:`MemoryStore._release`: override them to elect
  half-open probes across processes.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Final, Literal, Protocol, TypeVar

from ._fork import track
from ._validate import check_callable, check_seconds

__all__ = ["BreakerMember", "CooldownMember", "EventKind", "MemoryStore"]

_Store = TypeVar("_Store", bound="MemoryStore")

#: An event's kind: a cooldown started, a breaker opened, a breaker closed.
EventKind = Literal["cooldown", "open", "close"]

#: Facts tables are pruned of what is over when they grow past this (then past twice what
#: was left), so pruning costs O(1) per event, amortised, and the tables stay bounded.
_PRUNE_AT: Final = 1024


class CooldownMember(Protocol):
    """What a store needs of a transport's cooldown table."""

    def receive_cooldown(self, origin: str, until: float, signal: str) -> None:
        """Another member started a cooldown of ``origin`` until ``until`` (wall clock)."""


class BreakerMember(Protocol):
    """What a store needs of a circuit breaker."""

    def _learn(self, origin: str, kind: Literal["open", "close"], remaining: float,
               break_for: float) -> None:
        """Another member opened (for ``remaining`` seconds, a break of ``break_for``) or
        closed ``origin``'s breaker."""


class MemoryStore:
    """Shares cooldowns and breaker transitions among the transports and breakers of one
    process.

    Give the same store to several transports (``store=``: they share cooldowns) and to
    their breakers (``CircuitBreaker(store=...)``: they share transitions and elect
    half-open probes together). :class:`~retry_transport.RedisStore` does the same across
    processes and machines.

    Args:
        probe_lease: seconds a half-open probe holds its slot at most: a probe that neither
            succeeds nor fails within it (its process died, say) lets another member
            probe. Default 30.0.
        wallclock: the POSIX time in seconds, in which times are shared. Default
            ``time.time``; the simulator passes its virtual clock.
    """

    def __init__(
        self, *, probe_lease: float = 30.0, wallclock: Callable[[], float] | None = None
    ) -> None:
        self.probe_lease = check_seconds("probe_lease", probe_lease)
        self.wallclock: Callable[[], float] = check_callable("wallclock", wallclock) or time.time
        self._lock = threading.Lock()
        track(self)  # a forked child gets a new lock
        self._tables: weakref.WeakSet[CooldownMember] = weakref.WeakSet()
        self._breakers: weakref.WeakSet[BreakerMember] = weakref.WeakSet()
        # What is known now, for members that join later: origin -> (until, signal) and
        # origin -> (until, break length), in wall-clock seconds.
        self._cooldowns: dict[str, tuple[float, str]] = {}
        self._opens: dict[str, tuple[float, float]] = {}
        self._prune_at = {"cooldowns": _PRUNE_AT, "opens": _PRUNE_AT}
        # Half-open probe slots held in this process: origin -> leases (wall-clock end,
        # the holder's id, its half-open period), oldest first.
        self._probes: dict[str, list[tuple[float, int, int]]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(probe_lease={self.probe_lease:g})"

    def _renew_locks(self) -> None:
        self._lock = threading.Lock()

    def close(self) -> None:
        """Nothing to stop for a memory store (a store that talks to a server stops)."""

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- members join ----------------------------------------------------------------------

    def _join_cooldowns(self, member: CooldownMember) -> None:
        """A transport's cooldown table joins: it is told the cooldowns running now."""
        with self._lock:
            self._tables.add(member)
            current = list(self._cooldowns.items())
        for origin, (until, signal) in current:
            member.receive_cooldown(origin, until, signal)

    def _join_breaker(self, breaker: BreakerMember) -> None:
        """A breaker joins: it learns the breaks running now."""
        with self._lock:
            self._breakers.add(breaker)
            current = list(self._opens.items())
        now = self.wallclock()
        for origin, (until, break_for) in current:
            if until > now:
                breaker._learn(origin, "open", until - now, break_for)

    # -- events of this process's members --------------------------------------------------

    def _cooldown(self, source: CooldownMember, origin: str, remaining: float, signal: str) -> None:
        """``source`` started (or lengthened) a cooldown of ``remaining`` seconds."""
        until = self.wallclock() + remaining
        if self._note_cooldown(origin, until, signal):
            self._tell_tables(origin, until, signal, source)
            self._share("cooldown", origin, until, signal)

    def _opened(self, source: BreakerMember, origin: str, remaining: float,
                break_for: float) -> None:
        """``source``'s breaker for ``origin`` opened for ``remaining`` seconds."""
        until = self.wallclock() + remaining
        with self._lock:
            self._opens[origin] = (until, break_for)
            self._prune("opens", until - remaining)
            others = [b for b in self._breakers if b is not source]
        for breaker in others:
            breaker._learn(origin, "open", remaining, break_for)
        self._share("open", origin, until, break_for)

    def _closed(self, source: BreakerMember, origin: str) -> None:
        """``source``'s breaker for ``origin`` closed (a probe succeeded)."""
        with self._lock:
            self._opens.pop(origin, None)
            others = [b for b in self._breakers if b is not source]
        for breaker in others:
            breaker._learn(origin, "close", 0.0, 0.0)
        self._share("close", origin, 0.0, 0.0)

    def _elect(self, origin: str, slots: int, holder: object, period: int) -> float | None:
        """May ``holder`` (a breaker) send a half-open probe to ``origin`` in its half-open
        ``period``? ``None``: yes, it holds one of the ``slots`` until :meth:`_release`
        (or the lease ends); else the seconds until a slot frees at the latest."""
        now = self.wallclock()
        with self._lock:
            leases = [lease for lease in self._probes.get(origin, ()) if lease[0] > now]
            if len(leases) < slots:
                leases.append((now + self.probe_lease, id(holder), period))
                self._probes[origin] = leases
                return None
            self._probes[origin] = leases
            return min(lease[0] for lease in leases) - now

    def _release(self, origin: str, holder: object, period: int) -> None:
        """A probe ``holder`` was elected for in ``period`` is over: its slot is free (a
        slot whose lease ended meanwhile may be someone else's now, and stays theirs)."""
        with self._lock:
            leases = self._probes.get(origin)
            if not leases:
                return
            mine = (id(holder), period)
            for index, lease in enumerate(leases):
                if lease[1:] == mine:
                    del leases[index]
                    break
            if not leases:
                del self._probes[origin]

    # -- for stores that talk to a server ------------------------------------------------

    def _share(self, kind: EventKind, origin: str, until: float, extra: str | float) -> None:
        """Send one of this process's events to the others (a memory store has none)."""

    def _learn(self, kind: EventKind, origin: str, until: float, extra: str | float) -> None:
        """An event from another process: tell every member. ``until`` is wall-clock;
        ``extra`` the cooldown's signal or the break's length."""
        if kind == "cooldown":
            signal = str(extra)
            if self._note_cooldown(origin, until, signal):
                self._tell_tables(origin, until, signal, None)
            return
        with self._lock:
            if kind == "open":
                known = self._opens.get(origin)
                if known is not None and known[0] >= until:
                    return
                self._opens[origin] = (until, float(extra))
                self._prune("opens", self.wallclock())
            else:
                self._opens.pop(origin, None)
            breakers = list(self._breakers)
        remaining = until - self.wallclock()
        for breaker in breakers:
            if kind == "close":
                breaker._learn(origin, "close", 0.0, 0.0)
            elif remaining > 0.0:
                breaker._learn(origin, "open", remaining, float(extra))

    # -- inside ------------------------------------------------------------------------------

    def _note_cooldown(self, origin: str, until: float, signal: str) -> bool:
        """Record a cooldown; False if one as long is already known (nothing to tell)."""
        with self._lock:
            known = self._cooldowns.get(origin)
            if known is not None and known[0] >= until:
                return False
            self._cooldowns[origin] = (until, signal)
            self._prune("cooldowns", self.wallclock())
            return True

    def _tell_tables(self, origin: str, until: float, signal: str,
                          source: CooldownMember | None) -> None:
        with self._lock:
            others = [c for c in self._tables if c is not source]
        for member in others:
            member.receive_cooldown(origin, until, signal)

    def _prune(self, name: Literal["cooldowns", "opens"], now: float) -> None:
        """Drop what is over once a table has grown (under the lock)."""
        table: dict[str, tuple[float, object]] = getattr(self, "_" + name)
        if len(table) < self._prune_at[name]:
            return
        for origin in [o for o, (until, _) in table.items() if until <= now]:
            del table[origin]
        self._prune_at[name] = max(_PRUNE_AT, 2 * len(table))
