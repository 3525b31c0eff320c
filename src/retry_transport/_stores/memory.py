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

Sans-I/O like the core: this module imports no HTTP or client library and does no I/O of
its own (the threads it runs for a store that talks to a server call that store's methods).
It knows its members only through two protocols, :class:`CooldownMember` (a transport's
cooldown table) and :class:`BreakerMember` (a circuit breaker), and imports neither.

The backend interface, for a store that talks to a server (``RedisStore``):

- :meth:`MemoryStore._share`: override it to send one of this process's events;
- :meth:`MemoryStore._learn`: call it (or extend it) for each event that arrives;
- :meth:`MemoryStore._elect` and :meth:`MemoryStore._release`: override them to elect
  half-open probes across processes;
- what such a store is made of: :class:`Outbox`, what it has yet to send, however many
  events come at once; :func:`well_formed`, an event from another process, checked;
  :class:`Election`, a probe election handed to a thread of the store's, which the request
  waits for a bounded time; :func:`shown_url`, the server's URL without its credentials;
  :func:`serve`, :func:`run_elections` and :func:`shut_down`, its threads, which hold it
  only weakly between steps, and their end.
"""

from __future__ import annotations

import math
import queue
import random
import re
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final, Literal, Protocol, TypeVar
from urllib.parse import unquote_plus, urlsplit

from .._base.counting import PRUNE_AT, next_prune_at
from .._base.fork import track
from .._base.validate import check_callable, check_seconds

__all__ = [
    "BreakerMember", "CooldownMember", "Election", "Event", "EventKind", "MemoryStore",
    "Outbox", "run_elections", "serve", "shown_url", "shut_down", "well_formed",
]

_Store = TypeVar("_Store", bound="MemoryStore")

#: An event's kind: a cooldown started, a breaker opened, a breaker closed.
EventKind = Literal["cooldown", "open", "close"]



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
        track(self, "_lock")  # a forked child gets a new lock
        self._tables: weakref.WeakSet[CooldownMember] = weakref.WeakSet()
        self._breakers: weakref.WeakSet[BreakerMember] = weakref.WeakSet()
        # What is known now, for members that join later: origin -> (until, signal) and
        # origin -> (until, break length), in wall-clock seconds.
        self._cooldowns: dict[str, tuple[float, str]] = {}
        self._opens: dict[str, tuple[float, float]] = {}
        self._prune_at = {"cooldowns": PRUNE_AT, "opens": PRUNE_AT}
        # Half-open probe slots held in this process: origin -> leases (wall-clock end,
        # the holder's id, its half-open period), oldest first.
        self._probes: dict[str, list[tuple[float, int, int]]] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(probe_lease={self.probe_lease:g})"

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
        self._prune_at[name] = next_prune_at(len(table))


#: One event to send: its kind, its end (wall-clock seconds), the cooldown's signal or the
#: break's length.
Event = tuple[EventKind, str, float, "str | float"]


class Outbox(OrderedDict[tuple[str, str], tuple[EventKind, float, "str | float"]]):
    """The events a store that talks to a server has yet to send, oldest first, one per
    origin and kind: a cooldown, and a breaker's state (opened or closed). An event takes
    the place of the one waiting for its origin and kind: of two cooldowns or two openings
    the later end stays, of an opening and a closing the latest. So a burst of any size
    waits in as many places as it has origins; past ``cap`` places, an event for one more
    origin is dropped and counted in ``dropped``. Not locked: the store's lock guards it."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.dropped = 0

    def put(self, kind: EventKind, origin: str, until: float, extra: str | float) -> None:
        place = ("cooldown" if kind == "cooldown" else "breaker", origin)
        waiting = self.get(place)
        if waiting is None:
            if len(self) >= self.cap:
                self.dropped += 1
                return
        elif waiting[0] == kind != "close" and waiting[1] >= until:
            return  # an end as late waits already
        self[place] = (kind, until, extra)

    def waits(self, kind: EventKind, origin: str) -> bool:
        """Whether an event waits in the place of ``kind`` for ``origin``."""
        return ("cooldown" if kind == "cooldown" else "breaker", origin) in self

    def take(self, most: int) -> list[Event]:
        """The oldest ``most`` events at most, out of the queue."""
        taken = [self.popitem(last=False) for _ in range(min(most, len(self)))]
        return [(kind, origin, until, extra) for (_, origin), (kind, until, extra) in taken]


def well_formed(kind: object, origin: object, until: object = None,
                extra: object = None) -> Event | None:
    """An event from another process (its fields as they arrived), if it is well formed:
    a known kind, an origin, a finite end, a signal (cut to 64 characters) or a positive
    break length. Else None."""
    if not isinstance(origin, str) or not origin:
        return None
    if kind == "close":
        return "close", origin, 0.0, 0.0
    try:
        ends = float(until)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not math.isfinite(ends):
        return None
    if kind == "cooldown" and isinstance(extra, str) and extra:
        return "cooldown", origin, ends, extra[:64]
    if kind == "open":
        try:
            length = float(extra)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        if math.isfinite(length) and length > 0:
            return "open", origin, ends, length
    return None


class Election:
    """One probe election handed to the elector thread: its answer, or its abandonment by
    a request that stopped waiting, whichever comes first."""

    __slots__ = ("_done", "_lock", "_result", "_waiting", "keys", "token")

    def __init__(self, keys: list[str], token: str) -> None:
        self.keys, self.token = keys, token
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: int | BaseException | None = None
        self._waiting = True

    def wait(self, timeout: float) -> int | BaseException | None:
        """The answer, or ``None`` if it did not come within ``timeout`` seconds."""
        self._done.wait(timeout)
        with self._lock:
            self._waiting = False
            return self._result

    def answer(self, result: int | BaseException) -> bool:
        """Give the answer; False if nobody waits for it any more."""
        with self._lock:
            self._result = result
            waiting = self._waiting
        self._done.set()
        return waiting


def run_elections(store_ref: weakref.ref[Any], elections: queue.SimpleQueue[Election | None],
                  stop: threading.Event) -> None:
    """The elector thread of a store (its ``_run_election(election)`` answers one): one
    election at a time, until ``stop`` is set (and a ``None`` wakes it) or the store is
    gone. Between elections it holds only the weak ``store_ref``, so that a store nobody
    references can be collected."""
    while True:
        election = elections.get()
        if election is None or stop.is_set():
            return
        store = store_ref()
        if store is None:
            return
        store._run_election(election)
        store = None


#: Reconnection backoff of a store's thread (:func:`serve`): the first wait, and the cap
#: (seconds); each wait is jittered down to half of it.
BACKOFF_FIRST: Final = 0.1
BACKOFF_CAP: Final = 2.0


def serve(store_ref: weakref.ref[Any], stop: threading.Event, ready: threading.Event) -> None:
    """The thread of a store that talks to a server: open a session (``_session()``, a
    subscription say), connect it (``_connect(session)``), take turns (``_turn(session)``)
    until one fails, end the session (its ``reset()``), wait (``BACKOFF_FIRST`` doubling up
    to ``BACKOFF_CAP`` seconds) and start again, until ``stop`` is set or the store is gone.
    Each step runs as ``_guarded(step, session)``, which says whether it went well;
    ``ready`` is set after each connection attempt. The store is held only during a step,
    between steps only the weak ``store_ref``, so that a store nobody references can be
    collected (its finalizer then sets ``stop``)."""
    backoff = BACKOFF_FIRST
    rng = random.Random()
    while not stop.is_set():
        store = store_ref()
        if store is None:
            return
        session = store._session()
        on = store._guarded(store._connect, session)
        ready.set()
        if on:
            backoff = BACKOFF_FIRST
        while on and not stop.is_set():
            store = None  # between turns the store may be collected
            store = store_ref()
            on = store is not None and store._guarded(store._turn, session)
        store = None
        try:
            session.reset()
        except Exception:  # pragma: no cover - closing a dead connection
            pass
        if stop.wait(backoff * (0.5 + rng.random() / 2)):
            return
        backoff = min(backoff * 2, BACKOFF_CAP)


def shut_down(stop: threading.Event, elections: queue.SimpleQueue[Election | None],
              pool: Any) -> None:
    """Stop a store's threads and close its connections (``pool.disconnect()``): from its
    ``close()``, or once it is collected (from a ``weakref.finalize``, which holds nothing
    of the store)."""
    stop.set()
    elections.put(None)
    try:
        pool.disconnect()
    except Exception:  # pragma: no cover - closing a dead connection
        pass


#: A query parameter whose name holds one of these (in any case) is a credential: its value
#: is never shown (``password``, ``ssl_password``, ``auth_token``, ``api_key``, ...).
_SECRET_NAMES: Final = ("pass", "pwd", "secret", "token", "key", "auth", "credential")
_HIDDEN: Final = "***"


def shown_url(url: str) -> str:
    """A server's ``url`` as a store that talks to it may show it (logs, ``repr()``, thread
    names, error messages): the password of its userinfo and the value of every query
    parameter whose name suggests a secret (see ``_SECRET_NAMES``) replaced by ``***``, as
    is any fragment. An ``@`` past the host (a password with an unescaped ``/``, ``?`` or
    ``#``) hides all before it."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unparsable URL is not shown at all
        return _HIDDEN
    scheme, netloc, path, query = parts.scheme, parts.netloc, parts.path, parts.query
    start = f"{scheme}://" if "://" in url else f"{scheme}:"
    if "@" in path + query + parts.fragment:
        # Where the userinfo ends is not sure: hide everything up to the last "@", and the
        # values of what looks like a secret parameter after it.
        tail, hash_, _ = url.rpartition("@")[2].partition("#")
        shown = f"{start}{_HIDDEN}@" + "".join(map(_masked, re.split(r"([?&])", tail)))
        return shown + ("#" + _HIDDEN if hash_ else "")
    userinfo, at, hostport = netloc.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if at and colon:
        netloc = f"{user}:{_HIDDEN}@{hostport}"
    shown = f"{start}{netloc}{path}"
    if query:
        shown += "?" + "&".join(map(_masked, query.split("&")))
    if parts.fragment:
        shown += "#" + _HIDDEN
    return shown


def _masked(field: str) -> str:
    """One ``name=value`` of a query, its value hidden if its name suggests a secret."""
    name, equals, _ = field.partition("=")
    lowered = unquote_plus(name).lower()
    if equals and any(word in lowered for word in _SECRET_NAMES):
        return f"{name}={_HIDDEN}"
    return field
