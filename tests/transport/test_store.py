"""Stores: cooldowns and breaker transitions shared by the transports and breakers given one
(``rt.MemoryStore``; ``rt.RedisStore`` only where no server is needed).

Both flavours; transports through the harness (sync, asyncio, trio) in virtual time. Every
member has a fake clock of its own and the store a fake wall clock, so each test states in
which clock a time is counted."""

from __future__ import annotations

import gc
import linecache
import logging
import math
import random
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import trio
from trio.testing import MockClock

from tests import flavour as _flavour
from tests.flavour import httpx, rt
from tests.harness import FakeClock, Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

WALL = 1_700_000_000.0
A = "https://a.example.com/items"
B = "https://b.example.com/items"
A_ORIGIN = "https://a.example.com:443"
B_ORIGIN = "https://b.example.com:443"
URL = "https://api.example.com/items"
ORIGIN = "https://api.example.com:443"


# -- helpers -----------------------------------------------------------------------------


class Script:
    """A server scripted per host: queued answers (status, headers), then 200."""

    def __init__(self) -> None:
        self.queues: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.log: list[str] = []

    def answer(self, host: str, status: int, headers: dict[str, str] | None = None) -> None:
        self.queues.setdefault(host, []).append((status, headers or {}))

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host = str(request.url.host)
        self.log.append(host)
        queue = self.queues.get(host)
        if queue:
            status, headers = queue.pop(0)
            return httpx.Response(status, headers=headers)
        return httpx.Response(200)


class Backend:
    """One answer for every request (a status, or an exception class); counts the calls."""

    def __init__(self, outcome: int | type[BaseException] = 200) -> None:
        self.outcome = outcome
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        outcome = self.outcome
        if isinstance(outcome, int):
            return httpx.Response(outcome)
        raise outcome("boom", request=request)  # type: ignore[call-arg]


class RecordingStore(rt.MemoryStore):  # type: ignore[misc]
    """A memory store that records what it would send to other processes (``_share``, the
    hook a networked store overrides) and counts its closes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shared: list[tuple[str, str, float, object]] = []
        self.closes = 0

    def _share(self, kind: str, origin: str, until: float, extra: object) -> None:
        self.shared.append((kind, origin, until, extra))

    def close(self) -> None:
        self.closes += 1
        super().close()


def member(harness: Harness, handler: Any, clock: FakeClock | None = None,
           **kwargs: Any) -> tuple[Any, FakeClock]:
    """A transport of the harness's kind on a clock of its own (default: a fresh FakeClock
    at 1000.0), exact waits unless told otherwise: no retries, no jitter, base_delay 0.25."""
    clock = clock if clock is not None else FakeClock()
    kwargs.setdefault("max_attempts", 1)
    kwargs.setdefault("jitter", "none")
    kwargs.setdefault("base_delay", 0.25)
    kwargs["sleep"] = clock.sleep if harness.mode == "sync" else clock.asleep
    return harness.transport(handler, clock=clock, **kwargs), clock


def breaker(clock: Callable[[], float], store: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("min_requests", 3)
    kwargs.setdefault("failure_ratio", 0.5)
    kwargs.setdefault("window", 30.0)
    kwargs.setdefault("break_duration", 5.0)
    kwargs.setdefault("max_break_duration", 60.0)
    return rt.CircuitBreaker(clock=clock, store=store, **kwargs)


def trip(harness: Harness, transport: Any, backend: Backend, opener: Any) -> None:
    """Open ``opener`` with 500s (not retried: no waits, no give-up lines)."""
    backend.outcome = 500
    for _ in range(opener.min_requests):
        assert harness.send(transport).status_code == 500
    assert opener.state(URL) == "open"


def refused(harness: Harness, transport: Any, **kwargs: Any) -> Any:
    with pytest.raises(rt.CircuitOpenError) as caught:
        harness.send(transport, **kwargs)
    return caught.value


@dataclass
class ProbeRace:
    """Two breakers on one store, each behind a transport: ``sender``'s request to
    ``/probe`` (the half-open probe, once ``mine`` has been tripped and its break is over)
    sends a request through ``other`` (``theirs``) while it is out; what that request
    raised is in ``inside``. With ``no_verdict`` the probe then raises
    ``UnsupportedProtocol``, an error that says nothing of the server's health."""

    wall: FakeClock
    backend: Backend
    mine: Any
    theirs: Any
    sender: Any
    other: Any
    inside: list[Any]


def probe_race(harness: Harness, *, no_verdict: bool) -> ProbeRace:
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    backend = Backend()
    mine = breaker(harness.clock, store)
    theirs = breaker(harness.clock, store)
    inside: list[Any] = []
    other = rt.RetryTransport(httpx.MockTransport(backend), breaker=theirs, clock=harness.clock,
                              sleep=harness.clock.sleep, max_attempts=1)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/probe":
            with pytest.raises(rt.CircuitOpenError) as caught:
                with httpx.Client(transport=other) as client:
                    client.get(URL)
            inside.append(caught.value)
            assert theirs.state(URL) == "half_open"
            if no_verdict:
                raise httpx.UnsupportedProtocol("no verdict", request=request)
        return backend(request)

    sender = harness.transport(handler, breaker=mine, max_attempts=1)
    trip(harness, sender, backend, mine)
    return ProbeRace(wall, backend, mine, theirs, sender, other, inside)


def hammer(transports: list[Any], origins: list[str], *, rounds: int,
           refused: type[BaseException] | None = None) -> list[BaseException]:
    """One thread per transport, started together, each sending ``rounds`` requests to
    every origin in its own shuffled order (``refused`` errors are expected and ignored);
    returns what else the threads raised."""
    start = threading.Barrier(len(transports))
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        order = [f"{o}/r{r}" for r in range(rounds) for o in origins]
        random.Random(index).shuffle(order)
        try:
            start.wait(10)
            with httpx.Client(transport=transports[index]) as client:
                for url in order:
                    try:
                        client.get(url)
                    except BaseException as exc:
                        if refused is None or not isinstance(exc, refused):
                            raise
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(transports))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors


def advance(seconds: float, *clocks: FakeClock) -> None:
    for clock in clocks:
        clock.now += seconds


def records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "retry_transport" and r.levelno == level]


def learned(kind: str, origin: str, wait: float) -> Any:
    """The event a breaker's hooks get for a transition learned through its store."""
    return rt.RetryEvent(kind, "", origin, 0, wait, None, None, None, learned=True)


