"""The circuit breaker against real servers on 127.0.0.1.

A dependency goes down (it answers 503, or its port refuses connections) and comes back: the
breaker opens after ``min_requests`` failed attempts, refuses requests without connecting
while it is open (the servers' request and connection counts do not move), lets a single
probe through once the break is over, opens again for twice the break when the probe fails,
and closes when a probe succeeds. Retries disabled per request do not bypass it; refused
connections count as failures and 404s as healthy answers. Under load, a half-open breaker
lets exactly ``half_open_probes`` requests through: 16 threads on one sync client, 50 tasks
on one async client; a cancelled probe gives its slot back.

A probe that outlives its half-open period (the breaker opened again, and is half-open
anew) decides nothing when it ends: neither its verdict nor its cancellation touches the
new period's probes.

The breaker and the transport share an injected clock that only moves when a test advances
it, so no test waits for a break in real time; the network I/O is real. Each scenario is a
generator of requests written once and driven sync, and async on asyncio and trio.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import anyio.to_thread
import pytest

from tests.flavour import httpx, rt
from tests.real.clients import Waits, check_flavour, client_timeout
from tests.real.servers import (
    BOUND,
    FULL_BODY,
    LocalHTTPServer,
    RawServer,
    Reply,
    ScriptedHTTPServer,
    closed_port,
)

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

#: Failed attempts in the window that open the breaker (at the default ratio of 0.5).
MIN = 3
#: The first break, in seconds of the fake clock.
BREAK = 4.0
#: Attempts per request where retries are on: more than MIN, so the breaker, not the attempt
#: limit, is what stops the first request.
ATTEMPTS = 5
#: Longest a test waits for threads, tasks or the server to get somewhere, in real seconds.
WAIT = 5.0

OFF = {"retry": False}


class FakeClock:
    """A monotonic clock that moves only when the test advances it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Rig:
    """One breaker on a fake clock, and the breaker events its hooks and the transport's saw."""

    breaker: Any
    clock: FakeClock
    events: list[Any] = field(default_factory=list)  # the breaker's own hooks
    transport_events: list[Any] = field(default_factory=list)  # the transport's hooks

    @classmethod
    def make(cls, **breaker_kwargs: Any) -> Rig:
        clock = FakeClock()
        events: list[Any] = []
        breaker_kwargs.setdefault("min_requests", MIN)
        breaker_kwargs.setdefault("break_duration", BREAK)
        breaker = rt.CircuitBreaker(clock=clock, hooks=events.append, **breaker_kwargs)
        return cls(breaker, clock, events)

    def transport_kwargs(self, **kwargs: Any) -> dict[str, Any]:
        return {"breaker": self.breaker, "clock": self.clock,
                "hooks": self.transport_events.append, **kwargs}

    def kinds(self) -> list[str]:
        """The breaker's transitions, once each, in order (the same to both sets of hooks)."""
        kinds = [event.kind for event in self.events]
        assert [e.kind for e in self.transport_events if e.kind.startswith("breaker_")] == kinds
        return kinds

    def breaks(self) -> list[float]:
        """The length of each break the breaker announced."""
        return [event.wait for event in self.events if event.kind == "breaker_open"]


# -- driving a scenario sync or async ---------------------------------------------------

#: A scenario yields a URL, or (URL, extensions), and is sent back the response or the
#: exception the GET ended with.
Scenario = Generator["str | tuple[str, dict[str, Any]]", Any, None]


