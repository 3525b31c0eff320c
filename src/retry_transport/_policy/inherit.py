"""What the server-side middlewares (:mod:`retry_transport.asgi`, :mod:`retry_transport.wsgi`)
share: their base class (the check and keeping of their arguments, their repr), the reading
of the deadline header a caller sends, the answer given when the caller's time has already
run out, and the telling of a ``DeadlineExceeded`` that escapes the application from any
other error.

A caller's retry transport (``deadline_header=``) sends the whole milliseconds left of its
request's deadline. The header's value is taken only when it is one non-negative integer of
ASCII digits (at most :data:`MAX_DIGITS`, blanks around it allowed): no sign, no decimals,
no second value. Anything else grants no deadline: a caller's mistake never fails the
request, it only leaves the server to its own limits.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Final, cast

from .._base.errors import DeadlineExceededBase
from .._base.validate import (
    ATTEMPT_HEADER_REFUSED,
    MAX_SECONDS,
    check_header_name,
    check_seconds,
    is_number,
)
from .._wire.http import _PATH_PARAMETERS

__all__ = [
    "DEFAULT_HEADER",
    "EXPIRED_BODY",
    "EXPIRED_CONTENT_TYPE",
    "EXPIRED_STATUS",
    "MAX_DIGITS",
    "DeadlineMiddlewareBase",
    "check_app",
    "check_header",
    "check_max_seconds",
    "check_offset",
    "granted",
    "is_deadline",
    "log_escaped",
    "shown_path",
]

logger: Final = logging.getLogger("retry_transport")

#: The header both middlewares read unless told otherwise.
DEFAULT_HEADER: Final = "x-request-deadline-ms"

#: The longest value taken, in digits; a longer one is malformed.
MAX_DIGITS: Final = 15

#: The answer to a caller whose deadline has passed (a value of 0): the application is not
#: called.
EXPIRED_STATUS: Final = 504
EXPIRED_BODY: Final = b"deadline exceeded\n"
EXPIRED_CONTENT_TYPE: Final = "text/plain; charset=utf-8"

_VALUE: Final = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")
#: The blanks allowed around the value (HTTP's optional whitespace: space and tab).
_BLANKS: Final = " \t"


def check_app(app: object, kind: str) -> None:
    """Refuse an ``app`` that cannot be called (``kind``: ``"ASGI"`` or ``"WSGI"``)."""
    if not callable(app):
        raise TypeError(f"app must be an {kind} application (a callable), got {app!r}")


def check_header(header: object) -> str:
    """A header name (an RFC 9110 token) of its own, as given: never one HTTP defines nor
    ``Idempotency-Key`` (the names a transport refuses for its ``deadline_header``), since
    the digits such a header carries for its own reasons would be read as a deadline."""
    return cast(str, check_header_name("header", header, ATTEMPT_HEADER_REFUSED,
                                       why="its value would be read as a deadline",
                                       example=DEFAULT_HEADER))


def check_max_seconds(max_seconds: object) -> float | None:
    """``None``, or a finite number of seconds > 0 (and at most ``MAX_SECONDS``)."""
    if max_seconds is None:
        return None
    return check_seconds("max_seconds", max_seconds, or_none=True)


def check_offset(offset: object, max_seconds: float | None) -> float:
    """A number of seconds ``>= 0`` (and at most ``MAX_SECONDS``), below ``max_seconds``.

    ``TypeError`` for what is no number (a bool, a string, ``None``); ``ValueError`` for a
    number out of range: negative, NaN, infinite, above ``MAX_SECONDS`` (an int too large
    for a float included, never an ``OverflowError``), or not below ``max_seconds``, which
    would answer every request that carries a deadline ``504``.
    """
    if isinstance(offset, bool) or not isinstance(offset, (int, float)):
        raise TypeError(f"offset must be a number of seconds (an int or a float), got {offset!r}")
    if not is_number(offset) or not 0 <= offset <= MAX_SECONDS:
        shown = (repr(offset) if not isinstance(offset, int) or offset.bit_length() <= 64
                 else f"an int of {offset.bit_length()} bits")
        raise ValueError(
            f"offset must be a number of seconds >= 0 and <= {MAX_SECONDS:g}, got {shown}"
        )
    seconds = float(offset)
    if max_seconds is not None and seconds >= max_seconds:
        raise ValueError(
            f"offset must be less than max_seconds ({max_seconds!r}), got {offset!r}: every "
            "request that carries a deadline would be answered 504"
        )
    return seconds


class DeadlineMiddlewareBase:
    """What the ASGI and the WSGI ``DeadlineMiddleware`` share: their arguments, checked and
    kept as attributes, and their repr.

    A subclass names its protocol in ``_kind`` (``"ASGI"`` or ``"WSGI"``), keeps an
    ``__init__`` of its own (its signature names its kind of application) that calls this
    one, and reads the header in its ``__call__``.
    """

    _kind: ClassVar[str]

    app: Callable[..., Any]
    header: str
    max_seconds: float | None
    offset: float

    def __init__(self, app: Callable[..., Any], *, header: str = DEFAULT_HEADER,
                 max_seconds: float | None = None, offset: float = 0.0) -> None:
        # No docstring: help() on a subclass's __init__ would show it as that one's.
        check_app(app, self._kind)
        self.app = app
        self.header = check_header(header)
        self.max_seconds = check_max_seconds(max_seconds)
        self.offset = check_offset(offset, self.max_seconds)

    def __repr__(self) -> str:
        return (f"DeadlineMiddleware({self.app!r}, header={self.header!r}, "
                f"max_seconds={self.max_seconds!r}, offset={self.offset!r})")


def _milliseconds(value: str | bytes) -> int | None:
    """The value as milliseconds, or ``None`` if it is malformed."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip(_BLANKS)
    return int(text) if _VALUE.fullmatch(text) else None


