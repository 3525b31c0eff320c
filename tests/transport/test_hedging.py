"""Hedged requests: another copy of a slow request, the first final answer wins.

The handlers here are driven by events, not by time: an attempt that must be slow waits
until the test lets it go (or is cancelled), so the only real time waited is the hedging
delay itself (a few milliseconds, the point of the feature) on the sync and asyncio drivers;
trio runs it in virtual time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import anyio
import pytest
import trio.testing

from retry_transport._call.latency import LatencyTable
from tests.flavour import httpx, rt
from tests.harness import Harness

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://api.example.com/items"
DELAY = 0.005
#: How long a ("slow", status) attempt takes: several hedging delays (real time on the sync
#: and asyncio drivers, virtual on trio).
SLOW = 0.03


def closing(mode: str, closed: list[int], number: int,
            then: Callable[[], object] = lambda: None) -> Any:
    """A response body of the flavour under test that says when it was closed (and calls
    ``then``)."""
    if mode == "sync":
        class Sync(httpx.SyncByteStream):  # type: ignore[name-defined,misc]
            def __iter__(self) -> Any:
                yield b"late"

            def close(self) -> None:
                closed.append(number)
                then()

        return Sync()

    class Async(httpx.AsyncByteStream):  # type: ignore[name-defined,misc]
        async def __aiter__(self) -> Any:
            yield b"late"

        async def aclose(self) -> None:
            closed.append(number)
            then()

    return Async()


class Server:
    """Answers attempt ``n`` with ``script[n - 1]``: a status (at once), ``("hold",
    status)`` (once the test lets it go; async: never, until cancelled), ``("slow",
    status)`` (after ``SLOW`` seconds), or an exception."""

    def __init__(self, mode: str, script: list[Any]) -> None:
        self.mode = mode
        self.script = script
        self.seen: list[httpx.Request] = []
        self.closed: list[int] = []
        self.release = threading.Event()
        self.cancelled: list[int] = []

    def _answer(self, number: int, step: Any) -> httpx.Response:
        if isinstance(step, Exception):
            raise step
        status = step[1] if isinstance(step, tuple) else step
        return httpx.Response(status, stream=closing(self.mode, self.closed, number))

    def handler(self) -> Callable[..., Any]:
        def sync(request: httpx.Request) -> httpx.Response:
            self.seen.append(request)
            number = len(self.seen)
            step = self.script[min(number, len(self.script)) - 1]
            if isinstance(step, tuple) and step[0] == "slow":
                self.release.wait(SLOW)
            elif isinstance(step, tuple):  # held until the test lets it go
                assert self.release.wait(5.0), "never released"
            return self._answer(number, step)

        async def asynchronous(request: httpx.Request) -> httpx.Response:
            self.seen.append(request)
            number = len(self.seen)
            step = self.script[min(number, len(self.script)) - 1]
            if isinstance(step, tuple) and step[0] == "slow":
                await anyio.sleep(SLOW)
            elif isinstance(step, tuple):
                try:
                    await anyio.sleep(3600)  # held until cancelled
                except BaseException:
                    self.cancelled.append(number)
                    raise
            return self._answer(number, step)

        return sync if self.mode == "sync" else asynchronous


def send(harness: Harness, transport: Any, method: str = "GET", *,
         server: Server | None = None, **kwargs: Any) -> Any:
    """Send one request; trio runs in virtual time. Sync: then the held attempts of
    ``server`` are let go and the transport is closed (which waits for its workers)."""
    if harness.mode == "sync":
        client = httpx.Client(transport=transport)
        try:
            response = client.request(method, URL, **kwargs)
        finally:
            if server is not None:
                server.release.set()
            transport.close()
        return response

    async def main() -> Any:
        async with httpx.AsyncClient(transport=transport) as client:
            return await client.request(method, URL, **kwargs)

    if harness.mode == "trio":
        return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return anyio.run(main, backend="asyncio")


def hedged(harness: Harness, server: Server, **kwargs: Any) -> Any:
    kwargs.setdefault("hedging", rt.Hedging(DELAY))
    return harness.transport(server.handler(), **kwargs)


def test_a_slow_first_attempt_gets_a_hedge_that_wins(harness: Harness) -> None:
    server = Server(harness.mode, [("hold", 200), 200])
    events: list[Any] = []
    transport = hedged(harness, server, hooks=events.append)
    response = send(harness, transport, server=server)
    assert response.status_code == 200
    assert len(server.seen) == 2
    assert server.seen[1].extensions.get("retry_attempt") == 2
    info = rt.retry_info(response)
    assert (info.attempts, info.retries, info.hedges) == (2, 1, 1)
    assert [(a.hedge, a.cancelled, a.status) for a in info.history] == [
        (False, True, None), (True, False, 200)]
    stats = transport.stats
    assert (stats.hedges, stats.hedge_wins, stats.retries) == (1, 1, 0)
    assert [(e.kind, e.attempt) for e in events] == [("hedge", 2)]
    assert response.content == b"late"  # the winner's body, read by the client
    if harness.mode == "sync":
        assert sorted(server.closed) == [1, 2]  # the loser's late answer closed unread
    else:
        assert server.cancelled == [1]  # the loser was cancelled
        assert server.closed == [2]


class Step(NamedTuple):
    """What one attempt of a gated try does: set the gate ``sets``, wait for the gate
    ``waits``, then answer ``answer(gates)``."""

    answer: Callable[[Gates], Any]
    waits: str | None = None
    sets: str | None = None


class Gates:
    """The two attempts of a hedged try put in order: each may wait until a gate is set,
    by the other attempt or by the try, which closes an answer's body once it judged it
    (:meth:`body`). Threads' events in sync mode, the event loop's in async ones (made in
    the loop, as they are first named there)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.closed: list[int] = []
        self._events: dict[str, Any] = {}

    def event(self, name: str) -> Any:
        if name not in self._events:
            self._events[name] = threading.Event() if self.mode == "sync" else anyio.Event()
        return self._events[name]

    def body(self, number: int) -> Any:
        """A body that sets the gate ``"judged <number>"`` when the try closes it."""
        return closing(self.mode, self.closed, number, self.event(f"judged {number}").set)

    def handler(self, first: Step, hedge: Step) -> Callable[..., Any]:
        """Attempt 1 takes ``first``, the hedge (attempt 2) ``hedge``."""
        def step(request: httpx.Request) -> Step:
            chosen = hedge if request.extensions.get("retry_attempt") == 2 else first
            if chosen.sets is not None:
                self.event(chosen.sets).set()
            return chosen

        def sync(request: httpx.Request) -> Any:
            chosen = step(request)
            if chosen.waits is not None:
                assert self.event(chosen.waits).wait(5.0), f"never {chosen.waits}"
            return chosen.answer(self)

        async def asynchronous(request: httpx.Request) -> Any:
            chosen = step(request)
            if chosen.waits is not None:
                await self.event(chosen.waits).wait()
            return chosen.answer(self)

        return sync if self.mode == "sync" else asynchronous