#: (id, status, headers for a cooldown of ``s`` seconds, the signal, how messages spell it)
SIGNALS = [
    pytest.param(429, lambda s: {"Retry-After": f"{s:g}"}, "retry-after", "Retry-After",
                 id="429-retry-after"),
    pytest.param(503, lambda s: {"Retry-After": f"{s:g}"}, "retry-after", "Retry-After",
                 id="503-retry-after"),
    pytest.param(429, lambda s: {"retry-after-ms": f"{s * 1000:g}"}, "retry-after-ms",
                 "retry-after-ms", id="retry-after-ms"),
    pytest.param(200, lambda s: {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": f"{s:g}"},
                 "x-ratelimit-reset", "x-ratelimit-reset", id="quota"),
]


# -- cooldowns shared ----------------------------------------------------------------------


@table(("status", "headers", "signal", "shown"), SIGNALS)
def test_a_cooldown_holds_the_next_request_of_every_transport_of_the_store(
    harness: Harness, status: int, headers: Any, signal: str, shown: str
) -> None:
    """One transport is told to be quiet for 5 s; 2 s later another transport's request to
    that origin waits the 3 s left (plus the first backoff step), and says so."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    events: list[Any] = []
    first, first_clock = member(harness, server, store=store)
    second, second_clock = member(harness, server, store=store, hooks=events.append)
    server.answer("a.example.com", status, headers(5))
    assert harness.send(first, url=A).status_code == status
    advance(2.0, wall, first_clock, second_clock)
    response = harness.send(second, url=A)
    assert response.status_code == 200
    assert second_clock.waits == [3.25]
    assert first_clock.waits == []
    info = rt.retry_info(response)
    assert info is not None and info.total_wait == 3.25 and info.attempts == 1
    assert [(e.kind, e.wait, e.signal, e.learned) for e in events] == [
        ("cooldown", 3.25, signal, False)
    ]
    assert server.log == ["a.example.com", "a.example.com"]
    # The first transport applies its own cooldown as before.
    assert harness.send(first, url=A).status_code == 200
    assert first_clock.waits == [3.25]


def test_a_learned_wait_is_the_remaining_plus_at_most_one_jittered_step(
    harness: Harness,
) -> None:
    """With full jitter, each learning transport waits between the remaining time and the
    remaining time plus base_delay, and not all in the same instant."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    sender, _ = member(harness, server, store=store)
    receivers = [member(harness, server, store=store, jitter="full", base_delay=1.0,
                        rng=random.Random(seed)) for seed in range(6)]
    server.answer("a.example.com", 429, {"Retry-After": "10"})
    harness.send(sender, url=A)
    wall.now += 4.0
    for transport, clock in receivers:
        clock.now += 4.0
        assert harness.send(transport, url=A).status_code == 200
    waits = [w for _, clock in receivers for w in clock.waits]
    assert len(waits) == 6
    assert all(6.0 <= w <= 7.0 for w in waits), waits
    assert len(set(waits)) > 1


@table(("status", "headers", "signal", "shown"), SIGNALS)
def test_a_learned_cooldown_longer_than_max_retry_after_raises(
    harness: Harness, status: int, headers: Any, signal: str, shown: str
) -> None:
    """A learned cooldown acts as a local one: longer than the learner's max_retry_after, its
    request fails at once with CooldownError, unsent."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    sender, _ = member(harness, server, store=store)  # max_retry_after 60: it starts 30 s
    strict, strict_clock = member(harness, server, store=store, max_retry_after=10)
    server.answer("a.example.com", status, headers(30))
    harness.send(sender, url=A)
    advance(2.0, wall, strict_clock)
    with pytest.raises(rt.CooldownError) as caught:
        harness.send(strict, url=A)
    error = caught.value
    assert isinstance(error, httpx.TransportError)
    assert (error.origin, error.remaining) == (A_ORIGIN, 28.0)
    assert f"({shown})" in str(error) and "max_retry_after=10" in str(error)
    info = rt.retry_info(error)
    assert info is not None and info.attempts == 0
    assert info.stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG
    assert server.log == ["a.example.com"] and strict_clock.waits == []
    # The same, asked per request; a longer max_retry_after waits.
    loose, loose_clock = member(harness, server, store=store)
    with pytest.raises(rt.CooldownError):
        harness.send(loose, url=A, extensions={"retry": {"max_retry_after": 5}})
    assert harness.send(loose, url=A).status_code == 200
    assert loose_clock.waits == [28.25]


def test_a_learned_cooldown_past_the_deadline_raises(harness: Harness) -> None:
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    sender, _ = member(harness, server, store=store)
    receiver, clock = member(harness, server, store=store)
    server.answer("a.example.com", 503, {"Retry-After": "30"})
    harness.send(sender, url=A)
    with pytest.raises(rt.CooldownError, match="deadline") as caught:
        harness.send(receiver, url=A, extensions={"retry": {"deadline": 10}})
    assert caught.value.remaining == 30.0
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.DEADLINE
    with pytest.raises(rt.CooldownError, match="deadline"):  # the jitter on top counts too
        harness.send(receiver, url=A, extensions={"retry": {"deadline": 30.25}})
    assert clock.waits == [] and server.log == ["a.example.com"]
    response = harness.send(receiver, url=A, extensions={"retry": {"deadline": 31}})
    assert response.status_code == 200 and clock.waits == [30.25]


def test_other_origins_are_not_held(harness: Harness) -> None:
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    sender, _ = member(harness, server, store=store)
    receiver, clock = member(harness, server, store=store)
    server.answer("a.example.com", 429, {"Retry-After": "30"})
    harness.send(sender, url=A)
    for url in (B, "http://a.example.com/items", "https://a.example.com:8443/items",
                "https://sub.a.example.com/items"):
        assert harness.send(receiver, url=url).status_code == 200
    assert clock.waits == []
    assert harness.send(receiver, url="https://A.example.com:443/other").status_code == 200
    assert clock.waits == [30.25]


def test_transports_with_different_clocks_each_apply_the_right_remaining(
    harness: Harness,
) -> None:
    """One transport's clock is at 1000, another's at 5, the store's wall clock at 1.7e9:
    the time left is turned into each one's clock when its next request starts."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    first, first_clock = member(harness, server, FakeClock(1000.0), store=store)
    second, second_clock = member(harness, server, FakeClock(5.0), store=store)
    server.answer("a.example.com", 429, {"Retry-After": "30"})
    harness.send(first, url=A)  # until 1030 for it, WALL + 30 for the store
    advance(10.0, wall, first_clock, second_clock)
    assert harness.send(second, url=A).status_code == 200
    assert second_clock.waits == [20.25] and second_clock.now == 35.25
    assert harness.send(first, url=A).status_code == 200
    assert first_clock.waits == [20.25] and first_clock.now == 1030.25
    # The other way: the second transport is told 12 s when the wall clock reads WALL + 40.
    wall.now = WALL + 40.0
    server.answer("b.example.com", 503, {"Retry-After": "12"})
    harness.send(second, url=B)
    first_clock.now += 1.0
    wall.now += 1.0
    assert harness.send(first, url=B).status_code == 200
    assert first_clock.waits == [20.25, 11.25]


def test_a_transport_that_joins_later_learns_the_running_cooldown(harness: Harness) -> None:
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    sender, _ = member(harness, server, store=store)
    server.answer("a.example.com", 429, {"Retry-After": "30"})
    harness.send(sender, url=A)
    wall.now += 10.0
    late, late_clock = member(harness, server, FakeClock(5.0), store=store)
    assert harness.send(late, url=A).status_code == 200
    assert late_clock.waits == [20.25]
    wall.now += 25.0  # over: a transport joining now is told nothing
    later, later_clock = member(harness, server, store=store)
    assert harness.send(later, url=A).status_code == 200
    assert later_clock.waits == []


def test_after_the_cooldown_ends_nothing_is_held(harness: Harness) -> None:
    """A cooldown learned but over by the learner's next request holds nothing."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    sender, sender_clock = member(harness, server, store=store)
    receiver, receiver_clock = member(harness, server, store=store)
    server.answer("a.example.com", 429, {"Retry-After": "5"})
    harness.send(sender, url=A)
    advance(5.0, wall, sender_clock, receiver_clock)
    for _ in range(2):
        assert harness.send(receiver, url=A).status_code == 200
        assert harness.send(sender, url=A).status_code == 200
    assert receiver_clock.waits == [] and sender_clock.waits == []


def test_a_transport_without_cooldowns_neither_shares_nor_learns(harness: Harness) -> None:
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    off, off_clock = member(harness, server, store=store, cooldown=False)
    on, on_clock = member(harness, server, store=store)
    third, third_clock = member(harness, server, store=store)
    server.answer("a.example.com", 429, {"Retry-After": "5"})
    assert harness.send(off, url=A).status_code == 429  # not shared
    assert harness.send(on, url=A).status_code == 200
    assert on_clock.waits == [] and off_clock.waits == []
    server.answer("b.example.com", 503, {"Retry-After": "5"})
    assert harness.send(on, url=B).status_code == 503  # shared with the third, not learned
    assert harness.send(off, url=B).status_code == 200
    assert off_clock.waits == []
    assert harness.send(third, url=B).status_code == 200
    assert third_clock.waits == [5.25]


def test_a_shorter_later_cooldown_does_not_shorten_a_known_one(harness: Harness) -> None:
    """A request in flight when another transport's 30 s cooldown starts comes back with
    Retry-After: 5: the store keeps the 30 s, for its own transport too."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    long_clock = FakeClock()
    long = rt.RetryTransport(
        httpx.MockTransport(lambda r: httpx.Response(429, headers={"Retry-After": "30"})),
        store=store, clock=long_clock, sleep=long_clock.sleep, max_attempts=1,
    )

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/slow":
            with httpx.Client(transport=long) as client:  # meanwhile, elsewhere: 30 s
                assert client.get(A).status_code == 429
            return httpx.Response(429, headers={"Retry-After": "5"})
        return httpx.Response(200)

    short, short_clock = member(harness, handler, store=store)
    other, other_clock = member(harness, handler, store=store)
    assert harness.send(short, url="https://a.example.com/slow").status_code == 429
    advance(1.0, wall, short_clock, other_clock)
    assert harness.send(other, url=A).status_code == 200
    assert other_clock.waits == [29.25]
    assert harness.send(short, url=A).status_code == 200
    assert short_clock.waits == [29.25]
    joined, joined_clock = member(harness, handler, store=store)
    assert harness.send(joined, url=A).status_code == 200
    assert joined_clock.waits == [29.25]


def test_a_learned_cooldown_is_not_echoed(harness: Harness) -> None:
    """What a member learns is not sent on again: the store shares one event per cooldown
    (a networked store would otherwise write it back, and again on every learner), and a
    third member is held exactly as long as the first said."""
    wall = FakeClock(WALL)
    store = RecordingStore(wallclock=wall)
    server = Script()
    sender, _ = member(harness, server, store=store)
    receivers = [member(harness, server, store=store) for _ in range(2)]
    server.answer("a.example.com", 429, {"Retry-After": "30"})
    harness.send(sender, url=A)
    assert store.shared == [("cooldown", A_ORIGIN, WALL + 30.0, "retry-after")]
    for transport, clock in receivers:
        assert harness.send(transport, url=A).status_code == 200
        assert clock.waits == [30.25]
    # An event from another process (what a networked store calls) is learned, not resent.
    store._learn("cooldown", B_ORIGIN, WALL + 20.0, "retry-after")
    for transport, clock in receivers:
        assert harness.send(transport, url=B).status_code == 200
        assert clock.waits == [30.25, 20.25]
    assert harness.send(sender, url=B).status_code == 200
    assert store.shared == [("cooldown", A_ORIGIN, WALL + 30.0, "retry-after")]
    third, third_clock = member(harness, server, store=store)
    assert harness.send(third, url=A).status_code == 200
    assert third_clock.waits == [30.25]


def test_a_learned_cooldown_is_not_echoed_with_a_running_wall_clock(harness: Harness) -> None:
    """With a wall clock that moves between two readings (as a real one does), a learner
    that shared what it learned would share a slightly later end, which the store would
    take for news: it must not happen."""
    ticks = iter(range(1_000_000))
    store = RecordingStore(wallclock=lambda: WALL + next(ticks) * 0.001)
    server = Script()
    sender, _ = member(harness, server, store=store)
    receivers = [member(harness, server, store=store) for _ in range(3)]
    server.answer("a.example.com", 429, {"Retry-After": "30"})
    harness.send(sender, url=A)
    for transport, clock in receivers:
        assert harness.send(transport, url=A).status_code == 200
        assert len(clock.waits) == 1 and 30.0 < clock.waits[0] <= 30.25
    assert [(kind, origin) for kind, origin, _, _ in store.shared] == [("cooldown", A_ORIGIN)]


def test_concurrent_tasks_of_two_transports_share_a_cooldown_on_trio_virtual_time() -> None:
    """Tasks of a second transport started while the origin cools down start together at
    the end of the quiet the first transport was told about (event-loop clocks)."""
    starts: list[tuple[str, float]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        starts.append((request.url.path, trio.current_time()))
        await trio.sleep(0.1)
        if request.url.path == "/first":
            return httpx.Response(429, headers={"Retry-After": "2"})
        return httpx.Response(200)

    async def main() -> None:
        store = rt.MemoryStore(wallclock=trio.current_time)
        first = rt.AsyncRetryTransport(httpx.MockTransport(handler), store=store,
                                       max_attempts=1)
        second = rt.AsyncRetryTransport(httpx.MockTransport(handler), store=store,
                                        jitter="none", base_delay=0.0)
        async with httpx.AsyncClient(transport=first) as one, \
                httpx.AsyncClient(transport=second) as two:
            async def later(i: int) -> None:
                await trio.sleep(0.5 + 0.1 * i)
                assert (await two.get(f"https://a.example.com/later{i}")).status_code == 200

            async with trio.open_nursery() as nursery:
                nursery.start_soon(one.get, "https://a.example.com/first")
                for i in range(5):
                    nursery.start_soon(later, i)

    trio.run(main, clock=MockClock(autojump_threshold=0))
    assert starts[0] == ("/first", 0.0)
    assert len(starts) == 6
    for path, t in starts[1:]:
        assert t == pytest.approx(2.1), (path, t)


def test_transports_of_both_flavours_share_one_store() -> None:
    """An httpx transport and an httpx2 one (and sync with async) share cooldowns."""
    if len(_flavour.MODULES) < 2:
        pytest.skip("httpx2 is not installed")
    (hx, rt1), (hx2, rt2) = _flavour.MODULES["httpx"], _flavour.MODULES["httpx2"]
    assert rt1.MemoryStore is rt2.MemoryStore
    store = rt1.MemoryStore(wallclock=lambda: WALL)
    clock, clock2 = FakeClock(), FakeClock(50.0)
    one = rt1.RetryTransport(
        hx.MockTransport(lambda r: hx.Response(429, headers={"Retry-After": "7"})),
        store=store, clock=clock, sleep=clock.sleep, max_attempts=1)
    two = rt2.AsyncRetryTransport(hx2.MockTransport(lambda r: hx2.Response(200)), store=store,
                                  clock=clock2, sleep=clock2.asleep, jitter="none",
                                  base_delay=0.0)
    with hx.Client(transport=one) as client:
        client.get(A)

    async def main() -> int:
        async with hx2.AsyncClient(transport=two) as client:
            return int((await client.get(A)).status_code)

    assert anyio.run(main) == 200
    assert clock2.waits == [7.0]


# -- breakers shared -------------------------------------------------------------------------


def test_an_opening_opens_every_breaker_of_the_store_with_its_break(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    backend = Backend()
    mine_events: list[Any] = []
    theirs_events: list[Any] = []
    mine = breaker(harness.clock, store, hooks=mine_events.append)
    their_clock = FakeClock(5.0)
    theirs = breaker(their_clock, store, break_duration=1.0, hooks=theirs_events.append)
    sender = harness.transport(backend, breaker=mine, max_attempts=1)
    receiver, _ = member(harness, backend, their_clock, breaker=theirs)
    trip(harness, sender, backend, mine)
    assert theirs.state(URL) == "open"
    assert theirs.opened_for(ORIGIN) == 5.0  # the sender's break, not its own 1 s
    error = refused(harness, receiver)
    assert (error.origin, error.remaining) == (ORIGIN, 5.0)
    assert rt.retry_info(error).stop_reason is rt.StopReason.CIRCUIT_OPEN
    their_clock.now += 1.0
    assert refused(harness, receiver).remaining == 4.0
    assert backend.calls == 3
    assert records(caplog, logging.WARNING) == [
        f"Circuit breaker opened for {ORIGIN} after 500: no request is sent for 5.000 s"
    ]
    assert records(caplog, logging.INFO) == [
        f"Circuit breaker opened for {ORIGIN} by another member of its store: no request "
        "is sent for 5.000 s"
    ]
    assert theirs_events == [learned("breaker_open", ORIGIN, 5.0)]
    assert [(e.kind, e.learned) for e in mine_events] == [("breaker_open", False)]
    their_clock.now += 4.0
    assert theirs.state(URL) == "half_open"


def test_a_successful_probe_closes_every_breaker_of_the_store(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    backend = Backend()
    theirs_events: list[Any] = []
    mine = breaker(harness.clock, store)
    their_clock = FakeClock(5.0)
    theirs = breaker(their_clock, store, break_duration=2.0, hooks=theirs_events.append)
    sender = harness.transport(backend, breaker=mine, max_attempts=1)
    receiver, _ = member(harness, backend, their_clock, breaker=theirs)
    trip(harness, sender, backend, mine)
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    caplog.clear()
    advance(5.0, harness.clock, wall)  # the receiver's own clock stands still: still open
    backend.outcome = 200
    assert harness.send(sender).status_code == 200
    assert mine.state(URL) == "closed"
    assert theirs.state(URL) == "closed"
    assert theirs_events[-1] == learned("breaker_close", ORIGIN, 0.0)
    assert [e.kind for e in theirs_events] == ["breaker_open", "breaker_close"]
    assert f"Circuit breaker closed for {ORIGIN} by another member of its store: it answered " \
           "a probe" in records(caplog, logging.INFO)
    assert records(caplog, logging.WARNING) == []
    assert harness.send(receiver).status_code == 200
    assert backend.calls == 5
    # Closed for good: a fresh window (1 success, then 2 failures is 2 / 3), and its next
    # break is its own break_duration again, which the sender learns in turn.
    backend.outcome = 500
    for _ in range(2):
        assert harness.send(receiver).status_code == 500
    assert theirs.state(URL) == "open" and theirs.opened_for(ORIGIN) == 2.0
    assert mine.state(URL) == "open" and mine.opened_for(ORIGIN) == 2.0


def test_a_breaker_that_joins_later_learns_the_running_break(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    backend = Backend()
    mine = breaker(harness.clock, store)
    sender = harness.transport(backend, breaker=mine, max_attempts=1)
    trip(harness, sender, backend, mine)
    advance(2.0, harness.clock, wall)
    events: list[Any] = []
    late_clock = FakeClock(50.0)
    late = breaker(late_clock, store, hooks=events.append)
    assert late.state(URL) == "open"
    assert events == [learned("breaker_open", ORIGIN, 5.0)]
    assert f"Circuit breaker opened for {ORIGIN} by another member of its store: no request " \
           "is sent for 3.000 s" in records(caplog, logging.INFO)
    transport, _ = member(harness, backend, late_clock, breaker=late)
    assert refused(harness, transport).remaining == 3.0
    late_clock.now += 3.0
    assert late.state(URL) == "half_open"
    wall.now += 3.0  # the break is over: a breaker joining now learns nothing
    fresh_events: list[Any] = []
    fresh = breaker(FakeClock(), store, hooks=fresh_events.append)
    assert fresh.state(URL) == "closed" and fresh_events == []


@pytest.mark.parametrize("probes", [1, 2, 3])
def test_half_open_probes_are_elected_among_all_breakers_of_the_store(probes: int) -> None:
    """Three breakers, each allowing ``probes`` at a time: the store lets ``probes`` through
    in all; the others are refused (0.0: every slot taken) until a verdict."""
    clock = FakeClock()
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    members = [breaker(clock, store, min_requests=1, failure_ratio=1.0,
                       half_open_probes=probes) for _ in range(3)]
    assert members[0].record(ORIGIN, True) == ["breaker_open"]
    assert all(m.state(ORIGIN) == "open" for m in members)
    advance(5.0, clock, wall)
    admitted: list[tuple[Any, int]] = []
    for _ in range(2):
        for m in members:
            refusal, probe, _ = m.admit(ORIGIN)
            if refusal is None:
                assert probe
                admitted.append((m, probe))
            else:
                assert (refusal, probe) == (0.0, 0)
    assert len(admitted) == probes
    first, probe = admitted[0]
    assert first.record(ORIGIN, False, probe) == ["breaker_close"]
    assert all(m.state(ORIGIN) == "closed" for m in members)
    assert all(m.admit(ORIGIN)[0] is None for m in members)


def test_only_one_breaker_admits_the_probe_through_the_transports(harness: Harness) -> None:
    """During one breaker's probe, a request through another breaker of the store is
    refused with CircuitOpenError (every probe slot taken); the probe's success opens it."""
    race = probe_race(harness, no_verdict=False)
    wall, backend, theirs, sender, other, inside = (
        race.wall, race.backend, race.theirs, race.sender, race.other, race.inside
    )
    assert theirs.state(URL) == "open"
    advance(5.0, harness.clock, wall)
    backend.outcome = 200
    assert harness.send(sender, url="https://api.example.com/probe").status_code == 200
    assert len(inside) == 1
    assert inside[0].remaining == 0.0 and "every probe slot taken" in str(inside[0])
    assert backend.calls == 4  # the refused request was not sent
    assert theirs.state(URL) == "closed"
    with httpx.Client(transport=other) as client:
        assert client.get(URL).status_code == 200


def test_a_probe_without_a_verdict_frees_the_fleet_slot(harness: Harness) -> None:
    """A probe that ends without a verdict gives its slot back to the store: a request
    through another breaker goes as the probe."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    backend = Backend()
    mine = breaker(harness.clock, store)
    theirs = breaker(harness.clock, store)
    sender = harness.transport(backend, breaker=mine, max_attempts=1)
    receiver = harness.transport(backend, breaker=theirs, max_attempts=1)
    trip(harness, sender, backend, mine)
    advance(5.0, harness.clock, wall)
    backend.outcome = httpx.UnsupportedProtocol  # says nothing of the server's health
    with pytest.raises(httpx.UnsupportedProtocol):
        harness.send(sender)
    assert mine.state(URL) == "half_open" and theirs.state(URL) == "half_open"
    backend.outcome = 200
    assert harness.send(receiver).status_code == 200  # the other breaker's probe
    assert mine.state(URL) == "closed" and theirs.state(URL) == "closed"
    assert backend.calls == 5


@pytest.mark.parametrize("backend_name", ["asyncio", "trio"])
def test_a_cancelled_probe_frees_the_fleet_slot(backend_name: str) -> None:
    """A probe cancelled mid-attempt: while it hangs, another breaker's request is refused;
    once cancelled, the store's slot is free again and the next probe closes both."""
    clock = FakeClock()
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    mine = breaker(clock, store, min_requests=1, failure_ratio=1.0)
    theirs = breaker(clock, store, min_requests=1, failure_ratio=1.0)
    calls: list[str] = []

    async def main() -> None:
        entered = anyio.Event()

        async def handler(request: httpx.Request) -> httpx.Response:
            calls.append(request.url.path)
            if request.url.path == "/hang":
                entered.set()
                await anyio.sleep_forever()
            return httpx.Response(500 if request.url.path == "/fail" else 200)

        def transport(which: Any) -> Any:
            return rt.AsyncRetryTransport(httpx.MockTransport(handler), breaker=which,
                                          clock=clock, sleep=clock.asleep, max_attempts=1)

        async with httpx.AsyncClient(transport=transport(mine)) as client, \
                httpx.AsyncClient(transport=transport(theirs)) as other:
            await client.get("https://api.example.com/fail")
            assert theirs.state(URL) == "open"
            advance(5.0, clock, wall)
            async with anyio.create_task_group() as group:
                group.start_soon(client.get, "https://api.example.com/hang")
                await entered.wait()
                with pytest.raises(rt.CircuitOpenError) as caught:
                    await other.get("https://api.example.com/other")
                assert caught.value.remaining == 0.0
                group.cancel_scope.cancel()
            # The slot is back in the store: the next probe (of this breaker) is elected.
            assert (await client.get("https://api.example.com/ok")).status_code == 200
            assert theirs.state(URL) == "closed"
            assert (await other.get("https://api.example.com/after")).status_code == 200

    anyio.run(main, backend=backend_name)
    assert calls == ["/fail", "/hang", "/ok", "/after"]


def test_a_probe_refused_by_a_learned_cooldown_frees_the_fleet_slot(harness: Harness) -> None:
    """A request admitted as the probe that a cooldown learned from another transport then
    refuses (CooldownError, unsent) gives the fleet's slot back at once."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    mine = breaker(harness.clock, store, min_requests=1, failure_ratio=1.0)
    theirs = breaker(harness.clock, store, min_requests=1, failure_ratio=1.0)
    teller, _ = member(harness, server, store=store)
    prober = harness.transport(server, breaker=mine, store=store, max_attempts=1)
    mine.record(ORIGIN, True)
    advance(5.0, harness.clock, wall)
    server.answer("api.example.com", 503, {"Retry-After": "30"})
    harness.send(teller)  # the cooldown, learned by the prober
    with pytest.raises(rt.CooldownError):
        harness.send(prober, extensions={"retry": {"max_retry_after": 10}})
    assert server.log == ["api.example.com"]
    refusal, probe, _ = theirs.admit(ORIGIN)
    assert refusal is None and probe


def test_a_probe_lease_ends_its_slot(harness: Harness) -> None:
    """A probe that never comes back (its process died) holds the fleet's slot for
    probe_lease seconds of the store's wall clock, then another breaker may probe."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(probe_lease=5, wallclock=wall)
    assert store.probe_lease == 5.0
    backend = Backend()
    lost = breaker(harness.clock, store, min_requests=1, failure_ratio=1.0)
    theirs = breaker(harness.clock, store, min_requests=1, failure_ratio=1.0)
    receiver = harness.transport(backend, breaker=theirs, max_attempts=1)
    assert lost.record(ORIGIN, True) == ["breaker_open"]
    advance(5.0, harness.clock, wall)
    refusal, probe, _ = lost.admit(ORIGIN)
    assert refusal is None and probe  # ... and never a verdict
    assert refused(harness, receiver).remaining == 0.0
    advance(4.9, harness.clock, wall)
    assert refused(harness, receiver).remaining == 0.0
    assert backend.calls == 0
    advance(0.1, harness.clock, wall)
    assert harness.send(receiver).status_code == 200
    assert backend.calls == 1
    assert theirs.state(URL) == "closed" and lost.state(URL) == "closed"


def test_a_failed_probe_reopens_every_breaker_for_the_doubled_break(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    backend = Backend()
    theirs_events: list[Any] = []
    mine = breaker(harness.clock, store)
    theirs = breaker(harness.clock, store, hooks=theirs_events.append)
    sender = harness.transport(backend, breaker=mine, max_attempts=1)
    receiver = harness.transport(backend, breaker=theirs, max_attempts=1)
    trip(harness, sender, backend, mine)
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    advance(5.0, harness.clock, wall)
    backend.outcome = 503
    assert harness.send(sender).status_code == 503  # the probe fails
    assert mine.opened_for(ORIGIN) == 10.0 and theirs.opened_for(ORIGIN) == 10.0
    assert theirs.state(URL) == "open"
    assert refused(harness, receiver).remaining == 10.0
    assert theirs_events[-1] == learned("breaker_open", ORIGIN, 10.0)
    assert f"Circuit breaker opened for {ORIGIN} by another member of its store: no request " \
           "is sent for 10.000 s" in records(caplog, logging.INFO)
    # The receiver probes next and fails: both are open for 20 s.
    advance(10.0, harness.clock, wall)
    assert harness.send(receiver).status_code == 503
    assert refused(harness, sender).remaining == 20.0
    assert mine.opened_for(ORIGIN) == 20.0
    advance(20.0, harness.clock, wall)
    backend.outcome = 200
    assert harness.send(sender).status_code == 200
    assert theirs.state(URL) == "closed"
    assert [e.kind for e in theirs_events] == [
        "breaker_open", "breaker_open", "breaker_half_open", "breaker_open", "breaker_close"
    ]
    assert [e.learned for e in theirs_events] == [True, True, False, False, True]


def test_a_learned_opening_stops_the_retries_of_a_request_in_flight(harness: Harness) -> None:
    """A request retrying through one breaker when another breaker of the store opens is
    not retried: the learned break acts as a local one (stop reason circuit_open)."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    backend = Backend(500)
    mine = breaker(harness.clock, store)
    theirs = breaker(harness.clock, store, min_requests=10)
    opener = rt.RetryTransport(httpx.MockTransport(backend), breaker=mine, clock=harness.clock,
                               sleep=harness.clock.sleep, max_attempts=1)
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) == 1:  # meanwhile, elsewhere, the other breaker opens
            with httpx.Client(transport=opener) as client:
                for _ in range(3):
                    client.get(URL)
        return httpx.Response(503)

    retrier = harness.transport(handler, breaker=theirs, max_attempts=3)
    response = harness.send(retrier)
    assert response.status_code == 503 and calls == ["/items"]
    info = rt.retry_info(response)
    assert info.stop_reason is rt.StopReason.CIRCUIT_OPEN and info.attempts == 1
    assert theirs.state(URL) == "open" and harness.waits == []


def test_a_learned_transition_is_not_echoed() -> None:
    """A breaker that learns an opening shares nothing; an event from another process is
    applied to every breaker and not sent back."""
    clock = FakeClock()
    wall = FakeClock(WALL)
    store = RecordingStore(wallclock=wall)
    mine = breaker(clock, store, min_requests=1, failure_ratio=1.0)
    theirs = breaker(clock, store, min_requests=1, failure_ratio=1.0)
    mine.record(ORIGIN, True)
    assert store.shared == [("open", ORIGIN, WALL + 5.0, 5.0)]
    assert theirs.state(ORIGIN) == "open"
    store._learn("open", B_ORIGIN, WALL + 8.0, 8.0)
    assert mine.state(B_ORIGIN) == "open" and theirs.state(B_ORIGIN) == "open"
    assert theirs.opened_for(B_ORIGIN) == 8.0
    store._learn("close", B_ORIGIN, 0.0, 0.0)
    assert mine.state(B_ORIGIN) == "closed" and theirs.state(B_ORIGIN) == "closed"
    assert store.shared == [("open", ORIGIN, WALL + 5.0, 5.0)]


# -- regressions ------------------------------------------------------------------------------


def test_an_idle_transports_inbox_keeps_one_entry_per_origin() -> None:
    """A transport that sends nothing for a while keeps the cooldowns the store delivers
    until its next request. One origin answering 429 Retry-After: 1 every two seconds (for a
    day: 43,200 events) must not pile up one inbox entry per event: only the latest end can
    matter, so the inbox keeps one entry per origin, like the store's own table."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    idle_clock, busy_clock = FakeClock(), FakeClock()
    idle = rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(200)), store=store,
                             clock=idle_clock, sleep=idle_clock.sleep, jitter="none",
                             base_delay=0.0)
    busy = rt.RetryTransport(
        httpx.MockTransport(lambda r: httpx.Response(429, headers={"Retry-After": "1"})),
        store=store, clock=busy_clock, sleep=busy_clock.sleep, max_attempts=1, budget=None,
    )
    with httpx.Client(transport=busy) as client:
        for i in range(500):
            if i:
                advance(2.0, wall, busy_clock, idle_clock)
            client.get(A)
    with httpx.Client(transport=idle) as client:  # the latest cooldown is the one applied
        assert client.get(A).status_code == 200
    assert idle_clock.waits == [1.0]
    for _ in range(500):  # the same, without the request that empties the inbox
        advance(2.0, wall, busy_clock, idle_clock)
        with httpx.Client(transport=busy) as client:
            client.get(A)
    entries = len(idle._controller.cooldowns.inbox)
    assert entries <= 1, f"{entries} inbox entries for one origin"




def test_a_probe_released_after_its_lease_frees_no_other_probes_slot() -> None:
    """Never more than half_open_probes in flight in all: probe 1 outlives its lease, so
    another breaker is elected as probe 2; when probe 1 then ends without a verdict, the
    slot it gives back is its own (long over), not probe 2's. (MemoryStore._release once
    popped the oldest lease whoever held it, and a third breaker was
    elected while probe 2 was in flight.)"""
    clock = FakeClock()
    wall = FakeClock(WALL)
    store = rt.MemoryStore(probe_lease=5, wallclock=wall)
    one, two, three, four = (breaker(clock, store, min_requests=1, failure_ratio=1.0)
                             for _ in range(4))
    one.record(ORIGIN, True)
    advance(5.0, clock, wall)
    refusal, probe1, _ = one.admit(ORIGIN)
    assert refusal is None
    advance(6.0, clock, wall)  # probe 1's lease is over
    refusal, probe2, _ = two.admit(ORIGIN)
    assert refusal is None  # probe 2 holds the only slot
    assert three.admit(ORIGIN)[0] == 0.0  # refused while probe 2 is in flight: right
    one.release(ORIGIN, probe1)  # probe 1 ends now, without a verdict
    assert four.state(ORIGIN) == "half_open"  # it has not asked the store yet
    assert four.admit(ORIGIN)[0] == 0.0, "a second probe was elected while probe 2 is out"
    two.release(ORIGIN, probe2)  # probe 2 ends: the slot is free for whoever asks next
    fresh = [m for m in (one, three) if m.admit(ORIGIN)[0] is None]
    assert len(fresh) == 1


def test_a_breaker_refused_during_a_probe_may_probe_a_second_after_its_release(
    harness: Harness,
) -> None:
    """A probe ends without a verdict and gives its slot back to the store; a breaker that
    was refused while it was out may probe a second later. (It used to keep refusing,
    without asking the store, until the probe's lease would have ended: probe_lease, 30 s
    by default.)"""
    race = probe_race(harness, no_verdict=True)
    wall, backend, mine, theirs, sender, other, inside = (
        race.wall, race.backend, race.mine, race.theirs, race.sender, race.other, race.inside
    )
    advance(5.0, harness.clock, wall)
    with pytest.raises(httpx.UnsupportedProtocol):
        harness.send(sender, url="https://api.example.com/probe")
    assert len(inside) == 1  # refused while the probe was out: right
    backend.outcome = 200
    advance(1.0, harness.clock, wall)
    with httpx.Client(transport=other) as client:
        response = client.get(URL)  # once: CircuitOpenError, every probe slot taken
    assert response.status_code == 200
    assert theirs.state(URL) == "closed" and mine.state(URL) == "closed"


def test_two_threads_of_one_transport_take_its_inbox_together() -> None:
    """Two threads of one transport (one httpx.Client shared, as usual) both start a
    request while a learned cooldown waits in its inbox: the first is paused after it took
    the inbox, before it applied it, and the second runs meanwhile: neither fails, and the
    cooldown is applied. (When the inbox was
    a deque, checked with ``while inbox`` and then popped, the thread that checked first
    popped an empty deque and its request raised IndexError.) The window is made
    deterministic with a line trace that pauses the first thread in take_inbox."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    server.answer("a.example.com", 429, {"Retry-After": "30"})
    sender_clock, shared_clock = FakeClock(), FakeClock()
    sender = rt.RetryTransport(httpx.MockTransport(server), store=store, clock=sender_clock,
                               sleep=sender_clock.sleep, max_attempts=1)
    shared = rt.RetryTransport(httpx.MockTransport(server), store=store, clock=shared_clock,
                               sleep=lambda s: None, max_attempts=1)
    with httpx.Client(transport=sender) as client:
        client.get(A)  # one learned cooldown waits in the shared transport's inbox
    paused, resume = threading.Event(), threading.Event()
    outcome: list[object] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_name == "take_inbox":
            return local
        return None

    def local(frame: Any, event: str, arg: Any) -> Any:
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        if event == "line" and "wallclock()" in line and not paused.is_set():
            paused.set()
            resume.wait(10)
        return local

    def first() -> None:
        sys.settrace(tracer)
        try:
            with httpx.Client(transport=shared) as client:
                outcome.append(client.get(B).status_code)
        except BaseException as exc:  # reported below
            outcome.append(exc)
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=first)
    thread.start()
    try:
        # Paused after it took the inbox, before it applied what it took.
        assert paused.wait(10), "take_inbox no longer reads the store's wallclock"
        with httpx.Client(transport=shared) as client:  # the second thread: this one
            assert client.get(B).status_code == 200
    finally:
        resume.set()
        thread.join(10)
    assert outcome == [200], outcome
    with pytest.raises(rt.CooldownError):  # the learned cooldown was applied all the same
        with httpx.Client(transport=shared) as client:
            client.get(A, extensions={"retry": {"max_retry_after": 1}})


# -- validation ----------------------------------------------------------------------------


NOT_STORES = [object(), "redis://localhost:6379/0", {}, True, 1, rt.RetryBudget]


@pytest.mark.parametrize("bad", NOT_STORES)
@pytest.mark.parametrize("kind", ["sync", "async", "breaker"])
def test_store_must_be_a_store(kind: str, bad: object) -> None:
    """Anything but a store is the wrong kind: a TypeError naming the argument."""
    with pytest.raises(TypeError, match="store"):
        if kind == "sync":
            rt.RetryTransport(httpx.MockTransport(Backend()), store=bad)
        elif kind == "async":
            rt.AsyncRetryTransport(httpx.MockTransport(Backend()), store=bad)
        else:
            rt.CircuitBreaker(store=bad)


def test_a_store_is_checked_even_without_cooldowns() -> None:
    with pytest.raises(TypeError, match="store"):
        rt.RetryTransport(httpx.MockTransport(Backend()), store="x", cooldown=False)


@pytest.mark.parametrize(("bad", "error"), [
    (0, ValueError), (-1, ValueError), (0.0, ValueError), (math.nan, ValueError),
    (math.inf, ValueError), (True, TypeError), (False, TypeError), ("x", TypeError),
    ("30", TypeError), (None, TypeError), (2e9, ValueError),
])
def test_probe_lease_must_be_positive_seconds(bad: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="probe_lease"):
        rt.MemoryStore(probe_lease=bad)


@pytest.mark.parametrize("good", [0.001, 1, 30.0, 1e9])
def test_probe_lease_accepts_positive_seconds(good: float) -> None:
    store = rt.MemoryStore(probe_lease=good)
    assert store.probe_lease == good and isinstance(store.probe_lease, float)
    assert store.wallclock is time.time
    assert repr(store) == f"MemoryStore(probe_lease={good:g})"
    with store as entered:
        assert entered is store
    store.close()  # nothing to stop: closing twice is fine


@pytest.mark.parametrize("bad", [1.0, "time.time", WALL])
def test_wallclock_must_be_a_function(bad: object) -> None:
    with pytest.raises(TypeError, match="wallclock"):
        rt.MemoryStore(wallclock=bad)


@pytest.mark.parametrize(("kwargs", "name", "error"), [
    ({"url": 123}, "url", TypeError),
    ({"url": ""}, "url", ValueError),
    ({"url": "   "}, "url", ValueError),
    ({"url": None}, "url", TypeError),
    ({"url": "http://localhost:6379/0"}, "url", ValueError),
    ({"prefix": ""}, "prefix", ValueError),
    ({"prefix": 5}, "prefix", TypeError),
    ({"socket_timeout": 0}, "socket_timeout", ValueError),
    ({"socket_timeout": -1}, "socket_timeout", ValueError),
    ({"socket_timeout": math.nan}, "socket_timeout", ValueError),
    ({"socket_timeout": "1"}, "socket_timeout", TypeError),
    ({"connect_timeout": 0}, "connect_timeout", ValueError),
    ({"probe_lease": 0}, "probe_lease", ValueError),
    ({"wallclock": 5}, "wallclock", TypeError),
])
def test_redis_store_arguments_are_checked_before_connecting(
    kwargs: dict[str, Any], name: str, error: type[Exception]
) -> None:
    with pytest.raises(error, match=name):
        rt.RedisStore(**kwargs)
    assert store_threads() == []  # it failed before starting its thread


def store_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("retry-transport store")]


def test_a_redis_store_without_a_server_returns_at_once_and_shares_locally(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An unreachable Redis: the constructor does not wait, and the process's own members
    still share cooldowns and breaker transitions."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    started = time.monotonic()
    store = rt.RedisStore("redis://127.0.0.1:1/0", connect_timeout=5.0, wallclock=lambda: WALL)
    try:
        assert time.monotonic() - started < 4.0
        assert store.connected is False
        assert isinstance(store, rt.MemoryStore)
        assert "not connected" in repr(store)
        server = Script()
        server.answer("a.example.com", 429, {"Retry-After": "30"})
        clocks = FakeClock(), FakeClock()
        one, two = (rt.RetryTransport(httpx.MockTransport(server), store=store, clock=c,
                                      sleep=c.sleep, jitter="none", base_delay=0.0,
                                      max_attempts=1) for c in clocks)
        with httpx.Client(transport=one) as client:
            client.get(A)
        with httpx.Client(transport=two) as client:
            assert client.get(A).status_code == 200
        assert clocks[1].waits == [30.0]
        mine = breaker(clocks[0], store, min_requests=1, failure_ratio=1.0)
        theirs = breaker(clocks[0], store, min_requests=1, failure_ratio=1.0)
        mine.record(ORIGIN, True)
        assert theirs.state(ORIGIN) == "open"
    finally:
        store.close()
        store.close()  # idempotent
    assert store.connected is False
    assert store_threads() == []


# -- lifetimes -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_closing_a_transport_never_closes_its_store(harness: Harness, kind: str) -> None:
    if kind == "memory":
        store: Any = RecordingStore(wallclock=lambda: WALL)
    else:
        class Counting(rt.RedisStore):  # type: ignore[misc]
            closes = 0

            def close(self) -> None:
                self.closes += 1
                super().close()

        store = Counting("redis://127.0.0.1:1/0", wallclock=lambda: WALL)
    try:
        server = Script()
        first, _ = member(harness, server, store=store)
        second, second_clock = member(harness, server, store=store)
        mine = breaker(harness.clock, store)
        third, _ = member(harness, server, store=store, breaker=mine)
        harness.send(first, url=A)  # each send closes its client, and the transport
        harness.send(third, url=A)
        if harness.mode == "sync":
            with first:
                pass
            first.close()
        else:
            async def close() -> None:
                async with first:
                    pass
                await first.aclose()

            harness.run(close)
        assert store.closes == 0
        # The closed transport still shares: the store is alive and well.
        server.answer("a.example.com", 429, {"Retry-After": "9"})
        harness.send(first, url=A)
        assert harness.send(second, url=A).status_code == 200
        assert second_clock.waits == [9.25]
    finally:
        store.close()
    assert store.closes == 1


def test_collected_transports_and_breakers_leave_the_store() -> None:
    """The store holds its members weakly: once the application drops a transport or a
    breaker, nothing of it stays alive, and the store goes on serving the others."""
    wall = FakeClock(WALL)
    store = rt.MemoryStore(wallclock=wall)
    server = Script()
    survivor_clock = FakeClock()
    survivor = rt.RetryTransport(httpx.MockTransport(server), store=store,
                                 clock=survivor_clock, sleep=survivor_clock.sleep,
                                 jitter="none", base_delay=0.0, max_attempts=1)
    survivor_breaker = breaker(survivor_clock, store, min_requests=1, failure_ratio=1.0)

    def build() -> list[weakref.ref[Any]]:
        clock = FakeClock()
        sync = rt.RetryTransport(httpx.MockTransport(server), store=store, clock=clock,
                                 sleep=clock.sleep, max_attempts=1)
        asynchronous = rt.AsyncRetryTransport(httpx.MockTransport(server), store=store,
                                              clock=clock, sleep=clock.asleep)
        gone = breaker(clock, store, min_requests=1, failure_ratio=1.0)
        with_breaker = rt.RetryTransport(httpx.MockTransport(server), store=store,
                                         breaker=gone, clock=clock, sleep=clock.sleep)
        server.answer("a.example.com", 429, {"Retry-After": "30"})
        with httpx.Client(transport=sync) as client:
            assert client.get(A).status_code == 429  # shared: everyone was told
        gone.record(B_ORIGIN, True)  # an opening, shared
        members = [sync, asynchronous, gone, with_breaker]
        return [weakref.ref(m) for m in members] + [
            weakref.ref(t._controller) for t in (sync, asynchronous, with_breaker)
        ]

    refs = build()
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
    assert survivor_breaker.state(B_ORIGIN) == "open"
    # The survivor learned what the dead told it, and the store still works.
    with httpx.Client(transport=survivor) as client:
        assert client.get(A).status_code == 200
    assert survivor_clock.waits == [30.0]
    server.answer("b.example.com", 503, {"Retry-After": "4"})
    with httpx.Client(transport=survivor) as client:
        client.get(B)
    survivor_breaker.record(A_ORIGIN, True)
    late_clock = FakeClock()
    late = rt.RetryTransport(httpx.MockTransport(server), store=store, clock=late_clock,
                             sleep=late_clock.sleep, jitter="none", base_delay=0.0)
    with httpx.Client(transport=late) as client:
        assert client.get(B).status_code == 200
    assert late_clock.waits == [4.0]


# -- threads ----------------------------------------------------------------------------------


def test_eight_threads_hammering_one_store() -> None:
    """Eight threads, each with its transport on one store, send to 50 origins, a third of
    which answer 429 Retry-After: 30. Time stands still, so no cooldown ends: afterwards
    every transport holds every origin that answered 429, and no other."""
    store = rt.MemoryStore(wallclock=lambda: WALL)
    origins = [f"https://o{i}.example.com" for i in range(50)]
    hot = {f"o{i}.example.com" for i in range(0, 50, 3)}
    seen: set[str] = set()
    seen_lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        host = str(request.url.host)
        with seen_lock:
            seen.add(host)
        if host in hot:
            return httpx.Response(429, headers={"Retry-After": "30"})
        return httpx.Response(200)

    transports = [
        rt.RetryTransport(httpx.MockTransport(handler), store=store, clock=lambda: 1000.0,
                          sleep=lambda s: None, max_attempts=1, budget=None)
        for _ in range(8)
    ]
    assert hammer(transports, origins, rounds=3) == []
    assert seen == {f"o{i}.example.com" for i in range(50)}
    for transport in transports:
        with httpx.Client(transport=transport) as client:
            for origin in origins:
                host = origin.removeprefix("https://")
                if host in hot:
                    with pytest.raises(rt.CooldownError) as caught:
                        client.get(origin, extensions={"retry": {"max_retry_after": 1}})
                    assert caught.value.remaining == 30.0
                else:
                    response = client.get(origin, extensions={"retry": {"max_retry_after": 1}})
                    assert response.status_code == 200
                    assert rt.retry_info(response).total_wait == 0.0


def test_eight_threads_with_a_breaker_each_on_one_store() -> None:
    """Eight threads, each with its transport and breaker on one store, send to 20 origins,
    half of which fail. Time stands still: afterwards every breaker is open for every failing
    origin and closed for the others, and each was told of each opening once (its own, or
    learned)."""
    store = rt.MemoryStore(wallclock=lambda: WALL)
    origins = [f"https://o{i}.example.com" for i in range(20)]
    failing = {f"o{i}.example.com" for i in range(0, 20, 2)}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500 if request.url.host in failing else 200)

    events: list[list[Any]] = [[] for _ in range(8)]
    breakers = [rt.CircuitBreaker(min_requests=3, failure_ratio=1.0, clock=lambda: 1000.0,
                                  store=store, hooks=events[i].append) for i in range(8)]
    transports = [
        rt.RetryTransport(httpx.MockTransport(handler), breaker=breakers[i], store=store,
                          clock=lambda: 1000.0, sleep=lambda s: None, max_attempts=1)
        for i in range(8)
    ]
    assert hammer(transports, origins, rounds=4, refused=rt.CircuitOpenError) == []
    expected = sorted(f"{o}:443" for o in origins if o.removeprefix("https://") in failing)
    for one, told in zip(breakers, events, strict=True):
        for origin in origins:
            host = origin.removeprefix("https://")
            assert one.state(origin) == ("open" if host in failing else "closed"), origin
        opened = sorted(e.url if e.learned else rt_origin(e.url) for e in told
                        if e.kind == "breaker_open")
        assert opened == expected
        assert {e.kind for e in told} == {"breaker_open"}


def rt_origin(url: str) -> str:
    """The origin of a URL as breakers spell it."""
    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.host}:{parsed.port or 443}"


def test_an_idle_member_keeps_a_bounded_inbox() -> None:
    """A transport that sends nothing, on a store told of 20,000 cooldowns: its inbox
    keeps at most INBOX_LIMIT of them, those that end last; one already over is not kept;
    and its next request applies them at once, held as the store said."""
    from retry_transport._guards.cooldowns import INBOX_LIMIT

    wall = FakeClock(start=1_000_000.0)
    store = rt.MemoryStore(wallclock=wall)
    clock = FakeClock()
    idle = rt.RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)),
                             store=store, clock=clock, sleep=clock.sleep, jitter="none",
                             base_delay=0.5)
    table = idle._controller.cooldowns
    assert table is not None
    for i in range(20_000):  # the later the origin, the later its end
        table.receive_cooldown(f"https://o{i}.example.com:443", wall.now + 10.0 + i / 1000,
                               "retry-after")
    table.receive_cooldown("https://over.example.com:443", wall.now - 1.0, "retry-after")
    assert len(table.inbox) <= INBOX_LIMIT
    assert "https://over.example.com:443" not in table.inbox
    assert "https://o19999.example.com:443" in table.inbox  # the latest end survives
    assert "https://o0.example.com:443" not in table.inbox  # the soonest made room
    idle.handle_request(httpx.Request("GET", "https://o19999.example.com/"))
    assert clock.waits == [pytest.approx(10.0 + 19.999 + 0.5)]
    assert table.inbox == {}
