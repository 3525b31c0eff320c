"""OpenTelemetry for retry transports: a span per attempt, retry metrics, observed stats.

Needs the ``otel`` extra (``pip install 'retry-transport[otel]'``: opentelemetry-api, and
opentelemetry-instrumentation-httpx for :func:`instrument`)::

    from opentelemetry import metrics
    import retry_transport as rt
    import retry_transport.otel as rt_otel

    meter = metrics.get_meter("my-service")
    transport = rt_otel.instrument(rt.RetryTransport(hooks=[rt_otel.metrics_hook(meter)]))
    rt_otel.observe(transport, meter)

* :func:`instrument` puts the instrumentation's transport *inside* the retry transport, so
  every attempt gets its own client span under the caller's span, and each retry's span
  carries ``http.request.resend_count`` (:func:`request_hook`). The span's URL is
  redacted as the library's logs redact it: no userinfo, path parameters, query string or
  fragment.
* :func:`metrics_hook` counts retries, give-ups and breaker transitions from the
  transport's hooks.
* :func:`observe` reports the transport's request counter and its budget's tokens.

Works with both flavours (``retry_transport.RetryTransport`` and
``retry_transport.httpx2.RetryTransport``), sync and async.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

try:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation
    from opentelemetry.trace import Span
    from opentelemetry.util.types import AttributeValue
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "retry_transport.otel needs OpenTelemetry: pip install 'retry-transport[otel]'"
    ) from exc

from ._base.models import RetryEvent
from ._io.drivers import AsyncRetry, SyncRetry
from ._wire.http import redact_url

__all__ = [
    "RESEND_COUNT",
    "URL_ATTRIBUTES",
    "async_request_hook",
    "instrument",
    "metrics_hook",
    "observe",
    "request_hook",
]

#: The span attribute a retry's span carries: how many times the request was sent before
#: (1 on the first retry). OpenTelemetry's HTTP semantic conventions name it.
RESEND_COUNT = "http.request.resend_count"

#: The span attributes that hold the request's full URL: ``url.full`` (the stable HTTP
#: semantic conventions) and ``http.url`` (the older ones, the instrumentation's default).
URL_ATTRIBUTES = ("url.full", "http.url")

_Transport = TypeVar("_Transport", SyncRetry[Any], AsyncRetry[Any])


def _resend_count(request_info: object) -> int | None:
    """``retry_attempt - 1`` from the request's extensions, or ``None`` on a first try."""
    extensions = getattr(request_info, "extensions", None)
    if not isinstance(extensions, Mapping):
        return None
    attempt = extensions.get("retry_attempt")
    if isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 2:
        return attempt - 1
    return None


def _redact(span: Span, request_info: object) -> None:
    """Write the span's URL attributes again, redacted (see :func:`request_hook`)."""
    url = getattr(request_info, "url", None)
    try:
        redacted = redact_url(url)
    except (AttributeError, TypeError, UnicodeError):
        return  # no URL of httpx or httpx2: nothing this hook can read
    attributes = getattr(span, "attributes", None)
    if isinstance(attributes, Mapping):
        names = [name for name in URL_ATTRIBUTES if name in attributes]
    else:  # a span that cannot be read: the stable attribute
        names = [URL_ATTRIBUTES[0]]
    for name in names:
        span.set_attribute(name, redacted)


def request_hook(span: Span, request_info: Any) -> None:
    """A request hook for opentelemetry-instrumentation-httpx's sync transports and
    instrumentors: redacts the span's URL and sets ``http.request.resend_count`` on the
    span of every retry.

    The instrumentation records the full URL (``url.full``, or ``http.url`` under the older
    conventions) with its query string and fragment, which may hold secrets (tokens,
    signatures); OpenTelemetry's HTTP conventions ask that credentials and sensitive query
    values stay out of it. The hook writes it again as the library's logs and hook events
    spell it: scheme, host, port and path, without userinfo, path parameters
    (``;jsessionid=...``), query string or fragment. (The span starts with the
    instrumentation's value: a span processor's ``on_start`` sees that one, an exporter
    only the redacted one.)

    ``request_info`` is the instrumentation's ``RequestInfo`` (or anything with an
    ``extensions`` mapping and an httpx or httpx2 ``url``, such as a request); a retry
    transport marks each retry with ``extensions["retry_attempt"]`` (2 for the first
    retry). A first try gets no resend count.
    """
    if not span.is_recording():
        return
    _redact(span, request_info)
    count = _resend_count(request_info)
    if count is not None:
        span.set_attribute(RESEND_COUNT, count)


async def async_request_hook(span: Span, request_info: Any) -> None:
    """:func:`request_hook` for the async transports and ``async_request_hook=`` (the
    instrumentation awaits its async hooks)."""
    request_hook(span, request_info)


def _missing_instrumentation(exc: ImportError) -> ImportError:
    error = ImportError(
        "retry_transport.otel.instrument needs opentelemetry-instrumentation-httpx: "
        "pip install 'retry-transport[otel]'"
    )
    error.__cause__ = exc
    return error