def _ask(ask: str | tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    return (ask, None) if isinstance(ask, str) else ask


def run_sync(scenario: Scenario, rig: Rig, **kwargs: Any) -> None:
    """Drive ``scenario`` through one sync client over a ``RetryTransport`` on ``rig``."""
    waits = Waits()
    transport = rt.RetryTransport(sleep=waits.sleep, **rig.transport_kwargs(**kwargs))
    with httpx.Client(transport=transport, timeout=client_timeout()) as client:
        check_flavour(Client=client, HTTPTransport=transport._transport)
        ask = next(scenario)
        for _ in range(1000):
            url, extensions = _ask(ask)
            result: Any
            try:
                result = client.get(url, extensions=extensions)
            except Exception as exc:
                result = exc
            try:
                ask = scenario.send(result)
            except StopIteration:
                return
    raise AssertionError("the scenario did not end")


async def run_async(scenario: Scenario, rig: Rig, **kwargs: Any) -> None:
    """The async twin of :func:`run_sync`, on the running event loop."""
    waits = Waits()
    transport = rt.AsyncRetryTransport(sleep=waits.asleep, **rig.transport_kwargs(**kwargs))
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as client:
        check_flavour(AsyncClient=client, AsyncHTTPTransport=transport._transport)
        ask = next(scenario)
        for _ in range(1000):
            url, extensions = _ask(ask)
            result: Any
            try:
                result = await client.get(url, extensions=extensions)
            except Exception as exc:
                result = exc
            try:
                ask = scenario.send(result)
            except StopIteration:
                return
    raise AssertionError("the scenario did not end")


# -- what outcomes must be ---------------------------------------------------------------


def check_refused(result: object, origin: str, remaining: float) -> None:
    """Refused by the breaker before any I/O, ``remaining`` seconds before a probe may go."""
    assert isinstance(result, rt.CircuitOpenError), result
    assert not isinstance(result, httpx.ConnectError)
    assert isinstance(result, httpx.TransportError)
    assert result.origin == origin
    assert result.remaining == remaining
    info = rt.retry_info(result)
    assert info is not None
    assert (info.attempts, info.history, info.stop_reason) == (0, (), rt.StopReason.CIRCUIT_OPEN)


def check_response(result: object, status: int, attempts: int, reason: str) -> None:
    assert isinstance(result, httpx.Response), result
    check_flavour(Response=result)
    assert result.status_code == status
    info = rt.retry_info(result)
    assert info is not None
    assert (info.attempts, info.stop_reason) == (attempts, rt.StopReason(reason))


def check_connect_error(result: object, attempts: int, reason: str) -> None:
    assert isinstance(result, httpx.ConnectError), result
    assert not isinstance(result, rt.CircuitOpenError)
    info = rt.retry_info(result)
    assert info is not None
    assert (info.attempts, info.stop_reason) == (attempts, rt.StopReason(reason))
    assert [attempt.error for attempt in info.history] == ["ConnectError"] * attempts


# -- 1. a server that answers 503, then comes back -----------------------------------------


def outage_503(rig: Rig, server: ScriptedHTTPServer) -> Scenario:
    breaker, clock, origin = rig.breaker, rig.clock, server.url
    url = server.script("/outage", then=Reply(503, b"down"))

    # Closed: the first request is retried until its MIN-th attempt opens the breaker, which
    # also stops its retries.
    result = yield url
    check_response(result, 503, MIN, "circuit_open")
    assert server.count("/outage") == MIN
    assert breaker.state(url) == "open"
    assert breaker.opened_for(origin) == BREAK

    # Open: requests fail at once; nothing reaches the server, not even a connection.
    requests, connections = server.count("/outage"), server.connections
    for step in range(1, 5):
        clock.advance(0.5)
        check_refused((yield url), origin, BREAK - 0.5 * step)
    assert (server.count("/outage"), server.connections) == (requests, connections)

    # Half-open with the server still down: one probe goes, fails, and the breaker opens again
    # for twice the break (the probe's request is not retried).
    clock.advance(BREAK - 2.0)
    assert breaker.state(url) == "half_open"
    check_response((yield url), 503, 1, "circuit_open")
    assert server.count("/outage") == MIN + 1
    assert breaker.state(url) == "open"
    assert breaker.opened_for(origin) == 2 * BREAK
    check_refused((yield url), origin, 2 * BREAK)
    clock.advance(BREAK)  # half of the doubled break: still open
    check_refused((yield url), origin, BREAK)
    assert breaker.state(url) == "open"
    assert server.count("/outage") == MIN + 1

    # The server comes back; once the break is over, the probe succeeds and closes it.
    server.script("/outage", then=Reply(200, b"back"))
    assert server.count("/outage") == MIN + 1
    clock.advance(BREAK)
    assert breaker.state(url) == "half_open"
    result = yield url
    check_response(result, 200, 1, "success")
    assert result.content == b"back"
    assert server.count("/outage") == MIN + 2
    assert breaker.state(url) == "closed"
    assert breaker.opened_for(origin) == BREAK  # the next break starts from the first again

    # Requests flow again, each one reaching the server.
    for n in range(1, 6):
        check_response((yield url), 200, 1, "success")
        assert server.count("/outage") == MIN + 2 + n
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_open",
                           "breaker_half_open", "breaker_close"]
    assert rig.breaks() == [BREAK, 2 * BREAK]


