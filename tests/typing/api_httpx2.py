"""Checked by ``mypy --strict`` in CI, never executed: the httpx2 flavour as users type it."""

from __future__ import annotations

import random

import httpx
import httpx2
import openai

import retry_transport as rt1
import retry_transport.httpx2 as rt


def sync_usage() -> None:
    transport = rt.RetryTransport(
        httpx2.HTTPTransport(), max_attempts=5, jitter="decorrelated", rng=random.Random(1)
    )
    client = httpx2.Client(transport=transport)  # an httpx2.BaseTransport
    response = client.get("https://example.com")
    info: rt.RetryInfo | None = rt.retry_info(response)
    if info is not None:
        reason: rt.StopReason = info.stop_reason
        del reason
    policy: rt.RetryPolicy = transport.policy.replace(max_attempts=2)
    client.get("https://example.com", extensions={"retry": policy})
    with rt.RetryTransport(limits=httpx2.Limits(max_connections=5)) as entered:
        same: rt.RetryTransport = entered
        del same


async def async_usage() -> None:
    transport = rt.AsyncRetryTransport(budget=None)
    async with httpx2.AsyncClient(transport=transport) as client:
        response = await client.get("https://example.com")
        del response


def one_budget_for_both_flavours() -> None:
    budget = rt.RetryBudget()
    shared: rt1.RetryBudget = budget  # the very same class
    httpx.Client(transport=rt1.RetryTransport(budget=shared))
    httpx2.Client(transport=rt.RetryTransport(budget=shared))


def the_sdk() -> None:
    client = openai.OpenAI(
        api_key="test",
        max_retries=0,
        http_client=httpx2.Client(transport=rt.RetryTransport(auto_idempotency_key=True)),
    )
    del client


def cooldown_error() -> None:
    try:
        httpx2.Client(transport=rt.RetryTransport()).get("https://example.com")
    except rt.CooldownError as exc:
        caught: httpx2.TransportError = exc
        seconds: float = exc.remaining
        del caught, seconds


def mistakes() -> None:
    # An httpx transport is not an httpx2 one, and the other way round.
    rt.RetryTransport(httpx.HTTPTransport())  # type: ignore[arg-type]
    httpx.Client(transport=rt.RetryTransport())  # type: ignore[arg-type]
    httpx2.Client(transport=rt1.RetryTransport())  # type: ignore[arg-type]
    rt.AsyncRetryTransport(httpx2.HTTPTransport())  # type: ignore[arg-type]
    rt.RetryTransport(max_attemps=5)  # type: ignore[call-arg]
