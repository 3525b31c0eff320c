"""retry_transport.otel with the real OpenTelemetry SDK and the real httpx instrumentation."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
instrumentation = pytest.importorskip("opentelemetry.instrumentation.httpx")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind  # noqa: E402

import retry_transport.otel as rt_otel  # noqa: E402
from tests import flavour as _flavour  # noqa: E402
from tests.flavour import httpx, rt  # noqa: E402

pytestmark = pytest.mark.usefixtures("flavour", "instrumented_flavour")

URL = "https://api.example.com/items?secret=1"


@pytest.fixture
def instrumented_flavour(flavour: str) -> str:
    """Skip the httpx2 runs when this instrumentation has no httpx2 transports."""
    if flavour != "httpx" and not hasattr(instrumentation, "SyncOpenTelemetryTransportHttpx2"):
        pytest.skip(f"opentelemetry-instrumentation-httpx does not instrument {flavour}")
    return flavour


class Telemetry:
    """A tracer provider and a meter provider that keep everything in memory."""

    def __init__(self) -> None:
        self.spans_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans_exporter))
        self.tracer = self.tracer_provider.get_tracer("tests")
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.meter = self.meter_provider.get_meter("tests")

    def spans(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.spans_exporter.get_finished_spans())

    def points(self, name: str) -> list[Any]:
        """The data points of metric ``name`` in a fresh collection."""
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def total(self, name: str, **attributes: Any) -> Any:
        return sum(
            point.value for point in self.points(name)
            if all(point.attributes.get(k) == v for k, v in attributes.items())
        )

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    t = Telemetry()
    yield t
    t.shutdown()


def statuses(*codes: int) -> Any:
    """A handler answering ``codes`` in turn (the last one from then on)."""
    remaining = list(codes)

    def handler(request: Any) -> Any:
        return httpx.Response(remaining.pop(0) if len(remaining) > 1 else remaining[0])

    return handler


async def no_sleep(seconds: float) -> None:
    pass


def check_attempt_spans(telemetry: Telemetry, parent_name: str = "parent") -> None:
    spans = telemetry.spans()
    (parent,) = [s for s in spans if s.name == parent_name]
    attempts = sorted((s for s in spans if s.kind is SpanKind.CLIENT),
                      key=lambda s: s.start_time or 0)
    assert len(attempts) == 3
    assert parent.context is not None
    for span in attempts:
        assert span.parent is not None
        assert span.parent.span_id == parent.context.span_id
        assert span.context is not None
        assert span.context.trace_id == parent.context.trace_id
    assert [(s.attributes or {}).get(rt_otel.RESEND_COUNT) for s in attempts] == [None, 1, 2]
    assert resend_absent(attempts[0])


def resend_absent(span: ReadableSpan) -> bool:
    return rt_otel.RESEND_COUNT not in (span.attributes or {})


# -- request_hook ----------------------------------------------------------------------------


def test_request_hook_marks_retries_only(telemetry: Telemetry) -> None:
    """resend_count = retry_attempt - 1; nothing for a first try or odd values."""
    info = instrumentation.RequestInfo
    cases = [({"retry_attempt": 2}, 1), ({"retry_attempt": 5}, 4), ({}, None), (None, None),
             ({"retry_attempt": True}, None), ({"retry_attempt": "3"}, None)]
    for extensions, expected in cases:
        with telemetry.tracer.start_as_current_span("s") as span:
            rt_otel.request_hook(span, info(b"GET", httpx.URL(URL), None, None, extensions))
        assert (telemetry.spans()[-1].attributes or {}).get(rt_otel.RESEND_COUNT) == expected


# -- spans, sync and async -------------------------------------------------------------------


def test_each_sync_attempt_gets_its_own_span(telemetry: Telemetry) -> None:
    transport = rt.RetryTransport(httpx.MockTransport(statuses(503, 503, 200)),
                                  sleep=lambda s: None)
    assert rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider,
                              meter_provider=telemetry.meter_provider) is transport
    with httpx.Client(transport=transport) as client:
        with telemetry.tracer.start_as_current_span("parent"):
            response = client.get(URL)
    assert response.status_code == 200
    assert rt.retry_info(response).attempts == 3
    check_attempt_spans(telemetry)
    assert "retry_attempt" not in response.request.extensions


@pytest.mark.anyio
async def test_each_async_attempt_gets_its_own_span(telemetry: Telemetry) -> None:
    transport = rt.AsyncRetryTransport(httpx.MockTransport(statuses(503, 503, 200)),
                                       sleep=no_sleep)
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider,
                       meter_provider=telemetry.meter_provider)
    async with httpx.AsyncClient(transport=transport) as client:
        with telemetry.tracer.start_as_current_span("parent"):
            response = await client.get(URL)
    assert response.status_code == 200
    check_attempt_spans(telemetry)


def hedge_spans(telemetry: Telemetry) -> None:
    """Two attempt spans under the parent: the first, and the hedge (resend count 1)."""
    spans = telemetry.spans()
    (parent,) = [s for s in spans if s.name == "parent"]
    attempts = sorted((s for s in spans if s.kind is SpanKind.CLIENT),
                      key=lambda s: s.start_time or 0)
    assert len(attempts) == 2
    assert parent.context is not None
    for span in attempts:
        assert span.parent is not None and span.parent.span_id == parent.context.span_id
    assert [(s.attributes or {}).get(rt_otel.RESEND_COUNT) for s in attempts] == [None, 1]
    assert telemetry.total("retry_transport.hedges") == 1


def test_each_sync_hedge_is_its_own_attempt_span(telemetry: Telemetry) -> None:
    """The hedge runs on a worker thread, in the caller's context: a child of its span."""
    import threading

    release = threading.Event()

    def handler(request: Any) -> Any:
        if request.extensions.get("retry_attempt") is None:
            release.wait(5.0)  # the first attempt answers once the hedge has
        else:
            release.set()
        return httpx.Response(200)

    meter = telemetry.meter_provider.get_meter("test")
    transport = rt.RetryTransport(httpx.MockTransport(handler), hedging=rt.Hedging(0.005),
                                  hooks=[rt_otel.metrics_hook(meter)])
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider,
                       meter_provider=telemetry.meter_provider)
    client = httpx.Client(transport=transport)
    with telemetry.tracer.start_as_current_span("parent"):
        response = client.get(URL)
    client.close()  # waits for the loser
    assert rt.retry_info(response).hedges == 1
    hedge_spans(telemetry)


