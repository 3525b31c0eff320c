"""Exceptions raised by the transports themselves, and the warning they issue.

What every flavour's errors share is defined here once: the base classes, and
:func:`errors_of`, which makes a flavour's four error classes from its library's module. This
module imports no HTTP library; each binding (``_io/transports.py`` for httpx,
``retry_transport.httpx2``) calls :func:`errors_of` with its own.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar, NamedTuple

__all__ = [
    "CircuitOpenErrorBase",
    "CooldownErrorBase",
    "DeadlineExceededBase",
    "Errors",
    "LayeredRetriesWarning",
    "StreamIdleTimeoutBase",
    "ThrottledErrorBase",
    "errors_of",
]


class LayeredRetriesWarning(RuntimeWarning):
    """An SDK retries above a retry transport: each of its retries makes the transport's
    attempts again (the OpenAI and Anthropic SDKs, their retries left on: 3 x 3 = 9
    requests for a call against a failing service instead of 3). Turn the SDK's retries
    off (``max_retries=0``) and let the transport retry.

    Issued with :func:`warnings.warn` once per transport, beside a WARNING line on the
    ``retry_transport`` logger, for a request carrying ``x-stainless-retry-count`` above
    0 (the SDKs number their own retries in it). A ``RuntimeWarning``: filter it by its
    class, ``warnings.filterwarnings("ignore", category=rt.LayeredRetriesWarning)``.
    """


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


class CircuitOpenErrorBase(CooldownErrorBase):
    """What every flavour's ``CircuitOpenError`` shares: the origin, and ``remaining``, the
    seconds until a probe may be sent (0.0 while half-open with every probe slot taken)."""


class DeadlineExceededBase(_Rebuilt):
    """What every flavour's ``DeadlineExceeded`` shares. Mixed in ahead of the flavour's
    ``TimeoutException``, whose constructor takes the request."""

    def __init__(self, message: str, *, request: Any) -> None:
        super().__init__(message, request=request)  # type: ignore[call-arg]


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


class StreamIdleTimeoutBase(_Rebuilt):
    """What every flavour's ``StreamIdleTimeout`` shares: the policy's ``idle_timeout`` it
    exceeded. Mixed in ahead of the flavour's ``ReadTimeout``, whose constructor takes the
    request."""

    _fields = ("timeout",)
    timeout: float

    def __init__(self, message: str, *, timeout: float, request: Any) -> None:
        super().__init__(message, request=request)  # type: ignore[call-arg]
        self.timeout = timeout


# The docstrings of a flavour's errors, written once: ``{library}`` stands for the library's
# import name. They are laid out as a class body's, so ``__doc__`` reads as a class
# statement's would.

_COOLDOWN_DOC = """\
The origin asked for quiet (``Retry-After`` on 429 or 503) and this request cannot wait.

    Raised before anything is sent, when the origin's remaining cooldown is longer than the
    request's ``max_retry_after`` or would run past its deadline. It subclasses
    ``{library}.TransportError``, so existing handlers of transport errors catch it.

    Attributes:
        origin: the origin that asked, as ``scheme://host:port``.
        remaining: seconds of quiet the origin still asks for.
    """

_CIRCUIT_OPEN_DOC = """\
The origin's circuit breaker is open: the request was not sent.

    Raised before an attempt, without I/O, when the transport's ``CircuitBreaker`` has seen
    the origin fail too often, and also for requests with retries disabled (the breaker
    protects the dependency, not the retry loop). ``retry_info(error)`` gives the request's
    metadata so far, with stop reason ``circuit_open``. It subclasses
    ``{library}.TransportError``.

    Attributes:
        origin: the origin, as ``scheme://host:port``.
        remaining: seconds until the breaker lets a probe through (0.0 while half-open with
            every probe slot taken).
    """

_DEADLINE_DOC = """\
The request's deadline passed before an attempt could be sent: nothing was sent.

    Raised when a request starts after the ambient deadline
    (:class:`retry_transport.deadline`) has passed, checked before the breaker and the
    cooldowns; when an attempt's ``deadline_header`` would carry 0 ms; and when the time
    left ran out during the wait before a retry. ``retry_info(error)`` says what was done
    (0 attempts for a first attempt), with stop reason ``deadline``. It subclasses
    ``{library}.TimeoutException``, so code that already catches timeouts keeps working.
    """

_THROTTLED_DOC = """\
The origin's :class:`~retry_transport.AdaptiveThrottle` refused the request's first
    attempt locally: nothing was sent.

    The origin has lately accepted too few of the attempts sent to it (it answered 429 or
    503, or failed), so this client sheds part of its load before it reaches the origin.
    ``retry_info(error)`` says 0 attempts, stop reason ``throttled``. It subclasses
    ``{library}.TransportError``, so existing handlers of transport errors catch it.

    Attributes:
        origin: the origin, as ``scheme://host:port``.
        probability: the probability the attempt was refused with, in (0, 1].
    """


_STREAM_IDLE_DOC = """\
The server was silent longer than the policy's ``idle_timeout`` while the caller read
    the body of a response handed over: the stream stalled.

    For an event stream (``text/event-stream``), no event with data came for
    ``idle_timeout`` seconds (keep-alive comments do not count); for any other body, no
    chunk did. Only the time spent waiting on the network for the caller's reads counts.
    The transport closed the response (its connection left the pool) before raising it;
    its note says what had arrived. Without ``Resume`` (or for a body it cannot resume),
    ``retry_info(error)`` gives the request's metadata with stop reason ``idle_timeout``;
    with it, a stall is a break like any other, and the body is resumed where it may be.
    It subclasses ``{library}.ReadTimeout``, so code that already catches read timeouts
    keeps working.

    Attributes:
        timeout: the ``idle_timeout`` exceeded, in seconds.
    """


class Errors(NamedTuple):
    """A flavour's error classes, in the order :meth:`Flavour.of` takes them."""

    cooldown: type[CooldownErrorBase]
    circuit_open: type[CircuitOpenErrorBase]
    deadline: type[DeadlineExceededBase]
    throttled: type[ThrottledErrorBase]
    stream_idle: type[StreamIdleTimeoutBase]


def errors_of(library: ModuleType, module: str) -> Errors:
    """The error classes of the flavour bound to ``library`` (``httpx`` or ``httpx2``).

    Each subclasses its base above and the library's ``TransportError`` (``DeadlineExceeded``:
    its ``TimeoutException``; ``StreamIdleTimeout``: its ``ReadTimeout``). ``module`` is the
    public module that exports them: their ``__module__``, with their own name as
    ``__qualname__``, so reprs and pickles name the public class
    (``retry_transport.CooldownError``).
    """

    def make(name: str, base: type[Any], parent: type[Any], doc: str) -> Any:
        namespace = {"__module__": module, "__qualname__": name,
                     "__doc__": doc.format(library=library.__name__)}
        return type(name, (base, parent), namespace)

    return Errors(
        make("CooldownError", CooldownErrorBase, library.TransportError, _COOLDOWN_DOC),
        make("CircuitOpenError", CircuitOpenErrorBase, library.TransportError,
             _CIRCUIT_OPEN_DOC),
        make("DeadlineExceeded", DeadlineExceededBase, library.TimeoutException,
             _DEADLINE_DOC),
        make("ThrottledError", ThrottledErrorBase, library.TransportError, _THROTTLED_DOC),
        make("StreamIdleTimeout", StreamIdleTimeoutBase, library.ReadTimeout,
             _STREAM_IDLE_DOC),
    )