def test_a_hedges_answer_handed_over_when_retries_stop_is_a_hedge_win(
        harness: Harness) -> None:
    """The first attempt answers 503 while the hedge is out (the try waits on for the
    hedge), then the hedge answers 503 with no attempt left: retries stop, and the answer
    handed over is the hedge's: a win of the hedge's, as a success of its would be."""
    gates = Gates(harness.mode)
    handler = gates.handler(
        first=Step(lambda g: httpx.Response(503, stream=g.body(1)), waits="hedge out"),
        hedge=Step(lambda g: httpx.Response(503, stream=g.body(2)), waits="judged 1",
                   sets="hedge out"))
    transport = harness.transport(handler, hedging=rt.Hedging(DELAY), max_attempts=2)
    response = send(harness, transport)
    assert response.status_code == 503
    info = rt.retry_info(response)
    assert [(a.status, a.hedge) for a in info.history] == [(503, False), (503, True)]
    assert info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    stats = transport.stats
    assert (stats.hedges, stats.hedge_wins) == (1, 1)


def test_a_hedges_outcome_is_settled_as_its_own_attempt(harness: Harness) -> None:
    """The hedge's 503 opens the breaker while the first attempt is out: the breaker is
    told of attempt 2, the hedge, as the event says (the first then answers 200)."""
    events: list[Any] = []
    gates = Gates(harness.mode)
    handler = gates.handler(first=Step(lambda g: httpx.Response(200), waits="judged 2"),
                            hedge=Step(lambda g: httpx.Response(503, stream=g.body(2))))
    breaker = rt.CircuitBreaker(min_requests=1, clock=harness.clock)
    transport = harness.transport(handler, hedging=rt.Hedging(DELAY), breaker=breaker,
                                  hooks=events.append)
    response = send(harness, transport)
    assert response.status_code == 200
    assert [(e.kind, e.attempt) for e in events] == [("hedge", 2), ("breaker_open", 2)]
    assert [(a.status, a.hedge) for a in rt.retry_info(response).history] == [
        (200, False), (503, True)]


def test_an_answer_before_the_delay_sends_no_hedge(harness: Harness) -> None:
    server = Server(harness.mode, [200])
    transport = hedged(harness, server, hedging=rt.Hedging(60.0))
    response = send(harness, transport, server=server)
    assert len(server.seen) == 1
    assert rt.retry_info(response).hedges == 0
    assert transport.stats.hedges == 0