@pytest.mark.anyio
async def test_each_async_hedge_is_its_own_attempt_span(telemetry: Telemetry) -> None:
    import anyio

    async def handler(request: Any) -> Any:
        if request.extensions.get("retry_attempt") is None:
            await anyio.sleep(3600)  # cancelled once the hedge has answered
        return httpx.Response(200)

    meter = telemetry.meter_provider.get_meter("test")
    transport = rt.AsyncRetryTransport(httpx.MockTransport(handler),
                                       hedging=rt.Hedging(0.005),
                                       hooks=[rt_otel.metrics_hook(meter)])
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider,
                       meter_provider=telemetry.meter_provider)
    async with httpx.AsyncClient(transport=transport) as client:
        with telemetry.tracer.start_as_current_span("parent"):
            response = await client.get(URL)
    assert rt.retry_info(response).hedges == 1
    hedge_spans(telemetry)


def test_metrics_hook_counts_throttled_attempts(telemetry: Telemetry) -> None:
    from retry_transport.testing import retry_testing

    throttle = rt.AdaptiveThrottle()
    for _ in range(50):
        throttle.record("https://api.example.com:443", False)
    meter = telemetry.meter_provider.get_meter("test")
    transport = rt.RetryTransport(httpx.MockTransport(statuses(200)), throttle=throttle,
                                  hooks=[rt_otel.metrics_hook(meter)])
    with httpx.Client(transport=transport) as client, \
            retry_testing(throttles=1.0):
        for _ in range(3):
            with pytest.raises(rt.ThrottledError):
                client.get(URL)
    assert telemetry.total("retry_transport.throttled") == 3 == transport.stats.throttled


def test_instrument_twice_wraps_once(telemetry: Telemetry) -> None:
    transport = rt.RetryTransport(httpx.MockTransport(statuses(503, 503, 200)),
                                  sleep=lambda s: None)
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider)
    wrapped = transport._transport
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider)
    assert transport._transport is wrapped
    with httpx.Client(transport=transport) as client:
        with telemetry.tracer.start_as_current_span("parent"):
            client.get(URL)
    check_attempt_spans(telemetry)


def test_failed_attempts_are_spans_too(telemetry: Telemetry) -> None:
    """An attempt that raises gets a span as well; the retry that follows is marked."""
    calls = []

    def handler(request: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200)

    transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=lambda s: None)
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider)
    with httpx.Client(transport=transport) as client:
        assert client.get(URL).status_code == 200
    first, second = sorted(telemetry.spans(), key=lambda s: s.start_time or 0)
    assert resend_absent(first) and not first.status.is_ok
    assert (second.attributes or {}).get(rt_otel.RESEND_COUNT) == 1


