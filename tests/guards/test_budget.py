"""The per-client retry budget: AWS SDK standard-mode arithmetic, shared and concurrent."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.transport.test_transport import script

pytestmark = pytest.mark.usefixtures("flavour")


def always(status: int) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status))


def test_defaults() -> None:
    """The AWS SDK standard-mode numbers."""
    budget = rt.RetryBudget()
    assert (budget.capacity, budget.retry_cost, budget.timeout_retry_cost,
            budget.success_refund) == (500, 5, 10, 1)
    assert budget.tokens == 500


@pytest.mark.parametrize(
    ("field", "value"),
    [("capacity", 0), ("capacity", -5), ("retry_cost", -1), ("timeout_retry_cost", float("nan")),
     ("success_refund", "1"), ("capacity", True), ("retry_cost", 501),
     ("timeout_retry_cost", 600)],
)
def test_invalid_budget_raises_naming_the_field(field: str, value: Any) -> None:
    """Bad numbers fail at construction."""
    with pytest.raises(ValueError, match=field):
        rt.RetryBudget(**{field: value})


def test_transport_owns_a_default_budget(harness: Harness) -> None:
    """Each transport gets a fresh full budget unless told otherwise."""
    handler, _ = script(503, 200)
    first, second = harness.transport(handler), harness.transport(handler)
    assert first.budget is not None and second.budget is not None
    assert first.budget is not second.budget
    harness.send(first)
    assert first.budget.tokens == 500  # took 5, got 5 back on success
    assert second.budget.tokens == 500


def test_exhaustion_stops_retries_at_once(harness: Harness) -> None:
    """With fewer tokens than a retry costs, the failure is handed over without a retry."""
    handler, seen = script(503)
    budget = rt.RetryBudget(capacity=12, retry_cost=5)
    transport = harness.transport(handler, budget=budget, max_attempts=10)
    response = harness.send(transport)
    assert response.status_code == 503
    assert len(seen) == 3  # two retries paid for, the third is refused
    assert budget.tokens == 2
    info = rt.retry_info(response)
    assert info is not None
    assert info.stop_reason is rt.StopReason.BUDGET_EXHAUSTED
    assert info.retries == 2
    harness.send(transport)
    assert len(seen) == 4  # now each request is sent once
    assert transport.stats.gave_up == {rt.StopReason.BUDGET_EXHAUSTED: 2}


def test_exhausted_budget_raises_the_last_error(harness: Harness) -> None:
    """An error is re-raised unchanged when the budget refuses its retry."""
    error = httpx.ConnectError("refused")
    handler, seen = script(error)
    budget = rt.RetryBudget(capacity=9, timeout_retry_cost=9)
    assert budget.acquire() == 5  # 4 tokens left: less than a retry costs
    transport = harness.transport(handler, budget=budget)
    with pytest.raises(httpx.ConnectError) as caught:
        harness.send(transport)
    assert caught.value is error
    assert len(seen) == 1
    info = rt.retry_info(caught.value)
    assert info is not None and info.stop_reason is rt.StopReason.BUDGET_EXHAUSTED


def test_timeouts_cost_more(harness: Harness) -> None:
    """A retry after a timeout takes timeout_retry_cost; after anything else, retry_cost."""
    budget = rt.RetryBudget(capacity=100)
    handler, _ = script(httpx.ReadTimeout("slow"), httpx.ConnectError("refused"), 503, 500)
    harness.send(harness.transport(handler, budget=budget, max_attempts=4))
    assert budget.tokens == 100 - 10 - 5 - 5


def test_success_refunds_the_last_retry_cost(harness: Harness) -> None:
    """Success after retries puts back what the last retry took."""
    budget = rt.RetryBudget(capacity=100)
    handler, _ = script(503, httpx.ReadTimeout("slow"), 200)
    harness.send(harness.transport(handler, budget=budget))
    assert budget.tokens == 100 - 5 - 10 + 10


def test_success_without_retry_refunds_one_up_to_capacity(harness: Harness) -> None:
    """A first-attempt success puts back success_refund, never above capacity."""
    budget = rt.RetryBudget(capacity=20, retry_cost=5, success_refund=2)
    transport = harness.transport(script(503, 503, 404)[0], budget=budget)
    harness.send(transport)  # two retries, ends in 404: no refund
    assert budget.tokens == 10
    ok = harness.transport(script(200)[0], budget=budget)
    for expected in (12, 14, 16, 18, 20, 20):
        harness.send(ok)
        assert budget.tokens == expected


def test_failures_refund_nothing(harness: Harness) -> None:
    """A request that ends unsuccessfully puts nothing back."""
    budget = rt.RetryBudget(capacity=100)
    harness.send(harness.transport(script(503, 404)[0], budget=budget))
    assert budget.tokens == 95


def test_budget_is_checked_last(harness: Harness) -> None:
    """No tokens are spent on a retry that another rule stops."""
    budget = rt.RetryBudget(capacity=100)
    transport = harness.transport(script(503)[0], budget=budget, max_attempts=2)
    harness.send(transport, "POST")  # unsafe_method: no token
    harness.send(transport, extensions={"retry": False})  # disabled: no token
    assert budget.tokens == 100
    harness.send(transport)  # one retry, then max_attempts: one retry's cost only
    assert budget.tokens == 95
    ra = httpx.Response(503, headers={"Retry-After": "3600"})
    harness.send(harness.transport(script(ra)[0], budget=budget))  # too long: no token
    assert budget.tokens == 95


def test_budget_none_never_limits(harness: Harness) -> None:
    """budget=None: only max_attempts bounds retries."""
    handler, seen = script(503)
    transport = harness.transport(handler, budget=None, max_attempts=3)
    for _ in range(200):
        harness.send(transport)
    assert len(seen) == 600
    assert transport.budget is None
    assert transport.stats.budget_tokens is None


def test_total_outage_allows_100_retries_then_sends_each_request_once(harness: Harness) -> None:
    """From a full bucket, an outage gets 100 retries (50 after timeouts), then 1.0x load."""
    handler, seen = script(503)
    transport = harness.transport(handler)
    for _ in range(1000):
        harness.send(transport)
    assert transport.stats.retries == 100
    assert len(seen) == 1100
    timeouts, seen_t = script(httpx.ReadTimeout("slow"))
    ttransport = harness.transport(timeouts)
    for _ in range(100):
        with pytest.raises(httpx.ReadTimeout):
            harness.send(ttransport)
    assert ttransport.stats.retries == 50


def test_shared_budget_across_mounts(harness: Harness) -> None:
    """One budget given to several transports bounds them together."""
    budget = rt.RetryBudget(capacity=10, retry_cost=5)
    a = harness.transport(script(503)[0], budget=budget)
    b = harness.transport(script(503)[0], budget=budget)
    harness.send(a)  # spends 10
    harness.send(b)  # nothing left
    assert a.stats.retries == 2 and b.stats.retries == 0
    assert b.stats.gave_up == {rt.StopReason.BUDGET_EXHAUSTED: 1}


class Interrupted(BaseException):
    """What a signal handler raises, as KeyboardInterrupt does: no Exception."""


@pytest.mark.parametrize("raised", [RuntimeError, Interrupted])
@pytest.mark.parametrize("hedged", [False, True], ids=["plain", "hedged"])
def test_a_retry_whose_wait_raises_gives_its_cost_back(
        harness: Harness, raised: type[BaseException], hedged: bool) -> None:
    """The sleep before a retry raises (an error of its own, or an interrupt): the request
    ends, and the tokens the budget's veto took for the retry never sent go back."""
    def sleep(seconds: float) -> None:
        raise raised("the wait was cut short")

    async def asleep(seconds: float) -> None:
        sleep(seconds)

    budget = rt.RetryBudget(capacity=500)
    handler, seen = script(503, 200)
    transport = harness.transport(
        handler, budget=budget, sleep=sleep if harness.mode == "sync" else asleep,
        hedging=rt.Hedging(30.0) if hedged else None)
    with pytest.raises(raised):
        harness.send(transport)
    assert len(seen) == 1 and transport.stats.retries == 1  # decided, never sent
    assert budget.tokens == 500


