"""A transport closed while requests are under way: no attempt of theirs starts after the
close, a wait between attempts ends at once, and the transport works again afterwards."""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://api.example.com/items"


def _counting(*statuses: int) -> tuple[Any, list[Any]]:
    """A handler answering each request with the next status (the last repeats), and
    the requests it got."""
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        status = statuses[min(len(seen), len(statuses)) - 1]
        return httpx.Response(status, headers={"Retry-After": "30"} if status == 503 else {})

    return handler, seen


def test_a_close_during_a_wait_sends_no_further_attempt(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Closed while the user's sleep waits: the retry is not sent, and the request ends
    with the flavour's TransportError saying so, stop reason ``closed``, logged at INFO."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    handler, seen = _counting(503, 200)
    transport: Any = None
    if harness.mode == "sync":
        def wait(seconds: float) -> None:
            harness.clock.sleep(seconds)
            transport.close()
    else:
        async def wait(seconds: float) -> None:  # type: ignore[misc]
            harness.clock.sleep(seconds)
            await transport.aclose()
    transport = harness.transport(handler, sleep=wait, max_attempts=3)
    with pytest.raises(httpx.TransportError, match="transport was closed") as caught:
        harness.send(transport, url=URL)
    info = rt.retry_info(caught.value)
    assert info is not None and info.stop_reason.value == "closed"
    assert info.attempts == 1 and [a.status for a in info.history] == [503]
    assert len(seen) == 1
    assert len(harness.waits) == 1 and harness.waits[0] >= 30.0
    assert transport.stats.gave_up == {rt.StopReason.CLOSED: 1}
    last = caplog.records[-1]
    assert last.levelno == logging.INFO and last.getMessage().endswith("503 (closed)")


def test_a_transport_works_again_after_close(harness: Harness) -> None:
    """As httpx's own transports: a request made after close() is served, retries included."""
    handler, seen = _counting(503, 200)
    transport = harness.transport(handler, respect_retry_after=False, base_delay=0.1,
                                  jitter="none")
    harness.send(transport, url=URL)  # served, then the client closes the transport
    assert len(seen) == 2
    response = harness.send(transport, url=URL)
    assert response.status_code == 200 and len(seen) == 3


def test_the_default_sync_wait_ends_at_once_on_close() -> None:
    """With the default sleep, close() from another thread ends a 30 s wait at once: the
    request raises the closed error, nothing more is sent."""
    handler, seen = _counting(503, 200)
    waiting = threading.Event()
    transport = rt.RetryTransport(httpx.MockTransport(handler),
                                  hooks=lambda event: waiting.set())
    outcome: list[BaseException | Any] = []

    def request() -> None:
        try:
            outcome.append(httpx.Client(transport=transport).get(URL))
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertions
            outcome.append(exc)

    thread = threading.Thread(target=request)
    thread.start()
    assert waiting.wait(10)
    transport.close()
    thread.join(10)
    assert not thread.is_alive()
    [error] = outcome
    assert isinstance(error, httpx.TransportError) and "closed" in str(error)
    assert len(seen) == 1


@pytest.mark.anyio
async def test_the_default_async_wait_ends_at_once_on_aclose(anyio_backend: str) -> None:
    """With the default sleep, aclose() from another task ends a 30 s wait at once."""
    handler, seen = _counting(503, 200)
    waiting = anyio.Event()
    transport = rt.AsyncRetryTransport(httpx.MockTransport(handler),
                                       hooks=lambda event: waiting.set())
    outcome: list[BaseException | Any] = []

    async def request() -> None:
        try:
            outcome.append(await httpx.AsyncClient(transport=transport).get(URL))
        except Exception as exc:  # noqa: BLE001 - recorded for the assertions
            outcome.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(request)
            await waiting.wait()
            await transport.aclose()
    [error] = outcome
    assert isinstance(error, httpx.TransportError) and "closed" in str(error)
    assert len(seen) == 1
