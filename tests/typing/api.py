"""Checked by ``mypy --strict`` in CI, never executed: the public API as users type it."""

from __future__ import annotations

import dataclasses
import random

import httpx

import retry_transport as rt


def sync_usage() -> None:
    transport = rt.RetryTransport(
        httpx.HTTPTransport(), max_attempts=5, jitter="decorrelated", rng=random.Random(1)
    )
    client = httpx.Client(transport=transport)
    response = client.get("https://example.com")
    info: rt.RetryInfo | None = rt.retry_info(response)
    if info is not None:
        attempts: int = info.attempts
        reason: rt.StopReason = info.stop_reason
        history: tuple[rt.Attempt, ...] = info.history
        del attempts, reason, history
    policy: rt.RetryPolicy = transport.policy.replace(max_attempts=2)
    client.get("https://example.com", extensions={"retry": policy})
    client.get("https://example.com", extensions={"retry": False})
    seconds: float | None = rt.parse_retry_after("120")
    del seconds


async def async_usage() -> None:
    async def sleep(seconds: float) -> None:
        return None

    transport = rt.AsyncRetryTransport(sleep=sleep, budget=None)
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.get("https://example.com")
        stats: rt.RetryStats = transport.stats
        del response, stats


def hooks_and_budget() -> None:
    def on_event(event: rt.RetryEvent) -> None:
        kind: str = event.kind
        reason: rt.StopReason | None = event.stop_reason
        del kind, reason

    budget = rt.RetryBudget(capacity=100, retry_cost=5)
    transport = rt.RetryTransport(
        hooks=[on_event], budget=budget, cooldown=False, contact="ops@example.com",
        auto_idempotency_key=True, deadline=5.0, retry_body_errors=True,
    )
    tokens: float = budget.tokens
    gave_up: int = transport.stats.gave_up.get(rt.StopReason.BUDGET_EXHAUSTED, 0)
    del tokens, gave_up
    try:
        httpx.Client(transport=transport).get("https://example.com")
    except rt.CooldownError as exc:
        origin: str = exc.origin
        remaining: float = exc.remaining
        del origin, remaining


def testing_helpers() -> None:
    from retry_transport.testing import TestingLog, retry_testing

    with retry_testing(attempts=2, cap=True, seed=1) as log:
        checked: TestingLog = log
        waits: list[float] = log.waits
        del checked, waits


def simulator() -> None:
    from retry_transport.sim import run_outage, run_storm, storm_stats

    policy = rt.RetryPolicy(max_attempts=5, max_delay=0.8)
    run = run_storm(policy, seed=21)
    attempts: int = run.attempts
    stats = storm_stats(policy, runs=10)
    median: float = stats.attempts_summary.median
    amplification: float = run_outage(budget=None).amplification
    del attempts, median, amplification


def policy_collections() -> None:
    # The collections take any iterable, and are frozensets once built.
    from_sets = rt.RetryPolicy(retry_methods={"GET", "POST"}, retry_statuses={503, 429})
    from_lists = rt.RetryPolicy(retry_statuses=[503], retry_methods=["get"])
    from_generator = rt.RetryPolicy(retry_statuses=(s for s in range(500, 505)))
    statuses: frozenset[int] = from_lists.retry_statuses
    methods: frozenset[str] = from_sets.retry_methods
    replaced: rt.RetryPolicy = from_generator.replace(retry_statuses=[502])
    # mypy types dataclasses.replace() from the fields (frozensets), though at run time it
    # goes through __init__ and takes any iterable: RetryPolicy.replace() says Any.
    copied: rt.RetryPolicy = dataclasses.replace(from_sets, retry_methods=frozenset({"PUT"}))
    overridden: rt.RetryPolicy = from_sets.with_override({"retry_statuses": [500]})
    rt.RetryTransport(retry_statuses=[503], retry_methods={"GET"})
    del statuses, methods, replaced, copied, overridden
    # The ignores are the test (warn_unused_ignores): these must stay errors.
    rt.RetryPolicy(retry_statuses={"503"})  # type: ignore[arg-type]
    rt.RetryPolicy(retry_methods=[1, 2])  # type: ignore[list-item]
    rt.RetryPolicy(retry_statuses=503)  # type: ignore[arg-type]
    as_set: set[int] = from_lists.retry_statuses  # type: ignore[assignment]
    del as_set


