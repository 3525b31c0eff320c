"""The server-side middlewares: an application runs within the deadline its caller sent in
``x-request-deadline-ms``, and within no other.

The ASGI middleware is called through ``httpx.ASGITransport`` (on asyncio and trio; a
table of values on both for its first row, on asyncio for the others: ``tests.tables``), the
WSGI one through ``httpx.WSGITransport``, and each directly where a transport cannot send
what the test needs. Every application reports ``time_left()`` from inside; no test sleeps,
so a deadline of 1.5 s reads between 1.0 and 1.5 s whatever the machine's speed.
"""

from __future__ import annotations

import logging
import math
import sys
import types
from collections.abc import Iterator, MutableMapping
from typing import Any

import anyio
import httpx
import pytest

import retry_transport as rt
from retry_transport import asgi, wsgi
from retry_transport._policy import deadlines as _deadlines
from retry_transport._policy.deadlines import deadline, time_left
from tests.tables import table

if sys.version_info >= (3, 11):
    from builtins import ExceptionGroup
else:  # pragma: no cover - Python 3.10: the backport anyio depends on
    from exceptiongroup import ExceptionGroup

HEADER = "x-request-deadline-ms"

#: Values that grant no deadline: the application runs with none.
MALFORMED = [
    pytest.param("-1", id="negative"),
    pytest.param("+5", id="plus-sign"),
    pytest.param("1.5", id="decimals"),
    pytest.param("1e3", id="exponent"),
    pytest.param("0x10", id="hex"),
    pytest.param("abc", id="letters"),
    pytest.param("", id="empty"),
    pytest.param("   ", id="blank"),
    pytest.param("1 5", id="inner-space"),
    pytest.param("15ms", id="unit"),
    pytest.param("1" * 16, id="16-digits"),
    pytest.param("1" * 40, id="40-digits"),
    pytest.param("100, 200", id="a-list"),
]
#: Values of 0: the caller's deadline has passed.
ZEROS = ["0", "000", " 0\t"]
#: Values written with the blanks HTTP allows around them.
PADDED = [" 1500", "1500 ", "\t1500\t"]


def between(left: float | None, seconds: float) -> bool:
    """``left`` is what ``seconds`` leave after the little time a test takes."""
    return left is not None and seconds - 0.5 < left <= seconds


#: The two flavours of ``DeadlineExceeded``: ``retry_transport``'s and its httpx2 twin's.
KINDS = ["httpx", "httpx2"]


def deadline_exceeded(kind: str = "httpx") -> Exception:
    """What a backend call through a retry transport raises once the deadline has passed."""
    if kind == "httpx":
        return rt.DeadlineExceeded("the deadline passed before the request could be sent",
                                   request=httpx.Request("GET", "https://backend.example/"))
    httpx2 = pytest.importorskip("httpx2")
    rt2 = pytest.importorskip("retry_transport.httpx2")
    error: Exception = rt2.DeadlineExceeded(
        "the deadline passed before the request could be sent",
        request=httpx2.Request("GET", "https://backend.example/"))
    return error


