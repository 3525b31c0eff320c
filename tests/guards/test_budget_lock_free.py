"""The retry budget without a lock: exact under threads, shared by sync and async transports,
after a fork, and the same tokens at every read as the float arithmetic of a lock gives."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator

import anyio
import pytest

from retry_transport._guards import budget as budget_module
from tests.flavour import httpx, rt
from tests.locks import CountingLock

pytestmark = pytest.mark.usefixtures("flavour")


@pytest.fixture
def switching() -> Iterator[None]:
    """Threads switch every microsecond, between any two bytecodes of the code under test."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _run_threads(first: Callable[[], None], second: Callable[[], None], count: int) -> None:
    """``count`` threads running ``first`` and as many running ``second``; none raised."""
    errors: list[BaseException] = []

    def run(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(target,)) for target in (first, second)
               for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_threads_retrying_on_one_budget_never_overdraw_it(switching: None) -> None:
    """Eight threads on two transports that share a budget of 1,000 tokens, one answered
    503 (a retry costs 5), one timing out (10): they ask for some 3,000 retries; exactly
    what 1,000 tokens pay for is spent, none is lost, and what is left pays for no more."""
    budget = rt.RetryBudget(capacity=1000)
    statuses = rt.RetryTransport(httpx.MockTransport(lambda request: httpx.Response(503)),
                                 budget=budget, sleep=lambda seconds: None)

    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    timeouts = rt.RetryTransport(httpx.MockTransport(timeout), budget=budget,
                                 sleep=lambda seconds: None)
    request = httpx.Request("GET", "https://api.example.com/")

    def send_503() -> None:
        for _ in range(200):
            statuses.handle_request(request).close()

    def send_timeouts() -> None:
        for _ in range(200):
            with pytest.raises(httpx.ReadTimeout):
                timeouts.handle_request(request)

    threads = [threading.Thread(target=send) for send in (send_503, send_timeouts) * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    left = budget.tokens
    assert 5 * statuses.stats.retries + 10 * timeouts.stats.retries + left == 1000
    # A 503 retry was refused at the end, so fewer than 5 are left, and they pay for none.
    assert 0 <= left < 5
    assert budget.acquire() is None and budget.tokens == left


def test_a_read_never_sees_a_retry_half_paid(switching: None) -> None:
    """Six threads pay for retries (5 or 10 tokens) from a bucket of 20, often short, and put
    the cost back, counting refunds of 5, while a reader reads: every read is a multiple of
    5 between 0 and the capacity, and once each cost taken is back the bucket is full."""
    budget = rt.RetryBudget(capacity=20, retry_cost=5, timeout_retry_cost=10,
                            success_refund=5)
    reads: list[float] = []
    done = threading.Event()
    refund = budget._count_refund
    assert refund is not None

    def pay_and_give_back(timeout: bool) -> Callable[[], None]:
        def run() -> None:
            for index in range(5_000):
                cost = budget.acquire(timeout=timeout)
                if index % 7 == 0:
                    refund()
                if cost is not None:
                    budget.release(cost)
        return run

    def reader() -> None:
        while not done.is_set():
            reads.append(budget.tokens)

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        _run_threads(pay_and_give_back(False), pay_and_give_back(True), 3)
    finally:
        done.set()
        watcher.join()
    assert reads and all(read % 5 == 0 and 0 <= read <= 20 for read in reads)
    assert budget.tokens == 20


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("capacity", [20, 500])
def test_a_budget_shared_by_sync_threads_and_async_tasks_comes_back_whole(
        backend: str, capacity: int) -> None:
    """Every request is answered 503, then 200 on its retry: threads on a sync transport and
    tasks on an async one share a budget. With 20 tokens, at most four retries are paid for
    at a time and the others refused; whatever the order, each retry paid for is put back on
    its success, and the bucket ends full; every request was retried or refused."""
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if request.extensions.get("retry_attempt") else 503)

    budget = rt.RetryBudget(capacity=capacity)
    sync_transport = rt.RetryTransport(httpx.MockTransport(handler), budget=budget,
                                       sleep=lambda seconds: None)

    async def no_sleep(seconds: float) -> None:
        await anyio.sleep(0)

    async_transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), budget=budget,
                                             sleep=no_sleep)

    def threads() -> None:
        request = httpx.Request("GET", "https://a.example.com/")
        for _ in range(150):
            sync_transport.handle_request(request).close()

    async def tasks() -> None:
        async def one() -> None:
            request = httpx.Request("GET", "https://b.example.com/")
            for _ in range(6):
                await (await async_transport.handle_async_request(request)).aclose()

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(one)

    workers = [threading.Thread(target=threads) for _ in range(4)]
    for worker in workers:
        worker.start()
    anyio.run(tasks, backend=backend)
    for worker in workers:
        worker.join()
    assert budget.tokens == capacity
    for transport, requests in ((sync_transport, 600), (async_transport, 300)):
        stats = transport.stats
        refused = stats.gave_up.get(rt.StopReason.BUDGET_EXHAUSTED, 0)
        assert stats.requests == requests
        assert stats.retries + refused == requests
    if capacity == 500:  # room for every retry at once
        assert sync_transport.stats.retries + async_transport.stats.retries == 900


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork only")
@pytest.mark.flavour_free
def test_a_child_forked_while_threads_pay_finds_a_whole_budget() -> None:
    """Processes forked while four threads pay for retries and put them back: each child
    finds a multiple of 5 tokens, between 0 and the capacity, and pays for a retry at once
    (nothing held by a thread the child does not have)."""
    budget = rt.RetryBudget(capacity=100)
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            cost = budget.acquire(timeout=random.random() < 0.5)
            if cost is not None:
                budget.release(cost)

    threads = [threading.Thread(target=busy, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    results = []
    try:
        for _ in range(10):
            time.sleep(0.002)
            pid = os.fork()
            if pid == 0:  # the child: check, then out, whatever happens
                code = 1
                try:
                    left = budget.tokens
                    if left % 5 == 0 and 5 <= left <= 100:  # threads hold at most 40
                        code = 0 if (budget.acquire() == 5
                                     and budget.tokens == left - 5) else 3
                    else:
                        code = 2
                finally:
                    os._exit(code)
            deadline = time.monotonic() + 2.0
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    results.append(os.waitstatus_to_exitcode(status))
                    break
                if time.monotonic() > deadline:  # pragma: no cover - a hung child
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    results.append("hung")
                    break
                time.sleep(0.001)
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
    assert results == [0] * 10
    assert budget.tokens == 100


class _Reference:
    """The bucket as a lock makes it: each change applied at once, in floats."""

    def __init__(self, capacity: float, cost: float, timeout_cost: float,
                 refund: float) -> None:
        self.tokens, self.capacity = capacity, capacity
        self.costs = (cost, timeout_cost)
        self.refund = refund

    def acquire(self, timeout: bool) -> float | None:
        cost = self.costs[timeout]
        if self.tokens < cost:
            return None
        self.tokens -= cost
        return cost

    def release(self, amount: float) -> None:
        self.tokens = min(self.capacity, self.tokens + amount)


@pytest.mark.flavour_free
@pytest.mark.parametrize("amounts", [(500, 5, 10, 1), (12, 5, 10, 1), (7.5, 2.5, 5, 0.5),
                                     (1.5, 0.25, 0.75, 0.125), (40, 3, 7, 2), (30, 0, 10, 0)])
@pytest.mark.parametrize("locked", [False, True], ids=["tokens", "under-a-lock"])
def test_every_read_gives_the_tokens_of_each_change_made_at_once(
        amounts: tuple[float, float, float, float], locked: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A seeded walk of retries paid for, costs put back, refunds counted (runs of them
    between reads too): after each step, the budget's tokens are the reference's, held as
    tokens or counted under the lock."""
    if locked:
        monkeypatch.setattr(budget_module, "MAX_UNITS", 0)
    budget = rt.RetryBudget(*amounts)
    reference = _Reference(*amounts)
    count_refund = budget._count_refund
    assert count_refund is not None
    rng = random.Random(f"budget:{amounts}")
    paid: list[float] = []
    for _ in range(2_000):
        step = rng.random()
        if step < 0.35:
            timeout = rng.random() < 0.3
            cost = budget.acquire(timeout=timeout)
            assert cost == reference.acquire(timeout)
            if cost is not None:
                paid.append(cost)
        elif step < 0.55 and paid:
            cost = paid.pop(rng.randrange(len(paid)))
            budget.release(cost)
            reference.release(cost)
        else:
            for _ in range(rng.choice((1, 1, 3, 20))):
                count_refund()
                reference.release(reference.refund)
        assert budget.tokens == reference.tokens
    assert repr(budget).startswith(f"RetryBudget(tokens={reference.tokens:g},")


@pytest.mark.flavour_free
def test_a_release_of_no_whole_unit_is_refused_by_a_bucket_of_tokens() -> None:
    """A bucket held as whole tokens takes back a whole number of them; one counted under the
    lock (amounts of no coarse unit) takes any amount; nonsense is refused by both."""
    whole = rt.RetryBudget(capacity=100)
    assert whole.acquire() == 5
    with pytest.raises(ValueError, match="amount"):
        whole.release(2.5)
    assert whole.tokens == 95
    whole.release(3)
    assert whole.tokens == 98
    whole.release(10**12)  # never above capacity
    assert whole.tokens == 100
    fine = rt.RetryBudget(capacity=1, retry_cost=0.1, timeout_retry_cost=0.2,
                          success_refund=0.1)
    assert fine.acquire() == 0.1
    fine.release(0.05)
    assert fine.tokens == min(1.0, 1.0 - 0.1 + 0.05)
    for budget in (whole, fine):
        with pytest.raises(ValueError, match="amount"):
            budget.release(-1)
        with pytest.raises(TypeError, match="amount"):
            budget.release("1")  # type: ignore[arg-type]


def test_a_subclass_acquire_is_asked_for_every_retry() -> None:
    """A budget whose acquire() is overridden (to watch it, as the simulator does) is asked
    for each retry, and what it answered goes back on success."""
    asked: list[bool] = []

    class Watched(rt.RetryBudget):
        __slots__ = ()

        def acquire(self, *, timeout: bool = False) -> float | None:
            asked.append(timeout)
            return super().acquire(timeout=timeout)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if request.extensions.get("retry_attempt") == 3 else 503)

    budget = Watched(capacity=100)
    transport = rt.RetryTransport(httpx.MockTransport(handler), budget=budget,
                                  sleep=lambda seconds: None)
    transport.handle_request(httpx.Request("GET", "https://api.example.com/")).close()
    assert asked == [False, False]
    assert budget.tokens == 100 - 5  # the last retry's cost back, not the first's


@pytest.mark.parametrize(("capacity", "locks"), [(500, False), (10**9, True)],
                         ids=["tokens", "too-many-units"])
def test_retries_and_successes_take_no_lock(capacity: int, locks: bool) -> None:
    """Requests retried once and then successful, and successes at once, pay and put back
    without the budget's lock, and a read takes none either; a bucket of more units than it
    holds as tokens counts under its lock."""
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/flaky" and not request.extensions.get("retry_attempt"):
            return httpx.Response(503)
        return httpx.Response(200)

    budget = rt.RetryBudget(capacity=capacity)
    lock = budget._lock = CountingLock()  # type: ignore[assignment]
    transport = rt.RetryTransport(httpx.MockTransport(handler), budget=budget,
                                  sleep=lambda seconds: None)
    for path in ("/flaky", "/ok") * 50:
        transport.handle_request(httpx.Request("GET", f"https://api.example.com{path}")).close()
    assert transport.stats.retries == 50
    assert budget.tokens == capacity
    assert (lock.taken > 0) is locks
