"""The server-side middlewares: an application runs within the deadline its caller sent in
``x-request-deadline-ms``, and within no other.

The ASGI middleware is called through ``httpx.ASGITransport`` (on asyncio and trio), the
WSGI one through ``httpx.WSGITransport``, and each directly where a transport cannot send
what the test needs. Every application reports ``time_left()`` from inside; no test sleeps,
so a deadline of 1.5 s reads between 1.0 and 1.5 s whatever the machine's speed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping
from typing import Any

import httpx
import pytest

from retry_transport import asgi, wsgi
from retry_transport._deadlines import deadline, time_left

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
@pytest.mark.parametrize("value", PADDED)
async def test_asgi_blanks_around_the_value_are_allowed(value: str) -> None:
    app = ASGIApp()
    await asgi_get(asgi.DeadlineMiddleware(app), {HEADER: value})
    assert between(app.lefts[0], 1.5), app.lefts


@pytest.mark.anyio
@pytest.mark.parametrize("value", ZEROS)
async def test_asgi_a_deadline_of_0_is_answered_504_without_the_app(value: str) -> None:
    app = ASGIApp()
    response = await asgi_get(asgi.DeadlineMiddleware(app), {HEADER: value})
    assert response.status_code == 504
    assert response.text == "deadline exceeded\n"
    assert response.headers["content-length"] == str(len(response.content))
    assert response.headers["content-type"].startswith("text/plain")
    assert app.lefts == []


@pytest.mark.anyio
@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize("max_seconds", [None, 2.0])
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
@pytest.mark.parametrize(("value", "max_seconds", "expected"), [
    ("5000", 2.0, 2.0), ("1500", 2.0, 1.5), ("999999999999999", 0.5, 0.5),
])
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
@pytest.mark.parametrize(("name", "value", "granted"), [
    (b"X-Request-Deadline-Ms", b"1500", True),  # a server that kept the case
    (HEADER.encode(), "١٥٠٠".encode(), False),  # digits of another script
    (HEADER.encode(), b"\xff", False),
])
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


def wsgi_get(app: Any, headers: Any = None) -> httpx.Response:
    with httpx.Client(transport=httpx.WSGITransport(app=app),
                      base_url="http://testserver") as client:
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


# -- the arguments ------------------------------------------------------------------------

MIDDLEWARES = [asgi.DeadlineMiddleware, wsgi.DeadlineMiddleware]


async def _asgi_app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover
    pass


def _wsgi_app(environ: Any, start_response: Any) -> list[bytes]:  # pragma: no cover
    return []


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize("header", [
    "", "x deadline", "x-deadline:", "x-déadline", "x-deadline\n", None, 1, b"x-deadline",
    "Content-Length", "content-length", "Idempotency-Key", "Host",
])
def test_a_header_that_is_no_name_of_its_own_is_refused(middleware: Any, header: Any) -> None:
    with pytest.raises(ValueError, match="header"):
        middleware(_asgi_app, header=header)


@pytest.mark.parametrize("middleware", MIDDLEWARES)
@pytest.mark.parametrize("max_seconds", [
    0, -1, 0.0, math.inf, -math.inf, math.nan, True, "5", 2e9,
])
def test_max_seconds_must_be_a_finite_number_above_0(middleware: Any, max_seconds: Any) -> None:
    with pytest.raises(ValueError, match="max_seconds"):
        middleware(_asgi_app, max_seconds=max_seconds)


@pytest.mark.parametrize("middleware", MIDDLEWARES)
def test_the_app_must_be_callable(middleware: Any) -> None:
    with pytest.raises(ValueError, match="app"):
        middleware(object())


@pytest.mark.parametrize(("middleware", "app"), [
    (asgi.DeadlineMiddleware, _asgi_app), (wsgi.DeadlineMiddleware, _wsgi_app),
])
def test_the_defaults_and_what_is_kept(middleware: Any, app: Any) -> None:
    plain = middleware(app)
    assert (plain.app, plain.header, plain.max_seconds) == (app, HEADER, None)
    assert "x-request-deadline-ms" in repr(plain)
    given = middleware(app, header="X-Deadline", max_seconds=3)
    assert (given.header, given.max_seconds) == ("X-Deadline", 3.0)
    assert isinstance(given.max_seconds, float)
