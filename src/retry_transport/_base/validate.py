"""The checks every constructor shares: one statement of "a number of seconds", of "a count",
of "a flag", of "an instance of", of "a callable", of "hooks", of "a set of statuses", of the
header names HTTP keeps for itself.

Each check returns the value as it is kept, or raises naming the argument, so that a bad
configuration fails where it is written, never on the first request: ``TypeError`` for a
value of the wrong kind (a string where a number goes, a ``bool`` or a float where a count
goes, anything but ``True`` or ``False`` for a flag, a callable of the wrong kind),
``ValueError`` for a value of the right kind that is wrong (out of range, not finite, not a
token).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, TypeGuard, TypeVar

__all__ = [
    "ATTEMPT_HEADER_REFUSED",
    "HTTP_FIELDS",
    "MAX_SECONDS",
    "TOKEN",
    "check_callable",
    "check_count",
    "check_flag",
    "check_header_name",
    "check_hooks",
    "check_instance",
    "check_number",
    "check_seconds",
    "check_statuses",
    "function_kind",
    "is_async_function",
    "is_number",
    "is_real",
]

#: The longest time any option may name, in seconds (about 31 years): far beyond any sane
#: wait, and well within what ``time.sleep`` and the event loops accept.
MAX_SECONDS: Final = 1e9

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")

#: RFC 9110 section 5.6.2: ``token = 1*tchar``, the form of a header name and a method.
TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def is_real(value: object) -> bool:
    """An int or a float, never a bool: the kind a number of seconds or of tokens is."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[float]:
    """A finite int or float (never a bool) that a float can hold: ``10**400`` is not one,
    so every check refuses it with its ``ValueError`` instead of an ``OverflowError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return abs(value) <= sys.float_info.max
    return math.isfinite(value)


def _kind(value: object) -> str:
    """What a refused value is, for a ``TypeError``: its repr and its type's name."""
    return f"{value!r} (a {type(value).__name__})"


def check_seconds(
    name: str, value: object, *, zero: bool = False, high: float = MAX_SECONDS,
    or_none: bool = False,
) -> float:
    """A finite number of seconds, > 0 (``>= 0`` with ``zero``) and at most ``high``.

    ``or_none``: the caller takes ``None`` too (and checks it first), so the message says so.
    """
    low = ">= 0" if zero else "> 0"
    alternative = ", or None" if or_none else ""
    if not is_real(value):
        raise TypeError(f"{name} must be a number of seconds (an int or a float){alternative}, "
                        f"got {_kind(value)}")
    if not is_number(value) or not ((0 <= value if zero else 0 < value) and value <= high):
        raise ValueError(
            f"{name} must be a number of seconds {low} and <= {high:g}{alternative}, "
            f"got {value!r}"
        )
    return float(value)


def check_number(
    name: str, value: object, *, low: float, high: float = math.inf, open_low: bool = False
) -> float:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``open_low``)."""
    if not is_real(value):
        raise TypeError(f"{name} must be a number (an int or a float), got {_kind(value)}")
    if not is_number(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    number = float(value)
    if number < low or number > high or (open_low and number == low):
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        upper = "" if high == math.inf else f" and <= {high:g}"
        raise ValueError(f"{name} must be {bound}{upper}, got {value!r}")
    return number


def check_count(name: str, value: object, *, low: int = 1, high: int | None = None,
                what: str = "an integer") -> int:
    """An int (never a bool, nor a float, even a whole one) in ``low..high``; ``what`` names
    the kind in the messages (``"a number of bytes"``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be {what} (an int), got {_kind(value)}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"from {low} to {high}"
        raise ValueError(f"{name} must be {what} {bound}, got {value!r}")
    return value


def check_flag(name: str, value: object) -> bool:
    """``True`` or ``False`` (not merely truthy: ``1`` and ``"yes"`` are ``TypeError``)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {_kind(value)}")
    return value


def check_instance(name: str, value: object, kind: type[_T], spelt: str, *,
                   hint: str = "") -> _T | None:
    """An instance of ``kind`` (spelt ``spelt``, such as ``"a CircuitBreaker"``) or
    ``None``; anything else is a ``TypeError`` naming the argument (and ``hint``)."""
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"{name} must be {spelt} or None, got {_kind(value)}{hint}")
    return value


def check_callable(name: str, value: _F | None) -> _F | None:
    """A function, or ``None``; ``TypeError`` for anything that cannot be called."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a function, got {value!r}")
    return value


