"""OpenTelemetry: a client span per attempt, retry counters, and the transport's stats.

``retry_transport.otel.instrument`` puts opentelemetry-instrumentation-httpx's transport
inside the retry transport, so each attempt is its own client span under the caller's span,
and every retry's span says which resend it is (``http.request.resend_count``).
``metrics_hook`` counts retries and give-ups; ``observe`` reports the request counter and the
budget's tokens. Runs offline: the "service" is a MockTransport, and the exporters print to
the console. It needs the ``otel`` extra and the OpenTelemetry SDK; from a checkout:

    pip install -e '.[otel]' opentelemetry-sdk
    python examples/otel_tracing.py
"""

from __future__ import annotations

import sys

import httpx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricsData,
    PeriodicExportingMetricReader as Reader,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import retry_transport as rt
import retry_transport.otel as rt_otel


def span_line(span: ReadableSpan) -> str:
    """One line per span instead of the exporter's JSON (pass no formatter to see that)."""
    attributes = span.attributes or {}
    resend = attributes.get(rt_otel.RESEND_COUNT)
    parent = f" parent={span.parent.span_id:016x}" if span.parent else ""
    status = attributes.get("http.response.status_code", attributes.get("http.status_code"))
    own = f"{span.context.span_id:016x}" if span.context else "?"
    return (f"span {span.name!r} id={own}{parent} status={status}"
            + (f" resend_count={resend}" if resend is not None else "") + "\n")


def metric_lines(data: MetricsData) -> str:
    lines = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if not metric.name.startswith("retry_transport."):
                    continue  # the instrumentation's own duration histogram
                for point in metric.data.data_points:
                    attributes = sorted((point.attributes or {}).items())
                    labels = ",".join(f"{key}={value!s}" for key, value in attributes)
                    lines.append(f"metric {metric.name}{{{labels}}} {point.value}")  # type: ignore[union-attr]
    return "\n".join(lines) + "\n"


def flaky(request: httpx.Request) -> httpx.Response:
    """/orders fails twice, then answers; /down never recovers."""
    if request.url.path == "/down":
        return httpx.Response(503)
    flaky.calls += 1  # type: ignore[attr-defined]
    return httpx.Response(200 if flaky.calls % 3 == 0 else 503)  # type: ignore[attr-defined]


flaky.calls = 0  # type: ignore[attr-defined]


def main() -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        formatter=span_line)))
    reader = Reader(ConsoleMetricExporter(formatter=metric_lines),
                    export_interval_millis=3_600_000)
    meter_provider = MeterProvider(metric_readers=[reader])
    meter = meter_provider.get_meter("example")

    transport = rt.RetryTransport(
        httpx.MockTransport(flaky), hooks=[rt_otel.metrics_hook(meter)],
        sleep=lambda seconds: None, max_attempts=3,
    )
    rt_otel.instrument(transport, tracer_provider=tracer_provider,
                       meter_provider=meter_provider)
    rt_otel.observe(transport, meter)

    tracer = tracer_provider.get_tracer("example")
    with httpx.Client(transport=transport, base_url="https://shop.example.com") as client:
        with tracer.start_as_current_span("checkout"):
            response = client.get("/orders")
            info = rt.retry_info(response)
            assert info is not None
            print(f"# /orders: {response.status_code} after {info.attempts} attempts")
        with tracer.start_as_current_span("status page"):
            response = client.get("/down")
            info = rt.retry_info(response)
            assert info is not None
            print(f"# /down: {response.status_code}, stop reason {info.stop_reason}")
    stats = transport.stats
    print(f"# stats: requests={stats.requests} retries={stats.retries} "
          f"gave_up={ {str(k): v for k, v in stats.gave_up.items()} }")
    sys.stdout.flush()
    meter_provider.shutdown()  # exports the metrics once, now
    tracer_provider.shutdown()


if __name__ == "__main__":
    main()
