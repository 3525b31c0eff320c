"""Deadlines: the whole operation, waits included, within ``deadline`` seconds."""

from __future__ import annotations

from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness

pytestmark = pytest.mark.usefixtures("flavour")


def timed(harness: Harness, outcomes: list[Any], spend: float) -> tuple[Any, list[dict[str, Any]]]:
    """A handler where each attempt takes ``spend`` virtual seconds; records attempt timeouts."""
    timeouts: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(dict(request.extensions["timeout"]))
        harness.clock.now += spend
        outcome = outcomes[min(len(timeouts), len(outcomes)) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome if isinstance(outcome, httpx.Response) else httpx.Response(outcome)

    return handler, timeouts


def test_attempt_timeouts_are_clipped_to_the_time_left(harness: Harness) -> None:
    """Each attempt's connect/read/write/pool timeouts end by the deadline."""
    handler, timeouts = timed(harness, [503, 503, 200], spend=0.5)
    transport = harness.transport(handler, deadline=3.0, jitter="none", base_delay=0.25)
    response = harness.send(transport, timeout=httpx.Timeout(10.0, connect=1.0))
    assert response.status_code == 200
    # attempt 1 at t=0; attempt 2 at 0.5 + 0.25; attempt 3 at 0.75 + 0.5 + 0.5
    assert timeouts[0] == {"connect": 1.0, "read": 3.0, "write": 3.0, "pool": 3.0}
    assert timeouts[1] == pytest.approx({"connect": 1.0, "read": 2.25, "write": 2.25,
                                         "pool": 2.25})
    assert timeouts[2] == pytest.approx({"connect": 1.0, "read": 1.25, "write": 1.25,
                                         "pool": 1.25})


def test_no_timeout_becomes_the_time_left(harness: Harness) -> None:
    """An attempt with timeouts off still gets the deadline as its timeout."""
    handler, timeouts = timed(harness, [200], spend=0.0)
    harness.send(harness.transport(handler, deadline=2.0), timeout=None)
    assert timeouts == [{"connect": 2.0, "read": 2.0, "write": 2.0, "pool": 2.0}]


def test_without_deadline_the_request_goes_through_untouched(harness: Harness) -> None:
    """No deadline: the client's timeouts reach the inner transport as they are."""
    handler, timeouts = timed(harness, [200], spend=0.0)
    harness.send(harness.transport(handler), timeout=7.0)
    assert timeouts == [{"connect": 7.0, "read": 7.0, "write": 7.0, "pool": 7.0}]


def test_wait_past_the_deadline_stops_at_once(harness: Harness) -> None:
    """A backoff that would end past the deadline is not slept: the last response returns."""
    handler, timeouts = timed(harness, [503], spend=0.4)
    transport = harness.transport(handler, deadline=2.0, jitter="none", base_delay=0.5,
                                  max_attempts=10)
    response = harness.send(transport)
    assert response.status_code == 503
    # t=0.4 wait 0.5, t=1.3 wait 1.0 -> 2.3 > 2.0: stop after two attempts.
    assert len(timeouts) == 2
    assert harness.waits == [0.5]
    info = rt.retry_info(response)
    assert info is not None and info.stop_reason is rt.StopReason.DEADLINE
    assert harness.clock.now - 1000.0 <= 2.0


def test_retry_after_past_the_deadline_stops_at_once(harness: Harness) -> None:
    """Retry-After longer than the time left: no wait, the 503 is returned."""
    handler, timeouts = timed(harness, [httpx.Response(503, headers={"Retry-After": "5"})],
                              spend=0.1)
    response = harness.send(harness.transport(handler, deadline=2.0))
    assert len(timeouts) == 1
    assert harness.waits == []
    assert rt.retry_info(response).stop_reason is rt.StopReason.DEADLINE  # type: ignore[union-attr]


def test_max_retry_after_wins_over_deadline(harness: Harness) -> None:
    """Both stop the wait; the longer-than-allowed Retry-After is named first."""
    handler, _ = timed(harness, [httpx.Response(503, headers={"Retry-After": "100"})], 0.1)
    response = harness.send(harness.transport(handler, deadline=2.0))
    assert rt.retry_info(response).stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG  # type: ignore[union-attr]


def test_deadline_stop_reraises_the_last_error(harness: Harness) -> None:
    """A timed-out attempt whose retry cannot fit raises the timeout itself."""
    error = httpx.ReadTimeout("slow")
    handler, timeouts = timed(harness, [error], spend=1.9)
    with pytest.raises(httpx.ReadTimeout) as caught:
        harness.send(harness.transport(handler, deadline=2.0, jitter="none"))
    assert caught.value is error
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.DEADLINE  # type: ignore[union-attr]


def test_per_request_deadline(harness: Harness) -> None:
    """extensions={"retry": {"deadline": ...}} sets a deadline for one request."""
    handler, timeouts = timed(harness, [200], spend=0.0)
    transport = harness.transport(handler)
    harness.send(transport, extensions={"retry": {"deadline": 1.5}}, timeout=5.0)
    harness.send(transport, timeout=5.0)
    assert timeouts[0]["read"] == 1.5
    assert timeouts[1]["read"] == 5.0


def test_max_attempts_still_applies_within_the_deadline(harness: Harness) -> None:
    """A generous deadline does not add attempts."""
    handler, timeouts = timed(harness, [503], spend=0.0)
    response = harness.send(harness.transport(handler, deadline=100.0))
    assert len(timeouts) == 3
    assert rt.retry_info(response).stop_reason is rt.StopReason.MAX_ATTEMPTS  # type: ignore[union-attr]


def test_never_sleeps_past_the_deadline_whatever_the_schedule(harness: Harness) -> None:
    """Across many jittered schedules the total time never passes the deadline."""
    import random

    for seed in range(30):
        h = Harness(harness.mode)
        handler, _ = timed(h, [503], spend=0.05)
        transport = h.transport(handler, deadline=1.0, max_attempts=50, base_delay=0.1,
                                rng=random.Random(seed))
        h.send(transport)
        assert h.clock.now - 1000.0 <= 1.0 + 0.05


def test_caller_request_gets_its_own_timeouts_back(harness: Harness) -> None:
    """Attempts carry clipped timeouts; the caller's request ends with its own again."""
    handler, timeouts = timed(harness, [503, 200], spend=0.5)
    response = harness.send(harness.transport(handler, deadline=3.0), timeout=9.0)
    assert timeouts[0]["read"] == 3.0
    assert response.request.extensions["timeout"] == {
        "connect": 9.0, "read": 9.0, "write": 9.0, "pool": 9.0
    }


def test_streaming_body_after_connect_error_with_a_deadline(harness: Harness) -> None:
    """Attempts reuse the caller's request object, so a body the inner transport has read
    (as MockTransport and pytest-httpx do) is still there for the retry."""
    seen: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.read())
        if len(seen) == 1:
            raise httpx.ConnectError("refused")
        return httpx.Response(200)

    def body() -> Any:
        yield b"one-"
        yield b"shot"

    if harness.mode == "sync":
        transport = harness.transport(handler, deadline=10.0)
        response = harness.send(transport, "PUT", content=body())
        assert response.status_code == 200
        assert seen == [b"one-shot", b"one-shot"]


