"""RedisStore: cooldowns and breaker transitions shared by every process that uses one Redis.

Events travel, decisions stay local. A cooldown or a breaker opening seen by one process is
written to Redis (a key whose TTL ends with the event) and published on one channel; a
background thread in every process subscribes and hands what arrives to its transports and
breakers, which keep checking their own tables as without a store. So the request path
never waits on Redis, with one exception: electing a half-open probe fleet-wide (a
set-if-absent on a key whose expiry bounds the probe), run by a second thread that the
request waits for at most the socket timeout in all, electing locally when it is late (a
slot won too late, or whose answer was lost, is given back).

Redis down, slow or gone: the thread notices (a command fails or times out), logs one
WARNING ("Lost the store", or "Cannot reach the store" while it never connected), reconnects
with backoff up to 2 s, then logs one INFO, reloads the current state and publishes again
this process's events that are not over.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import re
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any, Final, cast
from urllib.parse import unquote, urlsplit

from .._base.counting import counter
from .._base.validate import check_seconds
from . import memory as _store
from .memory import Election, EventKind, MemoryStore, Outbox, shown_url, well_formed

__all__ = ["RedisStore"]

logger: Final = logging.getLogger("retry_transport")

#: Seconds the thread waits for a message before it looks at what it has to send.
_POLL: Final = 0.05
#: Seconds between the thread's health checks of a quiet connection.
_PING_EVERY: Final = 1.0
#: Origins whose events may wait to be sent at once (see ``Outbox``); past it, events are
#: dropped and logged: a bound on memory, not a queue length a busy fleet reaches.
_PENDING_CAP: Final = 100_000
#: Events written per round trip to Redis (one pipeline), and messages delivered per turn of
#: the thread at most, so that neither sending nor receiving waits on the other for long.
_BATCH: Final = 256
#: Seconds between two log lines about dropped events, while drops go on.
_DROPS_LOGGED_EVERY: Final = 10.0

# KEYS[1] the event's key, KEYS[2] the channel; ARGV: end (wall-clock seconds), the value,
# TTL in ms, the message. Written only if the end moves later than the one stored. The TTL
# is counted from when Redis runs this, not from when it was sent: a slow trip does not
# make the key outlive its event (Redis's clock, NTP-synced like the hosts').
_LATER: Final = """
local old = redis.call('GET', KEYS[1])
if old then
  local ends = tonumber(string.match(old, '^(%S+)'))
  if ends and ends >= tonumber(ARGV[1]) then return 0 end
end
local now = redis.call('TIME')
local left = math.ceil((tonumber(ARGV[1]) - now[1] - now[2] / 1000000) * 1000)
local ttl = math.min(tonumber(ARGV[3]), left)
if ttl < 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('PUBLISH', KEYS[2], ARGV[4])
return 1
"""

# KEYS: the origin's probe slots; ARGV: this probe's token, the lease in ms. Returns the
# slot taken (1-based), or minus the milliseconds until the first slot frees.
_ELECT: Final = """
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) then return i end
end
local soonest = tonumber(ARGV[2])
for _, key in ipairs(KEYS) do
  local left = redis.call('PTTL', key)
  if left >= 0 and left < soonest then soonest = left end
end
return -math.max(soonest, 1)
"""

# KEYS[1] a probe slot; ARGV[1] the token that took it: freed only by its holder.
_RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _check_database(url: str) -> None:
    """A ``redis://`` or ``rediss://`` URL's path is its database number, or nothing:
    redis-py reads any other path (``/abc``) as database 0 without a word."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return  # redis-py says what is wrong with it
    if parts.scheme not in ("redis", "rediss"):
        return
    path = unquote(parts.path).strip("/")
    if path and not (path.isascii() and path.isdigit()):
        raise ValueError(
            "url must name its database by number (redis://host:6379/0), got "
            f"{shown_url(url)!r}"
        )


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


