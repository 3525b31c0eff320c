"""retry-transport: an httpx transport that retries transient failures, and only those.

import httpx, retry_transport as rt

client = httpx.Client(transport=rt.RetryTransport())
response = client.get("https://api.example.com/items")
rt.retry_info(response).attempts
"""

from . import presets as presets  # rt.presets.openai(): a module, not in __all__
from ._base.errors import LayeredRetriesWarning
from ._base.models import Attempt, RetryEvent, RetryInfo, RetryStats, StopReason
from ._call.hedging import Hedging
from ._call.latency import LatencySummary
from ._call.resume import Resume
from ._guards.breaker import CircuitBreaker
from ._guards.budget import RetryBudget
from ._guards.throttle import AdaptiveThrottle
from ._io.transports import (
    AsyncRetryTransport,
    CircuitOpenError,
    CooldownError,
    DeadlineExceeded,
    RetryTransport,
    StreamIdleTimeout,
    ThrottledError,
)
from ._policy.deadlines import deadline, time_left
from ._policy.observe import RetryHook
from ._policy.policy import (
    DEFAULT_RETRY_METHODS,
    DEFAULT_RETRY_STATUSES,
    EventPredicate,
    Jitter,
    RetryPolicy,
    RetryPredicate,
)
from ._stores.memory import MemoryStore
from ._stores.redis import RedisStore
from ._wire.http import retry_info
from ._wire.retry_after import parse_http_date, parse_retry_after
from ._wire.sse import ServerSentEvent

__version__ = "0.1.0"

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


def _public(namespace: dict[str, object], names: list[str], module: str) -> None:
    """Say where the public names live: their ``__module__`` is the package, not the private
    module that defines them (as httpx does), so reprs, docs and pickles name only public
    paths. Constants (frozensets) have no ``__module__`` to set."""
    for name in names:
        value = namespace[name]
        if isinstance(value, (frozenset, str)):
            continue
        try:
            value.__module__ = module
        except (AttributeError, TypeError):  # pragma: no cover - a type that refuses it
            pass


_public(globals(), __all__, __name__)
