"""A WSGI middleware that runs each request within the deadline its caller sent.

A client whose retry transport has ``deadline_header="x-request-deadline-ms"`` sends, on
every attempt, the whole milliseconds left of its request's deadline. Wrapping a Flask,
Django or any WSGI application in :class:`DeadlineMiddleware` makes that the ambient
deadline of the request's handler, so that the retry transports it calls other services
with (and :func:`retry_transport.time_left`) stop when the caller would stop waiting::

    from retry_transport.wsgi import DeadlineMiddleware

    app.wsgi_app = DeadlineMiddleware(app.wsgi_app, max_seconds=30)  # Flask
    application = DeadlineMiddleware(get_wsgi_application())  # Django's wsgi.py
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from http import HTTPStatus
from typing import Any

from ._deadlines import fresh
from ._inherit import (
    DEFAULT_HEADER,
    EXPIRED_BODY,
    EXPIRED_CONTENT_TYPE,
    EXPIRED_STATUS,
    check_app,
    check_header,
    check_max_seconds,
    granted,
)

__all__ = ["DeadlineMiddleware"]

Environ = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_EXPIRED_STATUS_LINE = f"{EXPIRED_STATUS} {HTTPStatus(EXPIRED_STATUS).phrase}"
_EXPIRED_HEADERS = (
    ("Content-Type", EXPIRED_CONTENT_TYPE),
    ("Content-Length", str(len(EXPIRED_BODY))),
)


class DeadlineMiddleware:
    """Runs a WSGI application's requests within the deadline their caller sent.

    For each request the ``header`` is read from the environ (``x-request-deadline-ms`` is
    ``environ["HTTP_X_REQUEST_DEADLINE_MS"]``): its value is the caller's time left in
    milliseconds, a non-negative integer of ASCII digits (at most 15, blanks around it
    allowed).

    * A value above 0: the application runs with that deadline (counted from when the
      middleware reads it: the time the request took to arrive is not known), capped at
      ``max_seconds``, as the only ambient deadline: :func:`retry_transport.time_left`
      reads it, and deadlines in force where the middleware is called (as in a test
      calling the app in-process through ``httpx.WSGITransport``) do not hold inside.
      The application is called, and the iterable it returns is iterated and closed, in
      a copy of the calling context that holds the deadline: code in a generator response
      sees it too, and the server's own context never changes.
    * 0: the caller's deadline has passed; the request is answered
      ``504 Gateway Timeout`` with a short ``text/plain`` body, without calling the
      application.
    * No header, or a malformed value (a sign, decimals, letters, an empty value, more
      than 15 digits, or several values, which servers join with commas): the application
      runs with no deadline at all, ``max_seconds`` included (it caps what a caller grants;
      it is no deadline of its own). A malformed value is never answered ``400``.

    Args:
        app: the WSGI application.
        header: the name of the header carrying the milliseconds left. Default
            ``"x-request-deadline-ms"``, as the transports' ``deadline_header`` sends.
        max_seconds: the most time, in seconds, a caller may grant: a finite number > 0,
            or ``None`` (the default) for no cap.

    Raises:
        ValueError: ``app`` is not callable, ``header`` is not a header name (or is one
            HTTP defines), or ``max_seconds`` is neither ``None`` nor a finite number > 0.
    """

    def __init__(self, app: WSGIApp, *, header: str = DEFAULT_HEADER,
                 max_seconds: float | None = None) -> None:
        check_app(app, "WSGI")
        self.app = app
        self.header = check_header(header)
        self.max_seconds = check_max_seconds(max_seconds)
        self._key = "HTTP_" + self.header.upper().replace("-", "_")

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        value = environ.get(self._key)
        seconds = granted(() if value is None else (value,), self.max_seconds)
        if seconds == 0.0:
            start_response(_EXPIRED_STATUS_LINE, list(_EXPIRED_HEADERS))
            return [EXPIRED_BODY]
        context = contextvars.copy_context()
        return context.run(self._start, context, seconds, environ, start_response)

    def _start(self, context: contextvars.Context, seconds: float | None, environ: Environ,
               start_response: StartResponse) -> Iterable[bytes]:
        """Call the application in ``context`` (this runs in it) with only the deadline."""
        scope = ExitStack()
        scope.enter_context(fresh(seconds))
        try:
            result = self.app(environ, start_response)
            if isinstance(result, (list, tuple)):  # no code of the app's left to run
                scope.close()
                return result
            try:
                iterator = iter(result)
            except BaseException:
                _close(result)
                raise
        except BaseException:
            scope.close()
            raise
        return _Response(context, result, iterator, scope)

    def __repr__(self) -> str:
        return (f"DeadlineMiddleware({self.app!r}, header={self.header!r}, "
                f"max_seconds={self.max_seconds!r})")


def _close(result: object) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()


class _Response:
    """The application's iterable, each step and its ``close`` run in the request's
    context; closing it also leaves the deadline's scope."""

    __slots__ = ("_context", "_iterator", "_result", "_scope")

    def __init__(self, context: contextvars.Context, result: Iterable[bytes],
                 iterator: Iterator[bytes], scope: ExitStack) -> None:
        self._context = context
        self._result = result
        self._iterator = iterator
        self._scope = scope

    def __iter__(self) -> _Response:
        return self

    def __next__(self) -> bytes:
        return self._context.run(next, self._iterator)

    def close(self) -> None:
        try:
            self._context.run(_close, self._result)
        finally:
            self._context.run(self._scope.close)