def test_the_policy_max_attempts_holds_in_all(harness: Harness) -> None:
    server = Server(harness.mode, [("hold", 200), ("hold", 200), 200, 200, 200])
    transport = hedged(harness, server, hedging=rt.Hedging(DELAY, max_attempts=5),
                       max_attempts=3)
    response = send(harness, transport, server=server)
    assert response.status_code == 200
    assert len(server.seen) == 3
    assert rt.retry_info(response).attempts == 3


def test_a_retryable_answer_starts_the_next_hedge_at_once(harness: Harness) -> None:
    """Attempt 1 hangs, hedge 2 answers 503: hedge 3 goes at once (two in flight again)."""
    server = Server(harness.mode, [("hold", 200), 503, 200])
    transport = hedged(harness, server)
    response = send(harness, transport, server=server)
    assert response.status_code == 200
    info = rt.retry_info(response)
    assert [(a.status, a.hedge, a.cancelled) for a in info.history] == [
        (None, False, True), (503, True, False), (200, True, False)]
    assert harness.waits == []  # no backoff: hedges are not retries
    assert 2 in server.closed  # the 503 was closed when it was judged: its connection back


def test_when_every_attempt_failed_the_retry_rules_take_over(harness: Harness) -> None:
    server = Server(harness.mode, [503, 200])
    transport = hedged(harness, server, hedging=rt.Hedging(60.0), jitter="none",
                       base_delay=0.5)
    response = send(harness, transport, server=server)
    assert response.status_code == 200
    assert harness.waits == [0.5]  # the ordinary backoff
    info = rt.retry_info(response)
    assert [(a.status, a.hedge, a.wait) for a in info.history] == [
        (503, False, 0.5), (200, False, 0.0)]
    assert server.closed == [1, 2]  # the 503 closed before the retry, then the answer


def test_an_unsafe_method_or_a_streamed_body_is_never_hedged(harness: Harness) -> None:
    server = Server(harness.mode, [("slow", 200)])
    post = hedged(harness, server)
    send(harness, post, "POST", content=b"pay")
    streamed = hedged(harness, server)
    if harness.mode == "sync":
        send(harness, streamed, "PUT", content=iter([b"one", b"shot"]))
    else:
        async def body() -> Any:
            yield b"one shot"
        send(harness, streamed, "PUT", content=body())
    assert len(server.seen) == 2  # each sent once, slow as it was
    assert post.stats.hedges == streamed.stats.hedges == 0


def test_a_post_with_an_idempotency_key_is_hedged(harness: Harness) -> None:
    server = Server(harness.mode, [("hold", 200), 201])
    transport = hedged(harness, server)
    response = send(harness, transport, "POST", server=server, json={"a": 1},
                    headers={"Idempotency-Key": "k1"})
    assert response.status_code == 201
    assert [r.headers["idempotency-key"] for r in server.seen] == ["k1", "k1"]
    assert [r.read() if harness.mode == "sync" else r.content for r in server.seen] == [
        b'{"a":1}', b'{"a":1}'] or len(server.seen) == 2


def test_an_empty_budget_sends_no_hedge(harness: Harness) -> None:
    server = Server(harness.mode, [("slow", 200), 200])
    empty = rt.RetryBudget(capacity=10, retry_cost=5)
    empty.acquire()
    empty.acquire()
    transport = hedged(harness, server, budget=empty)
    response = send(harness, transport)
    assert response.status_code == 200
    assert len(server.seen) == 1
    assert transport.stats.hedges == 0


def test_a_winning_hedge_is_refunded_as_a_successful_retry(harness: Harness) -> None:
    budget = rt.RetryBudget()
    full = budget.tokens
    server = Server(harness.mode, [("hold", 200), 200])
    send(harness, hedged(harness, server, budget=budget), server=server)
    assert len(server.seen) == 2
    assert budget.tokens == full  # the hedge's cost came back when it won


def test_a_losing_hedge_is_not_refunded(harness: Harness) -> None:
    budget = rt.RetryBudget(success_refund=0.0)
    full = budget.tokens
    server = Server(harness.mode, [("slow", 200), ("hold", 200)])
    response = send(harness, hedged(harness, server, budget=budget), server=server)
    assert rt.retry_info(response).history[0].status == 200  # the first attempt won
    assert budget.tokens == full - budget.retry_cost


def test_a_half_open_breaker_sends_no_hedge_beyond_its_probe(harness: Harness) -> None:
    breaker = rt.CircuitBreaker(min_requests=1, break_duration=1.0, clock=harness.clock)
    failing = Server(harness.mode, [503])
    send(harness, harness.transport(failing.handler(), breaker=breaker, max_attempts=1))
    harness.clock.now += 1.5  # half-open: one probe
    server = Server(harness.mode, [("slow", 200), 200])
    transport = hedged(harness, server, breaker=breaker)
    response = send(harness, transport)
    assert response.status_code == 200
    assert len(server.seen) == 1
    assert transport.stats.hedges == 0