def test_global_instrumentor_with_the_hook(telemetry: Telemetry) -> None:
    """The client instrumentor patches HTTPTransport, the default inner transport: given
    request_hook, it marks the retries without instrument()."""
    name = "HTTPXClientInstrumentor" if _flavour.current() == "httpx" else \
        "HTTPX2ClientInstrumentor"
    instrumentor = getattr(instrumentation, name)()
    instrumentor.instrument(tracer_provider=telemetry.tracer_provider,
                            meter_provider=telemetry.meter_provider,
                            request_hook=rt_otel.request_hook)
    try:
        # MockTransport is no HTTPTransport: a real one, over a pool that answers in turn.
        inner = httpx.HTTPTransport()
        inner._pool = _Answering(503, 503, 200)
        transport = rt.RetryTransport(inner, sleep=lambda s: None)
        with httpx.Client(transport=transport) as client:
            with telemetry.tracer.start_as_current_span("parent"):
                assert client.get(URL).status_code == 200
    finally:
        instrumentor.uninstrument()
    check_attempt_spans(telemetry)
    for span in telemetry.spans():  # the hook redacts these spans' URL too
        if span.kind is SpanKind.CLIENT:
            attributes = span.attributes or {}
            assert [attributes.get(name) for name in rt_otel.URL_ATTRIBUTES
                    if name in attributes] == ["https://api.example.com/items"]


class _Answering:
    """A connection pool answering ``codes`` in turn (no network touched)."""

    def __init__(self, *codes: int) -> None:
        self._core = __import__("httpcore" if _flavour.current() == "httpx" else "httpcore2")
        self._codes = list(codes)

    def handle_request(self, request: Any) -> Any:
        return self._core.Response(self._codes.pop(0))

    def __enter__(self) -> _Answering:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def close(self) -> None:
        pass


# -- the URL on the spans --------------------------------------------------------------------

SECRET_URL = "https://user:hunter2@api.example.com/v1/items;jsessionid=s3ss10n?token=t0ken#frag"
REDACTED = "https://api.example.com/v1/items"
SECRETS = ("user", "hunter2", "REDACTED", "jsessionid", "s3ss10n", "token", "t0ken", "frag")


def check_redacted(telemetry: Telemetry, attempts: int = 3) -> None:
    """Every client span's URL is the redacted one, and no attribute holds a secret."""
    spans = [s for s in telemetry.spans() if s.kind is SpanKind.CLIENT]
    assert len(spans) == attempts
    for span in spans:
        attributes = dict(span.attributes or {})
        urls = {name: attributes[name] for name in rt_otel.URL_ATTRIBUTES if name in attributes}
        assert urls and set(urls.values()) == {REDACTED}, attributes
        for value in attributes.values():
            assert not any(secret in str(value) for secret in SECRETS), attributes


def test_sync_spans_carry_the_redacted_url(telemetry: Telemetry) -> None:
    """The logs never showed the query string; the spans showed all of it (a token in the
    query, a session in the path parameters, the fragment)."""
    transport = rt.RetryTransport(httpx.MockTransport(statuses(503, 503, 200)),
                                  sleep=lambda s: None)
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider)
    with httpx.Client(transport=transport) as client:
        with telemetry.tracer.start_as_current_span("parent"):
            assert client.get(SECRET_URL).status_code == 200
    check_redacted(telemetry)
    check_attempt_spans(telemetry)


@pytest.mark.anyio
async def test_async_spans_carry_the_redacted_url(telemetry: Telemetry) -> None:
    transport = rt.AsyncRetryTransport(httpx.MockTransport(statuses(503, 503, 200)),
                                       sleep=no_sleep)
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider)
    async with httpx.AsyncClient(transport=transport) as client:
        with telemetry.tracer.start_as_current_span("parent"):
            assert (await client.get(SECRET_URL)).status_code == 200
    check_redacted(telemetry)
    check_attempt_spans(telemetry)


def test_a_failed_attempt_span_carries_the_redacted_url(telemetry: Telemetry) -> None:
    def handler(request: Any) -> Any:
        raise httpx.ConnectError("refused", request=request)

    transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=lambda s: None)
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider)
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ConnectError):
        client.get(SECRET_URL)
    check_redacted(telemetry)