def granted(values: Iterable[str | bytes], max_seconds: float | None,
            offset: float = 0.0) -> float | None:
    """The deadline the header's ``values`` (each one the header carried) grant, in seconds.

    ``None``: no deadline (no value, a malformed one, or several). ``0.0``: no time is left
    for the application (the value is 0, or not above ``offset``). Otherwise the value in
    seconds, capped at ``max_seconds`` (a caller cannot grant more time than the server
    allows itself) and at ``MAX_SECONDS`` (a deadline of 31 years is none, and longer ones
    overflow the timeouts they become), less ``offset`` (the time kept back for the answer's
    way home), in that order.
    """
    found = list(values)
    if len(found) != 1:
        return None
    milliseconds = _milliseconds(found[0])
    if milliseconds is None:
        return None
    seconds = min(milliseconds / 1000, MAX_SECONDS)
    if max_seconds is not None:
        seconds = min(seconds, max_seconds)
    return seconds - offset if seconds > offset else 0.0


def _groups() -> tuple[type[BaseException], ...]:
    """The exception group types in use: the builtin one, or on Python 3.10 the backport's
    if something (anyio, trio) has loaded it; never imported here."""
    if sys.version_info >= (3, 11):
        return (BaseExceptionGroup,)  # noqa: F821 - a builtin from Python 3.11 on
    backport = sys.modules.get("exceptiongroup")  # pragma: no cover - Python 3.10
    return () if backport is None else (backport.BaseExceptionGroup,)  # pragma: no cover


def is_deadline(error: BaseException) -> bool:
    """``error`` is a ``DeadlineExceeded`` of any flavour (``retry_transport``'s, or
    ``retry_transport.httpx2``'s, told by their shared base without importing httpx2), or
    an exception group (a task group's) holding nothing else."""
    if isinstance(error, DeadlineExceededBase):
        return True
    groups = _groups()
    if groups and isinstance(error, groups):
        return all(is_deadline(inner) for inner in error.exceptions)  # type: ignore[attr-defined]
    return False


def shown_path(path: str) -> str:
    """A request's path as logs show it: without its query string and path parameters
    (``;jsessionid=...``), which may hold secrets."""
    path = path.split("?", 1)[0]
    return _PATH_PARAMETERS.sub("", path) if ";" in path else path


def log_escaped(method: str, path: str, error: BaseException) -> None:
    """An INFO line: the application let a ``DeadlineExceeded`` escape before answering, and
    the middleware answered ``504`` instead (the caller's time ran out; no bug)."""
    logger.info("%s %s: the deadline ran out in the application (%s); answered %d",
                method, shown_path(path), type(error).__name__, EXPIRED_STATUS)