def is_async_function(function: object) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(function) or (
        callable(function) and inspect.iscoroutinefunction(type(function).__call__)
    )


def function_kind(function: object) -> Literal["async", "plain"] | None:
    """Whether calling ``function`` gives an awaitable, as far as it can be told without
    calling it.

    ``"async"``: a coroutine function, or a ``functools.partial`` or bound method of one, or
    an object whose ``__call__`` is one. ``"plain"``: any other Python function, bound method
    or partial of one (whatever it returns: a ``def`` or ``lambda`` is plain, even one that
    returns a coroutine), or a builtin such as ``time.sleep``. ``None``: anything else (an
    object with a plain ``__call__``, a class, a mock), whose calls may give either.
    """
    if is_async_function(function):
        return "async"
    inner = function
    while True:
        if isinstance(inner, functools.partial):
            inner = inner.func
        elif inspect.ismethod(inner):
            inner = inner.__func__
        else:
            break
    if inner is not function and is_async_function(inner):
        return "async"
    if inspect.isfunction(inner):
        # A generator-based coroutine (types.coroutine) is awaitable too.
        return "async" if inner.__code__.co_flags & inspect.CO_ITERABLE_COROUTINE else "plain"
    if inspect.isbuiltin(inner):
        return "plain"
    return None


# -- header names ---------------------------------------------------------------------------


def _fields(groups: Mapping[str, str]) -> Mapping[str, str]:
    return {name: role for role, names in groups.items() for name in names.split()}


#: The request header fields HTTP itself defines, lower-case, each with what it is for. Every
#: one has a meaning of its own that the client, the client's HTTP library, proxies and
#: servers act on, and ordinary requests carry many of them whatever their method:
#:
#: * framing and connection management: RFC 9112 sections 6.1 and 6.2 (``Transfer-Encoding``,
#:   ``Content-Length``), RFC 9110 sections 6.6.2 (``Trailer``), 7.6.1 (``Connection``, and
#:   the connection-specific ``Keep-Alive`` and ``Proxy-Connection`` it names), 7.8
#:   (``Upgrade``), 10.1.1 (``Expect``) and 10.1.4 (``TE``);
#: * routing: RFC 9110 sections 7.2, 7.6.2 and 7.6.3 (``Host``, ``Max-Forwards``, ``Via``),
#:   RFC 7239 (``Forwarded``);
#: * credentials: RFC 9110 sections 11.6.2 and 11.7.2 (``Authorization``,
#:   ``Proxy-Authorization``), RFC 6265 section 5.4 (``Cookie``);
#: * representation metadata: RFC 9110 sections 8.3 to 8.5, 8.7 and 14.4 (``Content-Type``,
#:   ``Content-Encoding``, ``Content-Language``, ``Content-Location``, ``Content-Range``);
#: * content negotiation: RFC 9110 section 12.5 (``Accept``, ``Accept-Charset``,
#:   ``Accept-Encoding``, ``Accept-Language``);
#: * request context: RFC 9110 sections 6.6.1, 10.1.2, 10.1.3 and 10.1.5 (``Date``, ``From``,
#:   ``Referer``, ``User-Agent``);
#: * caching: RFC 9111 sections 5.2 and 5.4 (``Cache-Control``, ``Pragma``);
#: * conditions and ranges: RFC 9110 sections 13.1 and 14.2 (``If-Match``, ``If-None-Match``,
#:   ``If-Modified-Since``, ``If-Unmodified-Since``, ``If-Range``, ``Range``).
#:
#: Neither the ``idempotency_header`` (whose presence opts a request into retries) nor the
#: ``attempt_header`` (whose value the transport overwrites) may be one of them.
HTTP_FIELDS: Final[Mapping[str, str]] = _fields({
    "an HTTP header for message framing and connection management (RFC 9112, RFC 9110)":
        "content-length transfer-encoding te trailer connection keep-alive proxy-connection"
        " upgrade expect",
    "an HTTP header for routing (RFC 9110, RFC 7239)": "host max-forwards via forwarded",
    "an HTTP header for credentials (RFC 9110, RFC 6265)":
        "authorization proxy-authorization cookie",
    "an HTTP header of representation metadata (RFC 9110)":
        "content-type content-encoding content-language content-location content-range",
    "an HTTP header for content negotiation (RFC 9110)":
        "accept accept-charset accept-encoding accept-language",
    "an HTTP header of request context (RFC 9110)": "date from referer user-agent",
    "an HTTP header for caching (RFC 9111)": "cache-control pragma",
    "an HTTP header for conditional and range requests (RFC 9110)":
        "if-match if-none-match if-modified-since if-unmodified-since if-range range",
})