class RedisStore(MemoryStore):
    """Shares cooldowns and breaker transitions between processes through Redis.

    Give it to every transport (``store=``) and breaker (``CircuitBreaker(store=...)``) of
    every worker: when one worker is told ``429 Retry-After: 30``, the others hold their
    requests to that origin too; when one worker's breaker opens, the others' open; half-open
    probes are elected among them all. The retry budget stays per process.

    Create one store per process (after forking: a store's thread does not survive a
    fork) and close it when done; one store may serve any number of transports and
    breakers, sync and async, of both flavours.

    Args:
        url: the Redis server, as ``redis.Redis.from_url`` reads it
            (``redis://[:password@]host:port/db``, ``rediss://`` for TLS,
            ``unix:///path``). Default ``redis://localhost:6379/0``. Shown (log lines,
            ``repr()``, thread names, errors) with its credentials as ``***``: the
            userinfo's password, and any query parameter named like a secret.
        prefix: the start of every key and of the channel, so that several applications
            can share one Redis. Default ``"retry-transport:"``.
        socket_timeout: seconds any Redis command may take (connecting included) before
            the store treats Redis as lost. Default 0.25: the longest a request can wait on
            the store (only a request asking to be a half-open probe waits on it at all).
            The client library's own command retries are off.
        connect_timeout: seconds the constructor waits to subscribe and load the current
            cooldowns and breaks. Default 1.0. An unreachable Redis makes it return at once
            and connect later.
        probe_lease: seconds a half-open probe holds its fleet-wide slot at most. Default
            30.0.
        wallclock: the POSIX time in seconds, in which the fleet's times are written.
            Default ``time.time`` (hosts should keep their clocks in sync, as with NTP).

    Raises:
        ImportError: the ``redis`` package is missing (``pip install
            'retry-transport[redis]'``).
        TypeError: an argument of the wrong kind (the message names it): a ``url`` or a
            ``prefix`` that is no string, a number of seconds that is no number.
        ValueError: an invalid argument (the message names it), such as a ``redis://``
            URL whose database is not a number (``/abc``, which redis-py reads as 0).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "retry-transport:",
        socket_timeout: float = 0.25,
        connect_timeout: float = 1.0,
        probe_lease: float = 30.0,
        wallclock: Callable[[], float] | None = None,
    ) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ImportError(
                "RedisStore needs the redis package: pip install 'retry-transport[redis]'"
            ) from None
        for name, value in (("url", url), ("prefix", prefix)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {value!r} (a {type(value).__name__})")
        if not url.strip():
            raise ValueError(f"url must be a Redis URL, got {url!r}")
        _check_database(url)
        if not prefix:
            raise ValueError(f"prefix must be a non-empty string, got {prefix!r}")
        self.socket_timeout = check_seconds("socket_timeout", socket_timeout, high=3600)
        self.connect_timeout = check_seconds("connect_timeout", connect_timeout, high=3600)
        super().__init__(probe_lease=probe_lease, wallclock=wallclock)
        self.url = url
        self.prefix = prefix
        no_retry = Retry(NoBackoff(), 0)
        try:
            pool = cast(Any, redis.ConnectionPool).from_url(
                url,
                socket_timeout=self.socket_timeout,
                socket_connect_timeout=self.socket_timeout,
                retry=no_retry,
                decode_responses=True,
            )
        except ValueError as exc:
            shown = shown_url(url)
            # redis-py's reason, unless it quotes what the URL shown hides ("Port could not
            # be cast to integer value as 'pa'", of a password with a "/" in it).
            quoted = re.findall(r"'([^']*)'", str(exc))
            reason = "" if any(q not in shown for q in quoted) else f": {exc}"
            raise ValueError(f"url must be a Redis URL, got {shown!r}{reason}") from None
        # Any: redis 5 to 8 annotate the client differently (untyped calls in one release,
        # unions of awaitables in another), so mypy's verdict must not hang on the release.
        self._redis: Any = redis.Redis(connection_pool=pool, retry=no_retry)
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        # Redis answered, but refused (out of memory, a read-only replica): that write is
        # dropped, the connection kept.
        self._refusals: tuple[type[BaseException], ...] = (redis.ResponseError,)
        self._no_script: type[BaseException] = redis.exceptions.NoScriptError
        self._refusal_logged = False
        self._later = self._redis.register_script(_LATER)
        self._elect_script = self._redis.register_script(_ELECT)
        self._release_script = self._redis.register_script(_RELEASE)
        self._channel = prefix + "events"
        # This process's events that are not over, sent again after a reconnection.
        self._own_cooldowns: dict[str, tuple[float, str]] = {}
        self._own_opens: dict[str, tuple[float, float]] = {}
        # Probe slots this process holds in Redis: (origin, holder id, period) -> [(key,
        # token)].
        self._held: dict[tuple[str, int, int], list[tuple[str, str]]] = {}
        # Probe slots given back and not yet freed in Redis: (key, token), oldest first.
        self._releases: list[tuple[str, str]] = []
        self._start()  # a worker forked from this process restarts it (_fork)
        self._ready.wait(self.connect_timeout)

    def _start(self) -> None:
        self._sender = uuid.uuid4().hex
        self._tokens = counter(1)
        self._pending = Outbox(_PENDING_CAP)  # what is to be sent (under the lock)
        self._drops_logged_at = 0.0  # time.monotonic() of the last line about drops
        self.connected = False
        self._ever_connected = False  # since this start (a forked child starts again)
        self._lost_logged = False
        self._stop = threading.Event()
        self._ready = threading.Event()
        # Elections run on a thread of their own, so a request waits on an Event for at
        # most socket_timeout in all, whatever Redis does (a script to load again, a new
        # connection), and never calls the client library itself.
        self._elections: queue.SimpleQueue[Election | None] = queue.SimpleQueue()
        # The threads hold the store weakly, and only while they work on it: a store that
        # nobody references any more is collected, and then this stops its threads and
        # closes its connections (as close() does, without waiting for the threads).
        previous = getattr(self, "_finalizer", None)
        if previous is not None:  # a forked child: the parent's threads are not here
            previous.detach()
        self._finalizer = weakref.finalize(
            self, _store.shut_down, self._stop, self._elections, self._redis.connection_pool
        )
        self._finalizer.atexit = False  # at exit, daemon threads just end
        me = weakref.ref(self)
        self._thread = threading.Thread(
            target=_store.serve, args=(me, self._stop, self._ready),
            name=f"retry-transport store {shown_url(self.url)}", daemon=True,
        )
        self._elector = threading.Thread(
            target=_store.run_elections, args=(me, self._elections, self._stop),
            name=f"retry-transport elections {shown_url(self.url)}", daemon=True,
        )
        self._thread.start()
        self._elector.start()

    def _restart_after_fork(self) -> None:
        """In a child process (its locks already renewed): the parent's threads, probes and
        events are not ours; a store that was running starts afresh."""
        if self._stop.is_set():
            return
        self._held.clear()
        self._releases.clear()
        self._own_cooldowns.clear()
        self._own_opens.clear()
        self._start()

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"RedisStore({shown_url(self.url)!r}, prefix={self.prefix!r}, {state})"

    def close(self) -> None:
        """Stop the background threads (waiting for each at most ``4 * socket_timeout + 1``
        seconds) and close the connections. Members keep what they learned; nothing more is
        shared. Idempotent. A store dropped without it is closed when it is collected, its
        threads stopping on their own."""
        self.connected = False
        self._stop.set()
        self._elections.put(None)
        for thread in (self._thread, self._elector):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(self.socket_timeout * 4 + 1.0)
        self._finalizer()  # closes the connections, once

    # -- what the members' events become ------------------------------------------------

    def _share(self, kind: EventKind, origin: str, until: float, extra: str | float) -> None:
        if self._stop.is_set():
            return
        with self._lock:
            if kind == "cooldown":
                self._own_cooldowns[origin] = (until, str(extra))
            elif kind == "open":
                self._own_opens[origin] = (until, float(extra))
            else:
                self._own_opens.pop(origin, None)
            if self.connected:  # else sent when the connection is back
                self._pending.put(kind, origin, until, extra)

    def _send(self, events: list[tuple[EventKind, str, float, str | float]]) -> None:
        """Write and publish events, in one round trip (on the store's thread). A write
        Redis refuses is dropped (and logged once); a lost connection raises."""
        for attempt in range(2):
            pipe = self._redis.pipeline(transaction=False)
            for event in events:
                self._write(pipe, *event)
            results = pipe.execute(raise_on_error=False)
            errors = [r for r in results if isinstance(r, self._refusals)]
            if attempt == 0 and any(isinstance(e, self._no_script) for e in errors):
                continue  # the script cache was flushed meanwhile: it is loaded again
            for error in errors[:1]:
                self._refused(error)
            return

    def _write(self, pipe: Any, kind: EventKind, origin: str, until: float,
               extra: str | float) -> None:
        """Queue the commands of one event on ``pipe`` (nothing for one that is over)."""
        message = json.dumps(
            {"k": kind, "o": origin, "u": until, "x": extra, "f": self._sender},
            separators=(",", ":"),
        )
        if kind == "close":
            # Not a transaction: a Redis out of memory refuses every command queued in
            # one, and a read-only replica the DEL; the PUBLISH gets through all the same.
            pipe.delete(self._key("open", origin))
            pipe.publish(self._channel, message)
            return
        remaining = until - self.wallclock()
        if remaining <= 0:
            return
        value = f"{until!r} {extra}"
        self._later(
            keys=[self._key(kind, origin), self._channel],
            args=[repr(until), value, _ms(remaining), message],
            client=pipe,
        )

    def _report_drops(self) -> None:
        """One WARNING with the number of events dropped (past ``_PENDING_CAP``), when the
        thread has caught up, or every ``_DROPS_LOGGED_EVERY`` seconds while drops go on."""
        pending = self._pending
        now = time.monotonic()
        if not pending.dropped or pending and now < self._drops_logged_at + _DROPS_LOGGED_EVERY:
            return
        with self._lock:
            dropped, pending.dropped = pending.dropped, 0
        self._drops_logged_at = now
        logger.warning(
            "The store at %s dropped %d events: more than %d origins' events waited to be "
            "sent; the others may not learn of them (this process's cooldowns and breaks "
            "that are not over are sent again after a reconnection)",
            shown_url(self.url), dropped, _PENDING_CAP,
        )

    def _elect(self, origin: str, slots: int, holder: object, period: int) -> float | None:
        if not self.connected:
            return super()._elect(origin, slots, holder, period)  # each process its own
        token = f"{self._sender}:{next(self._tokens)}"
        keys = [self._key("probe", origin) + f":{n}" for n in range(1, slots + 1)]
        election = Election(keys, token)
        self._elections.put(election)
        answer = election.wait(self.socket_timeout)  # None: too late, the elector frees it
        if not isinstance(answer, int):
            if isinstance(answer, self._refusals):
                self._refused(answer)  # Redis answered: the connection is fine
            elif isinstance(answer, BaseException):
                self._trouble(answer)
            return super()._elect(origin, slots, holder, period)
        if answer < 0:
            return -answer / 1000
        with self._lock:
            self._held.setdefault((origin, id(holder), period), []).append(
                (keys[answer - 1], token)
            )
        return None

    def _run_election(self, election: Election) -> None:
        """One election (on the elector thread): answered or, when its request has stopped
        waiting, its slot (if it won one) given back."""
        answer: int | BaseException
        try:
            answer = int(self._elect_script(keys=election.keys,
                                            args=[election.token, _ms(self.probe_lease)]))
        except Exception as exc:  # anything: the request elects locally
            # Without its traceback, whose frames hold this store: the answer outlives
            # this call (in the election), and would keep the store alive until the next
            # garbage collection.
            answer = exc.with_traceback(None)
        if isinstance(answer, BaseException):
            # The script may have run and taken a slot whose answer was lost (a reply
            # after the timeout): free every slot this token could hold.
            lost = [(key, election.token) for key in election.keys]
        else:
            lost = []
        if not election.answer(answer) and isinstance(answer, int) and answer > 0:
            # Won for a request that stopped waiting: give it back.
            lost = [(election.keys[answer - 1], election.token)]
        if lost:
            with self._lock:
                self._releases.extend(lost)  # the store's thread sends them

    def _release(self, origin: str, holder: object, period: int) -> None:
        mine = (origin, id(holder), period)
        with self._lock:
            held = self._held.get(mine)
            slot = held.pop(0) if held else None
            if held is not None and not held:
                del self._held[mine]
        if slot is None:
            super()._release(origin, holder, period)  # elected locally, Redis was away
        else:
            # Sent by the store's thread now, or when the connection is back: freed only
            # if this token still holds the slot (its lease may be over, the slot someone
            # else's), so sending twice is harmless, and a blip does not leave the slot
            # taken for its lease.
            with self._lock:
                self._releases.append(slot)

    def _send_releases(self) -> None:
        """Free the probe slots given back (on the store's thread); one Redis refuses is
        dropped (its lease frees it)."""
        while True:
            with self._lock:
                if not self._releases:
                    return
                key, token = self._releases[0]
            try:
                self._release_script(keys=[key], args=[token])
            except self._refusals as exc:
                self._refused(exc)
            with self._lock:
                if self._releases and self._releases[0] == (key, token):
                    self._releases.pop(0)

    def _learn(self, kind: EventKind, origin: str, until: float, extra: str | float) -> None:
        if kind == "close":
            with self._lock:  # closed elsewhere: not this process's to publish again
                self._own_opens.pop(origin, None)
        super()._learn(kind, origin, until, extra)

    def _key(self, kind: str, origin: str) -> str:
        return f"{self.prefix}{kind}:{origin}"

    def _refused(self, exc: BaseException) -> None:
        """Redis answered a write with an error (out of memory under ``noeviction``, a
        read-only replica): the write is dropped, the connection kept. Logged once per
        store."""
        if not self._refusal_logged:
            self._refusal_logged = True
            logger.warning(
                "The store at %s refused a write (%s: %s): what this process learns may "
                "not reach the others; the store stays connected and goes on",
                shown_url(self.url), type(exc).__name__, exc,
            )

    def _trouble(self, exc: BaseException) -> None:
        """A command failed: Redis is lost until the thread reconnects."""
        if self.connected:
            self.connected = False
            self._lost(exc)

    def _lost(self, exc: BaseException) -> None:
        """Log, once until the connection is back, that Redis is lost (or, for a store that
        never connected, out of reach)."""
        if not self._lost_logged:
            self._lost_logged = True
            logger.warning(
                "%s at %s (%s): cooldowns and breaker transitions are not shared until it "
                "answers; requests go on with what this process knows",
                "Lost the store" if self._ever_connected else "Cannot reach the store",
                shown_url(self.url), type(exc).__name__,
            )

    # -- the thread (run by _store.serve) ------------------------------------------------

    def _session(self) -> Any:
        """A new subscription, for ``_connect`` and ``_turn``; its ``reset()`` ends it."""
        return self._redis.pubsub()

    def _guarded(self, step: Callable[[Any], None], pubsub: Any) -> bool:
        """Run one step of the store's thread (connecting, or a turn); False, the trouble
        logged and the store disconnected, if it failed."""
        try:
            step(pubsub)
        except self._errors as exc:
            self.connected = False
            self._lost(exc)
        except Exception:  # a defect: say so, keep the process's requests going
            self.connected = False
            logger.exception("The store's thread for %s failed", shown_url(self.url))
        else:
            return True
        return False

    def _connect(self, pubsub: Any) -> None:
        """Subscribe, then load what is current, then send this process's events again."""
        pubsub.subscribe(self._channel)
        # The confirmation: once it is in, nothing published from now on is missed.
        message = pubsub.get_message(timeout=self.socket_timeout)
        if message is None or message.get("type") != "subscribe":
            raise TimeoutError("no confirmation of the subscription")
        self._load("cooldown")
        self._load("open")
        with self._lock:
            self._pending.clear()
        # Connected from here: what members do from now on is queued; what they did
        # before is in the own tables, queued below (what is queued meanwhile is as new).
        self.connected = True
        self._send_releases()
        now = self.wallclock()
        with self._lock:
            for origin, (until, signal) in self._own_cooldowns.items():
                if until > now:
                    self._pending.put("cooldown", origin, until, signal)
            for origin, (until, break_for) in self._own_opens.items():
                if until > now and not self._pending.waits("open", origin):
                    self._pending.put("open", origin, until, break_for)
        if self._lost_logged:
            self._lost_logged = False
            shown = shown_url(self.url)
            logger.info("%s: sharing cooldowns and breaker transitions",
                        f"The store at {shown} is back" if self._ever_connected
                        else f"Reached the store at {shown}")
        self._ever_connected = True
        self._next_ping = time.monotonic() + _PING_EVERY

    def _load(self, kind: EventKind) -> None:
        start = self._key(kind, "")
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", start) + "*"
        keys = list(self._redis.scan_iter(match=pattern, count=1000))
        for batch in (keys[i:i + 500] for i in range(0, len(keys), 500)):
            for key, value in zip(batch, self._redis.mget(batch), strict=True):
                fields = value.split(" ", 1) if isinstance(value, str) else ()
                event = well_formed(kind, key[len(start):], *fields)
                if event is not None:
                    self._learn(*event)

    def _turn(self, pubsub: Any) -> None:
        """One turn of the store's thread, connected: send what the members did (a batch),
        deliver what the fleet did, check the connection when due."""
        clock = time.monotonic
        if not self.connected:  # a request's command failed
            raise TimeoutError("a command on the request path failed")
        if self._releases:
            self._send_releases()
        with self._lock:
            events = self._pending.take(_BATCH)
        if events:
            self._send(events)
        self._report_drops()
        # Wait for a message only when there is nothing more to send.
        timeout = 0.0 if self._pending else _POLL
        for _ in range(_BATCH):
            message = pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
            if message is None:
                break
            if message.get("type") == "message":
                self._receive(message.get("data"))
            timeout = 0.0
        if clock() >= self._next_ping:
            self._redis.ping()
            pubsub.ping()
            self._next_ping = clock() + _PING_EVERY
            self._expire_own()

    def _receive(self, data: object) -> None:
        """One message from the channel; anything malformed is ignored."""
        try:
            message = json.loads(data) if isinstance(data, (str, bytes)) else None
        except ValueError:
            message = None
        if not isinstance(message, dict) or message.get("f") == self._sender:
            return  # not ours to read, or this store's own (its members know it)
        kind, origin, until, extra = (message.get(k) for k in ("k", "o", "u", "x"))
        event = well_formed(kind, origin, until, extra)
        if event is not None:
            self._learn(*event)

    def _expire_own(self) -> None:
        now = self.wallclock()
        with self._lock:
            for table in (self._own_cooldowns, self._own_opens):
                for origin in [o for o, (until, _) in table.items() if until <= now]:
                    del table[origin]
