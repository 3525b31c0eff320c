"""retry-transport for httpx2 clients, and the SDKs built on them (OpenAI, Anthropic, MCP).

The same public API as ``retry_transport``, bound to httpx2: migrating is changing one
import::

    import httpx2
    import retry_transport.httpx2 as rt

    client = httpx2.Client(transport=rt.RetryTransport())

``RetryTransport`` and ``AsyncRetryTransport`` subclass ``httpx2.BaseTransport`` and
``httpx2.AsyncBaseTransport``, and ``CooldownError`` is an ``httpx2.TransportError``. Every
flavour-neutral name (``RetryPolicy``, ``RetryBudget``, ``RetryInfo``, ``StopReason``,
``parse_retry_after``, ``retry_info``, ...) is the very object ``retry_transport`` exports, so
a budget may be shared between an httpx transport and an httpx2 one. Needs the ``httpx2``
extra (Python 3.11 or later).
"""

try:
    import httpx2 as _httpx2
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "retry_transport.httpx2 needs httpx2 (Python 3.11 or later): "
        "pip install 'retry-transport[httpx2]'"
    ) from exc

from . import (
    DEFAULT_RETRY_METHODS,
    DEFAULT_RETRY_STATUSES,
    AdaptiveThrottle,
    Attempt,
    CircuitBreaker,
    Hedging,
    Jitter,
    LatencySummary,
    MemoryStore,
    RedisStore,
    RetryBudget,
    RetryEvent,
    RetryHook,
    RetryInfo,
    RetryPolicy,
    RetryStats,
    StopReason,
    deadline,
    parse_http_date,
    parse_retry_after,
    retry_info,
    time_left,
)
from ._io.drivers import AsyncRetry as _AsyncRetry, SyncRetry as _SyncRetry
from ._leaves.errors import (
    CircuitOpenErrorBase as _CircuitOpenErrorBase,
    CooldownErrorBase as _CooldownErrorBase,
    DeadlineExceededBase as _DeadlineExceededBase,
    ThrottledErrorBase as _ThrottledErrorBase,
)
from ._leaves.flavour import Flavour as _Flavour

__all__ = [
    "DEFAULT_RETRY_METHODS",
    "DEFAULT_RETRY_STATUSES",
    "AdaptiveThrottle",
    "AsyncRetryTransport",
    "Attempt",
    "CircuitBreaker",
    "CircuitOpenError",
    "CooldownError",
    "DeadlineExceeded",
    "Hedging",
    "Jitter",
    "LatencySummary",
    "MemoryStore",
    "RedisStore",
    "RetryBudget",
    "RetryEvent",
    "RetryHook",
    "RetryInfo",
    "RetryPolicy",
    "RetryStats",
    "RetryTransport",
    "StopReason",
    "ThrottledError",
    "deadline",
    "parse_http_date",
    "parse_retry_after",
    "retry_info",
    "time_left",
]


class CooldownError(_CooldownErrorBase, _httpx2.TransportError):
    """The origin asked for quiet (``Retry-After`` on 429 or 503) and this request cannot wait.

    Raised before anything is sent, when the origin's remaining cooldown is longer than the
    request's ``max_retry_after`` or would run past its deadline. It subclasses
    ``httpx2.TransportError``, so existing handlers of transport errors catch it.

    Attributes:
        origin: the origin that asked, as ``scheme://host:port``.
        remaining: seconds of quiet the origin still asks for.
    """


class CircuitOpenError(_CircuitOpenErrorBase, _httpx2.TransportError):
    """The origin's circuit breaker is open: the request was not sent.

    Raised before an attempt, without I/O. ``retry_info(error)`` gives the request's
    metadata so far, with stop reason ``circuit_open``. It subclasses
    ``httpx2.TransportError``.

    Attributes:
        origin: the origin, as ``scheme://host:port``.
        remaining: seconds until the breaker lets a probe through (0.0 while half-open with
            every probe slot taken).
    """


class DeadlineExceeded(_DeadlineExceededBase, _httpx2.TimeoutException):
    """The request's deadline passed before an attempt could be sent: nothing was sent.

    ``retry_info(error)`` says what was done, with stop reason ``deadline``. It subclasses
    ``httpx2.TimeoutException``, so code that already catches timeouts keeps working.
    """


class ThrottledError(_ThrottledErrorBase, _httpx2.TransportError):
    """The origin's ``AdaptiveThrottle`` refused the request's first attempt locally:
    nothing was sent. ``retry_info(error)`` says stop reason ``throttled``. It subclasses
    ``httpx2.TransportError``.

    Attributes:
        origin: the origin, as ``scheme://host:port``.
        probability: the probability the attempt was refused with, in (0, 1].
    """


#: What the core and the drivers need from httpx2.
_HTTPX2 = _Flavour.of(_httpx2, CooldownError, CircuitOpenError, DeadlineExceeded,
                      ThrottledError)


class RetryTransport(_SyncRetry[_httpx2.BaseTransport], _httpx2.BaseTransport):
    """An httpx2 transport that retries transient failures of the transport it wraps.

    ``httpx2.Client(transport=RetryTransport(...))``, in ``mounts=``, or as an SDK's
    ``http_client=httpx2.Client(transport=...)``. Without an inner transport it builds an
    ``httpx2.HTTPTransport``. The arguments are documented on ``__init__``.
    """

    _flavour = _HTTPX2


class AsyncRetryTransport(_AsyncRetry[_httpx2.AsyncBaseTransport], _httpx2.AsyncBaseTransport):
    """The async twin of :class:`RetryTransport`, for ``httpx2.AsyncClient``.

    Runs on asyncio and trio alike. Without an inner transport it builds an
    ``httpx2.AsyncHTTPTransport``.
    """

    _flavour = _HTTPX2



_PUBLIC = {"CooldownError", "CircuitOpenError", "DeadlineExceeded", "ThrottledError",
           "RetryTransport", "AsyncRetryTransport"}
for _name in _PUBLIC:
    globals()[_name].__module__ = __name__
del _name
