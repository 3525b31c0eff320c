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

Environ = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]

_EXPIRED_STATUS_LINE = f"{EXPIRED_STATUS} {HTTPStatus(EXPIRED_STATUS).phrase}"
_EXPIRED_HEADERS = (
    ("Content-Type", EXPIRED_CONTENT_TYPE),
    ("Content-Length", str(len(EXPIRED_BODY))),
)


class DeadlineMiddleware(DeadlineMiddlewareBase):
    """Runs a WSGI application's requests within the deadline their caller sent.

    For each request the ``header`` is read from the environ (``x-request-deadline-ms`` is
    ``environ["HTTP_X_REQUEST_DEADLINE_MS"]``): its value is the caller's time left in
    milliseconds, a non-negative integer of ASCII digits (at most 15, blanks around it
    allowed).

    * A value above 0: the application runs with that deadline (counted from when the
      middleware reads it: the time the request took to arrive is not known), capped at
      ``max_seconds``, then less ``offset``, as the only ambient deadline:
      :func:`retry_transport.time_left` reads it, and deadlines in force where the
      middleware is called (as in a test calling the app in-process through
      ``httpx.WSGITransport``) do not hold inside. The application is called, and the
      iterable it returns is iterated and closed, in a copy of the calling context that
      holds the deadline: code in a generator response sees it too, and the server's own
      context never changes.
    * 0, or a value that leaves no time once ``offset`` is taken off (``min(value,
      max_seconds) <= offset``): the caller's deadline has passed, or would before an
      answer got back; the request is answered ``504 Gateway Timeout`` with a short
      ``text/plain`` body, without calling the application.
    * No header, or a malformed value (a sign, decimals, letters, an empty value, more
      than 15 digits, or several values, which servers join with commas): the application
      runs with no deadline at all, ``max_seconds`` and ``offset`` included (they shape
      what a caller grants; they are no deadline of their own). A malformed value is never
      answered ``400``.

    A ``DeadlineExceeded`` (``retry_transport``'s or ``retry_transport.httpx2``'s, or an
    exception group of nothing else) that escapes the application before any of its
    response went out (no ``write()``, no item of its iterable yet: from the call, or
    while the first item is made, as in a generator) is answered ``504`` with the same
    body, and logged at INFO on the ``retry_transport`` logger (the method and the path,
    without its query string): the caller's time ran out, which is no bug. If the
    application had called ``start_response`` already, the 504 replaces its status and
    headers by calling ``start_response`` again with ``exc_info``, as PEP 3333 allows
    before the first output (``httpx.WSGITransport`` raises the exception so passed unless
    it has ``raise_app_exceptions=False``). Any other exception, and any exception once
    the response has gone out, reaches the server as it is.

    Args:
        app: the WSGI application.
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

    _kind = "WSGI"
    app: WSGIApp

    def __init__(self, app: WSGIApp, *, header: str = DEFAULT_HEADER,
                 max_seconds: float | None = None, offset: float = 0.0) -> None:
        super().__init__(app, header=header, max_seconds=max_seconds, offset=offset)
        self._key = "HTTP_" + self.header.upper().replace("-", "_")

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        value = environ.get(self._key)
        seconds = granted(() if value is None else (value,), self.max_seconds, self.offset)
        if seconds == 0.0:
            start_response(_EXPIRED_STATUS_LINE, list(_EXPIRED_HEADERS))
            return [EXPIRED_BODY]
        context = contextvars.copy_context()
        return context.run(self._start, context, seconds, environ, start_response)

    def _start(self, context: contextvars.Context, seconds: float | None, environ: Environ,
               start_response: StartResponse) -> Iterable[bytes]:
        """Call the application in ``context`` (this runs in it) with only the deadline."""
        output = _Output(start_response, environ)
        scope = ExitStack()
        scope.enter_context(fresh(seconds))
        try:
            result = self.app(environ, output.start_response)
            if isinstance(result, (list, tuple)):  # no code of the app's left to run
                scope.close()
                return result
            try:
                iterator = iter(result)
            except BaseException:
                _close(result)
                raise
        except Exception as exc:
            scope.close()
            answer = output.expired(exc)
            if answer is None:
                raise
            return answer
        except BaseException:
            scope.close()
            raise
        return _Response(context, result, iterator, scope, output)


def _close(result: object) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()


class _Output:
    """What the application has done of its response: whether it called ``start_response``
    (the server keeps the status and headers) and whether any of it went out (``write()``,
    or an item of its iterable: the server sends the headers with the first)."""

    __slots__ = ("_environ", "_start_response", "_write", "sent", "started")

    def __init__(self, start_response: StartResponse, environ: Environ) -> None:
        self._start_response = start_response
        self._environ = environ
        self._write: Callable[[bytes], object] | None = None
        self.started = False
        self.sent = False

    def start_response(self, status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Callable[[bytes], object]:
        """The server's ``start_response``, noted; it returns :meth:`write`."""
        if exc_info is None:
            self._write = self._start_response(status, headers)
        else:
            self._write = self._start_response(status, headers, exc_info)
        self.started = True
        return self.write

    def write(self, data: bytes) -> object:
        self.sent = True
        write = self._write  # only given out by start_response, which sets it
        if write is None:
            raise RuntimeError("write() called before start_response()")
        return write(data)

    def expired(self, error: Exception) -> list[bytes] | None:
        """The ``504`` answer to ``error`` escaping the application, if it is a
        ``DeadlineExceeded`` and nothing went out yet; otherwise ``None``: the caller raises
        ``error`` again."""
        if self.sent or not is_deadline(error):
            return None
        environ = self._environ
        if self.started:  # replaced, as PEP 3333 lets an application do before any output
            self._start_response(_EXPIRED_STATUS_LINE, list(_EXPIRED_HEADERS),
                                 (type(error), error, error.__traceback__))
        else:
            self._start_response(_EXPIRED_STATUS_LINE, list(_EXPIRED_HEADERS))
        log_escaped(str(environ.get("REQUEST_METHOD", "")),
                    str(environ.get("SCRIPT_NAME", "")) + str(environ.get("PATH_INFO", "")),
                    error)
        return [EXPIRED_BODY]


class _Response:
    """The application's iterable, each step and its ``close`` run in the request's
    context; closing it also leaves the deadline's scope. A ``DeadlineExceeded`` raised
    while its first item is made is answered ``504`` (:meth:`_Output.expired`)."""

    __slots__ = ("_context", "_iterator", "_output", "_result", "_scope")

    def __init__(self, context: contextvars.Context, result: Iterable[bytes],
                 iterator: Iterator[bytes], scope: ExitStack, output: _Output) -> None:
        self._context = context
        self._result = result
        self._iterator = iterator
        self._scope = scope
        self._output = output

    def __iter__(self) -> _Response:
        return self

    def __next__(self) -> bytes:
        output = self._output
        if output.sent:
            return self._context.run(next, self._iterator)
        try:
            chunk = self._context.run(next, self._iterator)
        except StopIteration:
            raise
        except Exception as exc:
            answer = output.expired(exc)
            if answer is None:
                raise
            self._iterator = iter(answer)
            return next(self._iterator)
        output.sent = True
        return chunk

    def close(self) -> None:
        try:
            self._context.run(_close, self._result)
        finally:
            self._context.run(self._scope.close)
