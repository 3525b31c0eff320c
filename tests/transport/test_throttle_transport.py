"""An AdaptiveThrottle through the transports: refusals before anything is sent, what is
counted, the error and the metadata, stats, events and logs, testing mode."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

import retry_transport
from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.locks import CountingLock
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

ORIGIN = "https://api.example.com:443"


class Below(random.Random):
    """Every draw is 0.0: any probability above 0 refuses."""

    def __init__(self) -> None:
        super().__init__(0)
        self.draws = 0

    def random(self) -> float:
        self.draws += 1
        return 0.0


def loaded(harness: Harness, requests: int, accepts: int, **kwargs: Any) -> Any:
    """A throttle whose origin has ``requests`` outcomes, ``accepts`` of them accepted."""
    throttle = rt.AdaptiveThrottle(rng=Below(), clock=harness.clock, **kwargs)
    for n in range(requests):
        throttle.record(ORIGIN, n < accepts)
    return throttle


def answering(*statuses: int) -> tuple[Any, list[Any]]:
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(statuses[min(len(seen), len(statuses)) - 1])

    return handler, seen


def test_a_refused_first_attempt_sends_nothing(harness: Harness) -> None:
    events: list[Any] = []
    own: list[Any] = []
    throttle = rt.AdaptiveThrottle(rng=Below(), clock=harness.clock, hooks=own.append)
    for n in range(100):
        throttle.record(ORIGIN, n < 20)
    handler, seen = answering(200)
    budget = rt.RetryBudget()
    tokens = budget.tokens
    transport = harness.transport(handler, throttle=throttle, hooks=events.append,
                                  budget=budget)
    with pytest.raises(rt.ThrottledError) as caught:
        harness.send(transport)
    error = caught.value
    assert seen == []
    assert isinstance(error, httpx.TransportError)
    assert error.origin == ORIGIN
    assert error.probability == 60 / 101
    info = rt.retry_info(error)
    assert info is not None
    assert (info.attempts, info.stop_reason) == (0, rt.StopReason.THROTTLED)
    assert throttle.counts(ORIGIN) == (101, 20)  # the refusal counts as a request
    assert transport.stats.throttled == 1
    assert transport.stats.gave_up == {rt.StopReason.THROTTLED: 1}
    assert budget.tokens == tokens  # no token spent
    for received in (events, own):
        throttled = [e for e in received if e.kind == "throttled"]
        assert [(e.attempt, e.stop_reason) for e in throttled] == [
            (1, rt.StopReason.THROTTLED)]


def test_nothing_is_refused_while_accepts_keep_up(harness: Harness) -> None:
    throttle = loaded(harness, 40, 20)  # exactly k * accepts: probability 0
    handler, seen = answering(200)
    transport = harness.transport(handler, throttle=throttle)
    harness.send(transport)
    assert len(seen) == 1
    assert throttle.rng.draws == 0  # type: ignore[attr-defined]
    assert throttle.counts(ORIGIN) == (41, 21)


def test_a_refused_retry_returns_the_last_response(harness: Harness) -> None:
    throttle = loaded(harness, 40, 20)  # the first goes; its 503 tips the balance
    handler, seen = answering(503, 200)
    budget = rt.RetryBudget()
    tokens = budget.tokens
    transport = harness.transport(handler, throttle=throttle, budget=budget)
    response = harness.send(transport)
    assert response.status_code == 503
    assert len(seen) == 1
    info = rt.retry_info(response)
    assert (info.attempts, info.stop_reason) == (1, rt.StopReason.THROTTLED)
    assert budget.tokens == tokens  # judged before the budget was asked
    assert harness.waits == []  # nobody waited for a retry that was refused
    assert transport.stats.throttled == 1


def test_requests_with_retries_disabled_are_judged_too(harness: Harness) -> None:
    handler, seen = answering(200)
    transport = harness.transport(handler, throttle=loaded(harness, 100, 0))
    with pytest.raises(rt.ThrottledError):
        harness.send(transport, extensions={"retry": False})
    assert seen == []


@table(("status", "accepted"), [(200, True), (404, True), (500, True), (429, False),
                                (503, False)])
def test_what_an_answer_counts(harness: Harness, status: int, accepted: bool) -> None:
    throttle = rt.AdaptiveThrottle(clock=harness.clock)
    handler, _ = answering(status)
    harness.send(harness.transport(handler, throttle=throttle, max_attempts=1))
    assert throttle.counts(ORIGIN) == (1, int(accepted))


def test_a_transient_error_is_a_request_without_accept(harness: Harness) -> None:
    throttle = rt.AdaptiveThrottle(clock=harness.clock)

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(httpx.ConnectError):
        harness.send(harness.transport(handler, throttle=throttle, max_attempts=2,
                                       jitter="none"))
    assert throttle.counts(ORIGIN) == (2, 0)


def test_the_clients_own_pool_timeouts_are_not_counted(harness: Harness) -> None:
    """A PoolTimeout never reached the origin and says nothing of it: neither a request nor
    an accept, so a burst of them cannot make the throttle refuse what follows."""
    throttle = rt.AdaptiveThrottle(rng=Below(), clock=harness.clock)
    calls: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) <= 6:
            raise httpx.PoolTimeout("pool full", request=request)
        return httpx.Response(200)

    transport = harness.transport(handler, throttle=throttle, budget=None)
    for _ in range(2):
        with pytest.raises(httpx.PoolTimeout):
            harness.send(transport)
    assert len(calls) == 6
    assert throttle.counts(ORIGIN) == (0, 0)
    assert harness.send(transport).status_code == 200
    assert throttle.counts(ORIGIN) == (1, 1)
    assert transport.stats.throttled == 0


def test_a_shared_throttle_counts_every_transport(harness: Harness) -> None:
    throttle = rt.AdaptiveThrottle(clock=harness.clock)
    handler, _ = answering(200)
    for _ in range(2):
        harness.send(harness.transport(handler, throttle=throttle))
    assert throttle.counts(ORIGIN) == (2, 2)
    assert throttle.probability(ORIGIN) == 0.0


def test_an_origin_tipped_over_through_one_transport_is_judged_by_every_other(
        harness: Harness) -> None:
    """Each transport sends first attempts without asking while no origin could refuse
    one: an origin tipped over by another transport's answers ends that for all."""
    throttle = rt.AdaptiveThrottle(rng=Below(), clock=harness.clock)
    calm, _ = answering(200)
    busy, _ = answering(503)
    mine = harness.transport(calm, throttle=throttle, max_attempts=1)
    theirs = harness.transport(busy, throttle=throttle, max_attempts=1)
    assert harness.send(mine).status_code == 200
    for _ in range(2):
        assert harness.send(theirs).status_code == 503  # 3 requests > 2 * 1 accept
    with pytest.raises(rt.ThrottledError):
        harness.send(mine)
    late = harness.transport(calm, throttle=throttle)  # made while the origin is over
    with pytest.raises(rt.ThrottledError):
        harness.send(late)