def test_no_hedge_starts_past_the_deadline(harness: Harness) -> None:
    server = Server(harness.mode, [("slow", 200), 200])
    transport = hedged(harness, server)
    with rt.deadline(1.0, clock=harness.clock):
        harness.clock.now += 0.9995  # less than 1 ms left: the first goes, no hedge
        send(harness, transport)
    assert len(server.seen) == 1


def test_the_latency_is_recorded_and_the_percentile_delay_takes_over() -> None:
    clock = [0.0]
    table = LatencyTable(lambda: clock[0])
    hedging = rt.Hedging("p50", min_samples=3, fallback_delay=0.25)
    assert hedging.delay_for(table, "https://a:443") == 0.25
    for seconds in (0.1, 0.1, 0.1):
        table.record("https://a:443", seconds)
    assert 0.1 <= hedging.delay_for(table, "https://a:443") <= 0.11  # never short of it
    table.record("https://b:443", 0.0)
    table.record("https://b:443", 0.0)
    table.record("https://b:443", 0.0)
    assert hedging.delay_for(table, "https://b:443") == 0.001  # never below 1 ms
    assert rt.Hedging(0.2).delay_for(table, "https://a:443") == 0.2


def test_the_percentile_takes_over_as_soon_as_min_samples_are_in() -> None:
    """Every call takes 60 ms; after five answers "p50" reads 60 ms: no more hedges at the
    50 ms fallback (in virtual time)."""
    hedges: list[tuple[float, float]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        await trio.sleep(0.060)
        return httpx.Response(200)

    async def main() -> None:
        transport = rt.AsyncRetryTransport(
            httpx.MockTransport(handler), budget=None,
            hedging=rt.Hedging("p50", min_samples=5),
            hooks=lambda e: e.kind == "hedge" and hedges.append((trio.current_time(), e.wait)))
        async with trio.open_nursery() as nursery:
            for _ in range(60):  # 100 requests a second for 0.6 s
                nursery.start_soon(transport.handle_async_request,
                                   httpx.Request("GET", URL))
                await trio.sleep(0.01)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    late = [(when, wait) for when, wait in hedges if when >= 0.2]
    assert hedges  # the first ones hedge at the fallback
    assert late == []  # five latencies are in by 0.11 s: from then on, no hedge


def test_every_transport_records_latency_per_origin(harness: Harness) -> None:
    """A random eighth of the attempts, and every attempt when a percentile of them sets the
    hedging delay."""
    def handler(request: httpx.Request) -> httpx.Response:
        harness.clock.now += 0.25
        return httpx.Response(200)

    transport = harness.transport(handler)
    hedging = harness.transport(handler, hedging=rt.Hedging("p50", fallback_delay=60.0))
    for _ in range(400):
        harness.send(transport)
    for _ in range(20):
        harness.send(hedging)
    summary = transport.latency(URL)
    assert summary is not None and 25 <= summary.count <= 80  # about 400 / 8
    assert summary.p50 == pytest.approx(0.25, rel=0.05)
    assert summary.p999 == pytest.approx(0.25, rel=0.05)
    assert transport.latency("https://api.example.com:443") == summary
    assert transport.latency("https://elsewhere.example") is None
    every = hedging.latency(URL)
    assert every is not None and every.count == 20


@pytest.mark.parametrize(("kwargs", "name", "error"), [
    ({"delay": 0}, "delay", ValueError), ({"delay": -1.0}, "delay", ValueError),
    ({"delay": float("inf")}, "delay", ValueError), ({"delay": 1e10}, "delay", ValueError),
    ({"delay": 10**400}, "delay", ValueError),
    ({"delay": "p49"}, "delay", ValueError), ({"delay": "p100"}, "delay", ValueError),
    ({"delay": "p95.55"}, "delay", ValueError), ({"delay": "95"}, "delay", ValueError),
    ({"max_attempts": 1}, "max_attempts", ValueError),
    ({"max_attempts": 6}, "max_attempts", ValueError),
    ({"max_attempts": 2.0}, "max_attempts", TypeError),
    ({"fallback_delay": 0}, "fallback_delay", ValueError),
    ({"fallback_delay": 1e10}, "fallback_delay", ValueError),
    ({"min_samples": 0}, "min_samples", ValueError),
    ({"min_samples": 1.5}, "min_samples", TypeError),
])
def test_invalid_settings_name_themselves(kwargs: dict[str, Any], name: str,
                                          error: type[Exception]) -> None:
    with pytest.raises(error, match=name):
        rt.Hedging(**kwargs)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"delay": True}, "delay"), ({"delay": None}, "delay"), ({"delay": [0.1]}, "delay"),
    ({"fallback_delay": "0.05"}, "fallback_delay"), ({"fallback_delay": None}, "fallback_delay"),
])
def test_a_delay_that_is_no_number_is_a_type_error(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(TypeError, match=name):
        rt.Hedging(**kwargs)


def test_the_longest_delays_allowed_are_waited_for_as_any(harness: Harness) -> None:
    """1e9 seconds, every seconds option's bound: a worker thread's wait takes it (a lock's
    timeout refuses 1e10), and a request answered before it is handed over."""
    server = Server(harness.mode, [200])
    for hedging in (rt.Hedging(1e9), rt.Hedging("p95", fallback_delay=1e9)):
        response = send(harness, hedged(harness, server, hedging=hedging))
        assert response.status_code == 200


def test_percentiles_from_p50_to_p99_9() -> None:
    assert rt.Hedging("p50").quantile == 0.5
    assert rt.Hedging("p99.9").quantile == pytest.approx(0.999)
    assert rt.Hedging().delay == "p95"
    assert rt.Hedging(0.1) == rt.Hedging(0.1)
    with pytest.raises(TypeError, match="hedging"):
        rt.RetryTransport(hedging="p95")  # type: ignore[arg-type]


def test_close_leaves_no_worker_thread() -> None:
    release = threading.Event()
    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(1)
        if len(seen) == 1:
            release.wait(5.0)
        else:
            release.set()
        return httpx.Response(200)

    transport = rt.RetryTransport(httpx.MockTransport(handler), hedging=rt.Hedging(DELAY))
    with httpx.Client(transport=transport) as client:
        assert client.get(URL).status_code == 200
    assert not [t for t in threading.enumerate() if t.name.startswith("retry-transport-hedge")]


def test_a_transport_dropped_without_close_leaves_no_worker_thread() -> None:
    """Its idle workers stop once the transport is collected, as an executor's did."""
    import gc

    def hedge_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("retry-transport-hedge")}

    before = hedge_threads()
    transport = rt.RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)),
                                  hedging=rt.Hedging(DELAY))
    assert httpx.Client(transport=transport).get(URL).status_code == 200
    assert hedge_threads() - before  # a worker ran the attempt, and waits for the next
    del transport
    gc.collect()
    for thread in hedge_threads() - before:
        thread.join(5.0)
    assert hedge_threads() - before == set()


