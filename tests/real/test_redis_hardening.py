"""RedisStore under conditions of its own: credentials in its URL, bursts of events, a
Redis that refuses writes, stores dropped without ``close()``, URLs it must refuse.

Against real ``redis-server`` processes on 127.0.0.1 (tests/real/redis_server.py) where the
behaviour needs one. The store is the same for both HTTP flavours, so these tests run once.
Every wait is bounded (``WAIT``), every loop ends by itself.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import retry_transport as rt
from tests.real.redis_server import RedisServer, free_port, redis_module

pytestmark = pytest.mark.real

#: Longest a test waits for something that should happen within a second (real seconds).
WAIT = 5.0
#: The secret of these tests' URLs: it must never be shown.
SECRET = "s3cr3t-Pa55"


def eventually(predicate: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.01)


def store_records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in list(caplog.records) if text in r.getMessage()]


def store_thread_names() -> list[str]:
    """The names of the stores' threads running now (both kinds are named after the URL)."""
    return [t.name for t in threading.enumerate()
            if t.name.startswith(("retry-transport store", "retry-transport elections"))]




# -- 1. credentials in the URL are never shown ------------------------------------------------

#: URLs with a credential in each place redis-py reads one, or a parameter named like one.
SECRET_URLS = [
    "redis://:{secret}@127.0.0.1:{port}/0",
    "redis://default:{secret}@127.0.0.1:{port}/0",
    "redis://127.0.0.1:{port}/0?password={secret}",
    "redis://127.0.0.1:{port}/0?username=default&password={secret}&db=0",
    "redis://127.0.0.1:{port}/0?PASSWORD={secret}",
    "redis://127.0.0.1:{port}/0?ssl_password={secret}",
    "redis://127.0.0.1:{port}/0?auth_token={secret}",
    "redis://127.0.0.1:{port}/0?api_key={secret}",
    "redis://127.0.0.1:{port}/0?client_secret={secret}",
    "redis://127.0.0.1:{port}/0?pwd={secret}",
    "redis://127.0.0.1:{port}/0?credentials={secret}",
    "redis://:7357?{secret}@127.0.0.1:{port}/0",  # an unescaped "?" in a password
]


def shown_by(store: Any, caplog: pytest.LogCaptureFixture) -> str:
    """Everything the store has shown: its repr, its threads' names, the log (with any
    traceback, as a handler formats it)."""
    return "\n".join([repr(store), *store_thread_names(), caplog.text])


