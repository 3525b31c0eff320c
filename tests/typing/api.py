"""Checked by ``mypy --strict`` in CI, never executed: the public API as users type it."""

from __future__ import annotations

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