def test_a_throttle_may_refuse_a_hedge(harness: Harness) -> None:
    """The first attempt goes (a high draw), the hedge is refused (a low one): the request
    goes on with the attempt in flight."""
    import random

    class Draws(random.Random):
        def __init__(self) -> None:
            super().__init__(0)
            self.draws = iter([0.99, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])

        def random(self) -> float:
            return next(self.draws, 0.0)

    throttle = rt.AdaptiveThrottle(rng=Draws(), clock=harness.clock)
    for n in range(30):
        throttle.record("https://api.example.com:443", n < 10)  # probability 10/31
    server = Server(harness.mode, [("slow", 200), 200])
    transport = hedged(harness, server, throttle=throttle)
    response = send(harness, transport)
    assert response.status_code == 200
    assert len(server.seen) == 1
    assert transport.stats.hedges == 0
    assert transport.stats.throttled == 1  # refused once: no hedge tried again in the try


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt or SystemExit raised inside an attempt."""


def test_an_interrupt_in_a_worker_reaches_the_caller() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise Interrupt

    transport = rt.RetryTransport(httpx.MockTransport(handler), hedging=rt.Hedging(DELAY))
    with pytest.raises(Interrupt):
        transport.handle_request(httpx.Request("GET", URL))
    transport.close()


@pytest.fixture
def thread_deaths(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What ``threading.excepthook`` is given while the test runs: each exception that
    ended a thread."""
    died: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    return died


