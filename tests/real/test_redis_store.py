"""RedisStore against a real ``redis-server`` on 127.0.0.1 (and a hung one).

Each test plays a fleet of workers: every worker has a RedisStore of its own (as every
process of a fleet would), all on one Redis and one key prefix (fresh per test, so that
tests do not meet), and its own transports and breakers on that store. The APIs the workers
call are real HTTP servers on 127.0.0.1, one origin each.

What is proved:

- a cooldown (``429 Retry-After``) seen by one worker holds the others' requests to that
  origin, sync and async (asyncio, trio), and across real processes the server gets no
  request past the moment the fleet has been told;
- a breaker opening and closing in one worker opens and closes the others' (logged at INFO,
  told to their hooks with ``learned=True``), and a half-open origin gets exactly
  ``half_open_probes`` probes from the whole fleet;
- Redis killed and restarted: requests never fail because of it, one WARNING and one INFO
  per store, sharing resumes, and each store publishes again what is not over; a hung
  Redis (one that never answers, or one frozen mid-run) never holds a request longer than
  the socket timeout;
- a store that starts later loads what is current; every key expires with its event;
- ``import retry_transport`` needs no redis package; a store's thread stops with the store,
  and a client's close leaves the store it was given alone.

Waits are real (the store's thread and Redis are), but short: events travel in
milliseconds; the bounds here (``WAIT``) only tell "arrives" from "never arrives".
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import pytest

from tests.flavour import current, httpx, rt
from tests.real.clients import Waits, client_timeout
from tests.real.redis_server import (
    DelayingProxy,
    HungRedis,
    RedisServer,
    free_port,
)
from tests.real.servers import LocalHTTPServer

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

#: Longest a test waits for something that should happen in milliseconds (real seconds).
WAIT = 5.0
#: Longest any server or helper thread blocks.
BOUND = 10.0
#: The stores' socket timeout here is the default: the longest a request may wait on Redis.
SOCKET_TIMEOUT = 0.25
#: A generous bound for "did not wait on Redis more than the socket timeout" on a loaded
#: machine (a hang would be the 2 s client timeout, or far longer).
QUICK = 1.5


# -- an API server that records when each request arrived ----------------------------------


@dataclass(frozen=True)
class Answer:
    """One scripted answer: a status, an optional ``Retry-After`` (seconds), and how long
    the server holds the request before answering."""

    status: int = 200
    retry_after: int | None = None
    hold: float = 0.0


@dataclass(frozen=True)
class Arrival:
    path: str
    at: float  # time.monotonic() of this (the server's) process
    worker: str | None  # the X-Worker header


class _ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = BOUND
    server: ApiServer

    def do_GET(self) -> None:
        answer = self.server._arrived(self.path, self.headers.get("x-worker"))
        if answer.hold:
            self.server.stopping.wait(answer.hold)
        body = b"ok" if answer.status == 200 else b"no"
        # Stamped before it is written: the client may read a 429 before this thread runs
        # again, and its retry after Retry-After must not look early.
        sent = time.monotonic()
        self.send_response_only(answer.status)
        if answer.retry_after is not None:
            self.send_header("Retry-After", str(answer.retry_after))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if answer.status == 429:
            self.server._sent_429(sent)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ApiServer(LocalHTTPServer):
    """A threaded HTTP/1.1 server (one origin) whose answers are scripted per path, which
    records the arrival of every request and when each 429 was sent."""

    request_queue_size = 128

    def __init__(self) -> None:
        super().__init__(_ApiHandler)
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._plans: dict[str, tuple[tuple[Answer, ...], Answer]] = {}
        self._counts: dict[str, int] = {}
        self.arrivals: list[Arrival] = []
        self.sent_429s: list[float] = []

    def stop(self) -> None:
        self.stopping.set()  # the held requests answer first
        super().stop()

    def script(self, path: str, *answers: Answer, then: Answer = Answer()) -> str:
        with self._lock:
            self._plans[path] = (answers, then)
        return self.origin + path

    def count(self, path: str | None = None) -> int:
        with self._lock:
            return len([a for a in self.arrivals if path is None or a.path == path])

    def _arrived(self, path: str, worker: str | None) -> Answer:
        at = time.monotonic()
        with self._lock:
            self.arrivals.append(Arrival(path, at, worker))
            index = self._counts.get(path, 0)
            self._counts[path] = index + 1
            answers, then = self._plans.get(path, ((), Answer()))
        return answers[index] if index < len(answers) else then

    def _sent_429(self, at: float) -> None:
        with self._lock:
            self.sent_429s.append(at)


@pytest.fixture
def api() -> Iterator[Callable[[], ApiServer]]:
    """Starts API servers (each its own origin); all are stopped at the end."""
    servers: list[ApiServer] = []

    def start() -> ApiServer:
        server = ApiServer().start()
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


# -- stores -------------------------------------------------------------------------------


Stores = Callable[..., Any]


def knows_cooldown(store: Any, origin: str) -> bool:
    """Whether ``store`` has been told of a running cooldown of ``origin`` (its table of what
    is current, which it hands to its transports)."""
    with store._lock:
        known = store._cooldowns.get(origin)
    return known is not None and known[0] > time.time()


def eventually(predicate: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.005)


async def aeventually(predicate: Callable[[], object], what: str, timeout: float = WAIT) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        await anyio.sleep(0.005)


def keys_of(redis: Any, prefix: str) -> list[str]:
    return sorted(redis.scan_iter(match=prefix + "*", count=1000))


def store_records(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in list(caplog.records) if text in r.getMessage()]


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.monotonic()
    result = call()
    return result, time.monotonic() - start


def store_threads() -> set[threading.Thread]:
    """The stores' background threads running now (they are named after their store)."""
    return {t for t in threading.enumerate() if t.name.startswith("retry-transport store")}


def client(transport: Any) -> Any:
    return httpx.Client(transport=transport, timeout=client_timeout())


ONE = {"retry": {"max_retry_after": 1}}  # a request that waits for no cooldown over 1 s
#: The Retry-After of the cooldown worker A shares: a worker that learns it within
#: COOLING - 1 seconds (milliseconds, on an idle machine) is refused by ONE. The wait that
#: follows is recorded, not slept, so a long one costs nothing (it was 2 s: a second's
#: margin for the store, the poll and the request on a loaded machine).
COOLING = 5


# -- 1. a cooldown seen by one worker holds the others ------------------------------------


