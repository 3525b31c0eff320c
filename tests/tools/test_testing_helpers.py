"""retry_transport.testing: run code that retries without waiting, with seeded jitter."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from retry_transport.testing import TestingLog, retry_testing
from tests.flavour import httpx, rt

#: The tests that build transports run once per flavour (httpx, httpx2); the ones about the
#: testing-mode blocks alone need no HTTP library.
flavoured = pytest.mark.usefixtures("flavour")


def slept() -> tuple[list[float], Any, Any]:
    waits: list[float] = []

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    return waits, waits.append, asleep


def flaky(*statuses: int) -> httpx.MockTransport:
    count = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        count[0] += 1
        return httpx.Response(statuses[min(count[0], len(statuses)) - 1])

    return httpx.MockTransport(handler)


@flavoured
def test_waits_are_logged_not_slept() -> None:
    """Inside retry_testing the transport's own sleep only ever gets 0."""
    real_waits, sleep, _ = slept()
    transport = rt.RetryTransport(flaky(503, 503, 200), sleep=sleep, base_delay=5.0)
    with retry_testing() as log, httpx.Client(transport=transport) as client:
        response = client.get("https://api.example.com/")
    assert response.status_code == 200
    assert real_waits == [0.0, 0.0]
    assert len(log.waits) == 2
    assert 0.0 <= log.waits[0] <= 5.0 and 0.0 <= log.waits[1] <= 10.0
    info = rt.retry_info(response)
    assert info is not None and [a.wait for a in info.history[:-1]] == log.waits


@flavoured
def test_jitter_is_seeded() -> None:
    """The same seed gives the same waits, whatever rng the transport was built with."""
    def run(seed: int) -> list[float]:
        transport = rt.RetryTransport(flaky(503), max_attempts=5, sleep=lambda s: None)
        with retry_testing(seed=seed) as log, httpx.Client(transport=transport) as client:
            client.get("https://api.example.com/")
        return log.waits

    assert run(3) == run(3)
    assert run(3) != run(4)


@flavoured
def test_attempts_set_and_capped() -> None:
    """attempts= replaces every policy's limit; with cap=True it only lowers it."""
    def attempts(**kwargs: Any) -> int:
        transport = rt.RetryTransport(flaky(503), max_attempts=4, sleep=lambda s: None,
                                      budget=None)
        with retry_testing(**kwargs), httpx.Client(transport=transport) as client:
            info = rt.retry_info(client.get("https://api.example.com/"))
        assert info is not None
        return info.attempts

    assert attempts() == 4
    assert attempts(attempts=1) == 1
    assert attempts(attempts=6) == 6
    assert attempts(attempts=6, cap=True) == 4
    assert attempts(attempts=2, cap=True) == 2


def test_blocks_nest_and_restore() -> None:
    """Leaving a block brings back the mode that was on before it."""
    from retry_transport import testing

    assert testing.active is None
    with retry_testing(attempts=2) as outer:
        with retry_testing(attempts=1) as inner:
            assert testing.active is inner
        assert testing.active is outer
    assert testing.active is None


def test_invalid_attempts() -> None:
    """attempts must be a positive integer."""
    with pytest.raises(ValueError, match="attempts"), retry_testing(attempts=0):
        pass


@flavoured
@pytest.mark.anyio
async def test_async_transports_do_not_wait(anyio_backend: str) -> None:
    """The async driver gets zero-second sleeps too, on asyncio and trio."""
    real_waits, _, asleep = slept()
    transport = rt.AsyncRetryTransport(flaky(502, 200), sleep=asleep, base_delay=30.0,
                                       max_delay=30.0)
    with retry_testing() as log:
        async with httpx.AsyncClient(transport=transport) as client:
            with anyio.fail_after(5):
                response = await client.get("https://api.example.com/")
    assert response.status_code == 200
    assert real_waits == [0.0]
    assert len(log.waits) == 1


@flavoured
def test_the_pytest_fixture(retry_testing: TestingLog) -> None:
    """The plugin's fixture (pytest11 entry point) turns testing mode on for the test."""
    from retry_transport import testing

    assert testing.active is retry_testing
    transport = rt.RetryTransport(flaky(503, 200), base_delay=3600.0, max_delay=3600.0)
    with httpx.Client(transport=transport) as client:  # the real time.sleep: must not run
        assert client.get("https://api.example.com/").status_code == 200
    assert len(retry_testing.waits) == 1


def test_works_with_pytest_httpx(mock_router: Any) -> None:
    """Testing mode and the flavour's pytest mock (pytest-httpx's ``httpx_mock``, or
    httpx2-pytest's ``httpx2_mock``) together: the default inner transport, no waiting."""
    mock_router.add_response(status_code=429, headers={"Retry-After": "120"})
    mock_router.add_response(json={"ok": True})
    transport = rt.RetryTransport(max_retry_after=300)
    with retry_testing() as log, httpx.Client(transport=transport) as client:
        assert client.get("https://api.example.com/").json() == {"ok": True}
    assert len(log.waits) == 1 and log.waits[0] >= 120.0
    assert len(mock_router.get_requests()) == 2  # both attempts reached the flavour's mock