def test_stable_conventions_carry_the_redacted_url_too() -> None:
    """Under OTEL_SEMCONV_STABILITY_OPT_IN=http/dup the instrumentation writes both url.full
    and http.url (it reads the variable once per process, hence the subprocess)."""
    import os
    from pathlib import Path

    code = f"""
        import anyio
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
        import retry_transport.otel as rt_otel
        from tests.flavour import MODULES

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        library, rt = MODULES[{_flavour.current()!r}]

        def handler(request):
            return library.Response(200)

        sync = rt.RetryTransport(library.MockTransport(handler))
        rt_otel.instrument(sync, tracer_provider=provider)
        library.Client(transport=sync).get({SECRET_URL!r})

        async def main():
            transport = rt.AsyncRetryTransport(library.MockTransport(handler))
            rt_otel.instrument(transport, tracer_provider=provider)
            async with library.AsyncClient(transport=transport) as client:
                await client.get({SECRET_URL!r})

        anyio.run(main)
        for span in exporter.get_finished_spans():
            print(span.attributes["url.full"], span.attributes["http.url"])
    """
    env = {**os.environ, "OTEL_SEMCONV_STABILITY_OPT_IN": "http/dup"}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, timeout=60, check=False, env=env,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{REDACTED} {REDACTED}"] * 2


# -- metrics ---------------------------------------------------------------------------------


def run_mixed(transport: Any) -> None:
    """One request recovers after two 503s, one gives up, one retries a read timeout."""

    def handler(request: Any) -> Any:
        path = request.url.path
        if path == "/timeout":
            raise httpx.ReadTimeout("slow", request=request)
        count = handler.calls.get(path, 0)  # type: ignore[attr-defined]
        handler.calls[path] = count + 1  # type: ignore[attr-defined]
        if path == "/down":
            return httpx.Response(503)
        return httpx.Response(503 if count < 2 else 200)

    handler.calls = {}  # type: ignore[attr-defined]
    transport._transport = httpx.MockTransport(handler)
    with httpx.Client(transport=transport, base_url="https://api.example.com") as client:
        assert client.get("/ok").status_code == 200
        assert client.get("/down").status_code == 503
        with pytest.raises(httpx.ReadTimeout):
            client.post("/timeout", headers={"idempotency-key": "k"})


def test_metrics_hook_counts_match_stats(telemetry: Telemetry) -> None:
    transport = rt.RetryTransport(hooks=[rt_otel.metrics_hook(telemetry.meter)],
                                  sleep=lambda s: None, max_attempts=3)
    run_mixed(transport)
    stats = transport.stats
    assert stats.retries == 6
    assert telemetry.total("retry_transport.retries") == stats.retries
    assert telemetry.total("retry_transport.give_ups") == sum(stats.gave_up.values())
    for reason, count in stats.gave_up.items():
        assert telemetry.total("retry_transport.give_ups", **{"retry.stop_reason": str(reason)}) \
            == count
    assert telemetry.total("retry_transport.retries", **{
        "server.address": "api.example.com", "http.request.method": "GET",
        "http.response.status_code": 503}) == 4
    assert telemetry.total("retry_transport.retries", **{
        "http.request.method": "POST", "error.type": "ReadTimeout"}) == 2
    for point in telemetry.points("retry_transport.retries"):
        assert "retry.stop_reason" not in point.attributes
        assert "api.example.com" == point.attributes["server.address"]
    give_ups = telemetry.points("retry_transport.give_ups")
    assert {p.attributes.get("http.response.status_code") for p in give_ups} == {503, None}
    assert telemetry.points("retry_transport.breaker.transitions") == []


def test_metrics_hook_counts_breaker_transitions(telemetry: Telemetry) -> None:
    now = [0.0]
    breaker = rt.CircuitBreaker(min_requests=1, failure_ratio=1.0, break_duration=5.0,
                                clock=lambda: now[0])
    answers = [503]
    transport = rt.RetryTransport(
        httpx.MockTransport(lambda request: httpx.Response(answers[0])),
        hooks=[rt_otel.metrics_hook(telemetry.meter)], breaker=breaker,
        sleep=lambda s: None, clock=lambda: now[0])
    with httpx.Client(transport=transport) as client:
        client.get(URL)  # fails: the breaker opens
        now[0] += 10.0
        answers[0] = 200
        client.get(URL)  # the probe: half-open, then closed
    states = {p.attributes["retry_transport.breaker.state"]: p.value
              for p in telemetry.points("retry_transport.breaker.transitions")}
    assert states == {"open": 1, "half_open": 1, "closed": 1}
    for point in telemetry.points("retry_transport.breaker.transitions"):
        assert point.attributes["server.address"] == "api.example.com"