def test_discarded_body_is_not_drained_under_a_deadline(harness: Harness) -> None:
    """A slow body could outlast the deadline: with one, discarded responses are just closed."""
    reads: list[str] = []

    class Body(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __iter__(self) -> Any:
            reads.append("read")
            yield b"busy!"

        async def __aiter__(self) -> Any:
            reads.append("read")
            yield b"busy!"

    count = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        count[0] += 1
        if count[0] == 1:
            return httpx.Response(503, headers={"Content-Length": "5"}, stream=Body())
        return httpx.Response(200)

    assert harness.send(harness.transport(handler, deadline=5.0)).status_code == 200
    assert reads == []
    count[0] = 0
    assert harness.send(harness.transport(handler)).status_code == 200
    assert reads == ["read"]  # without a deadline, a small body is drained for reuse


def test_timeouts_restored_when_cancelled_during_the_wait() -> None:
    """A request cancelled while waiting gets its own timeouts back."""
    import anyio

    request_seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        request_seen.append(request)
        return httpx.Response(503)

    async def main() -> None:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), deadline=60.0,
                                           base_delay=30.0, max_delay=30.0, jitter="none")
        async with httpx.AsyncClient(transport=transport, timeout=9.0) as client:
            with anyio.move_on_after(1):
                await client.get("https://api.example.com/")

    from trio.testing import MockClock

    anyio.run(main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)})
    assert request_seen[0].extensions["timeout"] == {
        "connect": 9.0, "read": 9.0, "write": 9.0, "pool": 9.0
    }


def test_a_wait_refused_by_the_deadline_is_recorded(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A deadline that stops early says so: the refused wait is in the last attempt's
    record and the give-up event, and the log line gives it with the time that was left."""
    handler, timeouts = timed(harness, [503], spend=0.4)
    events: list[rt.RetryEvent] = []
    transport = harness.transport(handler, deadline=2.0, jitter="none", base_delay=0.5,
                                  max_attempts=10, hooks=events.append)
    with caplog.at_level("INFO", logger="retry_transport"):
        response = harness.send(transport)
    # t=0.4 wait 0.5, t=1.3: the next wait of 1.0 s would end at 2.3, 0.7 s left.
    info = rt.retry_info(response)
    assert info is not None and info.stop_reason is rt.StopReason.DEADLINE
    assert [attempt.wait for attempt in info.history] == [0.5, 0.0]
    assert [attempt.refused_wait for attempt in info.history] == [None, 1.0]
    give_up = events[-1]
    assert give_up.kind == "give_up" and give_up.refused_wait == 1.0
    assert [event.refused_wait for event in events[:-1]] == [None]
    [line] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert ("the next wait of 1.000 s would end past the deadline (0.700 s left)"
            in line.getMessage())


def test_a_deadline_stop_without_a_retry_warns_with_the_refused_wait(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Stopped before any retry (a WARNING, not an ERROR): the line says the same."""
    handler, _ = timed(harness, [httpx.Response(503, headers={"Retry-After": "5"})], 0.5)
    transport = harness.transport(handler, deadline=2.0, jitter="none", base_delay=0.25)
    with caplog.at_level("WARNING", logger="retry_transport"):
        response = harness.send(transport)
    info = rt.retry_info(response)
    assert info is not None and info.history[-1].refused_wait == 5.25
    [line] = [r for r in caplog.records if r.name == "retry_transport"]
    assert line.levelname == "WARNING"
    assert ("(deadline: the next wait of 5.250 s would end past the deadline (1.500 s left))"
            in line.getMessage())


def test_other_stops_refuse_no_wait(harness: Harness) -> None:
    """Only a deadline stop records a refused wait: max_attempts leaves it ``None``."""
    handler, _ = timed(harness, [503], spend=0.0)
    response = harness.send(harness.transport(handler, deadline=60.0, max_attempts=2))
    info = rt.retry_info(response)
    assert info is not None and info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    assert [attempt.refused_wait for attempt in info.history] == [None, None]