def test_cooldown_in_one_worker_holds_another_sync(api: Any, stores: Stores) -> None:
    server = api()
    url = server.script("/limited", Answer(429, retry_after=COOLING))
    store_a, store_b = stores(), stores()
    waits_b = Waits()
    first = rt.RetryTransport(store=store_a, max_attempts=1)
    second = rt.RetryTransport(store=store_b, sleep=waits_b.sleep, base_delay=0.01)
    with client(first) as worker_a, client(second) as worker_b:
        assert worker_a.get(url).status_code == 429
        eventually(lambda: knows_cooldown(store_b, server.origin), "worker B told")
        sent = server.count()

        # Unable to wait that long: refused before anything is sent.
        with pytest.raises(rt.CooldownError) as refused:
            worker_b.get(url, extensions=ONE)
        assert refused.value.origin == server.origin
        assert 1.0 < refused.value.remaining <= COOLING
        assert server.count() == sent

        # Able to: held for the cooldown's remaining time, then sent.
        response = worker_b.get(url)
        assert response.status_code == 200
        assert len(waits_b.waits) == 1
        assert 1.0 < waits_b.waits[0] <= COOLING + 0.01
        assert server.count() == sent + 1


@pytest.mark.anyio
async def test_cooldown_in_one_worker_holds_another_async(api: Any, stores: Stores) -> None:
    server = api()
    url = server.script("/limited", Answer(429, retry_after=COOLING))
    store_a, store_b = stores(), stores()
    waits_a, waits_b = Waits(), Waits()
    first = rt.AsyncRetryTransport(store=store_a, sleep=waits_a.asleep, max_attempts=1)
    second = rt.AsyncRetryTransport(store=store_b, sleep=waits_b.asleep, base_delay=0.01)
    timeout = client_timeout()
    async with httpx.AsyncClient(transport=first, timeout=timeout) as worker_a, \
            httpx.AsyncClient(transport=second, timeout=timeout) as worker_b:
        assert (await worker_a.get(url)).status_code == 429
        await aeventually(lambda: knows_cooldown(store_b, server.origin), "worker B told")
        sent = server.count()

        with pytest.raises(rt.CooldownError) as refused:
            await worker_b.get(url, extensions=ONE)
        assert refused.value.origin == server.origin
        assert 1.0 < refused.value.remaining <= COOLING
        assert server.count() == sent

        response = await worker_b.get(url)
        assert response.status_code == 200
        assert len(waits_b.waits) == 1
        assert 1.0 < waits_b.waits[0] <= COOLING + 0.01
        assert server.count() == sent + 1


# -- 2. a fleet of processes ----------------------------------------------------------------

#: Worker processes.
WORKERS = 4
#: The 429's Retry-After, seconds: the fleet must be quiet from TOLD_WITHIN after it was
#: sent until it ends (1.5 s, in which four workers would send some 250 requests).
FLEET_RETRY_AFTER = 2
#: A request may still arrive this long after the 429 was sent (the fleet being told).
TOLD_WITHIN = 0.5
#: How long each worker sends requests once all have started: the first request meets the
#: 429, so this leaves each worker 0.6 s to send again once the cooldown is over.
FLEET_RUN = FLEET_RETRY_AFTER + 0.6


def _fleet_worker(flavour: str, redis_url: str, prefix: str, url: str, name: str,
                  ready: Any, go: Any, results: Any) -> None:
    """One process of the fleet: its own store, one transport, requests in a loop."""
    from tests import flavour as flavours

    statuses: list[int] = []
    errors: list[str] = []
    with flavours.use(flavour):
        store = flavours.rt.RedisStore(redis_url, prefix=prefix)
        try:
            # verify=False: plain HTTP only, and no CA bundle to load (a second per worker
            # on a loaded machine)
            transport = flavours.rt.RetryTransport(store=store, verify=False)
            with flavours.httpx.Client(transport=transport, timeout=5.0) as worker:
                ready.put((name, store.connected))
                if go.wait(BOUND * 3):
                    end = time.monotonic() + FLEET_RUN
                    while time.monotonic() < end:
                        try:
                            response = worker.get(url, headers={"X-Worker": name})
                            statuses.append(response.status_code)
                        except Exception as exc:
                            errors.append(repr(exc))
                        time.sleep(0.02)
        finally:
            store.close()
    results.put((name, statuses, errors))