def test_metrics_hook_ignores_cooldowns(telemetry: Telemetry) -> None:
    hook = rt_otel.metrics_hook(telemetry.meter)
    hook(rt.RetryEvent(kind="cooldown", method="GET", url=URL, attempt=0, wait=1.0,
                       status=None, error=None, stop_reason=None))
    assert telemetry.points("retry_transport.retries") == []


# -- observe ---------------------------------------------------------------------------------


def test_observe_reads_the_stats(telemetry: Telemetry) -> None:
    budget = rt.RetryBudget(capacity=100, retry_cost=5)
    transport = rt.RetryTransport(budget=budget, sleep=lambda s: None, max_attempts=3)
    rt_otel.observe(transport, telemetry.meter, attributes={"client": "api"})
    run_mixed(transport)
    stats = transport.stats
    assert stats.budget_tokens is not None and stats.budget_tokens < 100
    (requests,) = telemetry.points("retry_transport.requests")
    assert requests.value == stats.requests == 3
    assert requests.attributes == {"client": "api"}
    (tokens,) = telemetry.points("retry_transport.budget.tokens")
    assert tokens.value == pytest.approx(stats.budget_tokens)
    assert tokens.attributes == {"client": "api"}


def test_observe_holds_the_transport_weakly(telemetry: Telemetry) -> None:
    import gc

    transport = rt.RetryTransport(httpx.MockTransport(statuses(200)))
    rt_otel.observe(transport, telemetry.meter)
    del transport
    gc.collect()
    assert telemetry.points("retry_transport.requests") == []
    assert telemetry.points("retry_transport.budget.tokens") == []


@pytest.mark.anyio
async def test_observe_async_without_budget(telemetry: Telemetry) -> None:
    transport = rt.AsyncRetryTransport(httpx.MockTransport(statuses(503, 200)),
                                       sleep=no_sleep, budget=None)
    rt_otel.observe(transport, telemetry.meter)
    async with httpx.AsyncClient(transport=transport) as client:
        await client.get(URL)
        await client.get(URL)
    (requests,) = telemetry.points("retry_transport.requests")
    assert requests.value == transport.stats.requests == 2
    assert telemetry.points("retry_transport.budget.tokens") == []


# -- without OpenTelemetry -------------------------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=60, check=False)


def test_without_opentelemetry_the_module_names_the_extra() -> None:
    result = run_python("""
        import sys
        sys.modules["opentelemetry"] = None
        import retry_transport
        retry_transport.RetryTransport()
        try:
            import retry_transport.otel
        except ImportError as exc:
            print(exc)
        else:
            raise SystemExit("imported")
    """)
    assert result.returncode == 0, result.stderr
    assert "pip install 'retry-transport[otel]'" in result.stdout


def test_without_the_instrumentation_instrument_names_the_extra() -> None:
    result = run_python("""
        import sys
        sys.modules["opentelemetry.instrumentation"] = None
        import retry_transport, retry_transport.otel as rt_otel
        try:
            rt_otel.instrument(retry_transport.RetryTransport())
        except ImportError as exc:
            print(exc)
        else:
            raise SystemExit("instrumented")
    """)
    assert result.returncode == 0, result.stderr
    assert "pip install 'retry-transport[otel]'" in result.stdout


def test_each_resumption_is_an_attempt_span(telemetry: Telemetry) -> None:
    """A body that breaks twice while read: three attempt spans, the resumptions with their
    resend counts."""
    body = bytes(3000)

    class Broken(httpx.SyncByteStream):
        def __init__(self, data: bytes, cut: int | None) -> None:
            self.data, self.cut = data, cut

        def __iter__(self) -> Iterator[bytes]:
            yield self.data[:self.cut]
            if self.cut is not None:
                raise httpx.ReadError("cut")

    def handler(request: httpx.Request) -> httpx.Response:
        asked = request.headers.get("range")
        start = int(asked[6:-1]) if asked else 0
        cut = 1000 if start < 2000 else None
        headers = {"etag": '"e"', "content-length": str(len(body) - start)}
        if asked:
            headers["content-range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
        return httpx.Response(206 if asked else 200, headers=headers,
                              stream=Broken(body[start:], cut))

    transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=lambda s: None,
                                  resume=rt.Resume())
    rt_otel.instrument(transport, tracer_provider=telemetry.tracer_provider,
                       meter_provider=telemetry.meter_provider)
    with httpx.Client(transport=transport) as client:
        with telemetry.tracer.start_as_current_span("parent"):
            with client.stream("GET", URL) as response:
                assert response.read() == body
    assert rt.retry_info(response).resumes == 2
    check_attempt_spans(telemetry)