def test_server_503_then_back_sync(http_server: ScriptedHTTPServer) -> None:
    rig = Rig.make()
    run_sync(outage_503(rig, http_server), rig, max_attempts=ATTEMPTS)


@pytest.mark.anyio
async def test_server_503_then_back_async(http_server: ScriptedHTTPServer) -> None:
    rig = Rig.make()
    await run_async(outage_503(rig, http_server), rig, max_attempts=ATTEMPTS)


# -- 1. a port that refuses connections, then a server on it ------------------------------


def outage_refused(rig: Rig, port: int, servers: list[RawServer]) -> Scenario:
    breaker, clock = rig.breaker, rig.clock
    origin = f"http://127.0.0.1:{port}"
    url = origin + "/raw"

    # Nothing listens: the first request's connections are refused until the breaker opens.
    check_connect_error((yield url), MIN, "circuit_open")
    assert breaker.state(url) == "open"
    for step in range(1, 4):
        clock.advance(0.5)
        check_refused((yield url), origin, BREAK - 0.5 * step)

    # The probe is refused too: open again, for twice the break.
    clock.advance(BREAK - 1.5)
    assert breaker.state(url) == "half_open"
    check_connect_error((yield url), 1, "circuit_open")
    assert breaker.state(url) == "open"
    assert breaker.opened_for(origin) == 2 * BREAK
    check_refused((yield url), origin, 2 * BREAK)

    # The server comes back while the breaker is still open: nothing even connects to it.
    server = RawServer(port).start()
    servers.append(server)
    assert server.script(then="ok") == url
    for step in range(1, 4):
        clock.advance(1.0)
        check_refused((yield url), origin, 2 * BREAK - step)
    assert (server.connections, server.count) == (0, 0)

    # After the doubled break, one probe connects, succeeds and closes the breaker.
    clock.advance(2 * BREAK - 3.0)
    assert breaker.state(url) == "half_open"
    result = yield url
    check_response(result, 200, 1, "success")
    assert result.content == FULL_BODY
    assert (server.connections, server.count) == (1, 1)
    assert breaker.state(url) == "closed"

    # Requests flow again: one connection each (the server closes after every answer).
    for n in range(2, 6):
        check_response((yield url), 200, 1, "success")
        assert (server.connections, server.count) == (n, n)
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_open",
                           "breaker_half_open", "breaker_close"]
    assert rig.breaks() == [BREAK, 2 * BREAK]


@pytest.fixture
def revivable() -> Any:
    """A port nothing listens on yet, and the servers a test later starts on it."""
    servers: list[RawServer] = []
    try:
        yield closed_port(), servers
    finally:
        for server in servers:
            server.stop()


def test_port_refused_then_back_sync(revivable: tuple[int, list[RawServer]]) -> None:
    rig = Rig.make()
    run_sync(outage_refused(rig, *revivable), rig, max_attempts=ATTEMPTS)


@pytest.mark.anyio
async def test_port_refused_then_back_async(revivable: tuple[int, list[RawServer]]) -> None:
    rig = Rig.make()
    await run_async(outage_refused(rig, *revivable), rig, max_attempts=ATTEMPTS)


# -- 2. retries disabled per request -----------------------------------------------------


def retries_disabled(rig: Rig, server: ScriptedHTTPServer) -> Scenario:
    breaker, clock, origin = rig.breaker, rig.clock, server.url
    url = server.script("/off", then=Reply(503))

    # One attempt per request; the MIN-th opens the breaker.
    for n in range(1, MIN + 1):
        assert breaker.state(url) == "closed"
        check_response((yield url, OFF), 503, 1, "disabled")
        assert server.count("/off") == n
    assert breaker.state(url) == "open"

    # Requests without retries are refused all the same, without I/O.
    connections = server.connections
    for _ in range(3):
        check_refused((yield url, OFF), origin, BREAK)
    check_refused((yield url), origin, BREAK)  # and with retries on
    assert (server.count("/off"), server.connections) == (MIN, connections)

    # A request without retries may be the probe, and closes the breaker.
    server.script("/off", then=Reply(200))
    clock.advance(BREAK)
    check_response((yield url, OFF), 200, 1, "success")
    assert server.count("/off") == MIN + 1
    assert breaker.state(url) == "closed"
    for n in range(1, 4):
        check_response((yield url, OFF), 200, 1, "success")
        assert server.count("/off") == MIN + 1 + n
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_close"]


