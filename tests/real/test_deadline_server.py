"""A caller's deadline, inherited by a real ASGI server (uvicorn on 127.0.0.1) through
``retry_transport.asgi.DeadlineMiddleware``, and passed on by that server's own retry
transport to the next service, which then hears nothing once the first caller gave up; a
``DeadlineExceeded`` that escapes a handler, answered ``504`` by uvicorn and by the standard
library's WSGI server (``wsgiref``) through ``retry_transport.wsgi.DeadlineMiddleware``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, MutableMapping
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler

import httpx
import pytest
import uvicorn

import retry_transport as rt
from retry_transport import wsgi
from retry_transport._policy import deadlines as _deadlines
from retry_transport.asgi import DeadlineMiddleware
from tests.real.servers import BOUND, LocalHTTPServer

pytestmark = pytest.mark.real

HEADER = "x-request-deadline-ms"


class UvicornThread:
    """An ASGI app served by uvicorn on a free port of 127.0.0.1, from a daemon thread."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
            # no logging set-up of its own, the pure-Python parser, no websockets import:
            # nothing of the test process changes, whatever else is installed
            log_config=None, access_log=False, http="h11", ws="none", loop="asyncio",
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> UvicornThread:
        self._thread.start()
        until = time.monotonic() + BOUND
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > until:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.005)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(BOUND)


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """Serves an ASGI app wrapped in the middleware (given the keywords passed) with
    uvicorn; gives its URL. Every server is stopped at the end of the test."""
    started: list[UvicornThread] = []

    def start(app: Any, **options: Any) -> str:
        server = UvicornThread(DeadlineMiddleware(app, **options))
        started.append(server)
        return server.start().url

    try:
        yield start
    finally:
        for server in started:
            server.stop()


