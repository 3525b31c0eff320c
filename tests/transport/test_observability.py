"""Stats snapshots and hooks: what a dashboard sees."""

from __future__ import annotations

import logging

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.harness import FakeClock, Harness
from tests.transport.test_transport import script

pytestmark = pytest.mark.usefixtures("flavour")


def test_stats_count_requests_retries_and_give_ups(harness: Harness) -> None:
    """First attempts, retries and give-ups are counted separately."""
    outcomes: list[int] = [200, 503, 200, 503, 503, 503, 404, 503, 503, 404]
    handler, _ = script(*outcomes)
    transport = harness.transport(handler, budget=rt.RetryBudget(capacity=100))
    for _ in range(4):
        harness.send(transport)
    harness.send(transport, "POST")  # a 503 it refuses to retry
    stats = transport.stats
    # 200 | 503 200 | 503 503 503 (max) | 404 (not retried, not a give-up) | POST: 503 unsafe
    assert stats.requests == 5
    assert stats.retries == 3
    assert stats.gave_up == {rt.StopReason.MAX_ATTEMPTS: 1, rt.StopReason.UNSAFE_METHOD: 1}
    assert stats.retry_rate == pytest.approx(3 / 5)
    # full bucket: the first success's refund is capped; the recovery refunds its retry
    assert stats.budget_tokens == 100 - 5 + 5 - 5 - 5


def test_not_retryable_after_retries_is_a_give_up(harness: Harness) -> None:
    """A request that ends in a permanent failure after a retry counts as given up."""
    handler, _ = script(503, 404)
    transport = harness.transport(handler)
    harness.send(transport)
    assert transport.stats.gave_up == {rt.StopReason.NOT_RETRYABLE: 1}


def test_stats_snapshot_is_frozen(harness: Harness) -> None:
    """A snapshot does not change when the transport goes on working."""
    transport = harness.transport(script(503, 200)[0])
    before = transport.stats
    harness.send(transport)
    assert (before.requests, before.retries, before.retry_rate) == (0, 0, 0.0)
    assert transport.stats.retries == 1
    with pytest.raises(AttributeError):
        before.requests = 3  # type: ignore[misc]


def test_stats_repr_shows_the_give_ups_as_a_plain_dict(flavour: str) -> None:
    """The repr reads as the fields do (it showed ``gave_up=mappingproxy({...})``)."""
    transport = rt.RetryTransport(httpx.MockTransport(script(503)[0]), sleep=FakeClock().sleep,
                                  budget=None, max_attempts=2)
    with httpx.Client(transport=transport) as client:
        client.get("https://api.example.com/items")
    stats = transport.stats
    assert repr(stats) == (
        f"RetryStats(requests=1, retries=1, gave_up={{{rt.StopReason.MAX_ATTEMPTS!r}: 1}}, "
        "budget_tokens=None, retry_rate=1.0, hedges=0, hedge_wins=0, throttled=0, resumes=0)"
    )
    with pytest.raises(TypeError):
        stats.gave_up[rt.StopReason.DEADLINE] = 1  # type: ignore[index]  # still read-only


def test_hooks_receive_retries_and_give_ups(harness: Harness) -> None:
    """One event per retry scheduled and per give-up, with redacted URLs."""
    events: list[rt.RetryEvent] = []
    handler, _ = script(503, httpx.ReadTimeout("slow"), 502)
    transport = harness.transport(handler, hooks=[events.append], jitter="none")
    harness.send(transport, url="https://u:pw@api.example.com/v1/x?token=abc")
    assert [e.kind for e in events] == ["retry", "retry", "give_up"]
    first, second, last = events
    assert (first.method, first.url) == ("GET", "https://api.example.com/v1/x")
    assert (first.attempt, first.wait, first.status, first.error) == (1, 0.1, 503, None)
    assert (second.attempt, second.wait, second.status, second.error) == (2, 0.2, None,
                                                                          "ReadTimeout")
    assert first.stop_reason is None
    assert (last.attempt, last.status, last.stop_reason) == (3, 502, rt.StopReason.MAX_ATTEMPTS)


def test_success_tells_hooks_nothing(harness: Harness) -> None:
    """Hooks hear about retries and give-ups, not about ordinary successes."""
    events: list[rt.RetryEvent] = []
    transport = harness.transport(script(200)[0], hooks=events.append)
    harness.send(transport)
    transport2 = harness.transport(script(404)[0], hooks=events.append)
    harness.send(transport2)
    assert events == []