def test_successes_are_counted_without_the_throttles_lock(harness: Harness) -> None:
    """What the throttle adds to a success while no origin could refuse: a count without
    its lock, in the counts at the next read."""
    throttle = rt.AdaptiveThrottle(clock=harness.clock)
    handler, _ = answering(200)
    transport = harness.transport(handler, throttle=throttle)
    harness.send(transport)  # the origin's first count makes its entry, under the lock
    lock = CountingLock()
    throttle._lock = lock
    for _ in range(5):
        harness.send(transport)
    assert lock.taken == 0
    assert throttle.counts(ORIGIN) == (6, 6)


def test_testing_mode_turns_throttles_off_or_forces_them(harness: Harness) -> None:
    handler, seen = answering(200)
    transport = harness.transport(handler, throttle=loaded(harness, 100, 0))
    with retry_transport.testing.retry_testing(throttles="off"):
        harness.send(transport)
    assert len(seen) == 1
    calm = harness.transport(handler, throttle=rt.AdaptiveThrottle(clock=harness.clock))
    with retry_transport.testing.retry_testing(throttles=1.0), \
            pytest.raises(rt.ThrottledError) as caught:
        harness.send(calm)
    assert caught.value.probability == 1.0
    assert len(seen) == 1


@pytest.mark.parametrize("bad", ["sometimes", -0.1, 1.5, True])
def test_testing_mode_checks_throttles(bad: Any) -> None:
    with pytest.raises(ValueError, match="throttles"), \
            retry_transport.testing.retry_testing(throttles=bad):
        pass


def test_refusals_are_logged_once_per_origin(harness: Harness,
                                              caplog: pytest.LogCaptureFixture) -> None:
    handler, _ = answering(200)
    transport = harness.transport(handler, throttle=loaded(harness, 100, 0))
    with caplog.at_level(logging.DEBUG, logger="retry_transport"):
        for _ in range(5):
            with pytest.raises(rt.ThrottledError):
                harness.send(transport)
    lines = [r for r in caplog.records if "throttled" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.WARNING
    assert transport.stats.throttled == 5


def test_the_throttle_must_be_one() -> None:
    with pytest.raises(TypeError, match="throttle"):
        rt.RetryTransport(throttle=object())  # type: ignore[arg-type]


def test_the_error_pickles() -> None:
    import pickle

    request = httpx.Request("GET", "https://api.example.com/")
    error = rt.ThrottledError("refused", origin=ORIGIN, probability=0.5, request=request)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.origin, copy.probability, str(copy)) == (
        rt.ThrottledError, ORIGIN, 0.5, "refused")


def test_first_attempts_go_without_asking_until_an_origin_tips_over(
        harness: Harness) -> None:
    throttle = rt.AdaptiveThrottle(rng=Below(), clock=harness.clock)
    handler, seen = answering(200, 200, 200, 503, 503, 503, 503, 200)
    transport = harness.transport(handler, throttle=throttle, max_attempts=1)
    for _ in range(7):
        harness.send(transport)
    assert throttle.counts(ORIGIN) == (7, 3)  # each counted, plain or not
    assert throttle.rng.draws == 0  # type: ignore[attr-defined]
    assert throttle.hot == 1  # 7 > 2 * 3: the next attempt is asked, and refused
    with pytest.raises(rt.ThrottledError):
        harness.send(transport)
    assert len(seen) == 7
