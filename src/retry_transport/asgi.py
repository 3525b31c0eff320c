"""An ASGI middleware that runs each request within the deadline its caller sent.

A client whose retry transport has ``deadline_header="x-request-deadline-ms"`` sends, on
every attempt, the whole milliseconds left of its request's deadline. Wrapping a Starlette,
FastAPI or any ASGI 3 application in :class:`DeadlineMiddleware` makes that the ambient
deadline of the request's handler, so that the retry transports it calls other services
with (and :func:`retry_transport.time_left`) stop when the caller would stop waiting::

    from retry_transport.asgi import DeadlineMiddleware

    app = DeadlineMiddleware(app, max_seconds=30)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._policy.deadlines import fresh
from ._policy.inherit import (
    DEFAULT_HEADER,
    EXPIRED_BODY,
    EXPIRED_CONTENT_TYPE,
    EXPIRED_STATUS,
    DeadlineMiddlewareBase,
    granted,
    is_deadline,
    log_escaped,
)

__all__ = ["DeadlineMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_EXPIRED_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-type", EXPIRED_CONTENT_TYPE.encode("ascii")),
    (b"content-length", str(len(EXPIRED_BODY)).encode("ascii")),
)


class DeadlineMiddleware(DeadlineMiddlewareBase):
    """Runs an ASGI application's HTTP requests within the deadline their caller sent.

    For each HTTP request (``scope["type"] == "http"``) the ``header`` is read (in any
    case): its value is the caller's time left in milliseconds, a non-negative integer of
    ASCII digits (at most 15, blanks around it allowed).

    * A value above 0: the application runs with that deadline (counted from when the
      middleware reads it: the time the request took to arrive is not known), capped at
      ``max_seconds``, then less ``offset``, as the only ambient deadline:
      :func:`retry_transport.time_left` reads it, and deadlines in force where the
      middleware is called (as in a test calling the app in-process through
      ``httpx.ASGITransport``) do not hold inside.
    * 0, or a value that leaves no time once ``offset`` is taken off (``min(value,
      max_seconds) <= offset``): the caller's deadline has passed, or would before an
      answer got back; the request is answered ``504`` with a short ``text/plain`` body,
      without calling the application.
    * No header, a malformed value (a sign, decimals, letters, an empty value, more than
      15 digits) or the header sent more than once: the application runs with no deadline
      at all, ``max_seconds`` and ``offset`` included (they shape what a caller grants;
      they are no deadline of their own). A malformed value is never answered ``400``.

    A ``DeadlineExceeded`` (``retry_transport``'s or ``retry_transport.httpx2``'s, or an
    exception group of nothing else, as a task group raises) that escapes the application
    before it has sent ``http.response.start`` is answered ``504`` with the same body, and
    logged at INFO on the ``retry_transport`` logger (the method and the path, without its
    query string): the caller's time ran out, which is no bug. Any other exception, and
    any exception once the response has started, reaches the server as it is.

    Other scopes (``lifespan``, ``websocket``) go to the application untouched.

    Args:
        app: the ASGI 3 application.
        header: the name of the header carrying the milliseconds left. Default
            ``"x-request-deadline-ms"``, as the transports' ``deadline_header`` sends.
        max_seconds: the most time, in seconds, a caller may grant: a finite number > 0,
            or ``None`` (the default) for no cap.
        offset: seconds kept back for the answer's way home, taken off the time granted
            (after the ``max_seconds`` cap), so that the application stops that much before
            its caller would: a number >= 0 (the default 0), below ``max_seconds``.

    Raises:
        ValueError: ``header`` is not a header name (or is one
            HTTP defines), ``max_seconds`` is neither ``None`` nor a finite number > 0, or
            ``offset`` is negative, NaN, infinite, above 1e9 or not below ``max_seconds``.
        TypeError: ``app`` is not callable, or ``offset`` is not a number (an int or a
            float; a bool is none).
    """

    _kind = "ASGI"
    app: ASGIApp

    def __init__(self, app: ASGIApp, *, header: str = DEFAULT_HEADER,
                 max_seconds: float | None = None, offset: float = 0.0) -> None:
        super().__init__(app, header=header, max_seconds=max_seconds, offset=offset)
        self._name = self.header.lower().encode("ascii")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        name = self._name
        seconds = granted(
            (value for key, value in scope.get("headers", ()) if key.lower() == name),
            self.max_seconds, self.offset,
        )
        if seconds == 0.0:
            await _expired(send)
            return
        started = False

        async def may_wake(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True  # before sending: once tried, no other start may follow
            await send(message)

        with fresh(seconds):
            try:
                await self.app(scope, receive, may_wake)
                return
            except Exception as exc:
                if started or not is_deadline(exc):
                    raise
                log_escaped(scope.get("method", ""), scope.get("path", ""), exc)
        await _expired(send)


async def _expired(send: Send) -> None:
    """Answer ``504``: no time is left for the application (any more)."""
    await send({"type": "http.response.start", "status": EXPIRED_STATUS,
                "headers": list(_EXPIRED_HEADERS)})
    await send({"type": "http.response.body", "body": EXPIRED_BODY})