@pytest.mark.parametrize("template", SECRET_URLS)
def test_a_url_is_shown_without_its_credentials(
    template: str, stores: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listens on the port: the store logs that it cannot reach the URL, and names
    its threads after it, and shows it in its repr, each time without the secret (a
    ``?password=`` was shown verbatim)."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    port = free_port()
    store = stores(template.format(secret=SECRET, port=port))
    eventually(lambda: [r for r in caplog.records if r.levelno >= logging.WARNING],
               "the store logged its trouble")
    shown = shown_by(store, caplog)
    assert f"127.0.0.1:{port}" in repr(store)
    assert len([n for n in store_thread_names() if str(port) in n]) == 2
    assert SECRET not in shown, shown
    assert "***" in repr(store)


@pytest.mark.parametrize("template", SECRET_URLS[:4])
def test_a_connected_store_never_shows_its_password(
    template: str, stores: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that wants a password, given in each way redis-py reads one: the store
    connects (so the password was read), loses Redis and gets it back, and has a write
    refused; none of what it logs or shows holds the password."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    redis = RedisServer(None, "--requirepass", SECRET).start()
    watcher = redis.client()
    try:
        store = stores(template.format(secret=SECRET, port=redis.port))
        assert store.connected
        redis.kill()
        eventually(lambda: store_records(caplog, "Lost the store"), "the loss logged")
        redis.start()
        eventually(lambda: store_records(caplog, "is back"), "the return logged", 8.0)
        watcher.config_set("maxmemory-policy", "noeviction")
        watcher.config_set("maxmemory", 1)
        breaker = rt.CircuitBreaker(store=store, min_requests=1, break_duration=30.0)
        breaker.record("http://refused.test:80", True)  # an opening Redis refuses to write
        eventually(lambda: store_records(caplog, "refused a write"), "the refusal logged")
        shown = shown_by(store, caplog)
        assert SECRET not in shown, shown
        assert len(store_records(caplog, f"127.0.0.1:{redis.port}")) >= 3
    finally:
        watcher.close()
        redis.stop()


@pytest.mark.parametrize("url", [
    f"redis://:{SECRET}@127.0.0.1:port/0",
    f"redis://127.0.0.1:notaport/0?password={SECRET}",
    f"redis://:{SECRET[:4]}/{SECRET[4:]}@127.0.0.1:6379/0",  # an unescaped "/"
    f"redis://:{SECRET[:4]}#{SECRET[4:]}@127.0.0.1:6379/0",  # an unescaped "#"
])
def test_an_invalid_url_is_refused_without_showing_its_password(url: str) -> None:
    redis_module()
    with pytest.raises(ValueError, match="url") as refused:
        rt.RedisStore(url)
    message = str(refused.value)
    assert SECRET[:4] not in message and SECRET[4:] not in message, message


# -- 2. a burst of events reaches Redis whole ---------------------------------------------

#: Origins of the burst: one cooldown and one opening each, 30,000 events (the send queue
#: held 10,000 events, and some 6,000 of each kind reached Redis).
BURST = 15_000
#: Longest the burst may take to reach another store, made and sent (real seconds; it takes
#: about 5 here).
BURST_WAIT = 30.0


def test_a_burst_of_events_reaches_redis_and_the_others_whole(
    redis_server: RedisServer, stores: Callable[..., Any], prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """15,000 origins each answer ``503 Retry-After: 30`` to one worker, as fast as it can
    send: each a cooldown and a breaker opening, 30,000 events in a couple of seconds. Every
    one is in Redis and known to another worker's store in the end, and nothing is logged
    as dropped."""
    caplog.set_level(logging.WARNING, logger="retry_transport._stores.redis")
    sender, receiver = stores(redis_server.url), stores(redis_server.url)
    assert sender.connected and receiver.connected
    breaker = rt.CircuitBreaker(store=sender, min_requests=1, break_duration=30.0)
    transport = rt.RetryTransport(
        httpx.MockTransport(lambda r: httpx.Response(503, headers={"Retry-After": "30"})),
        store=sender, breaker=breaker, max_attempts=1,
    )
    logger = logging.getLogger("retry_transport")
    level, logger.level = logger.level, logging.ERROR  # 15,000 openings are WARNINGs
    try:
        for n in range(BURST):
            transport.handle_request(httpx.Request("GET", f"http://origin-{n}.test/"))
    finally:
        logger.setLevel(level)
    watcher = redis_server.client()

    def known() -> tuple[int, int]:
        with receiver._lock:
            return len(receiver._cooldowns), len(receiver._opens)

    try:
        eventually(lambda: known() == (BURST, BURST), "every event reached the other store",
                   BURST_WAIT)
        keys = keys_of(watcher, prefix)
        assert len([k for k in keys if k.startswith(prefix + "cooldown:")]) == BURST
        assert len([k for k in keys if k.startswith(prefix + "open:")]) == BURST
    finally:
        watcher.close()
    assert store_records(caplog, "dropped") == []


def keys_of(redis: Any, prefix: str) -> list[str]:
    return list(redis.scan_iter(match=prefix + "*", count=10_000))


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], tuple[Any, Any]]:
    """Holds a store's thread at its next send until released: (holding, release)."""

    def hold(store: Any) -> tuple[Any, Any]:
        holding, release = threading.Event(), threading.Event()
        send = store._send

        def held_send(events: Any) -> None:
            if not release.is_set():
                holding.set()
                release.wait(WAIT * 2)
            send(events)

        monkeypatch.setattr(store, "_send", held_send)
        return holding, release

    return hold


def test_waiting_events_of_one_origin_become_its_latest(
    redis_server: RedisServer, stores: Callable[..., Any], prefix: str,
    held: Callable[[Any], tuple[Any, Any]],
) -> None:
    """While the thread is busy, one origin's events wait in one place each: two cooldowns
    become the later; an opening, a closing and an opening again become that last
    opening; an opening then a closing become the closing."""
    sender, receiver = stores(redis_server.url), stores(redis_server.url)
    holding, release = held(sender)
    first = "http://first.test:80"
    rt.CircuitBreaker(store=sender, min_requests=1).record(first, True)  # held at its send
    assert holding.wait(WAIT)
    again, shut = "http://again.test:80", "http://shut.test:80"
    watcher = redis_server.client()
    try:
        clock = [0.0]
        breaker = rt.CircuitBreaker(store=sender, min_requests=1, break_duration=20.0,
                                    clock=lambda: clock[0])

        def close(origin: str) -> None:
            """Let the break end, and a probe succeed."""
            clock[0] += 60.0
            refusal, probe, _ = breaker.admit(origin)
            assert refusal is None and probe
            breaker.record(origin, False, probe)
            assert breaker.state(origin) == "closed"

        breaker.record(again, True)
        close(again)
        breaker.record(again, True)  # opened again: this is what is sent
        breaker.record(shut, True)
        close(shut)  # closed: this is what is sent
        answers = iter([5, 10])
        cooler = rt.RetryTransport(
            httpx.MockTransport(lambda r: httpx.Response(
                429, headers={"Retry-After": str(next(answers))})),
            store=sender, max_attempts=1, sleep=lambda seconds: None,  # waits, not slept
        )
        for _ in range(2):  # the second waits out the first cooldown, and is told 10 s
            cooler.handle_request(httpx.Request("GET", "http://cool.test/"))
        cool = "http://cool.test:80"
        with sender._lock:
            waiting = dict(sender._pending)
        assert waiting[("breaker", again)][0] == "open"
        assert waiting[("breaker", shut)][0] == "close"
        assert waiting[("cooldown", cool)][1] > time.time() + 8
        assert len(waiting) == 3  # again, shut, cool: one place each (first is held)
        release.set()
        eventually(lambda: watcher.exists(f"{prefix}open:{again}"), "the last opening written")
        eventually(lambda: receiver._opens.get(again) is not None, "and received")
        eventually(lambda: cool in receiver._cooldowns, "the cooldown received")
        assert receiver._cooldowns[cool][0] > time.time() + 8  # the later end
        assert float(watcher.get(f"{prefix}cooldown:{cool}").split(" ")[0]) > time.time() + 8
        assert not watcher.exists(f"{prefix}open:{shut}")
        assert shut not in receiver._opens
    finally:
        release.set()
        watcher.close()


def test_events_dropped_past_the_cap_are_logged_once_with_their_count(
    redis_server: RedisServer, stores: Callable[..., Any], prefix: str,
    held: Callable[[Any], tuple[Any, Any]], monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The bound on waiting events (100,000 origins; 10 here) is reached while the thread
    is busy: what does not fit is dropped, and one WARNING says how many."""
    from retry_transport._stores import redis as _redis

    caplog.set_level(logging.WARNING, logger="retry_transport")
    monkeypatch.setattr(_redis, "_PENDING_CAP", 10)
    sender = stores(redis_server.url)
    holding, release = held(sender)
    breaker = rt.CircuitBreaker(store=sender, min_requests=1, break_duration=20.0)
    breaker.record("http://first.test:80", True)
    assert holding.wait(WAIT)
    for n in range(30):
        breaker.record(f"http://origin-{n}.test:80", True)
    release.set()
    watcher = redis_server.client()
    try:
        eventually(lambda: len(keys_of(watcher, prefix + "open:")) == 1 + 10, "the 10 sent")
        eventually(lambda: store_records(caplog, "dropped"), "the drops logged")
        dropped = store_records(caplog, "dropped")
        assert [r.levelno for r in dropped] == [logging.WARNING]
        assert "dropped 20 events" in dropped[0].getMessage()
    finally:
        watcher.close()


# -- 3. a Redis that refuses writes is not a lost Redis -----------------------------------

#: How long the refusing Redis is worked: some 20 half-open elections, each refused.
REFUSING_RUN = 1.5


def fill(watcher: Any) -> None:
    """Write to a Redis under ``maxmemory`` and ``noeviction`` until it refuses."""
    errors = redis_module().exceptions
    for n in range(200):
        try:
            watcher.set(f"filler:{n}", "x" * 100_000)
        except errors.OutOfMemoryError:
            return
    raise AssertionError("Redis never refused a write")


def test_a_redis_refusing_writes_is_not_a_lost_connection(
    stores: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis started with ``maxmemory 1mb`` and ``noeviction``, full: each half-open
    election (a SET in a script), cooldown and opening the store writes is refused with an
    OOM error. One WARNING says so and why; the store stays connected, never logs a loss or
    a return, never reconnects. (A refused election was taken for a lost connection: 65
    losses, 64 returns and 66 reconnections in 10 s.)"""
    caplog.set_level(logging.INFO, logger="retry_transport")
    redis = RedisServer(None, "--maxmemory", "1mb", "--maxmemory-policy", "noeviction").start()
    watcher = redis.client()
    try:
        fill(watcher)
        store = stores(redis.url)
        assert store.connected
        connections = int(watcher.info("stats")["total_connections_received"])
        breaker = rt.CircuitBreaker(store=store, min_requests=1, break_duration=0.05)

        down = iter(range(10**6))

        def answer(request: httpx.Request) -> httpx.Response:
            if request.url.host == "down.test":  # fails, then its probe succeeds: again
                return httpx.Response(503 if next(down) % 2 == 0 else 200)
            return httpx.Response(429, headers={"Retry-After": "1"})

        transport = rt.RetryTransport(httpx.MockTransport(answer), store=store,
                                      breaker=breaker, max_attempts=1)
        disconnected = sent = 0
        with httpx.Client(transport=transport) as client:
            end = time.monotonic() + REFUSING_RUN
            while time.monotonic() < end:
                sent += 1
                for url in ("http://down.test/", f"http://cool-{sent}.test/"):
                    try:
                        client.get(url)
                    except (rt.CircuitOpenError, rt.CooldownError):
                        pass
                disconnected += not store.connected
                time.sleep(0.02)
        probes = store_records(caplog, "sending a probe")
        assert len(probes) >= 5, "too few half-open elections to tell"
        assert disconnected == 0, f"disconnected at {disconnected} of {sent} looks"
        for text in ("Lost the store", "is back", "Cannot reach", "Reached the store"):
            assert store_records(caplog, text) == [], text
        refused = store_records(caplog, "refused a write")
        assert [r.levelno for r in refused] == [logging.WARNING]
        assert "OutOfMemoryError" in refused[0].getMessage()
        assert "maxmemory" in refused[0].getMessage()  # Redis's reason, told
        # The connections it had (the subscription, the commands, perhaps one more for an
        # election while the thread wrote): none was dropped and made again.
        assert int(watcher.info("stats")["total_connections_received"]) - connections <= 1
        assert store.connected
    finally:
        watcher.close()
        redis.stop()


# -- 4. a store dropped without close() is freed -------------------------------------------

#: Stores made and dropped (each had two threads and two connections, for good).
DROPPED = 40


def redis_clients(watcher: Any) -> int:
    return int(watcher.info("clients")["connected_clients"])


def test_stores_dropped_without_close_stop_their_threads_and_connections(
    own_redis_server: RedisServer, prefix: str
) -> None:
    """Stores made, used (a transport and a breaker on each, a cooldown and an opening
    shared) and dropped without ``close()``: once collected, their threads end and Redis
    sees their connections go, back to what it had before. (200 dropped stores left 400
    threads, 400 sockets and 400 Redis clients.) Plus one whose Redis is out of reach."""
    redis_module()
    watcher = own_redis_server.client()
    try:
        threads, clients = len(store_thread_names()), redis_clients(watcher)
        answer = httpx.Response(429, headers={"Retry-After": "5"})
        made: list[Any] = []  # all alive at once first, to count what they run
        for n in range(DROPPED):
            store = rt.RedisStore(own_redis_server.url, prefix=prefix)
            assert store.connected
            breaker = rt.CircuitBreaker(store=store, min_requests=1)
            breaker.record(f"http://down-{n}.test:80", True)
            transport = rt.RetryTransport(httpx.MockTransport(lambda r: answer),
                                          store=store, breaker=breaker, max_attempts=1)
            transport.handle_request(httpx.Request("GET", f"http://cool-{n}.test/"))
            made.append(transport)
        made.append(rt.RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix=prefix))
        assert len(store_thread_names()) == threads + 2 * (DROPPED + 1)
        assert redis_clients(watcher) >= clients + DROPPED
        del made, store, breaker, transport
        gc.collect()
        eventually(lambda: len(store_thread_names()) == threads, "the threads ended")
        eventually(lambda: redis_clients(watcher) == clients, "the connections closed")
    finally:
        watcher.close()


def test_a_store_in_use_is_not_collected(
    redis_server: RedisServer, stores: Callable[..., Any], prefix: str
) -> None:
    """Only a store nobody references stops: one reached only through a transport and a
    breaker keeps sharing after a collection."""
    receiver = stores(redis_server.url)
    answer = httpx.Response(429, headers={"Retry-After": "5"})
    breaker = rt.CircuitBreaker(store=rt.RedisStore(redis_server.url, prefix=prefix),
                                min_requests=1)
    transport = rt.RetryTransport(httpx.MockTransport(lambda r: answer), store=breaker.store,
                                  breaker=breaker, max_attempts=1)
    try:
        gc.collect()
        transport.handle_request(httpx.Request("GET", "http://kept.test/"))
        eventually(lambda: "http://kept.test:80" in receiver._cooldowns, "shared")
    finally:
        breaker.store.close()


# -- 5. what the store says of a Redis it never reached; databases by number ----------------


def test_a_store_that_never_connected_cannot_reach_it_and_then_reaches_it(
    stores: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A store whose Redis is not up yet has lost nothing: it logs once that it cannot
    reach it (it said "Lost the store"), and once that it reached it; a loss after that is
    a loss."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    redis = RedisServer()  # its port, nobody listening yet
    try:
        store = stores(redis.url)
        assert not store.connected
        eventually(lambda: store_records(caplog, "Cannot reach the store at"), "logged")
        redis.start()
        eventually(lambda: store.connected, "connected", 8.0)
        eventually(lambda: store_records(caplog, "Reached the store at"), "logged")
        assert store_records(caplog, "Lost the store") == []
        assert store_records(caplog, "is back") == []
        redis.kill()
        eventually(lambda: store_records(caplog, "Lost the store at"), "the loss logged")
        cannot = store_records(caplog, "Cannot reach the store at")
        reached = store_records(caplog, "Reached the store at")
        assert [r.levelno for r in cannot] == [logging.WARNING]
        assert [r.levelno for r in reached] == [logging.INFO]
        assert f"redis://127.0.0.1:{redis.port}/0" in cannot[0].getMessage()
        assert [r.levelno for r in store_records(caplog, "Lost the store")] == [logging.WARNING]
    finally:
        redis.stop()


@pytest.mark.parametrize("path", ["/abc", "/db0", "/0/1", "/1.5", "/-1", "/ 1", "/%41"])
def test_a_database_that_is_not_a_number_is_refused(path: str) -> None:
    """redis-py reads such a path as database 0, without a word: the store refuses it
    before it starts anything."""
    redis_module()
    before = store_thread_names()
    with pytest.raises(ValueError, match="url") as refused:
        rt.RedisStore(f"redis://127.0.0.1:{free_port()}{path}?password={SECRET}")
    assert "database" in str(refused.value)
    assert SECRET not in str(refused.value)
    assert store_thread_names() == before


@pytest.mark.parametrize("path", ["", "/", "/0", "/15", "/%31"])
def test_a_database_by_number_or_none_is_taken(path: str) -> None:
    redis_module()
    rt.RedisStore(f"redis://127.0.0.1:{free_port()}{path}", connect_timeout=0.01).close()
