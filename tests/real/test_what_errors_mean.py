"""What an error says of the origin, against real servers on 127.0.0.1.

The client's own pool, full: a real connection pool of two, both connections held by
streamed responses the test keeps open, and a burst of requests that each wait in vain for
one (real ``PoolTimeout``s, every attempt's). Nothing of the burst reaches the server, which
never failed: with a circuit breaker and an adaptive throttle on, the requests after the
burst are answered, as they are with bare httpx. The connections are held until the test
lets them go, not for a time, so the outcome does not depend on the machine's load; the
waits between attempts are recorded, never slept.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.real.clients import Waits, check_flavour
from tests.real.servers import BOUND, ScriptedHTTPServer

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

#: The pool's connections, both held through the burst.
POOL = 2
#: Requests in the burst: with 3 attempts each, 24 PoolTimeouts, more than the default
#: breaker's ``min_requests`` (20), all of them failures were they counted.
BURST = 8
#: Plain GETs after the burst, each of which must be answered.
AFTER = 10


def pool_timeout() -> httpx.Timeout:
    """A short wait for a connection from the pool (the burst's), the rest as usual."""
    return httpx.Timeout(2.0, pool=0.2)


def guards() -> dict[str, Any]:
    """A breaker and a throttle with their defaults: both judge the origin's health."""
    return {"breaker": rt.CircuitBreaker(), "throttle": rt.AdaptiveThrottle()}


def check_after_the_burst(server: ScriptedHTTPServer, url: str, judges: dict[str, Any],
                          burst: list[BaseException | None], after: list[int]) -> None:
    """The burst waited in vain for the pool, sent nothing and opened nothing; every GET
    after it was answered."""
    assert len(burst) == BURST
    for error in burst:
        assert isinstance(error, httpx.PoolTimeout), error
        info = rt.retry_info(error)
        assert info is not None
        assert (info.attempts, info.stop_reason) == (3, rt.StopReason.MAX_ATTEMPTS)
    assert after == [200] * AFTER
    assert server.count("/pool") == POOL + AFTER  # the burst never reached it
    assert judges["breaker"].state(url) == "closed"
    assert judges["throttle"].counts(url) == (POOL + AFTER, POOL + AFTER)


def test_a_full_pool_opens_nothing_sync(http_server: ScriptedHTTPServer) -> None:
    url = http_server.script("/pool")
    recorder = Waits()
    inner = httpx.HTTPTransport(limits=httpx.Limits(max_connections=POOL))
    judges = guards()
    transport = rt.RetryTransport(inner, sleep=recorder.sleep, **judges)
    burst: list[BaseException | None] = []
    lock = threading.Lock()
    with httpx.Client(transport=transport, timeout=pool_timeout()) as client:
        check_flavour(Client=client, BaseTransport=transport, HTTPTransport=inner)
        held = [client.send(client.build_request("GET", url), stream=True)
                for _ in range(POOL)]

        def one() -> None:
            try:
                client.get(url)
            except Exception as exc:
                with lock:
                    burst.append(exc)
            else:
                with lock:
                    burst.append(None)

        threads = [threading.Thread(target=one) for _ in range(BURST)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(BOUND)
        for response in held:
            response.close()
        after = [client.get(url).status_code for _ in range(AFTER)]
    check_after_the_burst(http_server, url, judges, burst, after)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_full_pool_opens_nothing_async(http_server: ScriptedHTTPServer,
                                         backend: str) -> None:
    url = http_server.script("/pool")
    recorder = Waits()
    judges = guards()

    async def main() -> tuple[list[BaseException | None], list[int]]:
        inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=POOL))
        transport = rt.AsyncRetryTransport(inner, sleep=recorder.asleep, **judges)
        burst: list[BaseException | None] = []
        async with httpx.AsyncClient(transport=transport, timeout=pool_timeout()) as client:
            check_flavour(AsyncClient=client, AsyncBaseTransport=transport,
                          AsyncHTTPTransport=inner)
            held = [await client.send(client.build_request("GET", url), stream=True)
                    for _ in range(POOL)]

            async def one() -> None:
                try:
                    await client.get(url)
                except Exception as exc:
                    burst.append(exc)
                else:
                    burst.append(None)

            with anyio.fail_after(BOUND):
                async with anyio.create_task_group() as group:
                    for _ in range(BURST):
                        group.start_soon(one)
            for response in held:
                await response.aclose()
            after = [(await client.get(url)).status_code for _ in range(AFTER)]
        return burst, after

    burst, after = anyio.run(main, backend=backend)
    check_after_the_burst(http_server, url, judges, burst, after)