@pytest.mark.parametrize("hedged", [False, True], ids=["plain", "hedged"])
@pytest.mark.anyio
async def test_a_retry_cancelled_in_its_wait_gives_its_cost_back(
        anyio_backend: str, hedged: bool) -> None:
    """A cancellation while the transport waits before a retry (its own wait, a minute
    long, cancelled as soon as the retry is decided: no time passes): the budget is as
    before the request."""
    decided = anyio.Event()
    budget = rt.RetryBudget(capacity=500)
    handler, seen = script(503, 200)
    transport = rt.AsyncRetryTransport(
        httpx.MockTransport(handler), budget=budget, base_delay=60.0, max_delay=60.0, jitter="none",
        hedging=rt.Hedging(30.0) if hedged else None,
        hooks=[lambda event: decided.set() if event.kind == "retry" else None])

    async def send() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get("https://api.example.com/items")

    async with anyio.create_task_group() as group:
        group.start_soon(send)
        await decided.wait()
        group.cancel_scope.cancel()
    assert len(seen) == 1 and transport.stats.retries == 1
    assert budget.tokens == 500


def test_a_resumption_whose_wait_raises_gives_its_cost_back(harness: Harness) -> None:
    """The same for the resumption of a broken body: its wait interrupted, it is never
    sent, and the budget gets back what its veto took."""
    from tests.transport.test_resume import RangeServer, read

    def sleep(seconds: float) -> None:
        raise Interrupted("the wait was cut short")

    async def asleep(seconds: float) -> None:
        sleep(seconds)

    budget = rt.RetryBudget(capacity=500)
    server = RangeServer(cuts=(5000,))
    transport = harness.transport(server, budget=budget, resume=rt.Resume(),
                                  sleep=sleep if harness.mode == "sync" else asleep)
    with pytest.raises(Interrupted):
        read(harness, transport)
    assert len(server.requests) == 1 and transport.stats.resumes == 1
    assert budget.tokens == 500


