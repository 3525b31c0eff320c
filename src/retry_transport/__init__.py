"""retry-transport: an httpx transport that retries transient failures, and only those.

import httpx, retry_transport as rt

client = httpx.Client(transport=rt.RetryTransport())
response = client.get("https://api.example.com/items")
rt.retry_info(response).attempts
"""

from ._breaker import CircuitBreaker
from ._budget import RetryBudget
from ._core import RetryHook, retry_info
from ._errors import CircuitOpenError, CooldownError
from ._models import Attempt, RetryEvent, RetryInfo, RetryStats, StopReason
from ._policy import DEFAULT_RETRY_METHODS, DEFAULT_RETRY_STATUSES, Jitter, RetryPolicy
from ._redis import RedisStore
from ._retry_after import parse_http_date, parse_retry_after
from ._store import MemoryStore
from ._transports import AsyncRetryTransport, RetryTransport

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_RETRY_METHODS",
    "DEFAULT_RETRY_STATUSES",
    "AsyncRetryTransport",
    "Attempt",
    "CircuitBreaker",
    "CircuitOpenError",
    "CooldownError",
    "Jitter",
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
    "parse_http_date",
    "parse_retry_after",
    "retry_info",
]