@pytest.mark.parametrize("where", ["the delay's end", "a hedge sent", "a dressed hedge sent"])
def test_a_sync_request_interrupted_leaves_no_answer_open(
        where: str, thread_deaths: list[Any]) -> None:
    """An interrupt on the caller's thread (as a signal handler's exception is raised) at
    the end of the hedging delay, before a try takes the first attempt over (the caller's
    first reading of the clock: a transport times one attempt in eight, not the first), or
    once a hedge is sent (its ``hedge`` event), of a quick request or of one that is not
    plain (a deadline): every answer that comes after it is closed, no worker dies, and
    the transport hedges again. (A first request, answered at once, opens the transport's
    quick path: its first request goes by a call.)"""
    server = Server("sync", [200, ("hold", 200), ("hold", 200), 200, 200])
    caller = threading.current_thread()
    armed = threading.Event()

    def clock() -> float:
        if where == "the delay's end" and armed.is_set() and threading.current_thread() is caller:
            armed.clear()
            raise Interrupt
        return 1000.0

    def hook(event: Any) -> None:
        if where != "the delay's end" and event.kind == "hedge" and armed.is_set():
            armed.clear()
            raise Interrupt

    transport = rt.RetryTransport(httpx.MockTransport(server.handler()), clock=clock,
                                  hedging=rt.Hedging(DELAY), hooks=[hook])
    transport.handle_request(httpx.Request("GET", URL)).close()
    armed.set()
    with pytest.raises(Interrupt):
        if where == "a dressed hedge sent":
            with rt.deadline(60.0):
                transport.handle_request(httpx.Request("GET", URL))
        else:
            transport.handle_request(httpx.Request("GET", URL))
    server.release.set()  # the held attempts answer now, to no one
    response = transport.handle_request(httpx.Request("GET", URL))
    assert response.status_code == 200
    response.close()
    transport.close()  # waits for the workers
    sent = len(server.seen)  # the first, the interrupted request's attempts, the next one's
    assert sent == (3 if where == "the delay's end" else 4)
    assert sorted(server.closed) == list(range(1, sent + 1))
    assert thread_deaths == []


@pytest.mark.parametrize("where,line", [
    ("submit", "jobs.put((copy_context(), fn, arg, inbox, tag))"),
    ("_new", "thread.start()"),
])
def test_close_returns_after_an_interrupt_as_an_attempt_was_handed_to_a_worker(
        where: str, line: str) -> None:
    """An interrupt (a signal handler's exception) may land between any two lines of the
    caller's thread: one that lands as a hedged request's first attempt is handed to an
    idle worker (taken from the idle list, given nothing), or as a new worker's thread
    starts, leaves no worker that ``close()`` waits for in vain."""
    import inspect
    import sys
    import types

    from retry_transport._io import hedge_workers as _hedge_workers

    function = getattr(_hedge_workers.Workers, where)
    source, first = inspect.getsourcelines(function)
    target = first + next(n for n, text in enumerate(source) if text.strip() == line)
    code = function.__code__
    armed = [line == "thread.start()"]  # a new worker's start: the first request's

    def local(frame: types.FrameType, event: str, arg: object) -> Any:
        if event == "line" and frame.f_lineno == target and armed[0]:
            armed[0] = False
            raise Interrupt
        return local

    def tracer(frame: types.FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code is code else None

    transport = rt.RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)),
                                  hedging=rt.Hedging(DELAY))
    with httpx.Client(transport=transport) as client:
        if not armed[0]:
            assert client.get(URL).status_code == 200  # a worker, idle once it is done
            armed[0] = True
        sys.settrace(tracer)
        try:
            with pytest.raises(Interrupt):
                client.get(URL)
        finally:
            sys.settrace(None)
        assert not armed[0]
        closing = threading.Thread(target=transport.close, daemon=True)
        closing.start()
        closing.join(5.0)  # a safety net: a worker waiting for nothing would hold it for good
        assert not closing.is_alive()
    assert not [t for t in threading.enumerate()
                if t.name.startswith("retry-transport-hedge") and t.is_alive()]


def test_with_every_worker_busy_a_request_goes_unhedged_on_its_own_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from retry_transport._io import hedge_workers as _hedge_workers

    threads: list[threading.Thread] = []

    def handler(request: httpx.Request) -> httpx.Response:
        threads.append(threading.current_thread())
        return httpx.Response(200)

    monkeypatch.setattr(_hedge_workers, "HEDGE_WORKERS", 0)
    transport = rt.RetryTransport(httpx.MockTransport(handler), hedging=rt.Hedging(DELAY))
    response = transport.handle_request(httpx.Request("GET", URL))
    assert response.status_code == 200
    assert threads == [threading.current_thread()]  # no queue: sent here, at once
    transport.close()


def test_with_one_worker_no_hedge_waits_for_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from retry_transport._io import hedge_workers as _hedge_workers

    seen: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(1)
        threading.Event().wait(SLOW)  # several hedging delays
        return httpx.Response(200)

    monkeypatch.setattr(_hedge_workers, "HEDGE_WORKERS", 1)
    transport = rt.RetryTransport(httpx.MockTransport(handler), hedging=rt.Hedging(DELAY))
    assert transport.handle_request(httpx.Request("GET", URL)).status_code == 200
    assert seen == [1] and transport.stats.hedges == 0
    transport.close()


def test_a_closed_transports_tries_start_no_more_attempts() -> None:
    from retry_transport._io.hedge_workers import Workers

    workers = Workers()
    generation = workers.generation
    worker = workers.reserve(generation)
    assert worker is not None
    workers.release(worker)
    workers.close()
    assert workers.reserve(generation) is None  # a try begun before close()
    fresh = workers.reserve(workers.generation)  # a request made after it
    assert fresh is not None
    workers.release(fresh)
    workers.close()


