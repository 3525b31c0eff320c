"""The shared Retry-After cooldown: an origin that asked for quiet gets it from every request."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from trio.testing import MockClock

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

A = "https://a.example.com/items"
B = "https://b.example.com/items"


def router(log: list[tuple[str, float]], harness: Harness, first: httpx.Response) -> Any:
    """The first request to a.example.com gets ``first``; everything else gets 200."""

    def handler(request: httpx.Request) -> httpx.Response:
        log.append((str(request.url.host), harness.clock.now))
        if len(log) == 1:
            return first
        return httpx.Response(200)

    return handler


@table("status", [429, 503])
def test_other_requests_wait_out_the_cooldown(harness: Harness, status: int) -> None:
    """After a 429/503 with Retry-After, the next request to that origin waits first."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(status, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1,
                                  jitter="none", base_delay=0.25)
    assert harness.send(transport, url=A).status_code == status  # not retried, cooldown set
    response = harness.send(transport, url=A)
    assert response.status_code == 200
    # The server's 5 s are the floor; the first backoff step (0.25 s, no jitter) comes on top.
    assert harness.waits == [5.25]
    assert log == [("a.example.com", 1000.0), ("a.example.com", 1005.25)]
    info = rt.retry_info(response)
    assert info is not None and info.total_wait == 5.25 and info.attempts == 1


@table("status, headers", [
    (429, {"Retry-After": "3"}),
    (200, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "3"}),
], ids=["retry-after", "quota"])
def test_a_held_attempt_says_what_held_it(harness: Harness, status: int,
                                          headers: dict[str, str]) -> None:
    """The request another one's answer held shows it: its attempt was ``held`` that long
    by ``"cooldown"`` (in ``total_wait`` too); the request that set it was not held."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(status, headers=headers)
    transport = harness.transport(router(log, harness, first), max_attempts=1,
                                  jitter="none", base_delay=0.25)
    setter = harness.send(transport, url=A)
    held = harness.send(transport, url=A)
    assert harness.waits == [3.25]
    info = rt.retry_info(held)
    assert info is not None and (info.attempts, info.retries) == (1, 0)
    assert info.total_wait == 3.25
    assert (info.history[0].held, info.history[0].held_by) == (3.25, "cooldown")
    assert info.history[0].wait == 0.0  # no backoff: the hold is no retry's wait
    first_info = rt.retry_info(setter)
    assert first_info is not None
    assert (first_info.history[0].held, first_info.history[0].held_by) == (0.0, None)


def test_a_held_request_that_is_retried_shows_the_hold_on_its_first_attempt(
        harness: Harness) -> None:
    """Held, then retried: the hold is the first attempt's, the backoff the retry's."""
    answers = iter([httpx.Response(503, headers={"Retry-After": "2"}), httpx.Response(503),
                    httpx.Response(200)])
    transport = harness.transport(lambda request: next(answers), max_attempts=1,
                                  jitter="none", base_delay=0.5)
    harness.send(transport, url=A)
    response = harness.send(transport, url=A, extensions={"retry": {"max_attempts": 2}})
    info = rt.retry_info(response)
    assert info is not None and response.status_code == 200
    assert [(a.status, a.held, a.held_by, a.wait) for a in info.history] == [
        (503, 2.5, "cooldown", 0.5), (200, 0.0, None, 0.0)]
    assert info.total_wait == 3.0


def test_a_status_outside_retry_statuses_still_starts_the_cooldown(harness: Harness) -> None:
    """A 429 with Retry-After that the policy does not retry still cools its origin."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(429, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), retry_statuses={502},
                                  jitter="none", base_delay=0.25)
    assert harness.send(transport, url=A).status_code == 429  # final: not retried
    assert harness.send(transport, url=A).status_code == 200
    assert harness.waits == [5.25]


def test_other_origins_are_unaffected(harness: Harness) -> None:
    """The cooldown is per origin: scheme, host and port."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1, base_delay=0.0)
    harness.send(transport, url=A)
    harness.send(transport, url=B)
    harness.send(transport, url="http://a.example.com/items")  # another scheme
    harness.send(transport, url="https://a.example.com:8443/items")  # another port
    assert harness.waits == []
    harness.send(transport, url="https://a.example.com:443/other")  # same origin
    assert harness.waits == [5.0]


def test_cooldown_expires(harness: Harness) -> None:
    """Once the time has passed, requests go straight through."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1)
    harness.send(transport, url=A)
    harness.clock.now += 6
    harness.send(transport, url=A)
    assert harness.waits == []


def test_cooldown_can_be_turned_off(harness: Harness) -> None:
    """cooldown=False: each request only honours its own Retry-After."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1, cooldown=False)
    harness.send(transport, url=A)
    harness.send(transport, url=A)
    assert harness.waits == []


@table("status", [502, 504, 408])
def test_only_429_and_503_start_a_cooldown(harness: Harness, status: int) -> None:
    """Retry-After on other statuses still sets that request's wait, not the origin's."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(status, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1)
    harness.send(transport, url=A)
    harness.send(transport, url=A)
    assert harness.waits == []