def test_retries_disabled_sync(http_server: ScriptedHTTPServer) -> None:
    rig = Rig.make()
    run_sync(retries_disabled(rig, http_server), rig, max_attempts=ATTEMPTS)


@pytest.mark.anyio
async def test_retries_disabled_async(http_server: ScriptedHTTPServer) -> None:
    rig = Rig.make()
    await run_async(retries_disabled(rig, http_server), rig, max_attempts=ATTEMPTS)


# -- 3. what counts: refused connections do, 404s do not ---------------------------------


def what_counts(rig: Rig, server: ScriptedHTTPServer, refused_url: str) -> Scenario:
    breaker = rig.breaker
    refused_origin = refused_url.rsplit("/", 1)[0]

    # Four refused connections (one attempt each) open the refused origin's breaker...
    for _ in range(4):
        assert breaker.state(refused_url) == "closed"
        check_connect_error((yield refused_url), 1, "max_attempts")
    assert breaker.state(refused_url) == "open"
    check_refused((yield refused_url), refused_origin, BREAK)

    # ... and not the server's: each origin has its own state.
    missing = server.script("/missing", then=Reply(404, b"no such thing"))
    broken = server.script("/broken", then=Reply(503))
    assert breaker.state(missing) == "closed"

    # 404s are healthy answers: any number of them leaves the breaker closed...
    for n in range(1, 7):
        check_response((yield missing), 404, 1, "not_retryable")
        assert server.count("/missing") == n
    assert breaker.state(missing) == "closed"
    # ... and they count as outcomes: 3 failures in 9 outcomes stay under the ratio, 6 in 12
    # reach it (not 3 of 3, as they would if the 404s were left out).
    for n in range(1, 7):
        assert breaker.state(broken) == "closed"
        check_response((yield broken), 503, 1, "max_attempts")
        assert server.count("/broken") == n
    assert breaker.state(broken) == "open"
    # Open for the whole origin: a path that only ever answered 404 is refused too.
    check_refused((yield missing), server.url, BREAK)
    assert server.count("/missing") == 6
    assert breaker.state(refused_url) == "open"
    assert rig.kinds() == ["breaker_open", "breaker_open"]
    assert [event.error for event in rig.events] == ["ConnectError", None]
    assert [event.status for event in rig.events] == [None, 503]


def test_connect_errors_count_404s_do_not_sync(
    http_server: ScriptedHTTPServer, refused_url: str
) -> None:
    rig = Rig.make(min_requests=4)
    run_sync(what_counts(rig, http_server, refused_url), rig, max_attempts=1)


@pytest.mark.anyio
async def test_connect_errors_count_404s_do_not_async(
    http_server: ScriptedHTTPServer, refused_url: str
) -> None:
    rig = Rig.make(min_requests=4)
    await run_async(what_counts(rig, http_server, refused_url), rig, max_attempts=1)


# -- 4. a half-open breaker under load ---------------------------------------------------