def instrument(
    transport: _Transport,
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> _Transport:
    """Trace every attempt of ``transport``: wrap its inner transport in
    opentelemetry-instrumentation-httpx's transport, with :func:`request_hook`.

    Each attempt then gets its own client span (a child of whatever span is current when
    the request is made), whose URL is redacted (see :func:`request_hook`), and retries
    carry ``http.request.resend_count``. Works on a
    ``RetryTransport`` or an ``AsyncRetryTransport`` of either flavour; calling it again on
    the same transport changes nothing. Returns ``transport``.

    ``HTTPXClientInstrumentor().instrument()`` (or ``HTTPX2ClientInstrumentor``) patches
    ``HTTPTransport`` itself, the usual inner transport, so it already traces each attempt:
    with it, pass ``request_hook=request_hook, async_request_hook=async_request_hook``
    instead of calling this, which would trace every attempt twice.
    """
    try:
        from opentelemetry.instrumentation import httpx as instrumentation
    except ImportError as exc:
        raise _missing_instrumentation(exc) from exc
    flavour = transport._flavour.name
    wrapper: Any
    if isinstance(transport, SyncRetry):
        name = "SyncOpenTelemetryTransport"
        hook: Any = request_hook
    elif isinstance(transport, AsyncRetry):
        name = "AsyncOpenTelemetryTransport"
        hook = async_request_hook
    else:  # pragma: no cover - the TypeVar admits nothing else
        raise TypeError(f"instrument() takes a retry transport, got {transport!r}")
    if flavour != "httpx":
        name += flavour.capitalize()  # SyncOpenTelemetryTransportHttpx2, ...
    wrapper = getattr(instrumentation, name, None)
    if wrapper is None:
        raise ImportError(
            f"this opentelemetry-instrumentation-httpx has no {name} for {flavour}: "
            "upgrade it (0.66b2 or later instruments httpx2)"
        )
    inner = transport._transport
    if not isinstance(inner, wrapper):
        transport._transport = wrapper(
            inner,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            request_hook=hook,
        )
    return transport


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def metrics_hook(meter: Meter) -> Callable[[RetryEvent], None]:
    """A hook (for ``hooks=``, or a ``CircuitBreaker``'s) that counts what it is told.

    Counters, each with ``server.address`` (the URL's host), ``http.request.method``,
    ``http.response.status_code`` (when the attempt got a response) and ``error.type``
    (when it raised):

    * ``retry_transport.retries``: retries scheduled (``kind="retry"``);
    * ``retry_transport.give_ups``: requests given up on (``kind="give_up"``), also with
      ``retry.stop_reason``;
    * ``retry_transport.breaker.transitions``: circuit breaker state changes, also with
      ``retry_transport.breaker.state`` (``open``, ``half_open`` or ``closed``);
    * ``retry_transport.hedges``: hedges sent (``kind="hedge"``);
    * ``retry_transport.throttled``: attempts an ``AdaptiveThrottle`` refused locally
      (``kind="throttled"``).

    Cooldown waits are not counted. Give one transport's hook, or the breaker's, not both:
    a breaker tells its transport's hooks too.
    """
    retries = meter.create_counter(
        "retry_transport.retries", unit="{retry}", description="Retries scheduled."
    )
    give_ups = meter.create_counter(
        "retry_transport.give_ups",
        unit="{request}",
        description="Requests that ended unsuccessfully after or instead of a retry.",
    )
    transitions = meter.create_counter(
        "retry_transport.breaker.transitions",
        unit="{transition}",
        description="Circuit breaker state changes.",
    )
    hedges = meter.create_counter(
        "retry_transport.hedges", unit="{attempt}",
        description="Hedges sent: attempts started while an earlier one was in flight.",
    )
    throttled = meter.create_counter(
        "retry_transport.throttled", unit="{attempt}",
        description="Attempts an adaptive throttle refused before they were sent.",
    )
    states = {"breaker_open": "open", "breaker_half_open": "half_open",
              "breaker_close": "closed"}

    def hook(event: RetryEvent) -> None:
        kind = event.kind
        if kind == "retry":
            counter = retries
        elif kind == "give_up":
            counter = give_ups
        elif kind in states:
            counter = transitions
        elif kind == "hedge":
            counter = hedges
        elif kind == "throttled":
            counter = throttled
        else:
            return
        attributes: dict[str, AttributeValue] = {
            "server.address": _host(event.url),
            "http.request.method": event.method,
        }
        if event.status is not None:
            attributes["http.response.status_code"] = event.status
        if event.error is not None:
            attributes["error.type"] = event.error
        if kind == "give_up" and event.stop_reason is not None:
            attributes["retry.stop_reason"] = str(event.stop_reason)
        if counter is transitions:
            attributes["retry_transport.breaker.state"] = states[kind]
        counter.add(1, attributes)

    return hook


def observe(
    transport: SyncRetry[Any] | AsyncRetry[Any],
    meter: Meter,
    *,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> None:
    """Report ``transport.stats`` on each collection: ``retry_transport.requests`` (an
    observable counter of requests handled) and, when the transport has a budget,
    ``retry_transport.budget.tokens`` (an observable gauge of the tokens left).

    ``attributes`` go on every observation (to tell several transports apart). The
    callbacks hold the transport weakly: once it is gone they report nothing.
    """
    ref = weakref.ref(transport)
    labels = dict(attributes or {})

    def requests(options: CallbackOptions) -> Iterable[Observation]:
        live = ref()
        return [] if live is None else [Observation(live.stats.requests, labels)]

    meter.create_observable_counter(
        "retry_transport.requests",
        callbacks=[requests],
        unit="{request}",
        description="Requests handled by the retry transport.",
    )
    if transport.budget is None:
        return

    def tokens(options: CallbackOptions) -> Iterable[Observation]:
        live = ref()
        left = None if live is None else live.stats.budget_tokens
        return [] if left is None else [Observation(left, labels)]

    meter.create_observable_gauge(
        "retry_transport.budget.tokens",
        callbacks=[tokens],
        unit="{token}",
        description="Tokens left in the retry budget.",
    )
