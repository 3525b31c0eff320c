"""The httpx flavour: ``RetryTransport`` and ``AsyncRetryTransport`` for ``httpx`` clients,
and the errors they raise.

The drivers are written once (``_io/drivers.py``); these classes bind them to httpx: they are
``httpx.BaseTransport`` / ``httpx.AsyncBaseTransport`` subclasses, and classify httpx's own
exceptions. The errors are made from httpx by ``_base/errors.py``. ``retry_transport.httpx2``
binds the same drivers and errors to httpx2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import httpx

from .._base.errors import (
    CircuitOpenErrorBase,
    CooldownErrorBase,
    DeadlineExceededBase,
    StreamIdleTimeoutBase,
    ThrottledErrorBase,
    errors_of,
)
from .._base.flavour import Flavour
from .drivers import AsyncRetry, SyncRetry

__all__ = [
    "HTTPX",
    "AsyncRetryTransport",
    "CircuitOpenError",
    "CooldownError",
    "DeadlineExceeded",
    "RetryTransport",
    "StreamIdleTimeout",
    "ThrottledError",
]

if TYPE_CHECKING:  # what errors_of makes, as the type checker sees it
    class CooldownError(CooldownErrorBase, httpx.TransportError): ...
    class CircuitOpenError(CircuitOpenErrorBase, httpx.TransportError): ...
    class DeadlineExceeded(DeadlineExceededBase, httpx.TimeoutException): ...
    class ThrottledError(ThrottledErrorBase, httpx.TransportError): ...
    class StreamIdleTimeout(StreamIdleTimeoutBase, httpx.ReadTimeout): ...
else:
    (CooldownError, CircuitOpenError, DeadlineExceeded, ThrottledError,
     StreamIdleTimeout) = errors_of(
        httpx, "retry_transport")

#: What the core and the drivers need from httpx.
HTTPX: Final = Flavour.of(httpx, CooldownError, CircuitOpenError, DeadlineExceeded,
                          ThrottledError, StreamIdleTimeout)


class RetryTransport(SyncRetry[httpx.BaseTransport], httpx.BaseTransport):
    """An httpx transport that retries transient failures of the transport it wraps.

    ``httpx.Client(transport=RetryTransport(...))``, or in ``mounts=``. Without an inner
    transport it builds an ``httpx.HTTPTransport``. The arguments are documented on
    ``__init__``: the policy's fields as keywords, a budget, cooldowns, hooks, and the
    injected sleep, clocks and random source.
    """

    _flavour = HTTPX


class AsyncRetryTransport(AsyncRetry[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport):
    """The async twin of :class:`RetryTransport`, for ``httpx.AsyncClient``.

    Runs on asyncio and trio alike. Without an inner transport it builds an
    ``httpx.AsyncHTTPTransport``.
    """

    _flavour = HTTPX