class _HoldHandler(BaseHTTPRequestHandler):
    """``/down`` answers 503 at once; a path given a gate (``HoldServer.gate``) waits for it
    and answers the gate's status; any other path waits for the server's ``release``."""

    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    timeout = BOUND
    server: HoldServer

    def setup(self) -> None:
        super().setup()
        self.server.note_connection()

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        self.server.arrive(path)
        gate = self.server.gates.get(path)
        if path == "/down":
            status = 503
        elif gate is not None:
            event, status = gate
            if not event.wait(BOUND):
                status = 504
        else:
            status = 200 if self.server.release.wait(BOUND) else 504
        body = b"held" if status == 200 else b"down"
        self.send_response_only(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HoldServer(LocalHTTPServer):
    """A threaded HTTP/1.1 server that holds requests until ``release`` is set; counts
    requests per path (as they arrive) and connections."""

    request_queue_size = 128

    def __init__(self) -> None:
        super().__init__(_HoldHandler)
        self.release = threading.Event()
        self.gates: dict[str, tuple[threading.Event, int]] = {}
        self.connections = 0
        self._counts: dict[str, int] = {}
        self._changed = threading.Condition()

    def stop(self) -> None:
        self.release.set()  # the held requests answer first
        for event, _ in self.gates.values():
            event.set()
        super().stop()

    def gate(self, path: str, status: int, *, open: bool = False) -> threading.Event:
        """Hold requests to ``path`` until the event returned is set, then answer ``status``."""
        event = threading.Event()
        if open:
            event.set()
        self.gates[path] = (event, status)
        return event

    def note_connection(self) -> None:
        with self._changed:
            self.connections += 1

    def arrive(self, path: str) -> None:
        with self._changed:
            self._counts[path] = self._counts.get(path, 0) + 1
            self._changed.notify_all()

    def count(self, path: str) -> int:
        with self._changed:
            return self._counts.get(path, 0)

    def wait_for(self, path: str, count: int, timeout: float = WAIT) -> bool:
        """Whether ``count`` requests to ``path`` arrived within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self._counts.get(path, 0) >= count, timeout)


@pytest.fixture
def hold_server() -> Any:
    server = HoldServer().start()
    try:
        yield server
    finally:
        server.stop()


PROBES = 2


@dataclass
class Crowd:
    """What the requests sent at a half-open breaker ended with."""

    size: int
    responses: list[Any] = field(default_factory=list)
    refused: list[Any] = field(default_factory=list)
    unexpected: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_refused(self, exc: Exception) -> bool:
        """Record a refusal; True when every request but the probes has been refused."""
        with self.lock:
            self.refused.append(exc)
            return len(self.refused) == self.size - PROBES


def check_crowd(crowd: Crowd, rig: Rig, server: HoldServer, during: tuple[int, int, int]
                ) -> None:
    origin = server.url
    assert crowd.unexpected == []
    # While the probes were held: exactly PROBES requests at the server, all others refused
    # with every probe slot taken (remaining 0.0), none answered yet.
    assert during == (PROBES, crowd.size - PROBES, 0)
    assert len(crowd.refused) == crowd.size - PROBES
    for exc in crowd.refused:
        check_refused(exc, origin, 0.0)
    assert [response.status_code for response in crowd.responses] == [200] * PROBES
    assert server.count("/hold") == PROBES
    assert server.connections <= PROBES  # the pool's connection to /down, and one more
    assert rig.breaker.state(origin) == "closed"


def test_half_open_lets_two_of_16_threads_through(hold_server: HoldServer) -> None:
    rig = Rig.make(min_requests=2, half_open_probes=PROBES)
    origin, crowd = hold_server.url, Crowd(16)
    transport = rt.RetryTransport(sleep=Waits().sleep, **rig.transport_kwargs(max_attempts=1))
    everyone_refused = threading.Event()
    with httpx.Client(transport=transport, timeout=client_timeout()) as client:
        assert [client.get(origin + "/down").status_code for _ in range(2)] == [503, 503]
        assert rig.breaker.state(origin) == "open"
        rig.clock.advance(BREAK)
        assert rig.breaker.state(origin) == "half_open"

        def worker() -> None:
            try:
                response = client.get(origin + "/hold")
            except rt.CircuitOpenError as exc:
                if crowd.add_refused(exc):
                    everyone_refused.set()
            except BaseException as exc:  # reported by check_crowd
                crowd.unexpected.append(exc)
            else:
                with crowd.lock:
                    crowd.responses.append(response)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(crowd.size)]
        try:
            for thread in threads:
                thread.start()
            assert hold_server.wait_for("/hold", PROBES), "the probes never arrived"
            assert everyone_refused.wait(WAIT), (len(crowd.refused), crowd.unexpected)
            during = (hold_server.count("/hold"), len(crowd.refused), len(crowd.responses))
        finally:
            hold_server.release.set()
            for thread in threads:
                thread.join(WAIT)
        assert not any(thread.is_alive() for thread in threads)
        check_crowd(crowd, rig, hold_server, during)

        # Closed: requests flow again.
        for n in range(1, 4):
            assert client.get(origin + "/hold").status_code == 200
            assert hold_server.count("/hold") == PROBES + n
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_close"]


@pytest.mark.anyio
async def test_half_open_lets_two_of_50_tasks_through(hold_server: HoldServer) -> None:
    rig = Rig.make(min_requests=2, half_open_probes=PROBES)
    origin, crowd = hold_server.url, Crowd(50)
    transport = rt.AsyncRetryTransport(sleep=Waits().asleep,
                                       **rig.transport_kwargs(max_attempts=1))
    everyone_refused = anyio.Event()
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as client:
        for _ in range(2):
            assert (await client.get(origin + "/down")).status_code == 503
        assert rig.breaker.state(origin) == "open"
        rig.clock.advance(BREAK)
        assert rig.breaker.state(origin) == "half_open"

        async def task() -> None:
            try:
                response = await client.get(origin + "/hold")
            except rt.CircuitOpenError as exc:
                if crowd.add_refused(exc):
                    everyone_refused.set()
            except Exception as exc:  # reported by check_crowd
                crowd.unexpected.append(exc)
            else:
                crowd.responses.append(response)

        arrived = False
        during = (-1, -1, -1)
        async with anyio.create_task_group() as group:
            try:
                for _ in range(crowd.size):
                    group.start_soon(task)
                with anyio.move_on_after(WAIT):
                    await everyone_refused.wait()
                arrived = await anyio.to_thread.run_sync(hold_server.wait_for, "/hold", PROBES)
                during = (hold_server.count("/hold"), len(crowd.refused), len(crowd.responses))
            finally:
                hold_server.release.set()
        assert arrived, "the probes never arrived"
        check_crowd(crowd, rig, hold_server, during)

        for n in range(1, 4):
            assert (await client.get(origin + "/hold")).status_code == 200
            assert hold_server.count("/hold") == PROBES + n
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_close"]



@pytest.mark.anyio
async def test_a_cancelled_probe_frees_its_slot(hold_server: HoldServer) -> None:
    rig = Rig.make(min_requests=2)  # one probe at a time
    origin = hold_server.url
    gates = [hold_server.gate("/slow", 200), hold_server.gate("/fast", 200, open=True)]
    transport = rt.AsyncRetryTransport(sleep=Waits().asleep,
                                       **rig.transport_kwargs(max_attempts=1))
    refused: Any = None
    done: list[bool] = []
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as client:
        for _ in range(2):
            assert (await client.get(origin + "/down")).status_code == 503
        rig.clock.advance(BREAK)
        scope = anyio.CancelScope()

        async def probe() -> None:
            with scope:
                await client.get(origin + "/slow")
            done.append(scope.cancel_called)

        async with anyio.create_task_group() as group:
            try:
                group.start_soon(probe)
                assert await anyio.to_thread.run_sync(hold_server.wait_for, "/slow", 1)
                try:
                    await client.get(origin + "/fast")
                except rt.CircuitOpenError as exc:
                    refused = exc
                scope.cancel()
                await _until(lambda: bool(done))
            finally:
                for event in gates:
                    event.set()
        check_refused(refused, origin, 0.0)  # the probe's slot was taken...
        assert done == [True]
        assert rig.breaker.state(origin) == "half_open"
        # ... and its cancellation gave it back: the next request is the probe, and closes it.
        response = await client.get(origin + "/fast")
        check_response(response, 200, 1, "success")
        assert (hold_server.count("/slow"), hold_server.count("/fast")) == (1, 1)
        assert rig.breaker.state(origin) == "closed"
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_close"]

# -- a probe that outlives its half-open period ------------------------------------------

async def _until(condition: Any) -> None:
    """Wait (a bounded while) until ``condition()`` is true."""
    with anyio.fail_after(WAIT):
        while not condition():
            await anyio.sleep(0.005)


def test_a_stale_probe_does_not_decide_the_next_half_open_period(
    hold_server: HoldServer,
) -> None:
    rig = Rig.make(min_requests=2, half_open_probes=PROBES)
    origin = hold_server.url
    fail_a, pass_b, fail_c = (hold_server.gate(path, status)
                              for path, status in (("/a", 503), ("/b", 200), ("/c", 503)))
    results: dict[str, Any] = {}
    transport = rt.RetryTransport(sleep=Waits().sleep, **rig.transport_kwargs(max_attempts=1))
    with httpx.Client(transport=transport, timeout=client_timeout()) as client:

        def get(path: str) -> None:
            try:
                results[path] = client.get(origin + path)
            except Exception as exc:
                results[path] = exc

        threads = {path: threading.Thread(target=get, args=(path,), daemon=True)
                   for path in ("/a", "/b", "/c")}
        try:
            assert [client.get(origin + "/down").status_code for _ in range(2)] == [503, 503]
            rig.clock.advance(BREAK)
            # Half-open: A and B are its two probes. A fails: open again, for twice the break.
            threads["/a"].start()
            threads["/b"].start()
            assert hold_server.wait_for("/a", 1) and hold_server.wait_for("/b", 1)
            fail_a.set()
            threads["/a"].join(WAIT)
            check_response(results["/a"], 503, 1, "max_attempts")
            assert rig.breaker.state(origin) == "open"
            assert rig.breaker.opened_for(origin) == 2 * BREAK
            # Half-open again: C is this period's probe. B, from the last period, answers.
            rig.clock.advance(2 * BREAK)
            threads["/c"].start()
            assert hold_server.wait_for("/c", 1)
            pass_b.set()
            threads["/b"].join(WAIT)
            check_response(results["/b"], 200, 1, "success")
            after_b = rig.breaker.state(origin)
            fail_c.set()
            threads["/c"].join(WAIT)
            check_response(results["/c"], 503, 1, "max_attempts")
            after_c = rig.breaker.state(origin), rig.breaker.opened_for(origin)
        finally:
            for event in (fail_a, pass_b, fail_c):
                event.set()
            for thread in threads.values():
                if thread.ident is not None:
                    thread.join(WAIT)
    # B was admitted before the breaker opened again, like any request in flight then: its
    # answer says nothing of this period. C's failure decides it: open for twice as long.
    assert after_b == "half_open"
    assert after_c == ("open", 4 * BREAK)


@pytest.mark.anyio
async def test_a_cancelled_stale_probe_frees_no_current_slot(hold_server: HoldServer) -> None:
    rig = Rig.make(min_requests=2, half_open_probes=PROBES)
    origin = hold_server.url
    fail_a = hold_server.gate("/a", 503)
    gates = [fail_a, hold_server.gate("/b", 200), hold_server.gate("/c", 200),
             hold_server.gate("/d", 200), hold_server.gate("/e", 200, open=True)]
    results: dict[str, Any] = {}
    transport = rt.AsyncRetryTransport(sleep=Waits().asleep,
                                       **rig.transport_kwargs(max_attempts=1))
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as client:

        async def get(path: str) -> None:
            try:
                results[path] = await client.get(origin + path)
            except Exception as exc:
                results[path] = exc

        b_scope = anyio.CancelScope()
        b_done: list[bool] = []

        async def get_b() -> None:
            with b_scope:
                await get("/b")
            b_done.append(True)

        for _ in range(2):
            assert (await client.get(origin + "/down")).status_code == 503
        rig.clock.advance(BREAK)
        async with anyio.create_task_group() as group:
            try:
                # Half-open: A and B are its probes. A fails: open again.
                group.start_soon(get, "/a")
                group.start_soon(get_b)
                for path in ("/a", "/b"):
                    assert await anyio.to_thread.run_sync(hold_server.wait_for, path, 1)
                fail_a.set()
                await _until(lambda: "/a" in results)
                # Half-open again: C and D take both probe slots; E is refused.
                rig.clock.advance(2 * BREAK)
                group.start_soon(get, "/c")
                group.start_soon(get, "/d")
                for path in ("/c", "/d"):
                    assert await anyio.to_thread.run_sync(hold_server.wait_for, path, 1)
                await get("/e")
                first_e = results.pop("/e")
                # B, from the last period, is cancelled; C and D still hold both slots.
                b_scope.cancel()
                await _until(lambda: bool(b_done))
                await get("/e")
                second_e = results.pop("/e")
                reached = hold_server.count("/e")
            finally:
                for event in gates:
                    event.set()
    check_response(results["/a"], 503, 1, "max_attempts")
    assert "/b" not in results  # cancelled
    check_refused(first_e, origin, 0.0)
    # With C and D in flight, a third probe must be refused: half_open_probes is 2.
    check_refused(second_e, origin, 0.0)
    assert reached == 0
