"""The circuit breaker through the transports: both flavours, sync and async (asyncio and
trio), in virtual time; a table of values runs its first row so and its other rows sync
(``tests.tables``). The breaker shares the harness's FakeClock with the transport."""

from __future__ import annotations

import logging
import pickle
import ssl
import threading
from typing import Any

import anyio
import pytest
import trio
import trio.testing
from trio.testing import MockClock

from retry_transport.testing import retry_testing
from tests.flavour import httpx, rt
from tests.harness import FakeClock, Harness
from tests.locks import CountingLock
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://api.example.com/items"
ORIGIN = "https://api.example.com:443"


class Server:
    """A handler whose answer can be changed mid-test: a status, or an exception class
    (raised fresh for every attempt). Counts the attempts that reached it."""

    def __init__(self, outcome: int | type[BaseException] = 200) -> None:
        self.outcome = outcome
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        outcome = self.outcome
        if isinstance(outcome, int):
            return httpx.Response(outcome)
        if issubclass(outcome, httpx.TransportError):
            raise outcome("boom", request=request)
        raise outcome()


def make_breaker(harness: Harness, **kwargs: Any) -> rt.CircuitBreaker:
    kwargs.setdefault("min_requests", 3)
    kwargs.setdefault("failure_ratio", 0.5)
    kwargs.setdefault("window", 30.0)
    kwargs.setdefault("break_duration", 5.0)
    kwargs.setdefault("max_break_duration", 60.0)
    return rt.CircuitBreaker(clock=harness.clock, **kwargs)


def trip(harness: Harness, transport: Any, server: Server, breaker: rt.CircuitBreaker) -> None:
    """Open the breaker with 500s (a failure the policy does not retry: no waits, no logs)."""
    server.outcome = 500
    for _ in range(breaker.min_requests):
        assert harness.send(transport).status_code == 500
    assert breaker.state(URL) == "open"


def refused(harness: Harness, transport: Any, **kwargs: Any) -> Any:
    with pytest.raises(rt.CircuitOpenError) as caught:
        harness.send(transport, **kwargs)
    return caught.value


def send_any(harness: Harness, transport: Any, **kwargs: Any) -> httpx.Response:
    """Send through a sync or an async transport whatever the harness's mode (an async one
    runs on asyncio under the sync harness)."""
    if isinstance(transport, rt.RetryTransport) or harness.mode != "sync":
        return harness.send(transport, **kwargs)
    return Harness("asyncio").send(transport, **kwargs)


# -- what counts as a failure ------------------------------------------------------------


FAILURES: list[Any] = [503, 500, 502, 504, 429, 408, 501, 599,
                       "ConnectError", "ReadTimeout", "ConnectTimeout", "ReadError",
                       "RemoteProtocolError"]


@table("outcome", FAILURES)
def test_failures_open_the_breaker(harness: Harness, outcome: Any) -> None:
    """Statuses >= 500 or in retry_statuses and transient transport errors are failures."""
    outcome = getattr(httpx, outcome) if isinstance(outcome, str) else outcome
    server = Server(outcome)
    breaker = make_breaker(harness, min_requests=3, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker, max_attempts=1)
    for i in range(3):
        assert breaker.state(URL) == "closed", i
        if isinstance(outcome, int):
            assert harness.send(transport).status_code == outcome
        else:
            with pytest.raises(outcome):
                harness.send(transport)
    assert breaker.state(URL) == "open"
    assert server.calls == 3
    refused(harness, transport)
    assert server.calls == 3


def test_a_status_in_custom_retry_statuses_is_a_failure(harness: Harness) -> None:
    server = Server(409)
    breaker = make_breaker(harness, min_requests=2, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker, max_attempts=1,
                                  retry_statuses={409})
    harness.send(transport)
    harness.send(transport)
    assert breaker.state(URL) == "open"


@table("status", [404, 401, 400, 403, 409, 422, 200, 201, 204, 302])
def test_healthy_answers_never_open_it(harness: Harness, status: int) -> None:
    server = Server(status)
    breaker = make_breaker(harness, min_requests=3, failure_ratio=0.5)
    transport = harness.transport(server, breaker=breaker)
    for _ in range(30):
        assert harness.send(transport, follow_redirects=False).status_code == status
    assert breaker.state(URL) == "closed"
    assert server.calls == 30


@table("status", [404, 401])
def test_healthy_answers_count_as_outcomes(harness: Harness, status: int) -> None:
    """3 healthy + 1 failure is 0.25 (closed); 2 healthy + 2 failures is 0.5 (open)."""
    server = Server(status)
    low = make_breaker(harness, min_requests=4, failure_ratio=0.5)
    transport = harness.transport(server, breaker=low, max_attempts=1)
    for _ in range(3):
        harness.send(transport)
    server.outcome = 503
    harness.send(transport)
    assert low.state(URL) == "closed"

    server.outcome = status
    high = make_breaker(harness, min_requests=4, failure_ratio=0.5)
    transport = harness.transport(server, breaker=high, max_attempts=1)
    for _ in range(2):
        harness.send(transport)
    server.outcome = 503
    harness.send(transport)
    assert high.state(URL) == "closed"
    harness.send(transport)
    assert high.state(URL) == "open"