def escaped(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The records of the middlewares' line for a deadline that escaped the application."""
    return [record for record in caplog.records
            if record.name == "retry_transport" and "ran out in the application" in
            record.getMessage()]


def assert_expired(response: httpx.Response) -> None:
    """``response`` is the middlewares' short ``504``."""
    assert response.status_code == 504
    assert response.text == "deadline exceeded\n"
    assert response.headers["content-length"] == str(len(response.content))
    assert response.headers["content-type"].startswith("text/plain")


# -- ASGI ---------------------------------------------------------------------------------


class ASGIApp:
    """Records ``time_left()`` and the scope of each call; answers 200 with the time left."""

    def __init__(self) -> None:
        self.lefts: list[float | None] = []
        self.scopes: list[MutableMapping[str, Any]] = []

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        left = time_left()
        self.lefts.append(left)
        self.scopes.append(scope)
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": repr(left).encode()})


async def asgi_get(app: Any, headers: Any = None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://testserver") as client:
        return await client.get("/", headers=headers)


@pytest.mark.anyio
async def test_asgi_the_app_runs_within_the_deadline_sent() -> None:
    app = ASGIApp()
    response = await asgi_get(asgi.DeadlineMiddleware(app), {HEADER: "1500"})
    assert response.status_code == 200
    assert between(app.lefts[0], 1.5), app.lefts
    assert time_left() is None  # the caller's context never changes


@pytest.mark.anyio
@table("value", PADDED, over="anyio_backend")
async def test_asgi_blanks_around_the_value_are_allowed(value: str) -> None:
    app = ASGIApp()
    await asgi_get(asgi.DeadlineMiddleware(app), {HEADER: value})
    assert between(app.lefts[0], 1.5), app.lefts


@pytest.mark.anyio
@table("value", ZEROS, over="anyio_backend")
async def test_asgi_a_deadline_of_0_is_answered_504_without_the_app(value: str) -> None:
    app = ASGIApp()
    response = await asgi_get(asgi.DeadlineMiddleware(app), {HEADER: value})
    assert response.status_code == 504
    assert response.text == "deadline exceeded\n"
    assert response.headers["content-length"] == str(len(response.content))
    assert response.headers["content-type"].startswith("text/plain")
    assert app.lefts == []


@pytest.mark.anyio
@table(("max_seconds", "value"), [pytest.param(seconds, *row.values, id=f"{seconds}-{row.id}")
                                  for seconds in (None, 2.0) for row in MALFORMED],
       over="anyio_backend")
async def test_asgi_a_malformed_value_runs_the_app_with_no_deadline(
    value: str, max_seconds: float | None,
) -> None:
    app = ASGIApp()
    middleware = asgi.DeadlineMiddleware(app, max_seconds=max_seconds)
    response = await asgi_get(middleware, {HEADER: value})
    assert response.status_code == 200
    assert app.lefts == [None]


@pytest.mark.anyio
@pytest.mark.parametrize("max_seconds", [None, 2.0])
async def test_asgi_no_header_runs_the_app_with_no_deadline(max_seconds: float | None) -> None:
    app = ASGIApp()
    await asgi_get(asgi.DeadlineMiddleware(app, max_seconds=max_seconds))
    assert app.lefts == [None]


@pytest.mark.anyio
async def test_asgi_the_header_sent_twice_grants_no_deadline() -> None:
    app = ASGIApp()
    await asgi_get(asgi.DeadlineMiddleware(app), [(HEADER, "1500"), (HEADER, "1500")])
    assert app.lefts == [None]


@pytest.mark.anyio
@table(("value", "max_seconds", "expected"), [
    ("5000", 2.0, 2.0), ("1500", 2.0, 1.5), ("999999999999999", 0.5, 0.5),
], over="anyio_backend")
async def test_asgi_max_seconds_caps_what_a_caller_grants(
    value: str, max_seconds: float, expected: float,
) -> None:
    app = ASGIApp()
    await asgi_get(asgi.DeadlineMiddleware(app, max_seconds=max_seconds), {HEADER: value})
    assert between(app.lefts[0], expected), app.lefts


@pytest.mark.anyio
async def test_asgi_the_longest_value_is_no_deadline_a_timeout_cannot_hold() -> None:
    """15 digits (31,000 years) are taken, as the longest time an option may name."""
    app = ASGIApp()
    await asgi_get(asgi.DeadlineMiddleware(app), {HEADER: "9" * 15})
    assert between(app.lefts[0], 1e9), app.lefts


@pytest.mark.anyio
async def test_asgi_the_callers_deadline_does_not_leak_into_the_app() -> None:
    app = ASGIApp()
    middleware = asgi.DeadlineMiddleware(app)
    with deadline(100):
        await asgi_get(middleware)
        await asgi_get(middleware, {HEADER: "1500"})
        assert between(time_left(), 100)
    assert app.lefts[0] is None
    assert between(app.lefts[1], 1.5)  # not the least of 1.5 and 100: the only one


@pytest.mark.anyio
async def test_asgi_a_header_of_another_name_in_any_case() -> None:
    app = ASGIApp()
    middleware = asgi.DeadlineMiddleware(app, header="X-Deadline")
    await asgi_get(middleware, {"x-deadline": "1500"})
    await asgi_get(middleware, {HEADER: "1500"})
    assert between(app.lefts[0], 1.5)
    assert app.lefts[1] is None


async def _ignore_receive() -> MutableMapping[str, Any]:
    raise AssertionError("not called")  # pragma: no cover


@pytest.mark.anyio
@table(("name", "value", "granted"), [
    (b"X-Request-Deadline-Ms", b"1500", True),  # a server that kept the case
    (HEADER.encode(), "١٥٠٠".encode(), False),  # digits of another script
    (HEADER.encode(), b"\xff", False),
], over="anyio_backend")
async def test_asgi_headers_as_a_server_may_hand_them(name: bytes, value: bytes,
                                                      granted: bool) -> None:
    app = ASGIApp()
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "headers": [(name, value)]}
    await asgi.DeadlineMiddleware(app)(scope, _ignore_receive, send)
    assert between(app.lefts[0], 1.5) if granted else app.lefts == [None]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["lifespan", "websocket"])