def parsing_header_values(response: httpx.Response) -> None:
    # The natural call: headers.get() gives str | None.
    wait: float | None = rt.parse_retry_after(
        response.headers.get("Retry-After"), date=response.headers.get("Date")
    )
    raw: float | None = rt.parse_retry_after(b"120", now=10**400, date=b"")
    when = rt.parse_http_date(response.headers.get("Date"))
    from_bytes = rt.parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT", now=0)
    del wait, raw, when, from_bytes
    # The ignores are the test: other types are rejected, as at run time.
    rt.parse_retry_after(120)  # type: ignore[arg-type]
    rt.parse_retry_after("120", date=0)  # type: ignore[arg-type]
    rt.parse_http_date(1.5)  # type: ignore[arg-type]


def misspelt_keywords_are_caught() -> None:
    # The ignores are the test: with warn_unused_ignores (strict), mypy fails if these lines
    # ever stop being errors.
    rt.RetryTransport(max_attemps=5)  # type: ignore[call-arg]
    rt.RetryTransport(max_attempts="5")  # type: ignore[arg-type]
    rt.AsyncRetryTransport(jitter="wobbly")  # type: ignore[arg-type]
    rt.RetryTransport(http2=True, limits=httpx.Limits(max_connections=5), deadline=2.0)


def server_signals() -> None:
    policy = rt.RetryPolicy(
        should_retry_header="x-should-retry", trust_should_retry=True, respect_rate_limits=False
    )
    rt.RetryTransport(policy=policy, should_retry_header=None, respect_rate_limits=True)
    declined: rt.StopReason = rt.StopReason.SERVER_DECLINED
    attempt = rt.Attempt(429, None, 2.0, 2.1, "ratelimit")
    signal: str | None = attempt.signal
    held: float = attempt.held
    held_by: str | None = attempt.held_by
    del declined, signal, held, held_by
    rt.RetryTransport(trust_should_retry="yes")  # type: ignore[arg-type]


def attempt_numbers() -> None:
    rt.RetryTransport(attempt_header="x-attempt")
    rt.AsyncRetryTransport(attempt_header=None)
    rt.RetryTransport(attempt_header=1)  # type: ignore[arg-type]


def shared_state() -> None:
    with rt.RedisStore("redis://localhost:6379/0", prefix="app:", socket_timeout=0.1) as store:
        breaker = rt.CircuitBreaker(store=store, half_open_probes=2)
        sync = rt.RetryTransport(store=store, breaker=breaker)
        asynchronous = rt.AsyncRetryTransport(store=store, breaker=breaker)
        connected: bool = store.connected
        del sync, asynchronous, connected
    local: rt.MemoryStore = rt.MemoryStore(probe_lease=10.0)
    rt.RetryTransport(store=local).close()
    rt.RetryTransport(store="redis://localhost")  # type: ignore[arg-type]


def deadlines_hedging_throttling() -> None:
    throttle = rt.AdaptiveThrottle(k=2, window=60.0, rng=random.Random(0))
    transport = rt.RetryTransport(
        deadline_header="x-request-deadline-ms",
        hedging=rt.Hedging("p95", max_attempts=3, fallback_delay=0.05, min_samples=20),
        throttle=throttle,
    )
    with rt.deadline(2.5):
        left: float | None = rt.time_left()
        del left
    summary: rt.LatencySummary | None = transport.latency("https://example.com")
    if summary is not None:
        p999: float = summary.p999
        del p999
    probability: float = throttle.probability("https://example.com")
    del probability
    try:
        httpx.Client(transport=transport).get("https://example.com")
    except rt.ThrottledError as error:
        origin: str = error.origin
        chance: float = error.probability
        del origin, chance
    except rt.DeadlineExceeded as timeout:
        caught: httpx.TimeoutException = timeout
        del caught
    stats: rt.RetryStats = transport.stats
    counts: tuple[int, int, int] = (stats.hedges, stats.hedge_wins, stats.throttled)
    del counts