def test_request_that_cannot_wait_fails_fast(harness: Harness) -> None:
    """A cooldown longer than the request's max_retry_after raises CooldownError, unsent."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "30"})
    transport = harness.transport(router(log, harness, first), max_attempts=1)
    harness.send(transport, url=A)
    with pytest.raises(rt.CooldownError) as caught:
        harness.send(transport, url=A, extensions={"retry": {"max_retry_after": 10}})
    error = caught.value
    assert isinstance(error, httpx.TransportError)
    assert error.origin == "https://a.example.com:443"
    assert error.remaining == 30.0
    assert "https://a.example.com:443" in str(error) and "30.000 s" in str(error)
    assert len(log) == 1
    info = rt.retry_info(error)
    assert info is not None and info.attempts == 0
    assert info.stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG
    assert transport.stats.gave_up == {rt.StopReason.MAX_ATTEMPTS: 1,
                                       rt.StopReason.RETRY_AFTER_TOO_LONG: 1}


def test_cooldown_past_the_deadline_fails_fast(harness: Harness) -> None:
    """A request whose deadline ends before the cooldown does not wait in vain."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(429, headers={"Retry-After": "30"})
    transport = harness.transport(router(log, harness, first), max_attempts=1)
    harness.send(transport, url=A)
    with pytest.raises(rt.CooldownError, match="deadline") as caught:
        harness.send(transport, url=A, extensions={"retry": {"deadline": 10}})
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.DEADLINE  # type: ignore[union-attr]
    assert harness.waits == []


def test_too_long_retry_after_starts_no_cooldown(harness: Harness) -> None:
    """A Retry-After beyond max_retry_after is refused, not imposed on other requests."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "7200"})
    transport = harness.transport(router(log, harness, first))
    assert harness.send(transport, url=A).status_code == 503
    assert harness.send(transport, url=A).status_code == 200
    assert harness.waits == []


def test_concurrent_requests_share_the_cooldown_on_trio_virtual_time() -> None:
    """Tasks in flight when a 429 arrives hold their first attempts until the origin is ready."""
    starts: list[tuple[str, float]] = []
    throttled = False

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal throttled
        starts.append((request.url.path, anyio.current_time()))
        await anyio.sleep(0.1)
        if not throttled:
            throttled = True
            return httpx.Response(429, headers={"Retry-After": "2"})
        return httpx.Response(200)

    async def main() -> list[rt.RetryInfo]:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), jitter="none",
                                           base_delay=0.0)
        infos: list[rt.RetryInfo] = []
        async with httpx.AsyncClient(transport=transport) as client:
            async def one(path: str, delay: float) -> None:
                await anyio.sleep(delay)
                response = await client.get(f"https://a.example.com{path}")
                info = rt.retry_info(response)
                assert info is not None and response.status_code == 200
                infos.append(info)

            async with anyio.create_task_group() as group:
                group.start_soon(one, "/first", 0.0)
                for i in range(5):
                    group.start_soon(one, f"/later{i}", 0.5 + 0.1 * i)
        return infos

    clock = MockClock(autojump_threshold=0)
    infos = anyio.run(main, backend="trio", backend_options={"clock": clock})
    # The 429 arrives at t=0.1 asking for 2 s: nobody may start before t=2.1.
    first_start = {path: t for path, t in reversed(starts)}
    assert starts[0] == ("/first", 0.0)
    for path, t in starts[1:]:
        assert t == pytest.approx(2.1), (path, t)
    assert sorted(first_start) == ["/first"] + [f"/later{i}" for i in range(5)]
    assert len(infos) == 6


def test_cooldown_wait_is_logged_and_told_to_hooks(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A request held by a cooldown says so: an INFO line and a "cooldown" hook event."""
    import logging

    events: list[rt.RetryEvent] = []
    log: list[tuple[str, float]] = []
    first = httpx.Response(429, headers={"Retry-After": "45"})
    transport = harness.transport(router(log, harness, first), max_attempts=1,
                                  hooks=events.append, jitter="none", base_delay=0.5)
    harness.send(transport, url=A)
    caplog.set_level(logging.INFO, logger="retry_transport")
    harness.send(transport, url="https://a.example.com/health?key=secret")
    assert "Holding GET https://a.example.com/health for 45.500 s" in caplog.text
    assert "secret" not in caplog.text
    cooldowns = [e for e in events if e.kind == "cooldown"]
    assert len(cooldowns) == 1
    assert (cooldowns[0].attempt, cooldowns[0].wait) == (0, 45.5)