async def test_asgi_other_scopes_pass_through_untouched(kind: str) -> None:
    """The app gets the very scope, receive and send, in the caller's own context."""
    got: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        got.extend([scope, receive, send, time_left()])

    async def send(message: Any) -> None:  # pragma: no cover - never called
        pass

    scope = {"type": kind, "headers": [(HEADER.encode(), b"0")]}
    with deadline(100):
        await asgi.DeadlineMiddleware(app)(scope, _ignore_receive, send)
    assert got[:3] == [scope, _ignore_receive, send]
    assert got[0] is scope and scope == {"type": kind, "headers": [(HEADER.encode(), b"0")]}
    assert between(got[3], 100)  # no fresh context: the caller's deadline holds


class Raiser:
    """An ASGI app that raises ``error``, after ``http.response.start`` with ``started``."""

    def __init__(self, error: BaseException, *, started: bool = False) -> None:
        self.error = error
        self.started = started
        self.calls = 0

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        if self.started:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        raise self.error


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("headers", [{HEADER: "1500"}, None], ids=["granted", "no-header"])
async def test_asgi_a_deadline_escaping_the_app_is_answered_504(
    kind: str, headers: Any, caplog: pytest.LogCaptureFixture,
) -> None:
    """Either flavour's ``DeadlineExceeded``, whether the caller sent a deadline or not."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    app = Raiser(deadline_exceeded(kind))
    assert_expired(await asgi_get(asgi.DeadlineMiddleware(app), headers))
    assert app.calls == 1
    assert len(escaped(caplog)) == 1


@pytest.mark.anyio
async def test_asgi_a_task_group_of_deadlines_is_answered_504() -> None:
    """A handler that fans its backend calls out in a task group gets an exception group."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        async def call() -> None:
            raise deadline_exceeded()

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            group.start_soon(call)

    assert_expired(await asgi_get(asgi.DeadlineMiddleware(app)))


@pytest.mark.anyio
async def test_asgi_a_group_with_another_error_reaches_the_server() -> None:
    """A group that holds anything besides deadlines is no deadline: raised as it is."""
    errors = ExceptionGroup("calls", [deadline_exceeded(), RuntimeError("bug")])
    with pytest.raises(ExceptionGroup) as raised:
        await asgi_get(asgi.DeadlineMiddleware(Raiser(errors)))
    assert raised.value is errors


@pytest.mark.anyio
async def test_asgi_another_error_still_reaches_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Raised as it is (a server answers 500), and not logged by the middleware."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    error = httpx.ReadTimeout("the backend was slow")  # a timeout, but no deadline's
    middleware = asgi.DeadlineMiddleware(Raiser(error))
    with pytest.raises(httpx.ReadTimeout) as raised:
        await asgi_get(middleware, {HEADER: "1500"})
    assert raised.value is error
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=middleware, raise_app_exceptions=False),
        base_url="http://testserver",
    ) as client:
        assert (await client.get("/")).status_code == 500
    assert escaped(caplog) == []


@pytest.mark.anyio
async def test_asgi_a_deadline_after_the_response_started_reaches_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing is sent after the application's own ``http.response.start``."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    error = deadline_exceeded()
    scope = {"type": "http", "method": "GET", "path": "/", "headers": []}
    with pytest.raises(rt.DeadlineExceeded) as raised:
        await asgi.DeadlineMiddleware(Raiser(error, started=True))(scope, _ignore_receive, send)
    assert raised.value is error
    assert sent == [{"type": "http.response.start", "status": 200, "headers": []}]
    assert escaped(caplog) == []


@pytest.mark.anyio
async def test_asgi_an_escaped_deadline_is_logged_at_info_without_the_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One INFO line, no traceback, the path shown without its query and parameters."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    middleware = asgi.DeadlineMiddleware(Raiser(deadline_exceeded()))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=middleware),
                                 base_url="http://testserver") as client:
        await client.get("/orders/42;jsessionid=s3cret", params={"token": "s3cret"})
    [record] = escaped(caplog)
    assert record.levelno == logging.INFO
    assert record.exc_info is None  # no traceback: no bug
    assert record.getMessage() == ("GET /orders/42: the deadline ran out in the application "
                                   "(DeadlineExceeded); answered 504")


# -- WSGI ---------------------------------------------------------------------------------


class WSGIApp:
    """Records ``time_left()`` of each call; answers 200 with the time left."""

    def __init__(self) -> None:
        self.lefts: list[float | None] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        left = time_left()
        self.lefts.append(left)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [repr(left).encode()]


def wsgi_get(app: Any, headers: Any = None, *,
             raise_app_exceptions: bool = True) -> httpx.Response:
    transport = httpx.WSGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
    with httpx.Client(transport=transport, base_url="http://testserver") as client:
        return client.get("/", headers=headers)


