"""Exceptions raised by the transports themselves."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

__all__ = [
    "CircuitOpenError",
    "CircuitOpenErrorBase",
    "CooldownError",
    "CooldownErrorBase",
    "DeadlineExceeded",
    "DeadlineExceededBase",
    "ThrottledError",
    "ThrottledErrorBase",
]


class _Rebuilt(Exception):
    """Pickling for the errors below, whose constructors take keyword-only arguments: the
    message, the request, and the attributes named in ``_fields``. The class's own method
    rebuilds it, so a pickle names only the public class."""

    _fields: ClassVar[tuple[str, ...]] = ()

    def __reduce__(self) -> tuple[object, ...]:
        values = tuple(getattr(self, name) for name in self._fields)
        return (type(self)._rebuild, (str(self), self.request, *values),  # type: ignore[attr-defined]
                self.__dict__)

    @classmethod
    def _rebuild(cls, message: str, request: Any, *values: Any) -> _Rebuilt:
        return cls(message, request=request,  # type: ignore[call-arg]
                   **dict(zip(cls._fields, values, strict=True)))


class CooldownErrorBase(_Rebuilt):
    """What every flavour's ``CooldownError`` shares: the origin and the seconds left.

    Mixed in ahead of the flavour's ``TransportError``, whose constructor takes the request.
    """

    _fields = ("origin", "remaining")
    origin: str
    remaining: float

    def __init__(self, message: str, *, origin: str, remaining: float, request: Any) -> None:
        super().__init__(message, request=request)  # type: ignore[call-arg]
        self.origin = origin
        self.remaining = remaining


class CooldownError(CooldownErrorBase, httpx.TransportError):
    """The origin asked for quiet (``Retry-After`` on 429 or 503) and this request cannot wait.

    Raised before anything is sent, when the origin's remaining cooldown is longer than the
    request's ``max_retry_after`` or would run past its deadline. It subclasses
    ``httpx.TransportError``, so existing handlers of transport errors catch it.

    Attributes:
        origin: the origin that asked, as ``scheme://host:port``.
        remaining: seconds of quiet the origin still asks for.
    """


class CircuitOpenErrorBase(CooldownErrorBase):
    """What every flavour's ``CircuitOpenError`` shares: the origin, and ``remaining``, the
    seconds until a probe may be sent (0.0 while half-open with every probe slot taken)."""


class CircuitOpenError(CircuitOpenErrorBase, httpx.TransportError):
    """The origin's circuit breaker is open: the request was not sent.

    Raised before an attempt, without I/O, when the transport's ``CircuitBreaker`` has seen
    the origin fail too often, and also for requests with retries disabled (the breaker
    protects the dependency, not the retry loop). ``retry_info(error)`` gives the request's
    metadata so far, with stop reason ``circuit_open``. It subclasses
    ``httpx.TransportError``.

    Attributes:
        origin: the origin, as ``scheme://host:port``.
        remaining: seconds until the breaker lets a probe through (0.0 while half-open with
            every probe slot taken).
    """


class DeadlineExceededBase(_Rebuilt):
    """What every flavour's ``DeadlineExceeded`` shares. Mixed in ahead of the flavour's
    ``TimeoutException``, whose constructor takes the request."""

    def __init__(self, message: str, *, request: Any) -> None:
        super().__init__(message, request=request)  # type: ignore[call-arg]


class DeadlineExceeded(DeadlineExceededBase, httpx.TimeoutException):
    """The request's deadline passed before an attempt could be sent: nothing was sent.

    Raised when a request starts after the ambient deadline
    (:class:`retry_transport.deadline`) has passed, checked before the breaker and the
    cooldowns; when an attempt's ``deadline_header`` would carry 0 ms; and when the time
    left ran out during the wait before a retry. ``retry_info(error)`` says what was done
    (0 attempts for a first attempt), with stop reason ``deadline``. It subclasses
    ``httpx.TimeoutException``, so code that already catches timeouts keeps working.
    """


class ThrottledErrorBase(_Rebuilt):
    """What every flavour's ``ThrottledError`` shares: the origin and the probability the
    attempt was refused with. Mixed in ahead of the flavour's ``TransportError``."""

    _fields = ("origin", "probability")
    origin: str
    probability: float

    def __init__(self, message: str, *, origin: str, probability: float, request: Any) -> None:
        super().__init__(message, request=request)  # type: ignore[call-arg]
        self.origin = origin
        self.probability = probability


class ThrottledError(ThrottledErrorBase, httpx.TransportError):
    """The origin's :class:`~retry_transport.AdaptiveThrottle` refused the request's first
    attempt locally: nothing was sent.

    The origin has lately accepted too few of the attempts sent to it (it answered 429 or
    503, or failed), so this client sheds part of its load before it reaches the origin.
    ``retry_info(error)`` says 0 attempts, stop reason ``throttled``. It subclasses
    ``httpx.TransportError``, so existing handlers of transport errors catch it.

    Attributes:
        origin: the origin, as ``scheme://host:port``.
        probability: the probability the attempt was refused with, in (0, 1].
    """