def _fleet_context() -> Any:
    """Fresh processes for the workers: forked from a forkserver that has imported this
    module once (no thread of this process is copied; a worker starts in milliseconds), or
    spawned where there is no forkserver."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        return context
    return multiprocessing.get_context("spawn")


def test_fleet_of_processes_goes_quiet_on_one_429(
    api: Any, redis_server: RedisServer, prefix: str, flavour: str
) -> None:
    server = api()
    url = server.script("/fleet", Answer(429, retry_after=FLEET_RETRY_AFTER))
    context = _fleet_context()
    ready, results, go = context.Queue(), context.Queue(), context.Event()
    names = [f"w{i}" for i in range(WORKERS)]
    processes = [
        context.Process(
            target=_fleet_worker,
            args=(flavour, redis_server.url, prefix, url, name, ready, go, results),
            daemon=True,
        )
        for name in names
    ]
    outcomes: dict[str, tuple[list[int], list[str]]] = {}
    try:
        for process in processes:
            process.start()
        for _ in names:
            name, connected = ready.get(timeout=BOUND * 3)
            assert connected, f"{name}'s store did not connect"
        go.set()
        for _ in names:
            name, statuses, errors = results.get(timeout=BOUND * 2)
            outcomes[name] = (statuses, errors)
        for process in processes:
            process.join(BOUND)
            assert process.exitcode == 0
    finally:
        go.set()
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(BOUND)
        for q in (ready, results):
            q.close()
            q.join_thread()

    for name, (statuses, errors) in outcomes.items():
        assert errors == [], name
        assert statuses and set(statuses) == {200}, (name, statuses)  # the 429 was retried
    assert len(server.sent_429s) == 1
    told = server.sent_429s[0] + TOLD_WITHIN
    ends = server.sent_429s[0] + FLEET_RETRY_AFTER
    arrivals = server.arrivals
    during = [a for a in arrivals if told < a.at < ends]
    assert during == [], [(a.worker, round(a.at - server.sent_429s[0], 3)) for a in during]
    # Every worker was sending before (the fleet was busy) and after the cooldown.
    assert {a.worker for a in arrivals if a.at >= ends} == set(names)
    assert len([a for a in arrivals if a.at < told]) >= 2


# -- 3. breaker transitions travel -------------------------------------------------------


def test_breaker_opening_and_closing_reach_another_worker(
    api: Any, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="retry_transport")
    server = api()
    url = server.script("/flaky", Answer(503), Answer(503))
    store_a, store_b = stores(), stores()
    events_a: list[Any] = []
    events_b: list[Any] = []
    breaker_a = rt.CircuitBreaker(store=store_a, min_requests=2, break_duration=1.0,
                                  hooks=events_a.append)
    breaker_b = rt.CircuitBreaker(store=store_b, min_requests=2, break_duration=1.0,
                                  hooks=events_b.append)
    transport = rt.RetryTransport(store=store_a, breaker=breaker_a, sleep=Waits().sleep)
    with client(transport) as worker_a:
        response = worker_a.get(url)  # 503, 503: the breaker opens
        assert response.status_code == 503
        assert rt.retry_info(response).stop_reason is rt.StopReason.CIRCUIT_OPEN
        assert breaker_a.state(url) == "open"

        eventually(lambda: breaker_b.state(url) != "closed", "worker B's breaker opened")
        assert breaker_b.state(url) == "open"
        eventually(lambda: events_b, "worker B's hooks told")  # just after the state
        assert [(e.kind, e.learned, e.url, e.wait) for e in events_b] == [
            ("breaker_open", True, server.origin, 1.0)
        ]
        assert all(not e.learned for e in events_a)
        learned = store_records(caplog, "by another member of its store")
        assert [r.levelno for r in learned] == [logging.INFO]
        assert "opened" in learned[0].getMessage()
        # Worker A's own opening is a WARNING, on the request's thread; nothing the store's
        # thread logs (worker B's learning) is.
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert {r.threadName for r in warnings} == {threading.current_thread().name}
        assert any("Circuit breaker opened for" in r.getMessage() for r in warnings)

        eventually(lambda: breaker_a.state(url) == "half_open", "the break ended", 3.0)
        assert worker_a.get(url).status_code == 200  # the probe: the breaker closes
        assert breaker_a.state(url) == "closed"
        # Worker B's break is over too: without the closing it would stay half-open.
        eventually(lambda: breaker_b.state(url) == "closed", "worker B's breaker closed")
        eventually(lambda: len(events_b) == 2, "worker B's hooks told")  # after the state
    assert [(e.kind, e.learned) for e in events_b] == [
        ("breaker_open", True), ("breaker_close", True)
    ]
    learned = store_records(caplog, "by another member of its store")
    assert [r.levelno for r in learned] == [logging.INFO, logging.INFO]
    assert "closed" in learned[1].getMessage()


# -- 4. half-open probes are elected fleet-wide ------------------------------------------

FLEET_THREADS = 5  # per worker


def test_exactly_half_open_probes_probes_fleet_wide(api: Any, stores: Stores) -> None:
    server = api()
    url = server.script("/probe", Answer(503), then=Answer(200, hold=0.8))
    workers: list[tuple[Any, Any]] = []
    try:
        for _ in range(3):
            store = stores()
            breaker = rt.CircuitBreaker(store=store, min_requests=1, break_duration=0.3,
                                        half_open_probes=2)
            transport = rt.RetryTransport(store=store, breaker=breaker, max_attempts=1)
            workers.append((breaker, client(transport)))
        assert workers[0][1].get(url).status_code == 503  # worker 0's breaker opens
        breakers = [breaker for breaker, _ in workers]
        eventually(lambda: all(b.state(url) != "closed" for b in breakers), "all opened")
        eventually(lambda: all(b.state(url) == "half_open" for b in breakers), "all half-open")
        assert server.count("/probe") == 1

        barrier = threading.Barrier(len(workers) * FLEET_THREADS)
        results: list[Any] = []

        def send(worker: Any) -> None:
            barrier.wait(BOUND)
            try:
                results.append(worker.get(url))
            except Exception as exc:
                results.append(exc)

        threads = [threading.Thread(target=send, args=(worker,), daemon=True)
                   for _, worker in workers for _ in range(FLEET_THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(BOUND)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        for _, worker in workers:
            worker.close()

    assert server.count("/probe") == 1 + 2
    answered = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert [r.status_code for r in answered] == [200, 200]
    assert len(refused) == len(threads) - 2
    assert all(isinstance(r, rt.CircuitOpenError) for r in refused), refused


# -- 5. Redis killed and restarted ---------------------------------------------------------


class Traffic:
    """Requests through the given clients in a loop, on a thread, until stopped; every
    failure (an exception, or a status other than 200) is kept."""

    def __init__(self, clients: list[Any], url: str) -> None:
        self.clients, self.url = clients, url
        self.sent = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        end = time.monotonic() + 60.0
        while not self._stop.is_set() and time.monotonic() < end:
            for worker in self.clients:
                try:
                    status = worker.get(self.url).status_code
                    if status != 200:
                        self.failures.append(str(status))
                except Exception as exc:
                    self.failures.append(repr(exc))
                self.sent += 1
            self._stop.wait(0.01)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(BOUND)


def test_redis_killed_and_restarted(
    api: Any, stores: Stores, own_redis_server: RedisServer, prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="retry_transport")
    redis = own_redis_server
    steady, before, during, after = api(), api(), api(), api()
    steady_url = steady.script("/steady")
    before_url = before.script("/cool", Answer(429, retry_after=9))
    during_url = during.script("/cool", Answer(429, retry_after=9))
    after_url = after.script("/cool", Answer(429, retry_after=9))
    store_a, store_b = stores(redis.url), stores(redis.url)
    assert store_a.connected and store_b.connected
    loop_clients = [
        client(rt.RetryTransport(store=store, breaker=rt.CircuitBreaker(store=store)))
        for store in (store_a, store_b)
    ]
    cooler_a = client(rt.RetryTransport(store=store_a, max_attempts=1))
    lost = "Lost the store"
    back = "is back: sharing"
    try:
        with Traffic(loop_clients, steady_url) as traffic:
            assert cooler_a.get(before_url).status_code == 429
            eventually(lambda: knows_cooldown(store_b, before.origin), "B told (before)")

            redis.kill()
            eventually(lambda: len(store_records(caplog, lost)) == 2, "both stores lost it")
            assert cooler_a.get(during_url).status_code == 429  # while Redis is away
            sent = traffic.sent
            eventually(lambda: traffic.sent > sent + 4, "requests go on without Redis")

            redis.start()
            eventually(lambda: len(store_records(caplog, back)) == 2, "both stores back", 8.0)
            assert store_a.connected and store_b.connected
            # A's event of the outage is shared now that Redis is back.
            eventually(lambda: knows_cooldown(store_b, during.origin), "B told (outage)")

            # Sharing resumes.
            assert cooler_a.get(after_url).status_code == 429
            eventually(lambda: knows_cooldown(store_b, after.origin), "B told (after)")

            # The restart lost every key; A published again its cooldown from before, so a
            # store that starts now loads it.
            store_c = stores(redis.url)
            assert knows_cooldown(store_c, before.origin)
            with client(rt.RetryTransport(store=store_c)) as worker_c:
                with pytest.raises(rt.CooldownError):
                    worker_c.get(before_url, extensions=ONE)
            assert before.count() == 1
            sent = traffic.sent
            eventually(lambda: traffic.sent > sent + 4, "requests go on")
    finally:
        for worker in [*loop_clients, cooler_a]:
            worker.close()

    assert traffic.failures == []
    lost_records, back_records = store_records(caplog, lost), store_records(caplog, back)
    assert [r.levelno for r in lost_records] == [logging.WARNING] * 2
    assert [r.levelno for r in back_records] == [logging.INFO] * 2
    assert max(r.created for r in lost_records) <= min(r.created for r in back_records)


def test_a_store_made_while_redis_is_down_shares_once_it_is_up(
    api: Any, stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis not up yet: the store returns at once, requests go on, and what its members
    did meanwhile is published when Redis comes up."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    redis = RedisServer()  # its port, not listening yet
    try:
        store_a, elapsed = timed(lambda: stores(redis.url))
        assert elapsed < QUICK
        assert not store_a.connected
        limited = api()
        url = limited.script("/cool", Answer(429, retry_after=9))
        with client(rt.RetryTransport(store=store_a, max_attempts=1)) as worker_a:
            assert worker_a.get(url).status_code == 429
        redis.start()
        eventually(lambda: store_a.connected, "store A connected", 8.0)
        # Connected, A then sends what it kept (on its own thread: on a loaded machine, some
        # time after): a store made once it is in Redis loads it.
        watcher = redis.client()
        try:
            eventually(lambda: watcher.exists(store_a.prefix + "cooldown:" + limited.origin),
                       "the cooldown written")
        finally:
            watcher.close()
        store_b = stores(redis.url)
        assert knows_cooldown(store_b, limited.origin)
        # It never had Redis: it could not reach it, then reached it (nothing was lost).
        assert [r.levelno for r in store_records(caplog, "Cannot reach the store")] == [
            logging.WARNING
        ]
        assert [r.levelno for r in store_records(caplog, "Reached the store")] == [logging.INFO]
        assert store_records(caplog, "Lost the store") == []
    finally:
        redis.stop()


# -- 6. a hung Redis ------------------------------------------------------------------------


def test_hung_redis_never_holds_a_request(
    api: Any, stores: Stores, hung_redis: HungRedis
) -> None:
    store, elapsed = timed(lambda: stores(hung_redis.url, connect_timeout=1.0))
    assert elapsed < 1.0 + 1.0
    assert not store.connected
    assert hung_redis.connections >= 1  # it did try, and got no answer
    server, limited = api(), api()
    url = server.script("/down", Answer(503))
    limited_url = limited.script("/cool", Answer(429, retry_after=1))
    waits = Waits()
    breaker = rt.CircuitBreaker(store=store, min_requests=1, break_duration=0.2)
    transport = rt.RetryTransport(store=store, breaker=breaker, sleep=waits.sleep)
    cooler = rt.RetryTransport(store=store, sleep=waits.sleep)
    with client(transport) as worker, client(cooler) as cooling:
        response, elapsed = timed(lambda: worker.get(url))  # opens the breaker
        assert response.status_code == 503
        assert elapsed < QUICK
        assert breaker.state(url) == "open"

        eventually(lambda: breaker.state(url) == "half_open", "the break ended", 3.0)
        response, elapsed = timed(lambda: worker.get(url))  # a probe: elected, answered
        assert response.status_code == 200
        assert elapsed < QUICK
        assert breaker.state(url) == "closed"

        response, elapsed = timed(lambda: cooling.get(limited_url))  # a cooldown, retried
        assert response.status_code == 200
        assert elapsed < QUICK
        assert rt.retry_info(response).attempts == 2
    _, elapsed = timed(store.close)
    assert elapsed < SOCKET_TIMEOUT * 4 + 1.0 + 1.0


def test_redis_frozen_mid_run_never_holds_a_request(
    api: Any, stores: Stores, own_redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Connected, then Redis stops answering (SIGSTOP): the probe election on the request
    path waits at most the socket timeout, then elects locally."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    redis = own_redis_server
    store = stores(redis.url)
    assert store.connected
    server, limited = api(), api()
    url = server.script("/down", Answer(503))
    limited_url = limited.script("/cool", Answer(429, retry_after=1))
    breaker = rt.CircuitBreaker(store=store, min_requests=1, break_duration=0.3)
    transport = rt.RetryTransport(store=store, breaker=breaker, sleep=Waits().sleep)
    cooler = rt.RetryTransport(store=store, sleep=Waits().sleep)
    watcher = redis.client()
    try:
        with client(transport) as worker, client(cooler) as cooling:
            assert worker.get(url).status_code == 503  # opens, and the opening is shared
            eventually(lambda: watcher.exists(store.prefix + "open:" + server.origin),
                       "the opening written")
            eventually(lambda: breaker.state(url) == "half_open", "the break ended", 3.0)
            redis.freeze()
            try:
                # The store has not noticed yet (its next health check would take the socket
                # timeout): the probe's election asks Redis, which never answers.
                assert store.connected
                response, elapsed = timed(lambda: worker.get(url))
                assert response.status_code == 200
                assert elapsed < QUICK
                assert breaker.state(url) == "closed"

                response, elapsed = timed(lambda: cooling.get(limited_url))
                assert response.status_code == 200
                assert elapsed < QUICK
                eventually(lambda: store_records(caplog, "Lost the store"), "the loss logged")
            finally:
                redis.thaw()
            eventually(lambda: store_records(caplog, "is back: sharing"), "back", 8.0)
            assert worker.get(url).status_code == 200
    finally:
        watcher.close()
    assert len(store_records(caplog, "Lost the store")) == 1


# -- 7. a store that starts later loads what is current ---------------------------------------


def test_new_store_loads_current_cooldowns_and_breaks(
    api: Any, stores: Stores, redis_server: RedisServer
) -> None:
    limited, down = api(), api()
    # What store C loads must still be running when it is read: a 10 s cooldown and break,
    # of which the writing, the new store's loading and the requests may take 6 on a
    # loaded machine (they had 2 of 5).
    limited_url = limited.script("/cool", Answer(429, retry_after=10))
    down_url = down.script("/down", then=Answer(503))
    store_a = stores()
    breaker_a = rt.CircuitBreaker(store=store_a, min_requests=1, break_duration=10.0)
    transport_a = rt.RetryTransport(store=store_a, breaker=breaker_a, max_attempts=1)
    cooler_a = rt.RetryTransport(store=store_a, max_attempts=1)
    watcher = redis_server.client()
    try:
        with client(transport_a) as worker_a, client(cooler_a) as cooling:
            assert cooling.get(limited_url).status_code == 429
            assert worker_a.get(down_url).status_code == 503
        assert breaker_a.state(down_url) == "open"
        eventually(
            lambda: watcher.exists(store_a.prefix + "cooldown:" + limited.origin,
                                   store_a.prefix + "open:" + down.origin) == 2,
            "both written",
        )
    finally:
        watcher.close()

    store_c = stores()  # a process that starts now
    breaker_c = rt.CircuitBreaker(store=store_c)
    assert breaker_c.state(down_url) == "open"
    with client(rt.RetryTransport(store=store_c, breaker=breaker_c)) as worker_c:
        with pytest.raises(rt.CooldownError) as held:
            worker_c.get(limited_url, extensions=ONE)
        assert 4.0 < held.value.remaining <= 10.0
        with pytest.raises(rt.CircuitOpenError) as refused:
            worker_c.get(down_url)
        assert 4.0 < refused.value.remaining <= 10.0
    assert (limited.count(), down.count()) == (1, 1)


# -- 8. keys live as long as their events, no longer ---------------------------------------


#: Milliseconds of slack between this test's reading of the time and Redis's (the TTL is
#: counted from when Redis runs the write; see
#: test_a_key_never_outlives_its_event_even_on_a_slow_trip), and the rounding up.
TRIP = 100


def test_keys_expire_with_their_events(
    api: Any, stores: Stores, redis_server: RedisServer, prefix: str
) -> None:
    limited, down = api(), api()
    limited_url = limited.script("/cool", Answer(429, retry_after=1))
    down_url = down.script("/down", Answer(503), then=Answer(200, hold=0.5))
    lease = 2.0
    store = stores(probe_lease=lease)
    breaker = rt.CircuitBreaker(store=store, min_requests=1, break_duration=0.6)
    transport = rt.RetryTransport(store=store, breaker=breaker, max_attempts=1)
    cooler = rt.RetryTransport(store=store, max_attempts=1)
    watcher = redis_server.client()

    def check_ttls() -> set[str]:
        kinds = set()
        for key in keys_of(watcher, prefix):
            kind, _, rest = key[len(prefix):].partition(":")
            value = watcher.get(key)
            wall = time.time()  # before PTTL: what is left of the event only shrinks
            ttl = watcher.pttl(key)
            if ttl == -2:
                continue  # expired meanwhile
            assert ttl > 0, (key, ttl)
            if kind == "probe":
                assert ttl <= lease * 1000, (key, ttl)
                origin = rest.rsplit(":", 1)[0]
            else:
                until = float(value.split(" ", 1)[0])
                longest = 1000 if kind == "cooldown" else 600
                assert ttl <= (until - wall) * 1000 + TRIP, (key, ttl, (until - wall) * 1000)
                assert ttl <= longest + TRIP, (key, ttl)
                origin = rest
            assert origin in (limited.origin, down.origin), key
            kinds.add(kind)
        return kinds

    probe: list[Any] = []
    try:
        with client(transport) as worker, client(cooler) as cooling:
            assert cooling.get(limited_url).status_code == 429
            assert worker.get(down_url).status_code == 503
            eventually(lambda: len(keys_of(watcher, prefix)) == 2, "both written")
            assert check_ttls() == {"cooldown", "open"}

            eventually(lambda: breaker.state(down_url) == "half_open", "the break ended", 3.0)
            thread = threading.Thread(target=lambda: probe.append(worker.get(down_url)),
                                      daemon=True)
            thread.start()
            eventually(lambda: watcher.exists(f"{prefix}probe:{down.origin}:1"), "elected")
            assert "probe" in check_ttls()
            thread.join(BOUND)
        assert [r.status_code for r in probe] == [200]
        eventually(lambda: keys_of(watcher, prefix) == [], "every key gone", 3.0)
    finally:
        watcher.close()


# -- 9. no redis package ---------------------------------------------------------------------


def test_import_without_redis_and_the_error_then() -> None:
    module = "retry_transport" if current() == "httpx" else "retry_transport.httpx2"
    code = (
        "import sys\n"
        "sys.modules['redis'] = None\n"
        f"import {module} as rt\n"
        "try:\n"
        "    rt.RedisStore()\n"
        "except ImportError as exc:\n"
        "    print('ImportError:', exc)\n"
        "else:\n"
        "    print('no error')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ImportError:"), done.stdout
    assert "retry-transport[redis]" in done.stdout

    # Nor is redis imported until a RedisStore is made.
    code = f"import sys\nimport {module}\nprint('redis' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr


FORKED = """
import multiprocessing, sys, time
import {library} as httpx, {module} as rt