def call(app: Any, environ: dict[str, Any]) -> tuple[list[Any], Any]:
    """Call a WSGI app directly: the start_response calls it made, and its iterable."""
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Any:
        started.append((status, headers))
        return lambda data: None  # pragma: no cover - never written to

    return started, app(environ, start_response)


def test_wsgi_the_app_runs_within_the_deadline_sent() -> None:
    app = WSGIApp()
    response = wsgi_get(wsgi.DeadlineMiddleware(app), {HEADER: "1500"})
    assert response.status_code == 200
    assert between(app.lefts[0], 1.5), app.lefts
    assert time_left() is None


@pytest.mark.parametrize("value", PADDED)
def test_wsgi_blanks_around_the_value_are_allowed(value: str) -> None:
    app = WSGIApp()
    wsgi_get(wsgi.DeadlineMiddleware(app), {HEADER: value})
    assert between(app.lefts[0], 1.5), app.lefts


@pytest.mark.parametrize("value", ZEROS)
def test_wsgi_a_deadline_of_0_is_answered_504_without_the_app(value: str) -> None:
    app = WSGIApp()
    response = wsgi_get(wsgi.DeadlineMiddleware(app), {HEADER: value})
    assert response.status_code == 504
    assert response.text == "deadline exceeded\n"
    assert response.headers["content-length"] == str(len(response.content))
    assert response.headers["content-type"].startswith("text/plain")
    assert app.lefts == []
    started, body = call(wsgi.DeadlineMiddleware(app),
                         {"HTTP_X_REQUEST_DEADLINE_MS": value})
    assert [status for status, _ in started] == ["504 Gateway Timeout"]
    assert b"".join(body) == b"deadline exceeded\n"
    assert app.lefts == []


@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize("max_seconds", [None, 2.0])
def test_wsgi_a_malformed_value_runs_the_app_with_no_deadline(
    value: str, max_seconds: float | None,
) -> None:
    app = WSGIApp()
    response = wsgi_get(wsgi.DeadlineMiddleware(app, max_seconds=max_seconds), {HEADER: value})
    assert response.status_code == 200
    assert app.lefts == [None]


@pytest.mark.parametrize("max_seconds", [None, 2.0])
def test_wsgi_no_header_runs_the_app_with_no_deadline(max_seconds: float | None) -> None:
    app = WSGIApp()
    wsgi_get(wsgi.DeadlineMiddleware(app, max_seconds=max_seconds))
    assert app.lefts == [None]


@pytest.mark.parametrize("joined", ["1500,1500", "1500, 1500"])
def test_wsgi_the_header_sent_twice_grants_no_deadline(joined: str) -> None:
    """WSGI servers join the values of a repeated header with commas (httpx's WSGITransport
    keeps the last one only, so the environ is written here as a server writes it)."""
    app = WSGIApp()
    call(wsgi.DeadlineMiddleware(app), {"HTTP_X_REQUEST_DEADLINE_MS": joined})
    assert app.lefts == [None]


@pytest.mark.parametrize(("value", "max_seconds", "expected"), [
    ("5000", 2.0, 2.0), ("1500", 2.0, 1.5), ("999999999999999", 0.5, 0.5),
])
def test_wsgi_max_seconds_caps_what_a_caller_grants(
    value: str, max_seconds: float, expected: float,
) -> None:
    app = WSGIApp()
    wsgi_get(wsgi.DeadlineMiddleware(app, max_seconds=max_seconds), {HEADER: value})
    assert between(app.lefts[0], expected), app.lefts


def test_wsgi_the_callers_deadline_does_not_leak_into_the_app() -> None:
    app = WSGIApp()
    middleware = wsgi.DeadlineMiddleware(app)
    with deadline(100):
        wsgi_get(middleware)
        wsgi_get(middleware, {HEADER: "1500"})
        assert between(time_left(), 100)
    assert app.lefts[0] is None
    assert between(app.lefts[1], 1.5)


def test_wsgi_a_header_of_another_name() -> None:
    app = WSGIApp()
    middleware = wsgi.DeadlineMiddleware(app, header="X-Deadline")
    wsgi_get(middleware, {"x-deadline": "1500"})
    wsgi_get(middleware, {HEADER: "1500"})
    assert between(app.lefts[0], 1.5)
    assert app.lefts[1] is None


def test_wsgi_digits_of_another_script_grant_no_deadline() -> None:
    app = WSGIApp()
    call(wsgi.DeadlineMiddleware(app), {"HTTP_X_REQUEST_DEADLINE_MS": "١٥٠٠"})
    assert app.lefts == [None]