@table("override", [False, {"respect_retry_after": False}])
def test_requests_ignoring_retry_after_are_not_held(harness: Harness, override: Any) -> None:
    """A request that opts out of retries or of Retry-After is not held by others' quiet."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1)
    harness.send(transport, url=A)
    harness.send(transport, url=A, extensions={"retry": override})
    assert harness.waits == []


def test_expired_cooldowns_are_dropped(harness: Harness) -> None:
    """Once a cooldown is over, it leaves the table: requests elsewhere take the quick path."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "1"})
    transport = harness.transport(router(log, harness, first), max_attempts=1)
    harness.send(transport, url=A)
    assert list(transport._controller.cooldowns.until) == ["https://a.example.com:443"]
    harness.clock.now += 2
    harness.send(transport, url=B)  # another origin: the stale entry is dropped anyway
    assert transport._controller.cooldowns.until == {}


def test_the_jitter_on_top_of_a_cooldown_counts_against_the_deadline(harness: Harness) -> None:
    """A deadline the server's quiet fits in, but not the jitter on top, fails fast."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1,
                                  jitter="none", base_delay=1.0)
    harness.send(transport, url=A)
    with pytest.raises(rt.CooldownError, match="deadline") as caught:
        harness.send(transport, url=A, extensions={"retry": {"deadline": 5.5}})
    assert caught.value.remaining == 5.0  # what the origin asked for, without the jitter
    assert harness.waits == [] and len(log) == 1
    response = harness.send(transport, url=A, extensions={"retry": {"deadline": 6.5}})
    assert response.status_code == 200 and harness.waits == [6.0]


def test_requests_held_by_one_cooldown_come_back_spread_out() -> None:
    """Thirty requests held by one Retry-After: 1 reach the server over the first backoff
    step after it, not in one instant."""
    starts: list[float] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        starts.append(anyio.current_time())
        if len(starts) == 1:
            return httpx.Response(429, headers={"Retry-After": "1"})
        return httpx.Response(200)

    async def main() -> None:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), max_attempts=1,
                                           base_delay=0.5)
        async with httpx.AsyncClient(transport=transport) as client:
            await client.get(A)
            async with anyio.create_task_group() as group:
                for _ in range(30):
                    group.start_soon(client.get, A)

    anyio.run(main, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)})
    held = starts[1:]
    assert len(held) == 30
    assert all(1.0 <= t <= 1.5 for t in held), held  # the floor, plus at most base_delay
    assert max(held) - min(held) > 0.25  # full jitter spreads them over the step
    assert len(set(held)) == 30


def test_ipv6_origin(harness: Harness) -> None:
    """IPv6 hosts keep their brackets in the origin (and in CooldownError)."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "30"})
    transport = harness.transport(router(log, harness, first), max_attempts=1)
    harness.send(transport, url="http://[::1]:8080/x")
    with pytest.raises(rt.CooldownError) as caught:
        harness.send(transport, url="http://[::1]:8080/y", extensions={"retry": {"deadline": 1}})
    assert caught.value.origin == "http://[::1]:8080"


def test_cooldown_error_pickles() -> None:
    """CooldownError survives pickle and copy (process pools, error reporters)."""
    import copy
    import pickle

    error = rt.CooldownError("quiet", origin="https://a:443", remaining=3.0,
                             request=httpx.Request("GET", "https://a/"))
    for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error)):
        assert (str(clone), clone.origin, clone.remaining) == ("quiet", "https://a:443", 3.0)


@table(
    ("cooling", "other"),
    [
        ("https://a.example.com/items", "http://a.example.com/items"),  # same host, other port
        ("https://a.example.com/items", "https://a.example.com:8443/items"),
        ("http://[::1]:8080/x", "http://[::1]:8081/x"),
    ],
)
def test_another_origin_of_a_cooling_host_is_not_held(harness: Harness, cooling: str,
                                                      other: str) -> None:
    """Requests skip the table when their host has no cooldown; one of a cooling host is
    looked up by its whole origin: another port of the same host is not held, the cooling
    origin itself is."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1,
                                  jitter="none", base_delay=0.25)
    harness.send(transport, url=cooling)
    assert harness.send(transport, url=other).status_code == 200
    assert harness.send(transport, url=B).status_code == 200
    assert harness.waits == []
    assert harness.send(transport, url=cooling).status_code == 200
    assert harness.waits == [5.25]


def test_a_cooling_host_not_spelt_in_ascii_still_holds_its_requests(harness: Harness) -> None:
    """An internationalised host is spelt one way in the origin and another (IDNA) in the
    URL: while it cools, every request goes through the table, and it is held."""
    log: list[tuple[str, float]] = []
    first = httpx.Response(503, headers={"Retry-After": "5"})
    transport = harness.transport(router(log, harness, first), max_attempts=1,
                                  jitter="none", base_delay=0.25)
    idna = "https://bücher.example/items"
    harness.send(transport, url=idna)
    assert harness.send(transport, url=B).status_code == 200
    assert harness.waits == []
    assert harness.send(transport, url="https://xn--bcher-kva.example/items").status_code == 200
    assert harness.waits == [5.25]  # the same origin, spelt as the URL parses it
