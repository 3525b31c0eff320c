"""Feeding metrics from a hook: Prometheus-style counters, with no metrics library needed.

A hook is any callable taking a ``RetryEvent``. This one keeps counters keyed by labels, the
way ``prometheus_client.Counter(...).labels(...).inc()`` would; swap the dictionary for a
real Counter, or for an OpenTelemetry ``meter.create_counter(...).add(1, attributes)``, and
nothing else changes. Events carry the redacted URL, so label by host, not by full URL.

    python examples/metrics_hook.py
"""

from __future__ import annotations

from collections import Counter

import httpx

import retry_transport as rt

retries_total: Counter[tuple[str, str]] = Counter()  # labels: host, cause
give_ups_total: Counter[tuple[str, str]] = Counter()  # labels: host, stop reason


def metrics_hook(event: rt.RetryEvent) -> None:
    host = httpx.URL(event.url).host
    if event.kind == "retry":
        cause = str(event.status) if event.status is not None else str(event.error)
        retries_total[(host, cause)] += 1
    else:
        give_ups_total[(host, str(event.stop_reason))] += 1


def flaky(request: httpx.Request) -> httpx.Response:
    """Every third request to /orders succeeds; /slow always times out."""
    if request.url.path == "/slow":
        raise httpx.ReadTimeout("no answer", request=request)
    flaky.count += 1  # type: ignore[attr-defined]
    return httpx.Response(200 if flaky.count % 3 == 0 else 503)  # type: ignore[attr-defined]


flaky.count = 0  # type: ignore[attr-defined]


def main() -> None:
    transport = rt.RetryTransport(
        httpx.MockTransport(flaky), hooks=[metrics_hook], sleep=lambda seconds: None
    )
    with httpx.Client(transport=transport, base_url="https://shop.example.com") as client:
        for _ in range(4):
            client.get("/orders")
        try:
            client.get("/slow")
        except httpx.ReadTimeout:
            pass
    print("# TYPE http_client_retries_total counter")
    for (host, cause), count in sorted(retries_total.items()):
        print(f'http_client_retries_total{{host="{host}",cause="{cause}"}} {count}')
    print("# TYPE http_client_retry_give_ups_total counter")
    for (host, reason), count in sorted(give_ups_total.items()):
        print(f'http_client_retry_give_ups_total{{host="{host}",reason="{reason}"}} {count}')
    stats = transport.stats
    print(f"# requests={stats.requests} retries={stats.retries} "
          f"retry_rate={stats.retry_rate:.2f} budget_tokens={stats.budget_tokens}")


if __name__ == "__main__":
    main()