async def _answer(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class Reporter:
    """An ASGI app that answers each request with the ``time_left()`` it ran with."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        await _answer(send, 200, json.dumps({"left": _deadlines.time_left()}).encode())


@pytest.fixture(scope="module")
def _reporter() -> Iterator[tuple[Reporter, str]]:
    app = Reporter()
    server = UvicornThread(DeadlineMiddleware(app)).start()
    try:
        yield app, server.url
    finally:
        server.stop()


@pytest.fixture
def reporter(_reporter: tuple[Reporter, str]) -> Iterator[tuple[Reporter, httpx.Client]]:
    """The module's uvicorn server of a :class:`Reporter` (its calls counted from 0) and a
    plain client of it."""
    app, url = _reporter
    app.calls = 0
    with httpx.Client(base_url=url) as client:
        yield app, client


def test_the_app_runs_within_the_time_the_caller_sent(
    reporter: tuple[Reporter, httpx.Client],
) -> None:
    app, client = reporter
    response = client.get("/", headers={HEADER: "1500"})
    assert response.status_code == 200
    left = response.json()["left"]
    assert 1.0 < left <= 1.5
    assert app.calls == 1


def test_a_caller_out_of_time_is_answered_504_without_the_app(
    reporter: tuple[Reporter, httpx.Client],
) -> None:
    app, client = reporter
    response = client.get("/", headers={HEADER: "0"})
    assert response.status_code == 504
    assert response.text == "deadline exceeded\n"
    assert app.calls == 0


def test_without_the_header_the_app_runs_with_no_deadline(
    reporter: tuple[Reporter, httpx.Client],
) -> None:
    app, client = reporter
    with _deadlines.deadline(100):
        response = client.get("/")  # a plain client: the test's deadline is not sent
    assert response.json() == {"left": None}
    assert app.calls == 1


# -- three layers: client -> A -> B -------------------------------------------------------


class Unavailable(LocalHTTPServer):
    """Service B: answers 503 for ever, and notes when each request came (``time.monotonic``)
    and the deadline header it carried."""

    def __init__(self) -> None:
        super().__init__(_Unavailable)
        self.seen: list[tuple[float, str | None]] = []
        self._lock = threading.Lock()

    def note(self, header: str | None) -> None:
        with self._lock:
            self.seen.append((time.monotonic(), header))


class _Unavailable(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    timeout = BOUND
    server: Unavailable

    def do_GET(self) -> None:
        self.server.note(self.headers.get(HEADER))
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Forwarder:
    """Service A: calls the URL in its query (``?to=``) through a retry transport with no
    deadline of its own but the one it inherits; answers with what the transport did, and
    notes it (``self.reports``) should the caller have stopped listening."""

    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        target = parse_qs(scope["query_string"].decode())["to"][0]
        report: dict[str, Any] = {"inherited": _deadlines.time_left()}
        transport = rt.AsyncRetryTransport(
            deadline_header=HEADER, max_attempts=50, base_delay=0.05, max_delay=0.1,
            budget=None,
        )
        async with httpx.AsyncClient(transport=transport) as client:
            try:
                response = await client.get(target)
            except httpx.TimeoutException as exc:  # DeadlineExceeded among them
                info = rt.retry_info(exc)
                report["error"] = type(exc).__name__
            else:
                info = rt.retry_info(response)
                report["status"] = response.status_code
        assert info is not None  # every outcome of a retry transport carries it
        report.update(stop_reason=info.stop_reason.value if info.stop_reason else None,
                      attempts=info.attempts)
        self.reports.append(report)
        await _answer(send, 200, json.dumps(report).encode())


#: The caller's deadline, and what service A keeps back of the time it inherits for its
#: answer's way home; a hop (the request to A, A's answer back) takes at most HOP seconds,
#: what a loaded machine may take (a few milliseconds on an idle one). The margins were 50 ms
#: for the way home and 20 ms for B's notes, which a machine busy with other work overran.
DEADLINE = 2.0
OFFSET = 0.5
HOP = 0.5


def test_a_deadline_holds_across_three_services(serve: Callable[..., str]) -> None:
    """A, behind ``offset=OFFSET``, stops retrying B that much before its caller would stop
    waiting, so its answer is back before the caller's deadline (``margin`` > 0), and B
    hears nothing after the caller gave up."""
    service_b = Unavailable().start()
    service_a = Forwarder()
    try:
        url = serve(service_a, offset=OFFSET)
        transport = rt.RetryTransport(deadline_header=HEADER, max_attempts=1)
        with httpx.Client(transport=transport, base_url=url) as client, rt.deadline(DEADLINE):
            scope = _deadlines.current()
            assert scope is not None
            ends = scope.end  # on time.monotonic, as B's notes
            response = client.get("/", params={"to": service_b.url})  # not a timeout
            arrived = time.monotonic()
        time.sleep(0.05)  # anything B would still receive, late, arrives by now
    finally:
        service_b.stop()

    margin = ends - arrived
    assert 0 < margin, margin  # back before the caller gave up

    seen = list(service_b.seen)
    assert len(seen) >= 5, seen  # A did retry, for most of its time
    assert max(at for at, _ in seen) < ends, (ends, seen)  # nothing after the caller gave up
    # Each attempt went with time left of A's own deadline, OFFSET before the caller's:
    # A stopped at its deadline, whenever B got round to noting what arrived.
    sent = [int(header) for _, header in seen if header is not None]
    ceiling = (DEADLINE - OFFSET) * 1000
    assert len(sent) == len(seen) and all(0 < ms <= ceiling for ms in sent), sent
    assert sent == sorted(sent, reverse=True)  # the time left, each attempt less

    assert len(service_a.reports) == 1
    report = service_a.reports[0]
    assert DEADLINE - OFFSET - HOP < report["inherited"] <= DEADLINE - OFFSET
    assert report["stop_reason"] == "deadline"
    assert report["attempts"] == len(seen)
    assert response.status_code == 200
    assert response.json() == report


# -- a DeadlineExceeded that escapes a handler ----------------------------------------------


class Careless:
    """An ASGI app that calls the URL in its query (``?to=``) through a retry transport
    that passes the deadline on, and catches nothing (``/bug`` raises ``RuntimeError``
    instead): ``calls`` counts its requests."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        if scope["path"] == "/bug":
            raise RuntimeError("a bug")
        target = parse_qs(scope["query_string"].decode())["to"][0]
        transport = rt.AsyncRetryTransport(deadline_header=HEADER)
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get(target)
        await _answer(send, response.status_code, b"{}")


def test_uvicorn_answers_an_escaped_deadline_504(serve: Callable[..., str]) -> None:
    """1 ms granted is too little to send B anything: the handler's call raises
    ``DeadlineExceeded``, which uvicorn would answer 500; another error still is."""
    service_b = Unavailable().start()
    app = Careless()
    try:
        with httpx.Client(base_url=serve(app)) as client:
            response = client.get("/", params={"to": service_b.url}, headers={HEADER: "1"})
            bug = client.get("/bug", headers={HEADER: "1000"})
    finally:
        service_b.stop()
    assert response.status_code == 504
    assert response.text == "deadline exceeded\n"
    assert response.headers["content-type"].startswith("text/plain")
    assert bug.status_code == 500
    assert app.calls == 2
    assert service_b.seen == []


class _QuietWSGIHandler(WSGIRequestHandler):
    disable_nagle_algorithm = True
    timeout = BOUND

    def log_message(self, format: str, *args: Any) -> None:
        pass


class WSGIRefServer(LocalHTTPServer):
    """A WSGI app served by the standard library's ``wsgiref`` handler (which keeps the
    status and headers until the first item, as PEP 3333 asks) on 127.0.0.1."""

    def __init__(self, app: Any) -> None:
        super().__init__(_QuietWSGIHandler)
        self.application = app
        self.base_environ = {
            "SERVER_NAME": "127.0.0.1", "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PORT": str(self.server_port), "REMOTE_HOST": "", "CONTENT_LENGTH": "",
            "SCRIPT_NAME": "",
        }

    def get_app(self) -> Any:
        return self.application


def test_wsgiref_answers_an_escaped_deadline_504() -> None:
    """A generator response that called ``start_response("200 OK")`` and then raised
    ``DeadlineExceeded`` before its first item: the 504 replaces the 200."""
    service_b = Unavailable().start()

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        target = parse_qs(environ["QUERY_STRING"])["to"][0]
        with httpx.Client(transport=rt.RetryTransport(deadline_header=HEADER)) as client:
            yield str(client.get(target).status_code).encode()

    server = WSGIRefServer(wsgi.DeadlineMiddleware(app)).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            response = client.get("/", params={"to": service_b.url}, headers={HEADER: "1"})
            served = client.get("/", params={"to": service_b.url}, headers={HEADER: "5000"})
    finally:
        server.stop()
        service_b.stop()
    assert response.status_code == 504
    assert response.text == "deadline exceeded\n"
    assert served.status_code == 200 and served.text == "503"  # B was called this time
    assert len(service_b.seen) >= 1