#: The names ``attempt_header`` may not take: :data:`HTTP_FIELDS` and ``Idempotency-Key``
#: (the IETF httpapi draft's key: a server that deduplicates by it would take every
#: request's first attempt, numbered 1, for one operation). The idempotency header the
#: policy names is refused as well (:func:`check_attempt_header`).
ATTEMPT_HEADER_REFUSED: Final[Mapping[str, str]] = {
    **HTTP_FIELDS,
    "idempotency-key": "the key of the IETF Idempotency-Key draft, which servers deduplicate by",
}


def check_hooks(value: Iterable[Callable[..., object]] | Callable[..., object] | None,
                ) -> tuple[Callable[..., object], ...]:
    """Hooks as a tuple: a callable or an iterable of them; never a coroutine function (a
    hook is called, never awaited). Anything else is a ``TypeError``."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise TypeError(
            f"hooks must be a callable or a list of callables, got the string {value!r}"
        )
    if callable(value):
        value = [value]
    try:
        hooks = tuple(value)
    except TypeError:
        raise TypeError(f"hooks must be a callable or a list of them, got {value!r}") from None
    for hook in hooks:
        if not callable(hook):
            raise TypeError(f"hooks must be callables, got {hook!r}")
        if is_async_function(hook):
            raise TypeError(
                f"hooks must be plain functions, got the coroutine function {hook!r}: "
                "a hook is called, never awaited (hand the event to a queue or task instead)"
            )
    return hooks


def check_attempt_header(attempt_header: str | None, idempotency_header: str | None,
                         where: str = "the policy's", *, name: str = "attempt_header") -> None:
    """Refuse a header of the transport's own (``name``: ``attempt_header`` or
    ``deadline_header``) that is the idempotency header in effect (any case): every attempt
    would carry a number as its key, so an unkeyed request would be retried, under a new key
    each time. ``where`` says whose idempotency header it is."""
    if (
        attempt_header is not None
        and idempotency_header is not None
        and attempt_header.lower() == idempotency_header.lower()
    ):
        raise ValueError(
            f"{name} must not be {where} idempotency_header ({idempotency_header!r}):"
            " every attempt would carry a number as its key, so a request sent without a key"
            " would be retried, under a new key each time"
        )


def check_header_name(name: str, value: object, refused: Mapping[str, str], *, why: str,
                      example: str, or_none: bool = False) -> str | None:
    """A header name of the caller's own for the argument ``name``, as given: a token, never
    one of ``refused`` (lower-case name -> what it is), since ``why``; ``None`` too with
    ``or_none``. Anything but a string is a ``TypeError``; a ``ValueError`` names the
    argument and, for a refused name, suggests ``example``."""
    if value is None and or_none:
        return None
    spelt = "a header name or None" if or_none else "a header name"
    if not isinstance(value, str):
        raise TypeError(f"{name} must be {spelt} (a str), got {_kind(value)}")
    if not TOKEN.fullmatch(value):
        raise ValueError(f"{name} must be {spelt}, got {value!r}")
    role = refused.get(value.lower())
    if role is not None:
        raise ValueError(
            f"{name} must not be {value!r}, {role}: {why}; name a header of its own, such as "
            f"{example!r}"
        )
    return value


def check_statuses(name: str, value: object, low: int = 100, high: int = 599,
                   why: str = "") -> frozenset[int]:
    """A set of HTTP status codes for the argument ``name``, from any iterable of integers
    in ``low..high`` (``why``: the reason for a narrower range, said when one is out). A
    string, a lone number or an item that is no int is a ``TypeError``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{name} must be a set of status codes (ints), got {_kind(value)}")
    items = list(value)
    for status in items:
        if isinstance(status, bool) or not isinstance(status, int):
            raise TypeError(f"{name} must hold status codes (ints), got {_kind(status)}")
        if not low <= status <= high:
            raise ValueError(
                f"{name} must hold status codes (integers in {low}..{high}{why}), got {status!r}"
            )
    return frozenset(items)
