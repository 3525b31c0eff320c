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

import sys as _sys
import typing as _typing

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
    EventPredicate,
    Hedging,
    Jitter,
    LatencySummary,
    LayeredRetriesWarning,
    MemoryStore,
    RedisStore,
    Resume,
    RetryBudget,
    RetryEvent,
    RetryHook,
    RetryInfo,
    RetryPolicy,
    RetryPredicate,
    RetryStats,
    ServerSentEvent,
    StopReason,
    deadline,
    parse_http_date,
    parse_retry_after,
    presets,
    retry_info,
    time_left,
)
from ._base.errors import (
    CircuitOpenErrorBase as _CircuitOpenErrorBase,
    CooldownErrorBase as _CooldownErrorBase,
    DeadlineExceededBase as _DeadlineExceededBase,
    StreamIdleTimeoutBase as _StreamIdleTimeoutBase,
    ThrottledErrorBase as _ThrottledErrorBase,
    errors_of as _errors_of,
)
from ._base.flavour import Flavour as _Flavour
from ._io.drivers import AsyncRetry as _AsyncRetry, SyncRetry as _SyncRetry

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
    "EventPredicate",
    "Hedging",
    "Jitter",
    "LatencySummary",
    "LayeredRetriesWarning",
    "MemoryStore",
    "RedisStore",
    "Resume",
    "RetryBudget",
    "RetryEvent",
    "RetryHook",
    "RetryInfo",
    "RetryPolicy",
    "RetryPredicate",
    "RetryStats",
    "RetryTransport",
    "ServerSentEvent",
    "StopReason",
    "StreamIdleTimeout",
    "ThrottledError",
    "deadline",
    "parse_http_date",
    "parse_retry_after",
    "retry_info",
    "time_left",
]


if _typing.TYPE_CHECKING:  # what _errors_of makes, as the type checker sees it
    class CooldownError(_CooldownErrorBase, _httpx2.TransportError): ...
    class CircuitOpenError(_CircuitOpenErrorBase, _httpx2.TransportError): ...
    class DeadlineExceeded(_DeadlineExceededBase, _httpx2.TimeoutException): ...
    class ThrottledError(_ThrottledErrorBase, _httpx2.TransportError): ...
    class StreamIdleTimeout(_StreamIdleTimeoutBase, _httpx2.ReadTimeout): ...
else:
    (CooldownError, CircuitOpenError, DeadlineExceeded, ThrottledError,
     StreamIdleTimeout) = _errors_of(
        _httpx2, __name__)


#: What the core and the drivers need from httpx2.
_HTTPX2 = _Flavour.of(_httpx2, CooldownError, CircuitOpenError, DeadlineExceeded,
                      ThrottledError, StreamIdleTimeout)


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



# The errors already say where they live (_errors_of above).
_PUBLIC = {"RetryTransport", "AsyncRetryTransport"}
for _name in _PUBLIC:
    globals()[_name].__module__ = __name__
del _name

# ``import retry_transport.httpx2.presets`` names the same module as ``rt.presets``.
_sys.modules[f"{__name__}.presets"] = presets