@pytest.mark.anyio
async def test_the_pytest_fixture_works_with_pytest_httpx(
    anyio_backend: str, retry_testing: TestingLog, mock_router: Any
) -> None:
    """The ``retry_testing`` fixture and the flavour's pytest mock, sync and async: the
    default inner transports are mocked, and a long Retry-After is logged, not slept."""
    for _ in range(2):
        mock_router.add_response(status_code=503, headers={"Retry-After": "3600"})
        mock_router.add_response(json={"ok": True})
    transport = rt.RetryTransport(max_retry_after=7200)
    with httpx.Client(transport=transport) as client:  # the real time.sleep: must not run
        assert client.get("https://api.example.com/").json() == {"ok": True}
    atransport = rt.AsyncRetryTransport(max_retry_after=7200)
    async with httpx.AsyncClient(transport=atransport) as aclient:
        with anyio.fail_after(5):  # the real anyio.sleep: must not run
            assert (await aclient.get("https://api.example.com/")).json() == {"ok": True}
    assert len(retry_testing.waits) == 2 and min(retry_testing.waits) >= 3600.0
    assert len(mock_router.get_requests()) == 4


@flavoured
def test_deadline_counts_the_skipped_waits() -> None:
    """Testing mode stops where production would: the deadline sees the planned waits."""
    from tests.harness import FakeClock

    def run(testing: bool) -> tuple[int, rt.StopReason]:
        clock = FakeClock()  # moves only when the transport really sleeps
        transport = rt.RetryTransport(flaky(503), jitter="none", base_delay=0.4,
                                      max_attempts=5, deadline=1.0, sleep=clock.sleep,
                                      clock=clock)
        with httpx.Client(transport=transport) as client:
            if testing:
                with retry_testing():
                    response = client.get("https://api.example.com/")
            else:
                response = client.get("https://api.example.com/")
        info = rt.retry_info(response)
        assert info is not None
        return info.attempts, info.stop_reason

    # 0.4 then 0.8 s: the second wait would end at 1.2 s, past the deadline.
    assert run(testing=False) == run(testing=True) == (2, rt.StopReason.DEADLINE)


@flavoured
def test_no_cooldown_is_started_in_testing_mode() -> None:
    """Time stands still in testing mode, so a Retry-After cannot hold later requests."""
    count = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        count[0] += 1
        if count[0] == 1:
            return httpx.Response(503, headers={"Retry-After": "30"})
        return httpx.Response(200)

    transport = rt.RetryTransport(httpx.MockTransport(handler), max_attempts=1)
    with retry_testing() as log, httpx.Client(transport=transport) as client:
        for _ in range(4):
            client.get("https://api.example.com/")
    assert log.waits == []
    assert transport._controller.cooldowns.until == {}


def test_blocks_closed_out_of_order_leave_no_stale_mode() -> None:
    """Two threads' blocks may end in any order; once both end, testing mode is off."""
    import threading

    from retry_transport import testing

    entered_a, entered_b, exited_a = threading.Event(), threading.Event(), threading.Event()

    def thread_a() -> None:
        with retry_testing():
            entered_a.set()
            entered_b.wait(5)
        exited_a.set()

    def thread_b() -> None:
        entered_a.wait(5)
        with retry_testing() as log_b:
            entered_b.set()
            exited_a.wait(5)
            assert testing.active is log_b

    threads = [threading.Thread(target=thread_a), threading.Thread(target=thread_b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert testing.active is None



#: The flavour's pytest mock keeps quiet about the request it had no response for: the test
#: checks what the client saw instead.
def unmatched_allowed(test: Any) -> Any:
    test = pytest.mark.httpx_mock(assert_all_requests_were_expected=False)(test)
    return pytest.mark.httpx2_mock(assert_all_requests_were_expected=False)(test)


def assert_unmatched_at_once(exc: BaseException, mock_router: Any) -> None:
    """The mock's "no response" error came out of the second attempt, not retried."""
    assert "No response can be found" in str(exc)
    info = rt.retry_info(exc)
    assert info is not None and info.stop_reason is rt.StopReason.NOT_RETRYABLE
    assert [(a.status, a.error) for a in info.history] == [(503, None),
                                                           (None, "TimeoutException")]
    assert len(mock_router.get_requests()) == 2  # the 503, then one unmatched request


@unmatched_allowed
def test_a_mock_with_nothing_registered_is_not_retried(mock_router: Any) -> None:
    """One 503 registered for a 4-attempt client: the retry finds no response, and the
    mock's own error surfaces at once instead of being retried as a timeout."""
    mock_router.add_response(status_code=503)
    waits: list[float] = []
    transport = rt.RetryTransport(max_attempts=4, sleep=waits.append)
    with httpx.Client(transport=transport) as client:
        with pytest.raises(httpx.TimeoutException) as caught:
            client.get("https://api.example.com/")
    assert len(waits) == 1
    assert_unmatched_at_once(caught.value, mock_router)


@unmatched_allowed
@pytest.mark.anyio
async def test_async_a_mock_with_nothing_registered_is_not_retried(
    anyio_backend: str, mock_router: Any
) -> None:
    """The async twin, on asyncio and trio."""
    mock_router.add_response(status_code=503)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    transport = rt.AsyncRetryTransport(max_attempts=4, sleep=sleep)
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.TimeoutException) as caught:
            await client.get("https://api.example.com/")
    assert len(waits) == 1
    assert_unmatched_at_once(caught.value, mock_router)


@pytest.mark.usefixtures("flavour")
def test_a_plain_timeout_is_still_retried() -> None:
    """A ``TimeoutException`` raised anywhere but in a pytest mock is retried as before."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            raise httpx.TimeoutException("slow", request=request)
        return httpx.Response(200)

    transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=lambda _: None)
    with httpx.Client(transport=transport) as client:
        assert client.get("https://api.example.com/").status_code == 200
    assert len(calls) == 2