def test_every_attempt_counts_retries_included(harness: Harness) -> None:
    """One request of three 503 attempts fills a window of min_requests=3."""
    server = Server(503)
    breaker = make_breaker(harness, min_requests=3, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker, max_attempts=3, budget=None)
    response = harness.send(transport)
    assert response.status_code == 503 and server.calls == 3
    assert breaker.state(URL) == "open"
    assert rt.retry_info(response).stop_reason is rt.StopReason.MAX_ATTEMPTS


def test_errors_that_say_nothing_of_health_count_nothing(harness: Harness) -> None:
    """A non-transient error (UnsupportedProtocol, a certificate that failed verification,
    a bug in an inner transport) is no verdict either way."""
    calls = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        calls[0] += 1
        kind = calls[0] % 3
        if kind == 0:
            raise httpx.UnsupportedProtocol("nope", request=request)
        if kind == 1:
            try:
                raise ssl.SSLCertVerificationError("certificate verify failed")
            except ssl.SSLCertVerificationError as exc:
                raise httpx.ConnectError("tls", request=request) from exc
        raise RuntimeError("a bug")

    breaker = make_breaker(harness, min_requests=1, failure_ratio=1.0)
    transport = harness.transport(handler, breaker=breaker)
    for _ in range(9):
        with pytest.raises((httpx.TransportError, RuntimeError)):
            harness.send(transport)
    assert calls[0] == 9
    assert breaker.state(URL) == "closed"
    entry = breaker._origins.get(ORIGIN)
    assert entry is None or entry.outcomes == 0


def test_the_clients_own_pool_timeouts_are_no_verdict(harness: Harness) -> None:
    """A PoolTimeout says the client's own pool was full, not that the origin is unhealthy:
    retried as ever (nothing was sent), it never counts, so a burst of them leaves the
    breaker closed and the next requests go through."""
    server = Server(httpx.PoolTimeout)
    breaker = make_breaker(harness, min_requests=3, failure_ratio=0.5)
    transport = harness.transport(server, breaker=breaker, budget=None)
    for _ in range(3):
        with pytest.raises(httpx.PoolTimeout) as caught:
            harness.send(transport, method="POST", content=b"x")
        info = rt.retry_info(caught.value)
        assert (info.attempts, info.stop_reason) == (3, rt.StopReason.MAX_ATTEMPTS)
    assert server.calls == 9
    assert breaker.state(URL) == "closed"
    entry = breaker._origins.get(ORIGIN)
    assert entry is None or entry.outcomes == 0
    server.outcome = 200
    assert harness.send(transport).status_code == 200


# -- open: refused without I/O ----------------------------------------------------------


