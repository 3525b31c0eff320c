"""The ambient deadline: ``retry_transport.deadline(seconds)`` bounds every request made
inside it, and ``deadline_header`` sends the time left downstream."""

from __future__ import annotations

import asyncio
import contextvars
import math
import pickle
import threading
from typing import Any

import anyio
import pytest

import retry_transport
from tests.flavour import httpx, rt
from tests.harness import FakeClock, Harness

pytestmark = pytest.mark.usefixtures("flavour")

HEADER = "x-request-deadline-ms"


def recorder(harness: Harness, outcomes: list[Any], spend: float = 0.0
             ) -> tuple[Any, list[httpx.Request]]:
    """A handler answering ``outcomes`` in turn (the last one for ever), each attempt taking
    ``spend`` virtual seconds; it records what it was sent, headers and timeouts."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(httpx.Request(request.method, request.url, headers=request.headers,
                                  extensions=dict(request.extensions)))
        harness.clock.now += spend
        outcome = outcomes[min(len(seen), len(outcomes)) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return httpx.Response(outcome)

    return handler, seen


# -- the scope -------------------------------------------------------------------------------


def test_time_left_outside_every_scope_is_none() -> None:
    assert rt.time_left() is None


def test_nested_scopes_only_shorten() -> None:
    clock = FakeClock()
    with rt.deadline(5.0, clock=clock):
        assert rt.time_left() == 5.0
        with rt.deadline(2.0, clock=clock):
            assert rt.time_left() == 2.0
            clock.now += 0.5
            with rt.deadline(10.0, clock=clock):  # cannot lengthen the outer 1.5 s
                assert rt.time_left() == pytest.approx(1.5)
        assert rt.time_left() == pytest.approx(4.5)
    assert rt.time_left() is None


def test_scopes_on_different_clocks_each_count_on_their_own() -> None:
    slow, fast = FakeClock(), FakeClock(start=50.0)
    with rt.deadline(3.0, clock=slow), rt.deadline(5.0, clock=fast):
        assert rt.time_left() == 3.0
        fast.now += 4.5  # only the inner scope's clock moved
        assert rt.time_left() == pytest.approx(0.5)
        slow.now += 2.9
        assert rt.time_left() == pytest.approx(0.1)


def test_a_scope_starts_when_entered_and_never_reads_negative() -> None:
    clock = FakeClock()
    scope = rt.deadline(1.0, clock=clock)
    clock.now += 100.0  # made early, entered late
    with scope:
        assert rt.time_left() == 1.0
        clock.now += 3.0
        assert rt.time_left() == 0.0
    with scope:  # entered again: from the start again
        assert rt.time_left() == 1.0


@pytest.mark.parametrize(("seconds", "error"), [
    (0, ValueError), (-1, ValueError), (math.inf, ValueError), (math.nan, ValueError),
    (True, TypeError), ("1", TypeError), (None, TypeError), (1e12, ValueError),
])
def test_seconds_must_be_a_finite_positive_number(seconds: Any, error: type[Exception]) -> None:
    """A wrong number is a ValueError, no number at all (a bool, a string, None) a
    TypeError."""
    with pytest.raises(error, match="seconds"):
        rt.deadline(seconds)


def test_one_object_serves_several_threads_at_once() -> None:
    """Each block is its own scope in its own context: no thread undoes another's, and
    none keeps a deadline once its block is over."""
    shared = rt.deadline(30.0)
    inside = threading.Barrier(4)
    seen: list[tuple[float | None, float | None]] = []

    def work() -> None:
        with shared:
            inside.wait(5)  # all four inside at once
            during = rt.time_left()
            inside.wait(5)
        seen.append((during, rt.time_left()))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(seen) == 4
    assert all(during is not None and during > 29 and after is None for during, after in seen)


@pytest.mark.anyio
async def test_one_object_serves_several_tasks_at_once(anyio_backend: str) -> None:
    shared = rt.deadline(30.0)
    after: list[float | None] = []
    first_in, second_in, first_out = anyio.Event(), anyio.Event(), anyio.Event()

    async def first() -> None:
        with shared:
            first_in.set()
            await second_in.wait()  # both inside; this one leaves first
        after.append(rt.time_left())
        first_out.set()

    async def second() -> None:
        await first_in.wait()
        with shared:
            second_in.set()
            await first_out.wait()
            assert rt.time_left() is not None  # the other's exit left this one alone
        after.append(rt.time_left())

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        group.start_soon(second)
    assert after == [None, None]
    with shared, shared:  # nested: the outer still holds after the inner
        pass
    assert rt.time_left() is None


def test_clock_must_be_callable() -> None:
    with pytest.raises(TypeError, match="clock"):
        rt.deadline(1.0, clock=5)  # type: ignore[arg-type]


def test_the_default_clock_is_monotonic() -> None:
    with rt.deadline(30.0):
        left = rt.time_left()
    assert left is not None and 29.0 < left <= 30.0


def test_both_faces_export_the_same_objects() -> None:
    assert rt.deadline is retry_transport.deadline
    assert rt.time_left is retry_transport.time_left
    assert {"deadline", "time_left", "DeadlineExceeded"} <= set(rt.__all__)


# -- where the scope reaches -----------------------------------------------------------------


@pytest.mark.anyio
async def test_it_follows_tasks_and_worker_threads(anyio_backend: str) -> None:
    seen: dict[str, float | None] = {}

    async def task(name: str) -> None:
        seen[name] = rt.time_left()

    with rt.deadline(60.0):
        async with anyio.create_task_group() as group:
            group.start_soon(task, "task")
        seen["to_thread"] = await anyio.to_thread.run_sync(rt.time_left)
        if anyio_backend == "asyncio":
            seen["asyncio.to_thread"] = await asyncio.to_thread(rt.time_left)
            seen["create_task"] = await asyncio.create_task(_left())
    assert seen and all(value is not None and value > 59 for value in seen.values()), seen


async def _left() -> float | None:
    return rt.time_left()


def test_a_plain_thread_does_not_inherit_it() -> None:
    seen: list[float | None] = []
    with rt.deadline(60.0):
        thread = threading.Thread(target=lambda: seen.append(rt.time_left()))
        thread.start()
        thread.join(5)
        # ... unless it is given the context to run in
        context = contextvars.copy_context()
        thread = threading.Thread(target=lambda: seen.append(context.run(rt.time_left)))
        thread.start()
        thread.join(5)
    assert seen[0] is None
    assert seen[1] is not None and seen[1] > 59


# -- a transport under an ambient deadline -----------------------------------------------------


def test_the_ambient_deadline_clips_every_attempts_timeouts(harness: Harness) -> None:
    handler, seen = recorder(harness, [503, 200], spend=0.5)
    transport = harness.transport(handler, jitter="none", base_delay=0.25)
    with rt.deadline(3.0, clock=harness.clock):
        response = harness.send(transport, timeout=10.0)
    assert response.status_code == 200
    assert [r.extensions["timeout"]["read"] for r in seen] == pytest.approx([3.0, 2.25])


def test_the_earlier_of_the_policy_and_the_ambient_deadline_wins(harness: Harness) -> None:
    handler, seen = recorder(harness, [200])
    shorter_policy = harness.transport(handler, deadline=1.0)
    with rt.deadline(4.0, clock=harness.clock):
        harness.send(shorter_policy, timeout=10.0)
        harness.send(harness.transport(handler, deadline=9.0), timeout=10.0)
    assert [r.extensions["timeout"]["read"] for r in seen] == [1.0, 4.0]


def test_a_wait_past_the_ambient_deadline_stops_the_retries(harness: Harness) -> None:
    handler, seen = recorder(harness, [503], spend=0.3)
    transport = harness.transport(handler, jitter="none", base_delay=0.5, max_attempts=10)
    with rt.deadline(1.0, clock=harness.clock):
        response = harness.send(transport)
    info = rt.retry_info(response)
    assert response.status_code == 503
    assert info.stop_reason is rt.StopReason.DEADLINE
    # attempt 1 over at 0.3; a wait of 0.5; attempt 2 at 0.8 (0.2 s left), over at 1.1;
    # the next wait (1.0 s) is not slept
    assert [r.extensions["timeout"]["read"] for r in seen] == pytest.approx([1.0, 0.2])
    assert info.history[-1].refused_wait == 1.0


def test_the_scope_is_measured_on_its_own_clock(harness: Harness) -> None:
    """The transport's clock stands still; the scope's clock runs out: no attempt is sent."""
    scope_clock = FakeClock()
    handler, seen = recorder(harness, [200])
    transport = harness.transport(handler)
    with rt.deadline(1.0, clock=scope_clock):
        scope_clock.now += 1.5
        with pytest.raises(rt.DeadlineExceeded):
            harness.send(transport)
    assert seen == []


def test_a_passed_deadline_sends_nothing(harness: Harness) -> None:
    handler, seen = recorder(harness, [200])
    transport = harness.transport(handler)
    with rt.deadline(1.0, clock=harness.clock):
        harness.clock.now += 1.0
        with pytest.raises(rt.DeadlineExceeded) as caught:
            harness.send(transport)
    assert seen == []
    error = caught.value
    assert isinstance(error, httpx.TimeoutException)
    info = rt.retry_info(error)
    assert info is not None
    assert (info.attempts, info.retries, info.stop_reason) == (0, 0, rt.StopReason.DEADLINE)
    assert info.history == ()
    assert transport.stats.gave_up == {rt.StopReason.DEADLINE: 1}
    assert transport.stats.requests == 1


def test_the_deadline_is_checked_before_the_breaker_and_the_cooldowns(harness: Harness) -> None:
    handler, seen = recorder(harness, [503])
    breaker = rt.CircuitBreaker(min_requests=1, clock=harness.clock)
    transport = harness.transport(handler, breaker=breaker, max_attempts=1)
    harness.send(transport)  # the breaker opens
    with pytest.raises(rt.CircuitOpenError):
        harness.send(transport)
    with rt.deadline(1.0, clock=harness.clock):
        harness.clock.now += 2.0
        with pytest.raises(rt.DeadlineExceeded):
            harness.send(transport)
    assert len(seen) == 1


def test_a_cooldown_longer_than_the_ambient_time_left_is_refused(harness: Harness) -> None:
    handler, seen = recorder(harness, [200])
    responses = iter([httpx.Response(503, headers={"Retry-After": "5"})])

    def first_503(request: httpx.Request) -> httpx.Response:
        return next(responses, None) or handler(request)

    transport = harness.transport(first_503, max_attempts=1)
    harness.send(transport)  # the origin asks for 5 s of quiet
    with rt.deadline(2.0, clock=harness.clock), pytest.raises(rt.CooldownError) as caught:
        harness.send(transport)
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.DEADLINE  # type: ignore[union-attr]
    assert seen == []


def test_requests_with_retries_disabled_get_it_too(harness: Harness) -> None:
    handler, seen = recorder(harness, [200])
    transport = harness.transport(handler, deadline_header=HEADER)
    with rt.deadline(2.0, clock=harness.clock):
        harness.send(transport, extensions={"retry": False}, timeout=10.0)
    assert seen[0].extensions["timeout"]["read"] == 2.0
    assert seen[0].headers[HEADER] == "2000"


# -- the header ------------------------------------------------------------------------------


def test_each_attempt_carries_the_milliseconds_left(harness: Harness) -> None:
    handler, seen = recorder(harness, [503, 503, 200], spend=0.1234)
    transport = harness.transport(handler, deadline_header=HEADER, jitter="none",
                                  base_delay=0.25)
    with rt.deadline(3.0, clock=harness.clock):
        harness.send(transport)
    # 3.0; then 3.0 - 0.1234 - 0.25; then that - 0.1234 - 0.5 (rounded down)
    assert [r.headers[HEADER] for r in seen] == ["3000", "2626", "2003"]


def test_the_policy_deadline_alone_sends_the_header(harness: Harness) -> None:
    handler, seen = recorder(harness, [200])
    harness.send(harness.transport(handler, deadline_header=HEADER, deadline=1.5))
    assert seen[0].headers[HEADER] == "1500"


def test_without_a_deadline_the_callers_header_is_left_alone(harness: Harness) -> None:
    handler, seen = recorder(harness, [200, 200])
    transport = harness.transport(handler, deadline_header=HEADER)
    harness.send(transport)
    harness.send(transport, headers={HEADER: "999"})
    assert HEADER not in seen[0].headers
    assert seen[1].headers[HEADER] == "999"
    with rt.deadline(0.5, clock=harness.clock):
        harness.send(transport, headers={HEADER: "999"})  # a deadline: replaced
    assert seen[2].headers.get_list(HEADER) == ["500"]


def test_a_first_attempt_that_would_carry_zero_is_not_sent(harness: Harness) -> None:
    handler, seen = recorder(harness, [200])
    transport = harness.transport(handler, deadline_header=HEADER)
    with rt.deadline(1.0, clock=harness.clock):
        harness.clock.now += 0.9995
        with pytest.raises(rt.DeadlineExceeded):
            harness.send(transport)
    assert seen == []
    # without the header, the same half millisecond is still tried
    with rt.deadline(1.0, clock=harness.clock):
        harness.clock.now += 0.9995
        harness.send(harness.transport(handler))
    assert len(seen) == 1


def test_a_retry_that_would_carry_zero_is_not_waited_for(harness: Harness) -> None:
    """The last response comes back, stop reason deadline, rather than a retry with 0 ms."""
    handler, seen = recorder(harness, [503], spend=0.0)
    transport = harness.transport(handler, deadline_header=HEADER, jitter="none",
                                  base_delay=0.5, max_attempts=5)
    with rt.deadline(0.5005, clock=harness.clock):
        response = harness.send(transport)
    assert [r.headers[HEADER] for r in seen] == ["500"]  # a wait of 0.5 would leave 0.5 ms
    assert response.status_code == 503
    info = rt.retry_info(response)
    assert info.stop_reason is rt.StopReason.DEADLINE
    assert info.history[-1].refused_wait == 0.5


def test_a_retry_whose_time_ran_out_while_waiting_is_not_sent(harness: Harness) -> None:
    """The sleep overran the deadline: the retry is not sent, and the budget gets back what
    the retry cost."""
    handler, seen = recorder(harness, [503])
    budget = rt.RetryBudget()
    tokens = budget.tokens

    def oversleep(seconds: float) -> None:
        harness.clock.sleep(seconds + 1.0)

    async def aoversleep(seconds: float) -> None:
        oversleep(seconds)

    transport = harness.transport(handler, jitter="none", base_delay=0.1, budget=budget,
                                  sleep=oversleep if harness.mode == "sync" else aoversleep)
    with rt.deadline(0.5, clock=harness.clock), pytest.raises(rt.DeadlineExceeded) as caught:
        harness.send(transport)
    assert len(seen) == 1
    info = rt.retry_info(caught.value)
    assert info is not None and info.stop_reason is rt.StopReason.DEADLINE
    assert (info.attempts, [a.status for a in info.history]) == (1, [503])
    assert budget.tokens == tokens


@pytest.mark.parametrize(("bad", "error"), [
    ("a b", ValueError), ("", ValueError), ("Content-Length", ValueError), ("Host", ValueError),
    (5, TypeError),
])
def test_the_header_must_be_a_name_of_its_own(bad: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="deadline_header"):
        rt.RetryTransport(deadline_header=bad)


def test_the_header_is_not_the_idempotency_or_attempt_header() -> None:
    with pytest.raises(ValueError, match="deadline_header"):
        rt.RetryTransport(deadline_header="idempotency-key")
    with pytest.raises(ValueError, match="deadline_header"):
        rt.AsyncRetryTransport(deadline_header="X-Try", attempt_header="x-try")


def test_the_error_pickles() -> None:
    request = httpx.Request("GET", "https://api.example.com/")
    error = rt.DeadlineExceeded("not sent", request=request)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is rt.DeadlineExceeded
    assert str(copy) == "not sent"
    assert copy.request.url == request.url