store = rt.RedisStore({url!r}, prefix={prefix!r})

def child(connected, done):
    deadline = time.monotonic() + 10
    while not store.connected and time.monotonic() < deadline:
        time.sleep(0.01)
    connected.put(store.connected)
    answer = httpx.Response(429, headers={{"Retry-After": "5"}})
    transport = rt.RetryTransport(httpx.MockTransport(lambda r: answer), store=store,
                                  max_attempts=1)
    with httpx.Client(transport=transport) as client:
        client.get("http://fork.test/")
    done.wait(10)  # until the parent has learned it

if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    connected, done = context.Queue(), context.Event()
    worker = context.Process(target=child, args=(connected, done))
    worker.start()
    print("child connected:", connected.get(timeout=10))
    transport = rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(200)),
                                  store=store, max_retry_after=1)
    held, deadline = False, time.monotonic() + 10
    with httpx.Client(transport=transport) as client:
        while not held and time.monotonic() < deadline:
            try:
                client.get("http://fork.test/")
            except rt.CooldownError:
                held = True
            else:
                time.sleep(0.01)
    done.set()
    worker.join(10)
    print("parent held:", held, "child exit:", worker.exitcode)
    store.close()
"""


@pytest.mark.flavour_free  # the store alone: the same for both libraries
@pytest.mark.skipif(sys.platform == "win32", reason="no fork on Windows")
def test_a_store_made_before_a_fork_works_in_the_child(
    redis_server: RedisServer, prefix: str, tmp_path: Any
) -> None:
    """A module-level store in a prefork worker pool: the forked child's store runs a
    thread of its own under an identity of its own, so a 429 the child sees holds the
    parent (with the parent's identity, the parent would ignore the child's message as its
    own). Run in a subprocess, so that the test process itself is never forked."""
    library = "httpx" if current() == "httpx" else "httpx2"
    module = "retry_transport" if current() == "httpx" else "retry_transport.httpx2"
    script = tmp_path / "forked.py"
    script.write_text(FORKED.format(library=library, module=module, url=redis_server.url,
                                    prefix=prefix))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [
        "child connected: True", "parent held: True child exit: 0"
    ], (done.stdout, done.stderr)


# -- 10. closing -------------------------------------------------------------------------------


@pytest.mark.flavour_free  # the store alone: the same for both libraries
def test_close_stops_the_thread(stores: Stores, redis_server: RedisServer) -> None:
    before = store_threads()
    store = stores()
    assert store.connected
    threads = store_threads() - before
    assert len(threads) == 1
    assert redis_server.url in next(iter(threads)).name
    store.close()
    assert not store_threads() & threads
    assert not store.connected
    store.close()  # idempotent


def test_closing_a_client_leaves_its_store_alone(api: Any, stores: Stores) -> None:
    server = api()
    url = server.script("/cool", Answer(429, retry_after=3))
    before = store_threads()
    store_a = stores()
    thread_a = store_threads() - before
    store_b = stores()
    breaker = rt.CircuitBreaker(store=store_a)
    with client(rt.RetryTransport(store=store_a, breaker=breaker)) as worker:
        assert worker.get(server.origin + "/fine").status_code == 200
    worker.close()  # again, explicitly: closing the client closes its transport
    assert store_a.connected
    assert thread_a <= store_threads()
    # Still working: a cooldown through a new transport on it reaches the other store.
    with client(rt.RetryTransport(store=store_a, max_attempts=1)) as worker:
        assert worker.get(url).status_code == 429
    eventually(lambda: knows_cooldown(store_b, server.origin), "B told")


@pytest.mark.anyio
async def test_closing_an_async_client_leaves_its_store_alone(api: Any, stores: Stores) -> None:
    server = api()
    url = server.script("/cool", Answer(429, retry_after=3))
    before = store_threads()
    store_a = stores()
    thread_a = store_threads() - before
    store_b = stores()
    transport = rt.AsyncRetryTransport(store=store_a, breaker=rt.CircuitBreaker(store=store_a))
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as worker:
        assert (await worker.get(server.origin + "/fine")).status_code == 200
    await worker.aclose()
    assert store_a.connected
    assert thread_a <= store_threads()
    transport = rt.AsyncRetryTransport(store=store_a, max_attempts=1)
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as worker:
        assert (await worker.get(url)).status_code == 429
    await aeventually(lambda: knows_cooldown(store_b, server.origin), "B told")


def test_an_event_during_the_republish_is_shared(
    api: Any, stores: Stores, own_redis_server: RedisServer
) -> None:
    """After a reconnection the store sends again its events that are not over; one that a
    member shares meanwhile is not lost between that snapshot and the queue. The test holds
    the re-publishing open at its first event, and shares a new one then."""
    redis = own_redis_server
    before, meanwhile = api(), api()
    before_url = before.script("/cool", Answer(429, retry_after=9))
    meanwhile_url = meanwhile.script("/cool", Answer(429, retry_after=9))
    store_a, store_b = stores(redis.url), stores(redis.url)
    armed, republishing, shared = threading.Event(), threading.Event(), threading.Event()
    send = store_a._send

    def held_send(events: list[tuple[str, str, float, Any]]) -> None:
        if armed.is_set() and any(e[1] == before.origin for e in events):  # sent again
            armed.clear()
            republishing.set()
            shared.wait(BOUND)
        send(events)

    watcher = redis.client()
    try:
        with client(rt.RetryTransport(store=store_a, max_attempts=1)) as worker_a:
            assert worker_a.get(before_url).status_code == 429
            eventually(lambda: knows_cooldown(store_b, before.origin), "B told (before)")
            store_a._send = held_send
            armed.set()
            watcher.client_kill_filter(_type="pubsub")  # both stores reconnect
            assert republishing.wait(WAIT), "store A did not publish again"
            try:
                assert worker_a.get(meanwhile_url).status_code == 429
            finally:
                shared.set()
            eventually(lambda: knows_cooldown(store_b, meanwhile.origin),
                       "B told of the cooldown shared during the re-publishing", 3.0)
    finally:
        shared.set()
        watcher.close()


@pytest.mark.anyio
async def test_a_probe_without_verdict_frees_the_fleets_slot(
    api: Any, stores: Stores, redis_server: RedisServer, prefix: str
) -> None:
    """Worker A's probe is cancelled (it ends without a verdict) while worker B was refused
    because A held the fleet's only slot: the slot is free in Redis at once, and B, which
    remembers the refusal for at most a second, probes soon after (not after the lease).
    The second itself is tests/transport/test_store.py's, in virtual time: here B has
    anything under a third of the lease, what a loaded machine may take."""
    server = api()
    # A's probe is held, and A waits for it, until the test cancels it: the test has all the
    # time a loaded machine needs to have B refused meanwhile (the hold was 3 s, and A's
    # read timeout 2 s, after which the probe's timeout was a verdict).
    url = server.script("/probe", Answer(503), Answer(200, hold=BOUND))
    store_a, store_b = stores(), stores()
    lease = store_b.probe_lease  # the default, 30 s
    breaker_a = rt.CircuitBreaker(store=store_a, min_requests=1, break_duration=0.2)
    breaker_b = rt.CircuitBreaker(store=store_b, min_requests=1, break_duration=0.2)
    transport_a = rt.AsyncRetryTransport(store=store_a, breaker=breaker_a, max_attempts=1)
    transport_b = rt.AsyncRetryTransport(store=store_b, breaker=breaker_b, max_attempts=1)
    watcher = redis_server.client()
    try:
        async with httpx.AsyncClient(transport=transport_a,
                                     timeout=httpx.Timeout(2 * BOUND)) as worker_a, \
                httpx.AsyncClient(transport=transport_b, timeout=client_timeout()) as worker_b:
            assert (await worker_a.get(url)).status_code == 503
            await aeventually(lambda: breaker_b.state(url) != "closed", "B opened")
            await aeventually(lambda: breaker_a.state(url) == breaker_b.state(url) == "half_open",
                              "both half-open")
            async with anyio.create_task_group() as group:
                group.start_soon(worker_a.get, url)  # the probe, held by the server
                await aeventually(lambda: server.count("/probe") == 2, "A's probe arrived")
                with pytest.raises(rt.CircuitOpenError) as refused:
                    await worker_b.get(url)
                assert refused.value.remaining == 0.0  # the fleet's slot is taken
                group.cancel_scope.cancel()  # A's probe ends without a verdict
            slot = f"{prefix}probe:{server.origin}:1"
            await aeventually(lambda: not watcher.exists(slot), "the slot freed in Redis")
            freed = time.monotonic()
            response = None
            while response is None and time.monotonic() < freed + lease / 3:
                try:
                    response = await worker_b.get(url)  # B may probe now
                except rt.CircuitOpenError as exc:
                    assert exc.remaining == 0.0
                    await anyio.sleep(0.05)
            assert response is not None, "B never probed after the slot was freed"
            assert response.status_code == 200
            assert server.count("/probe") == 3
            assert breaker_b.state(url) == "closed"
    finally:
        watcher.close()


# -- regressions -----------------------------------------------------------------------------


@pytest.mark.flavour_free  # the store alone: the same for both libraries
def test_concurrent_probe_elections_do_not_interfere(stores: Stores) -> None:
    """Two threads elect at once: one is preempted while it draws its token (paused where
    it reads the store's ``_sender``), the other elects for another origin meanwhile. Both
    are elected, and no error escapes ``CircuitBreaker.admit`` (a token drawn from a
    generator raised ``ValueError: generator already executing`` here)."""
    store = stores()
    origins = ["http://127.0.0.1:10001", "http://127.0.0.1:10002"]
    breakers = [rt.CircuitBreaker(store=store, min_requests=1, break_duration=0.001)
                for _ in origins]
    for breaker, origin in zip(breakers, origins, strict=True):
        breaker.record(origin, True)  # open; half-open a millisecond later
    time.sleep(0.01)
    inside, resume = threading.Event(), threading.Event()
    real = type(store)

    class Preempted(real):  # type: ignore[misc, valid-type]
        @property
        def _sender(self) -> str:
            if threading.current_thread().name == "first election":
                inside.set()
                resume.wait(BOUND)
            return str(self.__dict__["_sender"])

    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(breakers[0].admit(origins[0])),
                              name="first election", daemon=True)
    store.__class__ = Preempted
    error: BaseException | None = None
    try:
        thread.start()
        assert inside.wait(WAIT)
        try:
            second = breakers[1].admit(origins[1])
        except Exception as exc:
            error = exc
    finally:
        resume.set()
        thread.join(BOUND)
        store.__class__ = real
    assert first and first[0][0] is None  # the first was elected
    assert error is None, f"the election raised {error!r}"
    assert second[0] is None


def test_a_key_never_outlives_its_event_even_on_a_slow_trip(
    api: Any, stores: Stores, own_redis_server: RedisServer, prefix: str
) -> None:
    """A Redis slow by 150 ms (frozen that long, within the socket timeout) runs the write
    late: the key's TTL is counted from then, so the key still ends with its cooldown
    (a TTL computed at sending outlived it by the trip)."""
    redis = own_redis_server
    limited = api()
    url = limited.script("/cool", Answer(429, retry_after=2))
    store = stores(redis.url)
    watcher = redis.client()
    key = f"{prefix}cooldown:{limited.origin}"
    try:
        with client(rt.RetryTransport(store=store, max_attempts=1)) as worker:
            redis.freeze()
            try:
                assert worker.get(url).status_code == 429
                time.sleep(0.15)
            finally:
                redis.thaw()
        eventually(lambda: watcher.exists(key), "written")
        until = float(watcher.get(key).split(" ", 1)[0])
        left = (until - time.time()) * 1000
        ttl = watcher.pttl(key)
        assert ttl <= left + 5, f"the key outlives its event by {ttl - left:.0f} ms"
    finally:
        watcher.close()


# -- review regressions ----------------------------------------------------------------------


def half_open_breakers(*stores_: Any, origin: str) -> list[Any]:
    """A breaker on each store, the first one opened for 0.2 s (the others learn it), all
    half-open on return. Nothing is sent to ``origin``."""
    breakers = [rt.CircuitBreaker(store=store, min_requests=1, break_duration=0.2)
                for store in stores_]
    breakers[0].record(origin, True)
    eventually(lambda: all(b.state(origin) != "closed" for b in breakers), "all opened")
    eventually(lambda: all(b.state(origin) == "half_open" for b in breakers), "half-open", 3.0)
    return breakers


def elected_within(breaker: Any, origin: str, timeout: float) -> int:
    """Ask ``breaker`` for a probe until it is elected (refusals say "every slot taken");
    its probe number. Fails after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        refusal, probe, _ = breaker.admit(origin)
        if refusal is None:
            return int(probe)
        assert refusal == 0.0, refusal  # half-open: refused only while the slot is taken
        if time.monotonic() > end:
            raise AssertionError(f"not elected within {timeout:g} s: the slot stays taken")
        time.sleep(0.02)


@pytest.mark.flavour_free  # the store alone: the same for both libraries
def test_an_election_answered_too_late_leaves_the_slot_free(
    delaying_proxy: DelayingProxy, stores: Stores, redis_server: RedisServer, prefix: str
) -> None:
    """Worker A's election runs in Redis (and takes the slot) but its reply comes after
    the socket timeout: A elects locally, and the slot its lost answer won is given back,
    so worker B is elected within seconds, not after the 30 s lease."""
    origin = "http://127.0.0.1:10004"
    store_a, store_b = stores(delaying_proxy.url), stores()
    assert store_a.connected and store_b.connected
    breaker_a, breaker_b = half_open_breakers(store_a, store_b, origin=origin)
    watcher = redis_server.client()
    slot = f"{prefix}probe:{origin}:1"
    try:
        watcher.script_load(store_a._elect_script.script)  # cached: the election runs
        store_a._redis.ping()  # and an idle connection waits in the pool: no handshake
        delaying_proxy.delay = SOCKET_TIMEOUT + 0.15
        try:
            (refusal, probe, _), elapsed = timed(lambda: breaker_a.admit(origin))
        finally:
            delaying_proxy.delay = 0.0
        assert refusal is None  # elected, locally
        assert elapsed < QUICK
        breaker_a.release(origin, probe)  # A's probe ends without a verdict
        probe_b = elected_within(breaker_b, origin, WAIT)
        assert watcher.get(slot) is not None  # B holds the fleet's slot now
        breaker_b.release(origin, probe_b)
    finally:
        watcher.close()


@pytest.mark.flavour_free  # the store alone: the same for both libraries
def test_an_election_waits_at_most_the_socket_timeout_in_all(
    delaying_proxy: DelayingProxy, stores: Stores, redis_server: RedisServer
) -> None:
    """As after a Redis restart: the script is not in Redis's cache and the connection is
    new, and each reply comes just within the socket timeout. Handshake, EVALSHA, NOSCRIPT,
    SCRIPT LOAD, EVALSHA: each command is in time, but the request waits at most about the
    socket timeout for them all (it waited 5 replies' worth, 4.75 s here), then elects
    locally."""
    origin = "http://127.0.0.1:10005"
    # A socket timeout of a second (the default is a quarter): the five replies would take
    # 4.75 s, the request may wait about one, and a loaded machine has a second more (it had
    # 0.2 s, against the 1 s the five replies took).
    timeout = 1.0
    store = stores(delaying_proxy.url, socket_timeout=timeout)
    assert store.connected
    (breaker,) = half_open_breakers(store, origin=origin)
    watcher = redis_server.client()
    try:
        watcher.script_flush()
        store._redis.connection_pool.disconnect(inuse_connections=False)
        delaying_proxy.delay = timeout - 0.05
        try:
            (refusal, probe, _), elapsed = timed(lambda: breaker.admit(origin))
        finally:
            delaying_proxy.delay = 0.0
        assert refusal is None
        assert elapsed < 2 * timeout, f"the election took {elapsed:.2f} s"
        breaker.release(origin, probe)
    finally:
        watcher.close()


def test_a_redis_refusing_writes_keeps_the_store_connected(
    own_redis_server: RedisServer, api: Any, stores: Stores, prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Redis out of memory under ``noeviction`` refuses the store's writes (as a read-only
    replica would): one WARNING, the write dropped, the connection kept, and the fleet's
    events (published by another worker: PUBLISH is not refused) keep arriving. Before, a
    refusal counted as a lost connection, the store re-sent its cooldown on reconnecting,
    was refused again, and spent its time reconnecting, deaf to the fleet."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    redis = own_redis_server
    limited = api()
    url = limited.script("/cool", Answer(429, retry_after=9))
    store = stores(redis.url)
    assert store.connected
    watcher = redis.client()
    try:
        watcher.config_set("maxmemory-policy", "noeviction")
        watcher.config_set("maxmemory", 1)
        with client(rt.RetryTransport(store=store, max_attempts=1)) as worker:
            assert worker.get(url).status_code == 429  # a cooldown the store must write
        origins = [f"http://fleet-{n}.test:80" for n in range(20)]
        disconnected = 0
        for origin in origins:
            message = {"k": "cooldown", "o": origin, "u": time.time() + 30,
                       "x": "retry-after", "f": "another worker"}
            watcher.publish(prefix + "events", json.dumps(message))
            time.sleep(0.05)
            disconnected += not store.connected
        assert disconnected == 0, f"disconnected at {disconnected} of {len(origins)} looks"
        eventually(lambda: all(knows_cooldown(store, o) for o in origins),
                   "every event of the fleet received", 2.0)
        eventually(lambda: store_records(caplog, "refused a write"), "the refusal logged")
        refused = store_records(caplog, "refused a write")
        assert [r.levelno for r in refused] == [logging.WARNING]
        assert "maxmemory" in refused[0].getMessage()  # Redis's reason, told
        assert store_records(caplog, "Lost the store") == []
        assert store.connected
    finally:
        watcher.config_set("maxmemory", 0)
        watcher.close()


@pytest.mark.flavour_free  # the store alone: the same for both libraries
def test_stores_made_and_closed_register_no_fork_hook_each(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The at-fork hook is the module's, registered once: stores made and closed (per
    job, per test) do not grow the interpreter's at-fork list, which the old per-store
    registrations did, for good."""
    registered: list[Any] = []
    monkeypatch.setattr(os, "register_at_fork", lambda **hooks: registered.append(hooks))
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens: a store returns at once
    for _ in range(200):
        rt.RedisStore(url, prefix="rt-test:fork:").close()
    assert len(registered) <= 1, f"{len(registered)} at-fork registrations for 200 stores"


@pytest.mark.flavour_free  # the store alone: the same for both libraries
def test_a_release_given_back_while_reconnecting_is_sent(
    own_redis_server: RedisServer, stores: Stores, prefix: str
) -> None:
    """A probe ends without a verdict while its store reconnects, just after the store sent
    the releases it had pending: its slot is freed in Redis all the same (it was neither
    sent nor queued, and stayed taken for the 30 s lease). The store's thread is held at
    that point (after its pending releases are sent) while the probe is given back."""
    redis = own_redis_server
    origin = "http://127.0.0.1:10006"
    store_a, store_b = stores(redis.url), stores(redis.url)
    breaker_a, breaker_b = half_open_breakers(store_a, store_b, origin=origin)
    watcher = redis.client()
    slot = f"{prefix}probe:{origin}:1"
    refusal, probe, _ = breaker_a.admit(origin)
    assert refusal is None and watcher.exists(slot)  # A holds the fleet's slot
    armed, held, resume = threading.Event(), threading.Event(), threading.Event()
    send_releases = store_a._send_releases

    def held_send_releases() -> None:
        send_releases()
        if armed.is_set() and threading.current_thread() is store_a._thread:
            armed.clear()
            held.set()
            resume.wait(BOUND)

    store_a._send_releases = held_send_releases
    try:
        armed.set()
        watcher.client_kill_filter(_type="pubsub")  # both stores reconnect
        assert held.wait(WAIT), "store A did not reconnect"
        breaker_a.release(origin, probe)  # the probe ends without a verdict, now
        resume.set()
        eventually(lambda: not watcher.exists(slot), "the slot freed in Redis", 3.0)
        breaker_b.release(origin, elected_within(breaker_b, origin, 3.0))
    finally:
        resume.set()
        watcher.close()