def test_a_raising_hook_is_logged_and_harmless(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken hook cannot break the request, and later hooks still run."""
    seen: list[str] = []

    def broken(event: rt.RetryEvent) -> None:
        raise RuntimeError("metrics backend down")

    transport = harness.transport(script(503, 200)[0],
                                  hooks=[broken, lambda e: seen.append(e.kind)])
    with caplog.at_level(logging.WARNING, logger="retry_transport"):
        response = harness.send(transport)
    assert response.status_code == 200
    assert seen == ["retry"]
    assert "metrics backend down" in caplog.text
    assert "Retry hook" in caplog.text


def test_hooks_must_be_callable() -> None:
    """A non-callable hook is a configuration error."""
    with pytest.raises(TypeError, match="hooks"):
        rt.RetryTransport(hooks=["not callable"])  # type: ignore[list-item]


def test_events_are_frozen() -> None:
    """Hooks cannot alter what other hooks see."""
    event = rt.RetryEvent("retry", "GET", "https://x/", 1, 0.5, 503, None, None)
    with pytest.raises(AttributeError):
        event.wait = 0  # type: ignore[misc]


def test_async_counters_exact_with_200_tasks() -> None:
    """200 concurrent tasks on one async client: every count adds up."""
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        await anyio.sleep(0)
        return httpx.Response(503 if calls % 3 else 200)

    async def nosleep(seconds: float) -> None:
        await anyio.sleep(0)

    async def main() -> rt.RetryStats:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), sleep=nosleep,
                                           budget=None)
        async with httpx.AsyncClient(transport=transport) as client:
            async def one() -> None:
                for _ in range(5):
                    await client.get("https://api.example.com/")

            async with anyio.create_task_group() as group:
                for _ in range(200):
                    group.start_soon(one)
        return transport.stats

    for backend in ("asyncio", "trio"):
        calls = 0
        stats = anyio.run(main, backend=backend)
        assert stats.requests == 1000
        assert stats.requests + stats.retries == calls


def test_counters_without_a_gil_are_locked(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a free-threaded interpreter the counters take a lock, and stay exact."""
    import threading

    from retry_transport._base import counting

    monkeypatch.setattr(counting, "LOCK_FREE", False)
    transport = rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(200)))
    assert isinstance(transport._controller.request_counter, counting._LockedCount)

    def work() -> None:
        for _ in range(500):
            transport.handle_request(httpx.Request("GET", "https://api.example.com/"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert transport.stats.requests == 4000
    assert transport.stats.requests == 4000  # reading does not count as a request


def test_refusals_are_logged_once_then_summarised(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """250 requests the budget refuses: one WARNING, then one summary line per 10 s of the
    transport's clock, per origin; hooks and stats still see every refusal."""
    caplog.set_level(logging.WARNING, logger="retry_transport")
    events: list[rt.RetryEvent] = []
    handler, _ = script(503)
    budget = rt.RetryBudget(capacity=5, retry_cost=5, timeout_retry_cost=5)
    transport = harness.transport(handler, budget=budget, max_attempts=2, hooks=events.append)
    harness.send(transport)  # spends the whole budget on its one retry
    caplog.clear()
    for i in range(250):
        if i == 100:
            harness.clock.now += 10.0
        harness.send(transport)
    harness.send(transport, url="https://other.example.com/")  # another origin: its own line
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0].startswith("Giving up on GET https://api.example.com/items after 1 attempt")
    assert "(budget_exhausted)" in lines[0]
    assert lines[1] == (
        "Gave up on 100 more request(s) to https://api.example.com:443 without a retry "
        "in the last 10 s (budget_exhausted)"
    )
    assert lines[2].startswith("Giving up on GET https://other.example.com/")
    give_ups = [e for e in events if e.kind == "give_up"]
    assert len(give_ups) == 1 + 250 + 1
    assert transport.stats.gave_up[rt.StopReason.BUDGET_EXHAUSTED] == 251


def test_path_parameters_are_not_logged(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """;jsessionid=... in a path is a secret like a query string: dropped from logs and hooks."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    events: list[rt.RetryEvent] = []
    handler, seen = script(503, 200)
    harness.send(harness.transport(handler, hooks=events.append),
                 url="https://api.example.com/a;jsessionid=SECRET1/b;v=SECRET2/c?q=SECRET3")
    assert events[0].url == "https://api.example.com/a/b/c"
    assert "SECRET" not in caplog.text
    assert str(seen[-1].url).count("SECRET") == 3  # the request itself is untouched


def test_the_refusal_log_forgets_origins_refused_long_ago(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One refused request to each of 2,500 origins, a second apart: the throttle table
    holds the origins of the last interval (and at most twice a floor), not all 2,500; an
    origin forgotten with refusals not yet reported gets its summary line then. (The table
    is the observer's, the same for every flavour and driver: one of them is enough.)"""
    import httpx as plain_httpx

    import retry_transport

    caplog.set_level(logging.WARNING, logger="retry_transport")
    clock = FakeClock()
    budget = retry_transport.RetryBudget(capacity=5, retry_cost=5, timeout_retry_cost=5)
    transport = retry_transport.RetryTransport(
        plain_httpx.MockTransport(lambda request: plain_httpx.Response(503)), budget=budget,
        max_attempts=2, clock=clock, sleep=clock.sleep)

    def send(url: str = "https://api.example.com/items") -> None:
        transport.handle_request(plain_httpx.Request("GET", url))

    send()  # spends the whole budget on its one retry
    send()  # refused: logged
    send()  # refused again within the interval: to be reported later
    for i in range(2500):
        clock.now += 1.0
        send(f"https://o{i}.example.com/")
    table = transport._controller.observer._refusals
    assert len(table) <= 2048
    assert any(r.getMessage().startswith("Gave up on 1 more request(s) to "
                                         "https://api.example.com:443") for r in caplog.records)


def test_a_malformed_retry_after_is_logged_once_per_origin_and_value(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Ignored (the backoff applies), but not silently: one DEBUG line per origin and value."""
    answers = iter(["soon", "soon", "1.5", "-5", "ok", "soon", "ok", "soon", "ok"])

    def handler(request: httpx.Request) -> httpx.Response:
        value = next(answers)
        if value == "ok":
            return httpx.Response(200)
        return httpx.Response(503, headers={"Retry-After": value})

    transport = harness.transport(handler, max_attempts=5)
    with caplog.at_level("DEBUG", logger="retry_transport"):
        assert harness.send(transport).status_code == 200
        assert harness.send(transport).status_code == 200  # "soon" again: no new line
        assert harness.send(transport, url="https://other.example.com/").status_code == 200
    lines = [r.getMessage() for r in caplog.records
             if r.levelname == "DEBUG" and "malformed Retry-After" in r.getMessage()]
    assert lines == [
        "Ignoring a malformed Retry-After from https://api.example.com:443: 'soon' "
        "(the backoff applies)",
        "Ignoring a malformed Retry-After from https://api.example.com:443: '1.5' "
        "(the backoff applies)",
        "Ignoring a malformed Retry-After from https://api.example.com:443: '-5' "
        "(the backoff applies)",
        "Ignoring a malformed Retry-After from https://other.example.com:443: 'soon' "
        "(the backoff applies)",
    ]


def test_retry_after_too_long_gives_the_value_and_the_cap(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    handler = lambda request: httpx.Response(429, headers={"Retry-After": "120"})  # noqa: E731
    transport = harness.transport(handler, max_retry_after=60.0)
    with caplog.at_level("WARNING", logger="retry_transport"):
        response = harness.send(transport)
    assert rt.retry_info(response).stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG  # type: ignore[union-attr]
    [line] = [r.getMessage() for r in caplog.records if r.name == "retry_transport"]
    assert line.endswith(
        "(retry_after_too_long: Retry-After of 120 s is over max_retry_after (60 s))")


# -- an SDK retrying above the transport ----------------------------------------------------


def sdk_post(harness: Harness, transport: object, count: str) -> httpx.Response:
    """A chat completion's POST, as the OpenAI SDK numbers its own retries."""
    return harness.send(transport, "POST",  # type: ignore[arg-type]
                        url="https://api.example.com/v1/chat/completions",
                        headers={"x-stainless-retry-count": count})


def test_an_sdk_retry_answered_at_once_is_warned_of(harness: Harness) -> None:
    """The SDK's call answered 409 (handed back at once), then its retry answered 200 at
    once on the quick path: that retry is warned of, once, as a LayeredRetriesWarning."""
    handler, seen = script(409, 200)
    transport = harness.transport(handler)
    assert sdk_post(harness, transport, "0").status_code == 409
    with pytest.warns(rt.LayeredRetriesWarning, match="max_retries=0") as caught:
        assert sdk_post(harness, transport, "1").status_code == 200
        assert sdk_post(harness, transport, "2").status_code == 200
    assert len(caught) == 1 and len(seen) == 3


def test_the_warning_as_an_error_leaves_nothing_behind(harness: Harness) -> None:
    """Under ``-W error`` (as this suite runs) the warning is raised as the SDK's retry
    starts: nothing of it was sent or counted, and the transport goes on as before."""
    handler, seen = script(409, 200)
    transport = harness.transport(handler)
    sdk_post(harness, transport, "0")
    with pytest.raises(rt.LayeredRetriesWarning):
        sdk_post(harness, transport, "1")
    assert len(seen) == 1 and transport.stats.requests == 1
    assert sdk_post(harness, transport, "1").status_code == 200  # warned once: no more
    assert len(seen) == 2 and transport.stats.requests == 2