class Streamed:
    """A response iterable whose steps and ``close`` record ``time_left()``."""

    def __init__(self, lefts: list[tuple[str, float | None]]) -> None:
        self.lefts = lefts
        self.closed = 0

    def __iter__(self) -> Iterator[bytes]:
        self.lefts.append(("iter", time_left()))
        yield b"a"
        self.lefts.append(("step", time_left()))
        yield b"b"

    def close(self) -> None:
        self.closed += 1
        self.lefts.append(("close", time_left()))


@pytest.mark.parametrize("through", ["httpx", "direct"])
def test_wsgi_the_response_is_iterated_and_closed_within_the_deadline(through: str) -> None:
    lefts: list[tuple[str, float | None]] = []
    streamed = Streamed(lefts)

    def app(environ: dict[str, Any], start_response: Any) -> Streamed:
        lefts.append(("call", time_left()))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return streamed

    middleware = wsgi.DeadlineMiddleware(app)
    if through == "httpx":
        assert wsgi_get(middleware, {HEADER: "1500"}).content == b"ab"
    else:
        _, body = call(middleware, {"HTTP_X_REQUEST_DEADLINE_MS": "1500"})
        chunks = []
        for chunk in body:
            assert time_left() is None  # the caller's context, between steps
            chunks.append(chunk)
        body.close()
        assert chunks == [b"a", b"b"]
    assert [step for step, _ in lefts] == ["call", "iter", "step", "close"]
    assert all(between(left, 1.5) for _, left in lefts), lefts
    assert streamed.closed == 1
    assert time_left() is None


def test_wsgi_a_generator_response_sees_the_deadline_even_when_closed_early() -> None:
    lefts: list[tuple[str, float | None]] = []

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [])
        try:
            lefts.append(("first", time_left()))
            yield b"a"
            yield b"b"  # pragma: no cover - closed before
        finally:
            lefts.append(("close", time_left()))

    with deadline(100):
        _, body = call(wsgi.DeadlineMiddleware(app), {"HTTP_X_REQUEST_DEADLINE_MS": "1500"})
        assert next(iter(body)) == b"a"
        body.close()
        assert between(time_left(), 100)
    assert [step for step, _ in lefts] == ["first", "close"]
    assert all(between(left, 1.5) for _, left in lefts), lefts


def test_wsgi_a_list_response_is_handed_back_as_it_is() -> None:
    """A list runs no code of the app's when iterated: the server gets it (and its len)."""
    chunks = [b"ok"]

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return chunks

    _, body = call(wsgi.DeadlineMiddleware(app), {"HTTP_X_REQUEST_DEADLINE_MS": "1500"})
    assert body is chunks


