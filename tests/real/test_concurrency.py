"""Many requests at once through one client against the real server: 16 threads on a sync
client, 200 tasks on an async one. Every path fails twice before it succeeds, so every
request must end after exactly 3 attempts, and the budget and counters must add up exactly."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.real.clients import Waits, check_flavour
from tests.real.servers import Reply, ScriptedHTTPServer

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

FAILURES = (Reply(503), Reply(502))
CAPACITY = 10_000


def timeout() -> httpx.Timeout:
    """Generous: 200 tasks share the connections, and a pool timeout would itself be retried."""
    return httpx.Timeout(10.0)


def limits() -> httpx.Limits:
    """httpcore's pool spends time quadratic in the requests waiting on it: 20 connections
    keep 200 tasks (all in the retry transport at once) to a couple of seconds."""
    return httpx.Limits(max_connections=20)


def check_response(response: httpx.Response) -> None:
    check_flavour(Response=response)
    assert response.status_code == 200
    info = rt.retry_info(response)
    assert info is not None
    assert info.attempts == 3
    assert info.stop_reason is rt.StopReason.SUCCESS
    assert [a.status for a in info.history] == [503, 502, 200]


def check_totals(
    server: ScriptedHTTPServer, paths: list[str], transport: rt.RetryTransport |
    rt.AsyncRetryTransport, budget: rt.RetryBudget, waits: Waits,
) -> None:
    count = len(paths)
    assert {path: server.count(path) for path in paths} == {path: 3 for path in paths}
    assert len(server.seen) == 3 * count
    stats = transport.stats
    assert (stats.requests, stats.retries, dict(stats.gave_up)) == (count, 2 * count, {})
    # each request takes two retry costs and gets its last one back on success
    assert budget.tokens == CAPACITY - count * budget.retry_cost
    assert stats.budget_tokens == budget.tokens
    assert len(waits.waits) == 2 * count


def test_16_threads_on_one_sync_client(http_server: ScriptedHTTPServer) -> None:
    paths = [f"/thread/{i}/{j}" for i in range(16) for j in range(10)]
    urls = [http_server.script(path, *FAILURES) for path in paths]
    budget = rt.RetryBudget(capacity=CAPACITY)
    waits = Waits()
    transport = rt.RetryTransport(sleep=waits.sleep, budget=budget)
    with httpx.Client(transport=transport, timeout=timeout()) as client:
        check_flavour(Client=client, HTTPTransport=transport._transport)

        def worker(i: int) -> int:
            for url in urls[i * 10:(i + 1) * 10]:
                check_response(client.get(url))
            return i

        with ThreadPoolExecutor(16) as pool:
            assert sorted(pool.map(worker, range(16))) == list(range(16))
    check_totals(http_server, paths, transport, budget, waits)


@pytest.mark.anyio
async def test_200_tasks_on_one_async_client(http_server: ScriptedHTTPServer) -> None:
    paths = [f"/task/{i}" for i in range(200)]
    urls = [http_server.script(path, *FAILURES) for path in paths]
    budget = rt.RetryBudget(capacity=CAPACITY)
    waits = Waits()
    transport = rt.AsyncRetryTransport(sleep=waits.asleep, budget=budget, limits=limits())
    done: list[str] = []
    async with httpx.AsyncClient(transport=transport, timeout=timeout()) as client:
        check_flavour(AsyncClient=client, AsyncHTTPTransport=transport._transport)

        async def task(url: str) -> None:
            check_response(await client.get(url))
            done.append(url)

        async with anyio.create_task_group() as group:
            for url in urls:
                group.start_soon(task, url)
    assert sorted(done) == sorted(urls)
    check_totals(http_server, paths, transport, budget, waits)