def test_a_worker_reserved_as_the_transport_closes_is_given_nothing_after_it() -> None:
    """A worker taken just before ``close()`` stopped it: the job handed to it afterwards is
    taken back (the caller is told), never left in its queue unrun."""
    from retry_transport._io.hedge_sync import Inbox
    from retry_transport._io.hedge_workers import Workers

    workers = Workers()
    worker = workers.reserve(workers.generation)
    assert worker is not None
    workers.close()  # the worker is told to stop, and has stopped
    ran: list[int] = []
    inbox = Inbox()
    inbox.over, inbox.call, inbox.first = False, None, None
    assert not workers.submit(ran.append, 1, inbox, None, worker)
    assert ran == [] and worker.jobs.empty() and inbox.empty()


#: Where the caller's cancellation comes in a hedged request (the first attempt holds until
#: the point says otherwise): while the first is out, before its delay; once the hedge is
#: sent; as the hedge answers; as the first answers, the hedge out; as the first is
#: cancelled because the hedge won.
CANCEL_POINTS = ["first out", "hedge sent", "hedge answered", "first answered",
                 "first cancelled"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("point", CANCEL_POINTS)
def test_an_async_request_cancelled_closes_every_answer_and_frees_its_probes(
        backend: str, point: str) -> None:
    """The caller's scope is cancelled at ``point`` of a quick hedged request, and of one
    whose attempts are a half-open breaker's two probes: every answer is closed, by the
    transport or the client, and both probe slots come back (the next request is admitted
    and hedged)."""
    created: list[int] = []
    closed: list[int] = []

    class Body(httpx.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, number: int) -> None:
            self.number = number

        async def __aiter__(self) -> Any:
            yield b"x"

        async def aclose(self) -> None:
            closed.append(self.number)

    def answer() -> httpx.Response:
        created.append(len(created) + 1)
        return httpx.Response(200, stream=Body(len(created)))

    async def cancelled(**kwargs: Any) -> list[int]:
        """The request cancelled at ``point``, then the next one: its attempts."""
        scope = anyio.CancelScope()
        hedge_out = anyio.Event()
        then: list[int] = []

        async def handler(request: httpx.Request) -> httpx.Response:
            hedge = request.extensions.get("retry_attempt") == 2
            if scope.cancelled_caught:  # the next request: a slow first and a hedge
                then.append(1)
                if not hedge:
                    await anyio.sleep(SLOW)
                return answer()
            if not hedge:
                if point == "first out":
                    scope.cancel()
                if point == "first answered":
                    await hedge_out.wait()
                    scope.cancel()
                    return answer()
                try:
                    await anyio.sleep(3600)
                except anyio.get_cancelled_exc_class():
                    if point == "first cancelled":
                        scope.cancel()
                    raise
            hedge_out.set()
            if point in ("hedge sent", "hedge answered"):
                scope.cancel()
            if point in ("hedge sent", "first answered"):
                await anyio.sleep(3600)
            return answer()

        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler),
                                           hedging=rt.Hedging(DELAY), budget=None, **kwargs)
        async with httpx.AsyncClient(transport=transport) as client:
            with scope:
                await client.get(URL)
            assert scope.cancelled_caught
            response = await client.get(URL)
            assert response.status_code == 200
        return then

    async def main() -> None:
        now = [1000.0]
        breaker = rt.CircuitBreaker(min_requests=1, break_duration=1.0, half_open_probes=2,
                                    clock=lambda: now[0])
        failing = rt.AsyncRetryTransport(httpx.MockTransport(lambda _: httpx.Response(503)),
                                         breaker=breaker, max_attempts=1)
        await failing.handle_async_request(httpx.Request("GET", URL))
        now[0] += 1.5  # half-open: two probes
        assert await cancelled() == [1, 1]
        assert await cancelled(breaker=breaker) == [1, 1]  # both admitted: no slot kept

    if backend == "trio":
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    else:
        anyio.run(main, backend="asyncio")
    assert created and sorted(closed) == sorted(created)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_hedge_that_leaves_the_pool_as_it_is_cancelled_is_no_hedge(backend: str) -> None:
    """httpx's own transport (a pool that traces each request): the hedge waits for a
    connection while the first attempt is on the wire; the first answers, the race is over,
    and the hedge is handed its connection just as it is cancelled (a pool's hand-over
    completes before the cancellation is seen at the next checkpoint): it reports being on
    the wire after the race. It is no hedge for ``RetryInfo``, nor for the stats, the hook
    events or the budget."""
    waiting = anyio.Event()

    class Pool(httpx.AsyncHTTPTransport):  # type: ignore[name-defined,misc]
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            trace = request.extensions["trace"]
            if request.extensions.get("retry_attempt") != 2:  # the first: a connection
                await trace("connection.connect_tcp.started", {})
                await waiting.wait()
                return httpx.Response(200)
            waiting.set()
            try:
                await anyio.sleep(3600)  # every connection is busy
            except anyio.get_cancelled_exc_class():
                await trace("connection.connect_tcp.started", {})  # handed one, cancelled
                raise
            raise AssertionError("the hedge got a connection")

    events: list[Any] = []

    async def main() -> None:
        budget = rt.RetryBudget()
        transport = rt.AsyncRetryTransport(Pool(), hedging=rt.Hedging(DELAY), budget=budget,
                                           hooks=events.append)
        async with httpx.AsyncClient(transport=transport) as client:
            response = await client.get(URL)
        assert waiting.is_set()  # the hedge went to the pool
        info = rt.retry_info(response)
        assert info is not None and info.hedges == 0
        assert [(a.hedge, a.cancelled) for a in info.history] == [(False, False)]
        assert transport.stats.hedges == 0
        assert [event.kind for event in events] == []
        assert budget.tokens == budget.capacity

    if backend == "trio":
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    else:
        anyio.run(main, backend="asyncio")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_cancelled_after_the_winner_came_the_winner_is_closed(backend: str) -> None:
    import anyio

    closed: list[str] = []

    class Body(httpx.AsyncByteStream):  # type: ignore[name-defined,misc]
        async def __aiter__(self) -> Any:
            yield b"x"

        async def aclose(self) -> None:
            closed.append("winner")

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.extensions.get("retry_attempt") is None:  # the first: slow, and its
            try:                                             # cleanup takes a while
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(0.2)
                raise
        return httpx.Response(200, stream=Body())

    async def main() -> None:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler),
                                           hedging=rt.Hedging(0.05), budget=None)
        with anyio.move_on_after(0.15) as scope:  # while the loser cleans up
            await transport.handle_async_request(httpx.Request("GET", URL))
        assert scope.cancelled_caught

    if backend == "trio":
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    else:
        anyio.run(main, backend="asyncio")
    assert closed == ["winner"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_deadline_spent_in_a_hold_raises_deadline_exceeded_itself(backend: str) -> None:
    """Not inside an exception group: the try's first check runs before its task group."""
    import anyio

    now = [0.0]

    async def oversleep(seconds: float) -> None:
        now[0] += seconds + 0.5  # the hold's wait overran

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": "1"})

    async def main() -> None:
        transport = rt.AsyncRetryTransport(
            httpx.MockTransport(handler), hedging=rt.Hedging(0.01), clock=lambda: now[0],
            sleep=oversleep, max_attempts=1, wallclock=lambda: 1e9)
        await transport.handle_async_request(httpx.Request("GET", URL))  # a 1 s cooldown
        with rt.deadline(1.3, clock=lambda: now[0]), pytest.raises(rt.DeadlineExceeded):
            await transport.handle_async_request(httpx.Request("GET", URL))

    anyio.run(main, backend=backend)


def test_on_asyncio_an_answer_before_the_delay_runs_in_the_callers_task() -> None:
    """No task is started for a hedged request that is answered before its delay."""
    import asyncio

    seen: list[tuple[object, int]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append((asyncio.current_task(), len(asyncio.all_tasks())))
        return httpx.Response(200)

    async def main() -> None:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler),
                                           hedging=rt.Hedging(5.0))
        for _ in range(3):
            response = await transport.handle_async_request(httpx.Request("GET", URL))
            assert response.status_code == 200
        assert seen == [(asyncio.current_task(), 1)] * 3

    asyncio.run(main())


def test_on_asyncio_a_winning_hedge_ends_the_callers_wait_and_takes_its_cancel_back() -> None:
    """The first attempt, awaited in the caller's task, is cancelled when a hedge wins; the
    caller gets the hedge's answer and no cancellation is left pending on its task."""
    import asyncio

    async def main() -> None:
        cancelled: list[bool] = []
        hold = asyncio.Event()

        async def handler(request: httpx.Request) -> httpx.Response:
            if request.extensions.get("retry_attempt") is None:
                try:
                    await hold.wait()  # never set: only a cancellation ends it
                except asyncio.CancelledError:
                    cancelled.append(True)
                    raise
            return httpx.Response(200 if request.extensions.get("retry_attempt") else 500)

        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler),
                                           hedging=rt.Hedging(DELAY), budget=None)
        response = await transport.handle_async_request(httpx.Request("GET", URL))
        assert response.status_code == 200
        assert rt.retry_info(response).hedges == 1
        assert cancelled == [True]
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        await asyncio.sleep(0)  # nothing left to cancel this task

    asyncio.run(main())