def test_wsgi_errors_of_the_app_reach_the_server_and_the_context_is_left() -> None:
    def failing(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        raise RuntimeError("app failed")

    def failing_later(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [])
        yield b"a"
        raise RuntimeError("step failed")

    with pytest.raises(RuntimeError, match="app failed"):
        call(wsgi.DeadlineMiddleware(failing), {"HTTP_X_REQUEST_DEADLINE_MS": "1500"})
    _, body = call(wsgi.DeadlineMiddleware(failing_later), {"HTTP_X_REQUEST_DEADLINE_MS": "9"})
    with pytest.raises(RuntimeError, match="step failed"):
        list(body)
    body.close()
    assert time_left() is None


class Server:
    """Calls a WSGI app as PEP 3333 has a server do: ``start_response`` keeps the status and
    headers until the first item or ``write()`` sends them; a second call needs
    ``exc_info``, whose exception it raises again once they are sent."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []  # (status, exc_info) of each start_response
        self.sent: str | None = None  # the status that went out
        self.body: list[bytes] = []

    def start_response(self, status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Any:
        if self.calls and exc_info is None:
            raise AssertionError("start_response called again without exc_info")
        if exc_info is not None and self.sent is not None:
            raise exc_info[1].with_traceback(exc_info[2])
        self.calls.append((status, exc_info))
        return self.write

    def write(self, data: bytes) -> None:
        if self.sent is None:
            self.sent = self.calls[-1][0]
        self.body.append(data)

    def run(self, app: Any, environ: dict[str, Any] | None = None) -> Server:
        result = app({"REQUEST_METHOD": "GET", "PATH_INFO": "/", **(environ or {})},
                     self.start_response)
        try:
            for chunk in result:
                self.write(chunk)
        finally:
            getattr(result, "close", lambda: None)()
        if self.sent is None:  # an empty body: the headers go out at the end
            self.sent = self.calls[-1][0]
        return self


def escaping_apps(error: BaseException) -> dict[str, Any]:
    """Apps that let ``error`` escape before any of their response went out, by case."""

    def in_the_call(environ: Any, start_response: Any) -> list[bytes]:
        raise error

    def after_start_response(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        raise error

    def first_item(environ: Any, start_response: Any) -> Iterator[bytes]:
        raise error
        yield b"never"  # a generator: nothing of it runs before its first item

    def first_item_after_start_response(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        raise error
        yield b"never"

    class Refusing:
        def __iter__(self) -> Iterator[bytes]:
            raise error

    def in_iter(environ: Any, start_response: Any) -> Refusing:
        start_response("200 OK", [])
        return Refusing()

    return {"in-the-call": in_the_call, "after-start_response": after_start_response,
            "first-item": first_item,
            "first-item-after-start_response": first_item_after_start_response,
            "in-iter": in_iter}


ESCAPES = list(escaping_apps(RuntimeError()))
#: The cases where the application had called ``start_response``: the 504 replaces it.
REPLACED = {"after-start_response", "first-item-after-start_response", "in-iter"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", ESCAPES)
def test_wsgi_a_deadline_escaping_the_app_is_answered_504(kind: str, case: str) -> None:
    """Before any of the response went out, ``start_response`` called by the app or not."""
    error = deadline_exceeded(kind)
    middleware = wsgi.DeadlineMiddleware(escaping_apps(error)[case])
    server = Server().run(middleware, {"HTTP_X_REQUEST_DEADLINE_MS": "1500"})
    assert server.sent == "504 Gateway Timeout"
    assert b"".join(server.body) == b"deadline exceeded\n"
    if case in REPLACED:  # replaced as PEP 3333 allows: again, with exc_info
        [(first, _), (second, exc_info)] = server.calls
        assert (first, second) == ("200 OK", "504 Gateway Timeout")
        assert exc_info[1] is error
    else:
        assert server.calls == [("504 Gateway Timeout", None)]
    # in-process: httpx's WSGITransport raises an exception passed as exc_info by default
    assert_expired(wsgi_get(middleware, {HEADER: "1500"}, raise_app_exceptions=False))
    if case not in REPLACED:
        assert_expired(wsgi_get(middleware))


def test_wsgi_a_replaced_answer_raises_in_the_in_process_transport_by_default() -> None:
    """``httpx.WSGITransport`` surfaces an ``exc_info`` it is given unless told not to."""
    app = escaping_apps(deadline_exceeded())["after-start_response"]
    with pytest.raises(rt.DeadlineExceeded):
        wsgi_get(wsgi.DeadlineMiddleware(app))


def test_wsgi_a_group_of_deadlines_is_answered_504() -> None:
    """An exception group of nothing but deadlines is a deadline too."""
    errors = ExceptionGroup("calls", [deadline_exceeded(), deadline_exceeded()])
    app = escaping_apps(errors)["first-item"]
    assert_expired(wsgi_get(wsgi.DeadlineMiddleware(app)))


@pytest.mark.parametrize("case", ESCAPES)
def test_wsgi_another_error_still_reaches_the_server(
    case: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """Raised as it is (a server answers 500), and not logged by the middleware."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    error = RuntimeError("bug")
    middleware = wsgi.DeadlineMiddleware(escaping_apps(error)[case])
    server = Server()
    with pytest.raises(RuntimeError) as raised:
        server.run(middleware, {"HTTP_X_REQUEST_DEADLINE_MS": "1500"})
    assert raised.value is error
    assert server.sent is None
    assert all(status == "200 OK" for status, _ in server.calls)
    assert escaped(caplog) == []


def test_wsgi_a_deadline_after_the_response_went_out_reaches_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once an item was handed over, or ``write()`` called, nothing changes."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    error = deadline_exceeded()

    def after_an_item(environ: Any, start_response: Any) -> Iterator[bytes]:
        start_response("200 OK", [])
        yield b""  # even an empty item: some servers send the headers with it
        raise error

    def after_write(environ: Any, start_response: Any) -> list[bytes]:
        start_response("200 OK", [])(b"a")
        raise error

    for app in (after_an_item, after_write):
        server = Server()
        with pytest.raises(rt.DeadlineExceeded) as raised:
            server.run(wsgi.DeadlineMiddleware(app), {"HTTP_X_REQUEST_DEADLINE_MS": "1500"})
        assert raised.value is error
        assert [status for status, _ in server.calls] == ["200 OK"]
        assert server.sent == "200 OK"
    assert escaped(caplog) == []


def test_wsgi_an_escaped_deadline_is_logged_at_info_without_the_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One INFO line, no traceback, ``SCRIPT_NAME`` and ``PATH_INFO`` without parameters."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    app = escaping_apps(deadline_exceeded())["first-item"]
    Server().run(wsgi.DeadlineMiddleware(app), {
        "REQUEST_METHOD": "POST", "SCRIPT_NAME": "/shop", "PATH_INFO": "/orders;sid=s3cret",
        "QUERY_STRING": "token=s3cret",
    })
    [record] = escaped(caplog)
    assert record.levelno == logging.INFO
    assert record.exc_info is None
    assert record.getMessage() == ("POST /shop/orders: the deadline ran out in the "
                                   "application (DeadlineExceeded); answered 504")


# -- the arguments ------------------------------------------------------------------------

MIDDLEWARES = [asgi.DeadlineMiddleware, wsgi.DeadlineMiddleware]


async def _asgi_app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover
    pass


def _wsgi_app(environ: Any, start_response: Any) -> list[bytes]:  # pragma: no cover
    return []


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize(("header", "error"), [
    ("", ValueError), ("x deadline", ValueError), ("x-deadline:", ValueError),
    ("x-déadline", ValueError), ("x-deadline\n", ValueError), (None, TypeError),
    (1, TypeError), (b"x-deadline", TypeError), ("Content-Length", ValueError),
    ("content-length", ValueError), ("Idempotency-Key", ValueError), ("Host", ValueError),
])
def test_a_header_that_is_no_name_of_its_own_is_refused(middleware: Any, header: Any,
                                                        error: type[Exception]) -> None:
    """A string that is no header name of its own is a ValueError; anything but a string
    (None, a number, bytes) a TypeError."""
    with pytest.raises(error, match="header"):
        middleware(_asgi_app, header=header)


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize(("max_seconds", "error"), [
    (0, ValueError), (-1, ValueError), (0.0, ValueError), (math.inf, ValueError),
    (-math.inf, ValueError), (math.nan, ValueError), (True, TypeError), ("5", TypeError),
    (2e9, ValueError),
])
def test_max_seconds_must_be_a_finite_number_above_0(middleware: Any, max_seconds: Any,
                                                     error: type[Exception]) -> None:
    with pytest.raises(error, match="max_seconds"):
        middleware(_asgi_app, max_seconds=max_seconds)


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_the_app_must_be_callable(middleware: Any) -> None:
    """Something that cannot be called is the wrong kind of app: a TypeError naming it."""
    with pytest.raises(TypeError, match="app"):
        middleware(object())


@pytest.mark.parametrize(("middleware", "app"), [
    (asgi.DeadlineMiddleware, _asgi_app), (wsgi.DeadlineMiddleware, _wsgi_app),
])
def test_the_defaults_and_what_is_kept(middleware: Any, app: Any) -> None:
    plain = middleware(app)
    assert (plain.app, plain.header, plain.max_seconds, plain.offset) == (
        app, HEADER, None, 0.0)
    assert "x-request-deadline-ms" in repr(plain)
    assert repr(plain).endswith("max_seconds=None, offset=0.0)")
    given = middleware(app, header="X-Deadline", max_seconds=3, offset=1)
    assert (given.header, given.max_seconds, given.offset) == ("X-Deadline", 3.0, 1.0)
    assert isinstance(given.max_seconds, float) and isinstance(given.offset, float)
    assert repr(given).endswith("header='X-Deadline', max_seconds=3.0, offset=1.0)")


# -- offset: time kept back for the answer's way home ------------------------------------


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The middlewares' deadlines measured on a clock that stands still: ``time_left()`` in
    the application reads exactly what it was granted (no test sleeps)."""
    monkeypatch.setattr(_deadlines, "time", types.SimpleNamespace(monotonic=lambda: 5000.0))


#: (value sent, max_seconds, offset, time left in the app): the cap first, then the offset.
OFFSETS = [
    pytest.param("1500", None, 0.2, 1.3, id="1500ms-less-200ms"),
    pytest.param("1500", None, 0, 1.5, id="no-offset"),
    pytest.param("201", None, 0.2, 0.001, id="1ms-above"),
    pytest.param("5000", 2.0, 0.5, 1.5, id="capped-then-less"),
    pytest.param("999999999999999", None, 1, 1e9 - 1, id="the-longest"),
]
#: (value sent, max_seconds, offset) that leave no time: answered 504.
NO_TIME_LEFT = [
    pytest.param("200", None, 0.2, id="equal"),
    pytest.param("150", None, 0.2, id="below"),
    pytest.param("1", None, 0.005, id="1ms"),
    pytest.param("0", None, 0.2, id="zero"),
]


@pytest.mark.anyio
@table(("value", "max_seconds", "offset", "expected"), OFFSETS, over="anyio_backend")
async def test_asgi_the_app_gets_the_time_left_less_the_offset(
    frozen: None, value: str, max_seconds: float | None, offset: float, expected: float,
) -> None:
    """Capped at ``max_seconds`` first, then less the offset, read on a frozen clock."""
    app = ASGIApp()
    middleware = asgi.DeadlineMiddleware(app, max_seconds=max_seconds, offset=offset)
    assert (await asgi_get(middleware, {HEADER: value})).status_code == 200
    assert app.lefts == [pytest.approx(expected, abs=1e-9)]


@pytest.mark.anyio
@table(("value", "max_seconds", "offset"), NO_TIME_LEFT, over="anyio_backend")
async def test_asgi_no_time_above_the_offset_is_answered_504_without_the_app(
    value: str, max_seconds: float | None, offset: float,
) -> None:
    """The application could not answer before its caller gave up: it is not called."""
    app = ASGIApp()
    middleware = asgi.DeadlineMiddleware(app, max_seconds=max_seconds, offset=offset)
    response = await asgi_get(middleware, {HEADER: value})
    assert_expired(response)
    assert app.lefts == []


@pytest.mark.parametrize(("value", "max_seconds", "offset", "expected"), OFFSETS)
def test_wsgi_the_app_gets_the_time_left_less_the_offset(
    frozen: None, value: str, max_seconds: float | None, offset: float, expected: float,
) -> None:
    """Capped at ``max_seconds`` first, then less the offset, read on a frozen clock."""
    app = WSGIApp()
    middleware = wsgi.DeadlineMiddleware(app, max_seconds=max_seconds, offset=offset)
    assert wsgi_get(middleware, {HEADER: value}).status_code == 200
    assert app.lefts == [pytest.approx(expected, abs=1e-9)]


@pytest.mark.parametrize(("value", "max_seconds", "offset"), NO_TIME_LEFT)
def test_wsgi_no_time_above_the_offset_is_answered_504_without_the_app(
    value: str, max_seconds: float | None, offset: float,
) -> None:
    """The application could not answer before its caller gave up: it is not called."""
    app = WSGIApp()
    middleware = wsgi.DeadlineMiddleware(app, max_seconds=max_seconds, offset=offset)
    assert_expired(wsgi_get(middleware, {HEADER: value}))
    assert app.lefts == []


@pytest.mark.anyio
async def test_asgi_an_offset_is_no_deadline_of_its_own() -> None:
    """Without a deadline sent, or with a malformed one, the offset takes nothing off."""
    app = ASGIApp()
    middleware = asgi.DeadlineMiddleware(app, offset=0.5)
    await asgi_get(middleware)
    await asgi_get(middleware, {HEADER: "-1"})
    assert app.lefts == [None, None]


def test_wsgi_an_offset_is_no_deadline_of_its_own() -> None:
    """Without a deadline sent, or with a malformed one, the offset takes nothing off."""
    app = WSGIApp()
    middleware = wsgi.DeadlineMiddleware(app, offset=0.5)
    wsgi_get(middleware)
    wsgi_get(middleware, {HEADER: "-1"})
    assert app.lefts == [None, None]


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize(("offset", "error"), [
    pytest.param("0.1", TypeError, id="a-string"),
    pytest.param(None, TypeError, id="None"),
    pytest.param(True, TypeError, id="True"),
    pytest.param(False, TypeError, id="False"),
    pytest.param(b"1", TypeError, id="bytes"),
    pytest.param([0.1], TypeError, id="a-list"),
    pytest.param(-0.001, ValueError, id="negative"),
    pytest.param(-1, ValueError, id="a-negative-int"),
    pytest.param(math.nan, ValueError, id="nan"),
    pytest.param(math.inf, ValueError, id="inf"),
    pytest.param(-math.inf, ValueError, id="-inf"),
    pytest.param(1e9 + 1, ValueError, id="above-1e9"),
    pytest.param(10**400, ValueError, id="an-int-too-large-for-a-float"),
    pytest.param(-(10**400), ValueError, id="a-negative-int-too-large-for-a-float"),
])
def test_an_offset_of_the_wrong_kind_or_value_is_refused(
    middleware: Any, offset: Any, error: type[Exception],
) -> None:
    """``TypeError`` for what is no number, ``ValueError`` for a number out of range."""
    with pytest.raises(error, match="^offset must be a number of seconds") as raised:
        middleware(_asgi_app, offset=offset)
    assert type(raised.value) is error  # not OverflowError, a ValueError's cousin


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize(("offset", "max_seconds"), [(2, 2), (2.5, 2.0), (1e9, 1)])
def test_an_offset_must_leave_time_below_max_seconds(
    middleware: Any, offset: float, max_seconds: float,
) -> None:
    """Else every request that carries a deadline would be answered 504."""
    with pytest.raises(ValueError, match="offset must be less than max_seconds"):
        middleware(_asgi_app, max_seconds=max_seconds, offset=offset)
