"""Origin cooldowns: an origin that asked for quiet is left alone until then.

When an origin answers 429 or 503 with a usable ``Retry-After`` (or a response shows an
exhausted rate-limit quota), every request the transport makes to it waits until then
before its first attempt, instead of adding to the load the origin is shedding. Each held
request adds the policy's first jittered backoff step on top, so the herd does not come back
in one instant; a request that cannot wait that long is refused with ``CooldownError``.

:class:`CooldownTable` is a guard (see ``_guards``): it holds or refuses first attempts, and
learns from every attempt's outcome. With a store, it is one of the store's members: what
it starts is shared, and what others start arrives in its inbox.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from .._base.fork import track
from .._base.models import DEADLINE, RETRY_AFTER_TOO_LONG, StopReason
from .._policy.policy import compute_backoff
from .._policy.rules import Outcome
from .._wire.http import URL_PARTS
from .seam import FIRST, HEDGE, AttemptKind, CallView, Guard, Hold, Refusal

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._stores.memory import MemoryStore

__all__ = ["INBOX_LIMIT", "CooldownTable"]

#: The most cooldowns a table keeps in its inbox (received from the store, not yet applied
#: by a request of its own): an idle transport on a busy store costs bounded memory, and
#: its next request bounded time.
INBOX_LIMIT: Final = 4096


def _host(origin: str) -> str | None:
    """The host of an origin (``scheme://host:port``) as a URL's parsed tuple holds it:
    lower-case, IPv6 without brackets; ``None`` unless it is ASCII (an IDNA name would have
    to be encoded as the HTTP library does)."""
    rest = origin.partition("://")[2]
    host = rest.rpartition(":")[0]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.lower() if host.isascii() else None



class CooldownTable(Guard):
    """The origins one transport holds requests for, and until when (its clock's time)."""

    # No veto (a retry already waits at least the server's time) and no ticket.
    learns = True

    #: No cooldown and nothing in the inbox: a first attempt is let through at once. Set
    #: under ``_inbox_lock`` only, False after the change that makes it so.
    idle: bool

    def __init__(self, clock: Callable[[], float], store: MemoryStore | None) -> None:
        self.clock = clock
        # origin -> clock time until which it asked for quiet
        self.until: dict[str, float] = {}
        # origin -> the header that started its cooldown ("retry-after", a rate-limit reset)
        self.signals: dict[str, str] = {}
        # (until, origin), soonest first: expires cooldowns without scanning the table.
        self._expiry: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        # Cooldowns other members of the store started, in wall-clock time: origin ->
        # (until, signal), the latest per origin, so an idle transport's inbox stays as
        # small as the store's table. Filled by whichever thread delivers them, emptied by
        # the next request, which turns them into this table's clock (an event loop's).
        self.inbox: dict[str, tuple[float, str]] = {}
        self._inbox_lock = threading.Lock()
        # The hosts of the origins in the table, as the URLs' parsed tuples spell them
        # (lower-case, IDNA-encoded), each with its number of origins: a request to another
        # host is let through without working out its origin. ``_unsure`` counts origins
        # whose host could not be spelt so (not ASCII): while any, every request is looked at.
        self._hosts: dict[str, int] = {}
        self._unsure = 0
        track(self, "_lock", "_inbox_lock")  # a forked child gets new locks
        self.idle = True
        self.store = store
        if store is not None:
            store._join_cooldowns(self)

    # -- the guard -----------------------------------------------------------------------

    def admit(self, call: CallView, kind: AttemptKind, paid: object) -> object:
        """Before a first attempt: ``None`` (go), a :class:`Hold` (wait first), or a
        :class:`Refusal` (the origin's quiet outlasts what the request may wait). It takes
        no ticket: it learns from responses through :meth:`learn`."""
        if kind is not FIRST:
            if kind is HEDGE and self.until and self.left(call.origin, self.clock()) > 0.0:
                return Refusal(RETRY_AFTER_TOO_LONG, None, "no hedge: the origin asked for quiet")
            return None
        if self.inbox:
            self.take_inbox()
        if not self.until or not call.enabled:
            return None
        policy = call.policy
        if not policy.respect_retry_after:
            return None
        origin = call.origin
        remaining = self.left(origin, self.clock())
        if remaining <= 0.0:
            return None
        signal = self.signals.get(origin, "retry-after")
        limit = policy.max_retry_after
        if remaining > limit:
            return self._refusal(origin, remaining, signal, RETRY_AFTER_TOO_LONG,
                                 f"more than max_retry_after={limit:g} s")
        # The origin's time is the floor; each held request adds the policy's first
        # jittered backoff step on top, so that the requests it held do not all come back
        # in the same instant (the herd that jitter exists to break up).
        wait = remaining + compute_backoff(policy, 0, policy.base_delay, call.rng)
        left = call.time_left
        if left is not None and wait >= left:
            return self._refusal(origin, remaining, signal, DEADLINE,
                                 f"past the deadline ({left:.3f} s left)")
        return Hold(wait, signal, "cooldown")

    @staticmethod
    def _refusal(origin: str, remaining: float, signal: str, reason: StopReason,
                 why: str) -> Refusal:
        shown = "Retry-After" if signal == "retry-after" else signal
        return Refusal(
            reason, "cooldown",
            f"{origin} asked for quiet ({shown}) for {remaining:.3f} s more, {why}: not sent",
            origin=origin, remaining=remaining,
        )

    def idle_for(self, request: Request) -> bool:
        """Whether ``request``'s host has no cooldown: then it goes as if the table were
        idle. False when unsure (a cooldown in the inbox, a host not spelt in ASCII)."""
        if self.inbox:
            return False
        expiry = self._expiry
        if expiry and expiry[0][0] <= self.clock():  # the soonest is over: drop what is
            self._expire(self.clock())
        if self._unsure:
            return False
        parts = getattr(request.url, URL_PARTS, None)  # (scheme, userinfo, host, port, ...)
        return isinstance(parts, tuple) and parts[2] not in self._hosts

    def learn(self, call: CallView, outcome: Outcome) -> None:
        """An origin asking for quiet starts (or lengthens) its cooldown."""
        if outcome.quiet is not None and call.testing is None:
            # (time stands still in testing mode: no cooldown is started)
            self.start(call.origin, self.clock() + outcome.quiet, outcome.signal)


    # -- the table -------------------------------------------------------------------------

    def left(self, origin: str, now: float) -> float:
        """Seconds of quiet ``origin`` still asks for (0.0: none). O(log n) at worst."""
        expiry = self._expiry
        if expiry and expiry[0][0] <= now:
            self._expire(now)
        until = self.until.get(origin)
        if until is None or until <= now:
            return 0.0
        return until - now

    def _expire(self, now: float) -> None:
        """Drop the cooldowns that are over, soonest first, so that requests go back to the
        quick path once every cooldown is over and the table does not grow without bound.
        Each entry is pushed and popped once: no scan of the table."""
        with self._lock:
            expiry, table = self._expiry, self.until
            while expiry and expiry[0][0] <= now:
                until, origin = heapq.heappop(expiry)
                if table.get(origin) == until:
                    del table[origin]
                    self.signals.pop(origin, None)
                    self._count_host(origin, -1)
        if not self.until:
            self._reidle()

    def _reidle(self) -> None:
        with self._inbox_lock:
            self.idle = not self.until and not self.inbox

    def start(self, origin: str, until: float, signal: str | None = None, *,
              share: bool = True) -> None:
        """``origin`` asked for quiet until ``until`` (clock time), by the header ``signal``.
        With a store, a cooldown that ends later than the one known is shared (``share``)."""
        signal = signal or "retry-after"
        with self._lock:
            known = self.until.get(origin)
            if until <= (0.0 if known is None else known):
                return
            if known is None:
                self._count_host(origin, 1)
            self.until[origin] = until
            self.signals[origin] = signal
            # A later cooldown of the same origin leaves its old entry in the heap;
            # _expire skips it, as it no longer matches the table.
            heapq.heappush(self._expiry, (until, origin))
        if self.idle:
            with self._inbox_lock:
                self.idle = False
        if share and self.store is not None:
            self.store._cooldown(self, origin, until - self.clock(), signal)

    def _count_host(self, origin: str, change: int) -> None:
        """One origin more (``change`` 1) or less (-1) for its host (under ``_lock``)."""
        host = _host(origin)
        if host is None:
            self._unsure += change
            return
        count = self._hosts.get(host, 0) + change
        if count > 0:
            self._hosts[host] = count
        else:
            self._hosts.pop(host, None)

    # -- the store's member protocol -----------------------------------------------------------

    def receive_cooldown(self, origin: str, until: float, signal: str) -> None:
        """Another member of the store started a cooldown until ``until`` (wall-clock
        seconds): applied at this table's next request (any thread may call this).

        The inbox of a transport that sends nothing stays bounded: a cooldown already over
        is not kept, and past ``INBOX_LIMIT`` entries the ones that end soonest make room.
        """
        store = self.store
        wall = store.wallclock() if store is not None else None
        if wall is not None and until <= wall:
            return
        with self._inbox_lock:
            known = self.inbox.get(origin)
            if known is None or until > known[0]:
                if known is None and len(self.inbox) >= INBOX_LIMIT:
                    self._trim_inbox(wall)  # it may put a new dict in its place
                self.inbox[origin] = (until, signal)
                self.idle = False

    def _trim_inbox(self, wall: float | None) -> None:
        """Make room in a full inbox (under ``_inbox_lock``): drop what is over, then the
        cooldowns that end soonest, down to half the limit (so this runs once per
        ``INBOX_LIMIT / 2`` new origins at most)."""
        inbox = self.inbox
        if wall is not None:
            for origin in [o for o, (until, _) in inbox.items() if until <= wall]:
                del inbox[origin]
        if len(inbox) >= INBOX_LIMIT:
            keep = sorted(inbox.items(), key=lambda item: item[1][0])[-(INBOX_LIMIT // 2):]
            self.inbox = dict(keep)

    def take_inbox(self) -> None:
        """Apply the cooldowns received, as if this table had started them."""
        with self._inbox_lock:
            inbox, self.inbox = self.inbox, {}
        store = self.store
        if store is not None and inbox:
            wall, now = store.wallclock(), self.clock()
            for origin, (until, signal) in inbox.items():
                if until > wall:
                    self.start(origin, now + (until - wall), signal, share=False)
        if not self.until:
            self._reidle()