def test_open_refuses_without_reaching_the_handler(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    assert server.calls == 3
    error = refused(harness, transport)
    assert server.calls == 3
    assert isinstance(error, rt.CircuitOpenError)
    assert isinstance(error, httpx.TransportError)  # the flavour's own
    assert not isinstance(error, rt.CooldownError)
    assert error.origin == ORIGIN
    assert error.remaining == 5.0
    assert ORIGIN in str(error) and "circuit breaker open" in str(error)
    assert "not sent" in str(error)
    assert error.request.url == httpx.URL(URL)
    info = rt.retry_info(error)
    assert info is not None
    assert (info.attempts, info.retries, info.history, info.total_wait) == (0, 0, (), 0.0)
    assert info.stop_reason is rt.StopReason.CIRCUIT_OPEN
    harness.clock.now += 2.0
    assert refused(harness, transport).remaining == 3.0
    assert server.calls == 3
    assert harness.waits == []
    stats = transport.stats
    assert stats.requests == 5
    assert stats.gave_up.get(rt.StopReason.CIRCUIT_OPEN) == 2


def test_the_breaker_is_per_origin(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    server.outcome = 200
    assert harness.send(transport, url="https://other.example.com/").status_code == 200
    assert harness.send(transport, url="http://api.example.com/").status_code == 200
    assert harness.send(transport, url="https://api.example.com:8443/").status_code == 200
    error = refused(harness, transport, url="https://api.example.com:443/other?q=1")
    assert error.origin == ORIGIN


def test_one_hosts_origins_stay_apart_whatever_the_order(harness: Harness) -> None:
    """A host called at several origins (another scheme, another port), in turns: each
    request is judged by its own origin's breaker, however the last one was spelt."""
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    server.outcome = 200
    for _ in range(2):
        for url in ("http://api.example.com/", "https://api.example.com:8443/",
                    "http://api.example.com:443/"):
            assert harness.send(transport, url=url).status_code == 200
        assert refused(harness, transport).origin == ORIGIN
    assert breaker.state("http://api.example.com:443") == "closed"


def test_ipv6_origin(harness: Harness) -> None:
    server = Server(500)
    breaker = make_breaker(harness, min_requests=1, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker)
    harness.send(transport, url="http://[::1]:8080/x")
    assert breaker.state("http://[::1]:8080") == "open"
    assert refused(harness, transport, url="http://[::1]:8080/y").origin == "http://[::1]:8080"


@table("override", [False, {"max_attempts": 1}, {"deadline": 100.0}])
def test_requests_with_retries_off_are_refused_too(harness: Harness, override: Any) -> None:
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    error = refused(harness, transport, extensions={"retry": override})
    assert rt.retry_info(error).stop_reason is rt.StopReason.CIRCUIT_OPEN
    assert server.calls == 3


def test_requests_with_retries_off_count(harness: Harness) -> None:
    """The breaker protects the dependency, not the retry loop."""
    server = Server(503)
    breaker = make_breaker(harness, min_requests=3, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker)
    for _ in range(3):
        response = harness.send(transport, extensions={"retry": False})
        assert rt.retry_info(response).stop_reason is rt.StopReason.DISABLED
    assert server.calls == 3
    assert breaker.state(URL) == "open"


def test_unsafe_methods_count_and_are_refused(harness: Harness) -> None:
    server = Server(503)
    breaker = make_breaker(harness, min_requests=2, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker)
    harness.send(transport, method="POST", content=b"x")
    harness.send(transport, method="POST", content=b"x")
    assert breaker.state(URL) == "open"
    refused(harness, transport, method="POST", content=b"x")
    assert server.calls == 2


def test_circuit_open_error_pickles() -> None:
    import copy

    error = rt.CircuitOpenError("open", origin="https://a:443", remaining=3.0,
                                request=httpx.Request("GET", "https://a/"))
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert type(clone) is rt.CircuitOpenError
        assert (str(clone), clone.origin, clone.remaining) == ("open", "https://a:443", 3.0)


# -- the decision order ------------------------------------------------------------------


def test_own_failures_open_it_and_stop_with_circuit_open(harness: Harness) -> None:
    """The attempt that opens the breaker is the last: the response is handed over with stop
    reason circuit_open, and the refused retry takes no budget tokens."""
    server = Server(503)
    budget = rt.RetryBudget(capacity=100, retry_cost=5)
    events: list[rt.RetryEvent] = []
    breaker = make_breaker(harness, min_requests=2, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker, budget=budget, max_attempts=5,
                                  jitter="none", base_delay=1.0, hooks=events.append)
    response = harness.send(transport)
    assert response.status_code == 503
    assert server.calls == 2
    info = rt.retry_info(response)
    assert info is not None
    assert info.stop_reason is rt.StopReason.CIRCUIT_OPEN
    assert (info.attempts, info.retries) == (2, 1)
    assert [a.status for a in info.history] == [503, 503]
    assert [a.wait for a in info.history] == [1.0, 0.0]
    assert harness.waits == [1.0]
    assert budget.tokens == 95  # the first retry was paid for, the refused one not
    opened = [e for e in events if e.kind == "breaker_open"]
    assert [(e.attempt, e.status, e.wait) for e in opened] == [(2, 503, 5.0)]
    assert transport.stats.gave_up == {rt.StopReason.CIRCUIT_OPEN: 1}


def test_own_errors_open_it_and_the_last_error_is_raised(harness: Harness) -> None:
    server = Server(httpx.ConnectError)
    budget = rt.RetryBudget(capacity=100, retry_cost=5)
    breaker = make_breaker(harness, min_requests=3, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker, budget=budget, max_attempts=10)
    with pytest.raises(httpx.ConnectError) as caught:
        harness.send(transport)
    assert not isinstance(caught.value, rt.CircuitOpenError)
    assert server.calls == 3
    info = rt.retry_info(caught.value)
    assert info is not None and info.stop_reason is rt.StopReason.CIRCUIT_OPEN
    assert (info.attempts, info.retries) == (3, 2)
    assert [a.error for a in info.history] == ["ConnectError"] * 3
    assert budget.tokens == 90


def test_circuit_open_is_checked_before_an_empty_budget(harness: Harness) -> None:
    server = Server(503)
    budget = rt.RetryBudget(capacity=5, retry_cost=5, timeout_retry_cost=5)
    breaker = make_breaker(harness, min_requests=2, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker, budget=budget, max_attempts=5)
    response = harness.send(transport)
    assert budget.tokens == 0
    assert rt.retry_info(response).stop_reason is rt.StopReason.CIRCUIT_OPEN


@table(
    ("kwargs", "headers", "reason"),
    [
        ({"max_attempts": 2}, {}, "max_attempts"),
        ({"max_attempts": 5, "max_retry_after": 10.0}, {"Retry-After": "60"},
         "retry_after_too_long"),
        ({"max_attempts": 5, "deadline": 1.5, "jitter": "none", "base_delay": 1.0}, {},
         "deadline"),
    ],
)
def test_earlier_rules_win_over_circuit_open(
    harness: Harness, kwargs: dict[str, Any], headers: dict[str, str], reason: str
) -> None:
    """max_attempts, Retry-After too long and the deadline are checked before the breaker."""
    calls = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        calls[0] += 1
        return httpx.Response(503, headers=headers if calls[0] == 2 else {})

    budget = rt.RetryBudget(capacity=100, retry_cost=5)
    breaker = make_breaker(harness, min_requests=2, failure_ratio=1.0)
    transport = harness.transport(handler, breaker=breaker, budget=budget, cooldown=False,
                                  **kwargs)
    response = harness.send(transport)
    assert calls[0] == 2
    assert breaker.state(URL) == "open"
    assert rt.retry_info(response).stop_reason.value == reason
    assert budget.tokens == 95


def test_the_breaker_opening_during_the_wait_stops_the_next_attempt(harness: Harness) -> None:
    """Request A's retry waits; meanwhile other requests (a second transport sharing the
    breaker) open it: A's next attempt is not sent, CircuitOpenError carries A's story."""
    server = Server(503)
    breaker = make_breaker(harness, min_requests=3, failure_ratio=1.0)
    others = Server(500)
    other = rt.RetryTransport(httpx.MockTransport(others), breaker=breaker,
                              clock=harness.clock, sleep=harness.clock.sleep)

    def flood() -> None:
        with httpx.Client(transport=other) as client:
            for _ in range(2):
                assert client.get(URL).status_code == 500

    def sleep(seconds: float) -> None:
        harness.clock.sleep(seconds)
        flood()

    async def asleep(seconds: float) -> None:
        sleep(seconds)

    events: list[rt.RetryEvent] = []
    budget = rt.RetryBudget(capacity=100, retry_cost=5)
    transport = harness.transport(server, breaker=breaker, budget=budget, hooks=events.append,
                                  max_attempts=5, jitter="none", base_delay=2.0,
                                  sleep=sleep if harness.mode == "sync" else asleep)
    error = refused(harness, transport)
    assert server.calls == 1 and others.calls == 2
    assert error.origin == ORIGIN and error.remaining == 5.0
    info = rt.retry_info(error)
    assert info is not None
    assert info.stop_reason is rt.StopReason.CIRCUIT_OPEN
    # The retry that was waited for is reported (as the stats count it), though not sent.
    assert (info.attempts, info.retries, info.total_wait) == (1, 1, 2.0)
    assert [(a.status, a.wait) for a in info.history] == [(503, 2.0)]
    assert harness.waits == [2.0]
    assert any("refused" in note for note in getattr(error, "__notes__", []))
    assert budget.tokens == 100  # the retry was paid for, then not sent: its tokens are back
    # A's transport saw its retry and its give-up; the opening was the other transport's.
    assert [e.kind for e in events] == ["retry", "give_up"]
    assert events[-1].stop_reason is rt.StopReason.CIRCUIT_OPEN
    stats = transport.stats
    assert (stats.requests, stats.retries) == (1, 1)
    assert stats.gave_up == {rt.StopReason.CIRCUIT_OPEN: 1}


# -- half-open ---------------------------------------------------------------------------


def test_probe_success_closes(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    harness.clock.now += 4.999
    refused(harness, transport)
    harness.clock.now += 0.001
    assert breaker.state(URL) == "half_open"
    server.outcome = 404  # a healthy answer
    response = harness.send(transport)
    assert response.status_code == 404 and server.calls == 4
    assert breaker.state(URL) == "closed"
    server.outcome = 200
    for _ in range(5):
        assert harness.send(transport).status_code == 200
    assert server.calls == 9


def test_probe_failure_reopens_for_twice_the_break(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness, break_duration=5.0, max_break_duration=15.0)
    transport = harness.transport(server, breaker=breaker, max_attempts=3)
    trip(harness, transport, server, breaker)
    for expected in (10.0, 15.0, 15.0):
        harness.clock.now += refused(harness, transport).remaining
        server.outcome = 503
        calls = server.calls
        response = harness.send(transport)  # the probe fails: no retry, it is open again
        assert server.calls == calls + 1
        info = rt.retry_info(response)
        assert info.stop_reason is rt.StopReason.CIRCUIT_OPEN and info.attempts == 1
        assert breaker.state(URL) == "open"
        assert refused(harness, transport).remaining == expected
    harness.clock.now += 15.0
    server.outcome = 200
    assert harness.send(transport).status_code == 200
    assert breaker.state(URL) == "closed"
    trip(harness, transport, server, breaker)
    assert refused(harness, transport).remaining == 5.0  # back to break_duration


def test_a_probe_error_reopens_and_is_raised(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    harness.clock.now += 5.0
    server.outcome = httpx.ReadTimeout
    with pytest.raises(httpx.ReadTimeout) as caught:
        harness.send(transport)
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.CIRCUIT_OPEN
    assert refused(harness, transport).remaining == 10.0


def test_half_open_with_the_probe_slot_taken_refuses_with_zero_remaining(
    harness: Harness,
) -> None:
    """While one probe is in flight (sent from inside another request's attempt), others
    are refused with remaining 0.0."""
    server = Server()
    breaker = make_breaker(harness)
    inner_errors: list[BaseException] = []
    probe_transport: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        server.calls += 1
        if request.url.path == "/probe":
            with pytest.raises(rt.CircuitOpenError) as caught:
                with httpx.Client(transport=probe_transport[0]) as client:
                    client.get(URL)
            inner_errors.append(caught.value)
            return httpx.Response(200)
        return httpx.Response(server.outcome)  # type: ignore[arg-type]

    transport = harness.transport(handler, breaker=breaker)
    probe_transport.append(rt.RetryTransport(httpx.MockTransport(handler), breaker=breaker,
                                             clock=harness.clock))
    trip(harness, transport, server, breaker)
    harness.clock.now += 5.0
    assert harness.send(transport, url="https://api.example.com/probe").status_code == 200
    assert len(inner_errors) == 1
    assert inner_errors[0].remaining == 0.0
    assert "every probe slot taken" in str(inner_errors[0])
    assert breaker.state(URL) == "closed"


def test_a_probe_without_a_verdict_frees_its_slot(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    harness.clock.now += 5.0
    server.outcome = httpx.UnsupportedProtocol
    for _ in range(3):  # each one a probe: the slot came back every time
        with pytest.raises(httpx.UnsupportedProtocol):
            harness.send(transport)
    assert server.calls == 6
    assert breaker.state(URL) == "half_open"
    server.outcome = 200
    assert harness.send(transport).status_code == 200
    assert breaker.state(URL) == "closed"


def test_a_probe_ending_in_a_pool_timeout_frees_its_slot(harness: Harness) -> None:
    """A probe whose attempts wait in vain for the client's own pool gives its slot back
    without a verdict: the breaker stays half-open, and the next probe decides."""
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    harness.clock.now += 5.0
    server.outcome = httpx.PoolTimeout
    for _ in range(2):  # every attempt a probe: the slot came back each time
        with pytest.raises(httpx.PoolTimeout):
            harness.send(transport)
    assert server.calls == 3 + 2 * 3
    assert breaker.state(URL) == "half_open"
    server.outcome = 200
    assert harness.send(transport).status_code == 200
    assert breaker.state(URL) == "closed"


def test_a_probe_refused_by_a_cooldown_frees_its_slot(harness: Harness) -> None:
    """A request admitted as the probe that the origin's cooldown then refuses
    (CooldownError before anything is sent) gives the slot back."""
    server = Server()
    breaker = make_breaker(harness, min_requests=3, failure_ratio=1.0)

    def handler(request: httpx.Request) -> httpx.Response:
        server.calls += 1
        return httpx.Response(503, headers={"Retry-After": "30"})

    transport = harness.transport(handler, breaker=breaker, max_attempts=1)
    harness.send(transport)  # a 30 s cooldown, and one failure
    breaker.record(ORIGIN, True, False)
    breaker.record(ORIGIN, True, False)
    assert breaker.state(URL) == "open"
    harness.clock.now += 5.0
    with pytest.raises(rt.CooldownError):
        harness.send(transport, extensions={"retry": {"max_retry_after": 10}})
    assert server.calls == 1
    assert breaker.state(URL) == "half_open"
    assert slots(breaker) == 1  # the slot is free


def test_an_interrupted_probe_frees_its_slot() -> None:
    """KeyboardInterrupt mid-probe (sync): the next request goes as the probe."""
    clock = FakeClock()
    server = Server()
    breaker = rt.CircuitBreaker(min_requests=1, failure_ratio=1.0, clock=clock)
    transport = rt.RetryTransport(httpx.MockTransport(server), breaker=breaker, clock=clock,
                                  sleep=clock.sleep)
    client = httpx.Client(transport=transport)
    server.outcome = 500
    client.get(URL)
    clock.now += 5.0
    server.outcome = KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        client.get(URL)
    assert breaker.state(URL) == "half_open"
    server.outcome = 200
    assert client.get(URL).status_code == 200
    assert breaker.state(URL) == "closed"
    assert server.calls == 3


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_cancelled_probe_frees_its_slot(backend: str) -> None:
    """A probe cancelled mid-attempt (anyio cancel scope) gives its slot back."""
    clock = FakeClock()
    breaker = rt.CircuitBreaker(min_requests=1, failure_ratio=1.0, clock=clock)
    calls: list[str] = []

    async def main() -> None:
        entered = anyio.Event()

        async def handler(request: httpx.Request) -> httpx.Response:
            calls.append(request.url.path)
            if request.url.path == "/hang":
                entered.set()
                await anyio.sleep_forever()
            return httpx.Response(500 if request.url.path == "/fail" else 200)

        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), breaker=breaker,
                                           clock=clock, sleep=clock.asleep)
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get("https://api.example.com/fail")
            assert breaker.state(URL) == "open"
            clock.now += 5.0
            async with anyio.create_task_group() as group:
                group.start_soon(client.get, "https://api.example.com/hang")
                await entered.wait()
                # the probe is in flight: its slot is taken
                with pytest.raises(rt.CircuitOpenError) as caught:
                    await client.get("https://api.example.com/other")
                assert caught.value.remaining == 0.0
                group.cancel_scope.cancel()
            assert breaker.state(URL) == "half_open"
            response = await client.get("https://api.example.com/ok")  # the next probe
            assert response.status_code == 200
            assert breaker.state(URL) == "closed"

    anyio.run(main, backend=backend)
    assert calls == ["/fail", "/hang", "/ok"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_probe_that_outlives_its_half_open_period_frees_no_newer_slot(backend: str) -> None:
    """Probe 1 hangs; probe 2 fails and reopens the breaker; after the new break, probes 3
    and 4 fill the new period's two slots. Probe 1 then ends without a verdict: the slot it
    frees is of a period that is over, so a fifth request is still refused (never more than
    half_open_probes in flight)."""
    clock = FakeClock()
    breaker = rt.CircuitBreaker(min_requests=1, failure_ratio=1.0, half_open_probes=2,
                                clock=clock)
    calls: list[str] = []
    done: set[str] = set()
    counts = {"refused": 0}

    async def main() -> None:
        gate1, gate2 = anyio.Event(), anyio.Event()
        inside: dict[str, anyio.Event] = {p: anyio.Event() for p in ("/p1", "/p3", "/p4")}

        async def handler(request: httpx.Request) -> httpx.Response:
            path = request.url.path
            calls.append(path)
            if path in inside:
                inside[path].set()
            if path == "/p1":
                await gate1.wait()
                raise httpx.UnsupportedProtocol("no verdict", request=request)
            if path in ("/p3", "/p4"):
                await gate2.wait()
                return httpx.Response(200)
            return httpx.Response(503 if path == "/p2" else 500 if path == "/fail" else 200)

        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), breaker=breaker,
                                           clock=clock, sleep=clock.asleep)
        async with httpx.AsyncClient(transport=transport) as client:

            async def get(path: str) -> None:
                try:
                    await client.get(f"https://api.example.com{path}")
                except httpx.UnsupportedProtocol:
                    pass
                finally:
                    done.add(path)

            await client.get("https://api.example.com/fail")
            clock.now += 5.0
            async with anyio.create_task_group() as group:
                group.start_soon(get, "/p1")
                await inside["/p1"].wait()
                response = await client.get("https://api.example.com/p2")  # reopens, 10 s
                assert rt.retry_info(response).stop_reason is rt.StopReason.CIRCUIT_OPEN
                assert breaker.state(URL) == "open"
                clock.now += 10.0
                async with anyio.create_task_group() as later:
                    later.start_soon(get, "/p3")
                    later.start_soon(get, "/p4")
                    await inside["/p3"].wait()
                    await inside["/p4"].wait()
                    gate1.set()  # probe 1 ends now, without a verdict
                    while "/p1" not in done:
                        await anyio.sleep(0)
                    try:
                        await client.get("https://api.example.com/p5")
                    except rt.CircuitOpenError as exc:
                        counts["refused"] += 1
                        assert exc.remaining == 0.0
                    gate2.set()
            assert breaker.state(URL) == "closed"

    anyio.run(main, backend=backend)
    assert "/p5" not in calls, calls
    assert counts["refused"] == 1
    assert sorted(calls) == ["/fail", "/p1", "/p2", "/p3", "/p4"]


# -- events and logs ---------------------------------------------------------------------


def test_events_reach_the_transports_and_the_breakers_hooks(harness: Harness) -> None:
    server = Server()
    breaker_events: list[rt.RetryEvent] = []
    transport_events: list[rt.RetryEvent] = []
    breaker = make_breaker(harness, hooks=breaker_events.append)
    transport = harness.transport(server, breaker=breaker, hooks=transport_events.append,
                                  max_attempts=1)
    trip(harness, transport, server, breaker)
    for _ in range(5):
        refused(harness, transport)
    harness.clock.now += 5.0
    server.outcome = 503
    harness.send(transport, url="https://api.example.com/probe?secret=1")  # reopens, 10 s
    harness.clock.now += 10.0
    server.outcome = 200
    harness.send(transport)
    kinds = [e.kind for e in breaker_events]
    assert kinds == ["breaker_open", "breaker_half_open", "breaker_open",
                     "breaker_half_open", "breaker_close"]
    breaker_kinds = {"breaker_open", "breaker_half_open", "breaker_close"}
    assert [e for e in transport_events if e.kind in breaker_kinds] == breaker_events
    first_open, half_open, reopen, _, close = breaker_events
    assert (first_open.wait, first_open.status, first_open.method) == (5.0, 500, "GET")
    assert first_open.url == URL and first_open.attempt == 1
    assert (half_open.wait, half_open.status) == (0.0, None)
    assert (reopen.wait, reopen.status) == (10.0, 503)
    assert reopen.url == "https://api.example.com/probe"  # no query string
    assert (close.wait, close.status) == (0.0, 200)
    assert all(e.stop_reason is None for e in breaker_events)


def test_an_opening_error_is_named_in_the_event(harness: Harness) -> None:
    events: list[rt.RetryEvent] = []
    server = Server(httpx.ConnectError)
    breaker = make_breaker(harness, min_requests=1, failure_ratio=1.0, hooks=events.append)
    transport = harness.transport(server, breaker=breaker, max_attempts=1)
    with pytest.raises(httpx.ConnectError):
        harness.send(transport)
    assert [(e.kind, e.status, e.error, e.wait) for e in events] == [
        ("breaker_open", None, "ConnectError", 5.0)
    ]


def test_a_hook_that_raises_breaks_nothing(harness: Harness, caplog: Any) -> None:
    def bad(event: rt.RetryEvent) -> None:
        raise RuntimeError("hook bug")

    server = Server()
    breaker = make_breaker(harness, hooks=bad)
    transport = harness.transport(server, breaker=breaker, hooks=bad)
    trip(harness, transport, server, breaker)
    refused(harness, transport)
    assert "hook" in caplog.text.lower()


def test_one_log_line_per_transition_not_per_refused_request(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """One WARNING when it opens, one INFO when it goes half-open and one when it closes,
    even with 50 requests refused in between."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    trip(harness, transport, server, breaker)
    for i in range(50):
        refused(harness, transport, url=f"https://api.example.com/items/{i}")
        harness.clock.now += 0.05
    harness.clock.now += 5.0
    server.outcome = 200
    harness.send(transport)
    records = [r for r in caplog.records if r.name == "retry_transport"]
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    infos = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert warnings == [
        f"Circuit breaker opened for {ORIGIN} after 500: no request is sent for 5.000 s"
    ], warnings
    assert infos == [
        f"Circuit breaker half-open for {ORIGIN}: sending a probe",
        f"Circuit breaker closed for {ORIGIN}: it answered a probe",
    ], infos
    assert not [r for r in records if r.levelno > logging.WARNING]


# -- one breaker, several transports -----------------------------------------------------


def test_shared_by_a_sync_and_an_async_transport(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness)
    mine = harness.transport(server, breaker=breaker)
    other_harness = Harness("asyncio" if harness.mode == "sync" else "sync")
    other_harness.clock = harness.clock
    theirs = other_harness.transport(server, breaker=breaker)
    assert type(mine) is not type(theirs)
    trip(harness, mine, server, breaker)
    with pytest.raises(rt.CircuitOpenError):
        send_any(other_harness, theirs)
    harness.clock.now += 5.0
    server.outcome = 200
    assert send_any(other_harness, theirs).status_code == 200  # the other one probes
    assert breaker.state(URL) == "closed"
    assert harness.send(mine).status_code == 200
    server.outcome = 503  # a fresh window: 1 success, then 2 failures is 2 / 3
    for _ in range(2):
        send_any(other_harness, theirs, extensions={"retry": False})
    assert breaker.state(URL) == "open"
    refused(harness, mine)
    assert server.calls == 3 + 1 + 1 + 2


def test_successes_of_a_closed_breaker_are_counted_without_its_lock(
        harness: Harness) -> None:
    """What a closed breaker adds to a success: a count without its lock, in the window
    at the next outcome (3 successes, then 3 failures: 3 of 6 opens it, not before)."""
    server = Server()
    breaker = make_breaker(harness, min_requests=6)
    transport = harness.transport(server, breaker=breaker)
    harness.send(transport)  # the origin's first outcome makes its entry, under the lock
    lock = CountingLock()
    breaker._lock = lock  # type: ignore[assignment]
    for _ in range(2):
        harness.send(transport)
    assert lock.taken == 0
    server.outcome = 500
    for _ in range(2):
        harness.send(transport)
    assert breaker.state(URL) == "closed"
    harness.send(transport)
    assert breaker.state(URL) == "open"


# -- testing mode ------------------------------------------------------------------------


def test_testing_mode_open_refuses_every_request(harness: Harness) -> None:
    """retry_testing(breakers="open"): the fallback path, without tripping anything."""
    server = Server()
    breaker = make_breaker(harness, break_duration=7.0)
    transport = harness.transport(server, breaker=breaker)
    plain = harness.transport(server)  # no breaker: nothing to refuse
    with retry_testing(breakers="open"):
        for extensions in ({}, {"retry": False}):
            error = refused(harness, transport, extensions=extensions)
            assert isinstance(error, httpx.TransportError)
            assert error.origin == ORIGIN and error.remaining == 7.0
            info = rt.retry_info(error)
            assert info.stop_reason is rt.StopReason.CIRCUIT_OPEN and info.attempts == 0
        refused(harness, transport, url="https://elsewhere.example.com/")
        assert harness.send(plain).status_code == 200
    assert server.calls == 1
    assert breaker.state(URL) == "closed"
    assert harness.send(transport).status_code == 200


def test_testing_mode_off_lets_requests_through_and_counts_nothing(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness, min_requests=1, failure_ratio=1.0)
    transport = harness.transport(server, breaker=breaker, max_attempts=1)
    with retry_testing(breakers="off"):
        server.outcome = 503
        for _ in range(5):
            assert harness.send(transport).status_code == 503
        assert breaker.state(URL) == "closed"
    assert breaker._origins == {}  # nothing was counted
    server.outcome = 500
    harness.send(transport)
    assert breaker.state(URL) == "open"
    with retry_testing(breakers="off"):
        server.outcome = 200
        assert harness.send(transport).status_code == 200  # through the open breaker
        server.outcome = 503
        assert harness.send(transport).status_code == 503
    assert breaker.state(URL) == "open"
    assert refused(harness, transport).remaining == 5.0  # the break is untouched
    assert server.calls == 5 + 1 + 2


def test_testing_mode_on_is_the_default(harness: Harness) -> None:
    server = Server()
    breaker = make_breaker(harness)
    transport = harness.transport(server, breaker=breaker)
    with retry_testing(), retry_testing(breakers="on"):
        trip(harness, transport, server, breaker)
        refused(harness, transport)


@pytest.mark.parametrize("bad", ["closed", "ON", "", None, True, 1])
def test_testing_mode_rejects_other_breaker_values(bad: Any) -> None:
    with pytest.raises(ValueError, match="breakers"):
        with retry_testing(breakers=bad):
            pass


# -- concurrency -------------------------------------------------------------------------


def slots(breaker: rt.CircuitBreaker, origin: str = ORIGIN) -> int:
    """How many probes a half-open breaker admits now (taking them)."""
    count = 0
    while True:
        refusal, probe, _ = breaker.admit(origin)
        if refusal is not None:
            assert refusal == 0.0 and not probe
            return count
        assert probe
        count += 1
        assert count < 1000


@pytest.mark.parametrize("probes", [1, 3])
def test_sixteen_threads_against_a_half_open_breaker(probes: int) -> None:
    """Exactly half_open_probes requests reach the server while the probes are held; the
    others are refused at once with remaining 0.0."""
    clock = FakeClock()
    events: list[rt.RetryEvent] = []
    breaker = rt.CircuitBreaker(min_requests=1, failure_ratio=1.0, half_open_probes=probes,
                                clock=clock, hooks=events.append)
    condition = threading.Condition()
    release = threading.Event()
    state = {"in_handler": 0, "refused": 0, "ok": 0, "calls": 0}
    errors: list[BaseException] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/fail":
            return httpx.Response(500)
        with condition:
            state["calls"] += 1
            state["in_handler"] += 1
            condition.notify_all()
        assert release.wait(30), "never released"
        return httpx.Response(200)

    transport = rt.RetryTransport(httpx.MockTransport(handler), breaker=breaker, clock=clock,
                                  sleep=clock.sleep)
    client = httpx.Client(transport=transport)
    client.get("https://api.example.com/fail")
    clock.now += 5.0
    assert breaker.state(URL) == "half_open"
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait()
        try:
            response = client.get(URL)
        except rt.CircuitOpenError as exc:
            with condition:
                state["refused"] += 1
                condition.notify_all()
            if exc.remaining != 0.0:
                errors.append(exc)
        except BaseException as exc:  # reported below
            errors.append(exc)
        else:
            with condition:
                state["ok"] += response.status_code == 200

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    with condition:
        assert condition.wait_for(
            lambda: state["in_handler"] + state["refused"] == 16 or bool(errors), timeout=30
        ), state
    assert errors == []
    assert state["calls"] == probes and state["refused"] == 16 - probes
    release.set()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert state == {"in_handler": probes, "refused": 16 - probes, "ok": probes,
                     "calls": probes}
    assert breaker.state(URL) == "closed"
    assert [e.kind for e in events] == ["breaker_open", "breaker_half_open", "breaker_close"]
    stats = transport.stats
    assert stats.requests == 17
    assert stats.gave_up == {rt.StopReason.CIRCUIT_OPEN: 16 - probes}
    # No slot is left taken: the next half-open period has all of them.
    clock.now += 34.0  # past the window and its last bucket, which hold the other probes' successes
    client.get("https://api.example.com/fail")
    clock.now += 5.0
    assert slots(breaker) == probes


@pytest.mark.parametrize("probes", [1, 4])
def test_two_hundred_trio_tasks_against_a_half_open_breaker(probes: int) -> None:
    events: list[rt.RetryEvent] = []
    counts = {"calls": 0, "refused": 0, "ok": 0, "zero": 0}

    async def main() -> Any:
        release = trio.Event()
        breaker = rt.CircuitBreaker(min_requests=1, failure_ratio=1.0, break_duration=5.0,
                                    half_open_probes=probes, clock=trio.current_time,
                                    hooks=events.append)

        async def handler(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/fail":
                return httpx.Response(500)
            counts["calls"] += 1
            await release.wait()
            await trio.sleep(1.0)  # the probe takes a while (virtual)
            return httpx.Response(200)

        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), breaker=breaker)
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get("https://api.example.com/fail")
            assert breaker.state(URL) == "open"
            await trio.sleep(5.0)
            assert breaker.state(URL) == "half_open"

            async def one() -> None:
                try:
                    response = await client.get(URL)
                except rt.CircuitOpenError as exc:
                    counts["refused"] += 1
                    counts["zero"] += exc.remaining == 0.0
                else:
                    counts["ok"] += response.status_code == 200

            async with trio.open_nursery() as nursery:
                for _ in range(200):
                    nursery.start_soon(one)
                await trio.testing.wait_all_tasks_blocked()
                assert counts == {"calls": probes, "refused": 200 - probes, "ok": 0,
                                  "zero": 200 - probes}
                release.set()
            assert breaker.state(URL) == "closed"
            stats = transport.stats
            await trio.sleep(34.0)  # past the window and its last bucket
            await client.get("https://api.example.com/fail")
            await trio.sleep(5.0)
            assert slots(breaker) == probes
            return stats

    stats = trio.run(main, clock=MockClock(autojump_threshold=0))
    assert counts == {"calls": probes, "refused": 200 - probes, "ok": probes,
                      "zero": 200 - probes}
    assert [e.kind for e in events] == ["breaker_open", "breaker_half_open", "breaker_close",
                                        "breaker_open"]  # the last one: slots() above
    assert stats.requests == 201
    assert stats.gave_up == {rt.StopReason.CIRCUIT_OPEN: 200 - probes}