def test_a_retry_interrupted_once_sent_keeps_its_cost(harness: Harness) -> None:
    """The retry was sent before the interrupt came: what it cost stays spent."""
    budget = rt.RetryBudget(capacity=500)
    handler, seen = script(503, Interrupted("mid-attempt"))
    with pytest.raises(Interrupted):
        harness.send(harness.transport(handler, budget=budget))
    assert len(seen) == 2
    assert budget.tokens == 495


def test_threaded_stress_is_exact() -> None:
    """16 threads x 500 requests on one sync client: exactly the retries the budget allows."""
    attempts = 0
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal attempts
        with lock:
            attempts += 1
        return httpx.Response(503)

    budget = rt.RetryBudget()
    transport = rt.RetryTransport(httpx.MockTransport(handler), budget=budget,
                                  sleep=lambda s: None)
    errors: list[BaseException] = []
    with httpx.Client(transport=transport) as client:
        def worker() -> None:
            try:
                for _ in range(500):
                    assert client.get("https://api.example.com/").status_code == 503
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    stats = transport.stats
    assert stats.requests == 8000
    assert stats.retries == 100
    assert attempts == 8100
    assert budget.tokens == 0
    assert sum(stats.gave_up.values()) == 8000


def test_budget_shared_by_sync_and_async_transports_under_load() -> None:
    """Threads on a sync transport and tasks on an async one drain one budget exactly."""
    budget = rt.RetryBudget(capacity=1000, retry_cost=1, success_refund=1)
    sync_t = rt.RetryTransport(always(503), budget=budget, sleep=lambda s: None)

    async def nosleep(seconds: float) -> None:
        await anyio.sleep(0)

    async_t = rt.AsyncRetryTransport(always(503), budget=budget, sleep=nosleep)

    def threads() -> None:
        with httpx.Client(transport=sync_t) as client:
            for _ in range(300):
                client.get("https://a.example.com/")

    async def tasks() -> None:
        async with httpx.AsyncClient(transport=async_t) as client:
            async def one() -> None:
                for _ in range(3):
                    await client.get("https://b.example.com/")

            async with anyio.create_task_group() as group:
                for _ in range(100):
                    group.start_soon(one)

    workers = [threading.Thread(target=threads) for _ in range(4)]
    for w in workers:
        w.start()
    anyio.run(tasks, backend="trio")
    for w in workers:
        w.join()
    total = sync_t.stats.retries + async_t.stats.retries
    assert total == 1000
    assert budget.tokens == 0


def test_refunds_counted_without_a_lock_are_all_applied() -> None:
    """Successes at once put their refund back through a lock-free count folded in at the
    next read: from 8 threads, 4,000 successes refill an emptied bucket of 10,000 by 4,000
    exactly, and a retry reads the bucket with them folded in."""
    budget = rt.RetryBudget(capacity=10_000, retry_cost=5, timeout_retry_cost=5)
    while budget.acquire() is not None:
        pass
    assert budget.tokens == 0
    transport = rt.RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)),
                                  budget=budget)
    request = httpx.Request("GET", "https://api.example.com/")

    def worker() -> None:
        for _ in range(500):
            transport.handle_request(request)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert budget.acquire() == 5  # the refunds are there before a retry is paid for
    assert budget.tokens == 4_000 - 5
    assert "tokens=3995" in repr(budget)


def test_late_refunds_clip_at_capacity_as_immediate_ones_would() -> None:
    budget = rt.RetryBudget(capacity=10, retry_cost=5, success_refund=1)
    assert budget.acquire() == 5
    tally = budget._count_refund
    assert tally is not None
    for _ in range(3):
        tally()
    assert budget.tokens == 8
    for _ in range(100):
        tally()
    assert budget.tokens == 10  # never above capacity
    assert budget.acquire() == 5 and budget.tokens == 5
