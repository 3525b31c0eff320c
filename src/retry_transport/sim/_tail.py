"""The tail at scale: hedged requests against a service whose latency has a heavy tail.

Dean and Barroso ("The Tail at Scale", Communications of the ACM, 2013): when one call in a
hundred is slow, a second copy of a request that has not answered after about the 95th
percentile of the latency cuts the tail for a few percent more calls. The model
(:func:`run_tail`):

* One client sends ``requests`` (10,000) GETs at a steady ``rate`` (1,000 a second: the
  ``i``-th at ``warmup_time + i / rate`` seconds), concurrently (each in a task of its own,
  whatever those before it are doing), through one real ``AsyncRetryTransport``
  (``policy``: ``RetryPolicy()``; ``hedging``: ``None``, ``Hedging(0.05)`` or
  ``Hedging("p95")``). Each request is handed to the transport's ``handle_async_request``
  as an ``httpx.AsyncClient`` hands it (the client itself is left out: it adds nothing to
  what is measured, and some 60% to the CPU time of the command's 30,000 requests).
* Warm-up: before them, ``warmup`` (100) requests over ``warmup_time`` (1 s), not counted,
  to the same origin. A client in its steady state has been running for a while; these fill
  the transport's latency table, so that ``"p95"`` is read from it for every request
  counted: until an origin has ``min_samples`` (50) latencies the transport uses
  ``fallback_delay`` (50 ms), and it reads a percentile delay again only once a second, so
  without a warm-up the first second's requests would all wait 50 ms before their hedge.
* The service: every call, a hedge's copy included, is an independent call with a latency
  of its own: ``slow_time`` (1 s) with probability ``slow_share`` (1%), else lognormal with
  median ``median`` (10 ms) and shape ``spread`` (0.25: 95% of these calls within 6.1 to
  16.3 ms). It answers 200 once that time has passed. It has no capacity limit: its calls do
  not slow each other down. A call the transport cancels (the loser of a hedged request:
  the transport cancels its task) stops there and frees the service at once: a call's
  *service time* runs from its arrival to its answer or its cancellation.
* Budget: with ``budget=True`` (the default) the transport has the default
  ``RetryBudget()`` (500 tokens; a hedge takes 5 as a retry does, put back if it wins; a
  success puts back 1), watched: the fewest tokens it held after paying for one, and the
  hedges (or retries) it could not pay for. ``budget=False``: ``budget=None``.
* Counting, over the counted requests: latency at the client, from a request's start to its
  response; attempts per request from its ``retry_info`` (the cancelled loser included);
  the calls that reached the service, those cancelled, and their service time; the hedging
  delays the transport used (its ``hedge`` events).
* Determinism: the ``k``-th call of request ``i`` (warm-up requests first) takes the ``k``-th
  of ``policy.max_attempts`` times drawn for that request, in request order, from
  ``random.Random(f"tail:{seed}")``. So the three configurations meet the same calls, and
  a run depends on its seed alone.

With the defaults (seed 0): without hedging p50 10.0 ms, p99 21.1 ms, p99.9 1.00 s (the
slow calls, 1% of them), 1 attempt per request; with ``Hedging(0.05)`` p99.9 63.7 ms for
1.0089 attempts per request; with ``Hedging("p95")`` (a delay of 15.9 ms) p99.9 29.6 ms for
1.0426. The p50 stays 10.0 ms, the budget never runs low (482 tokens at the lowest), and
the service spends 11 ms per request on calls instead of 19 ms: the slow calls that lost
were cancelled. A run takes about 1 s of CPU time without hedging and 2.3 s with it (the
hedged driver runs every request's attempts in a task group of their own).
"""

from __future__ import annotations

import math
import random
from typing import Final

import anyio
import httpx

from retry_transport import (
    AsyncRetryTransport,
    Hedging,
    RetryBudget,
    RetryEvent,
    RetryPolicy,
    retry_info,
)

from . import _virtual as virtual
from ._results import TailResult
from ._virtual import run_jumping

__all__ = ["TAIL_HEDGING", "run_tail"]

_ORIGIN: Final = "http://service.sim"
_URL: Final = httpx.URL(f"{_ORIGIN}/work")
_WARMUP_URL: Final = httpx.URL(f"{_ORIGIN}/warm-up")
#: Every answer's empty body, as a stream: a response given none reads its content at once,
#: 15 times as long to build (0.15 s of a run).
_EMPTY: Final = httpx.ByteStream(b"")

#: The command's three configurations: (label, hedging).
TAIL_HEDGING: Final[tuple[tuple[str, Hedging | None], ...]] = (
    ("none", None),
    ("Hedging(0.05)", Hedging(0.05)),
    ('Hedging("p95")', Hedging("p95")),
)


class _WatchedBudget(RetryBudget):
    """The default ``RetryBudget()``, noting the fewest tokens it held after paying for a
    hedge or a retry, and how many it could not pay for."""

    __slots__ = ("lowest", "refused")

    def __init__(self) -> None:
        super().__init__()
        self.lowest = self.capacity
        self.refused = 0

    def acquire(self, *, timeout: bool = False) -> float | None:
        cost = super().acquire(timeout=timeout)
        if cost is None:
            self.refused += 1
        else:  # tokens only fall here: the lowest is always one seen just after a payment
            self.lowest = min(self.lowest, self.tokens)
        return cost


class _TailService(httpx.AsyncBaseTransport):
    """Answers each call 200 after its own drawn time; a cancelled call stops at once."""

    def __init__(self, times: list[list[float]], counted_from: int) -> None:
        self.times = times
        self.counted_from = counted_from
        self.seen = [0] * len(times)  # calls per request so far
        self.calls = 0
        self.cancelled = 0
        self.busy = 0.0  # service time of the counted requests' calls

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        rid: int = request.extensions["sim_request"]
        k = self.seen[rid]
        self.seen[rid] = k + 1
        counted = rid >= self.counted_from
        start = virtual.now()
        try:
            await virtual.sleep(self.times[rid][k])
        except anyio.get_cancelled_exc_class():
            if counted:
                self.cancelled += 1
            raise
        finally:
            if counted:
                self.calls += 1
                self.busy += virtual.now() - start
        return httpx.Response(200, stream=_EMPTY, request=request)


def _check(requests: int, rate: float, warmup: int, warmup_time: float, median: float,
           spread: float, slow_share: float, slow_time: float) -> None:
    if requests < 1 or warmup < 0:
        raise ValueError(f"requests must be >= 1 and warmup >= 0, got {requests!r}, {warmup!r}")
    if not rate > 0 or not warmup_time >= 0 or (warmup and not warmup_time > 0):
        raise ValueError("rate must be > 0, warmup_time >= 0 (> 0 with a warm-up)")
    if not median > 0 or not spread >= 0 or not slow_time > 0:
        raise ValueError("median and slow_time must be > 0, spread >= 0")
    if not 0 <= slow_share <= 1:
        raise ValueError(f"slow_share must be from 0 to 1, got {slow_share!r}")


def run_tail(
    hedging: Hedging | None = None,
    *,
    policy: RetryPolicy | None = None,
    budget: bool = True,
    requests: int = 10_000,
    rate: float = 1000.0,
    warmup: int = 100,
    warmup_time: float = 1.0,
    median: float = 0.01,
    spread: float = 0.25,
    slow_share: float = 0.01,
    slow_time: float = 1.0,
    seed: int = 0,
) -> TailResult:
    """Run the tail-at-scale scenario once, in virtual time.

    Run it with ``hedging`` ``None``, ``Hedging(0.05)`` and ``Hedging("p95")`` (the same
    seed: the same calls) to compare them.

    Args:
        hedging: the transport's ``hedging=``; ``None``: no hedging.
        policy: the transport's policy; default ``RetryPolicy()``.
        budget: the default ``RetryBudget()`` (True) or ``budget=None`` (False).
        requests: the requests counted.
        rate: requests per second, one every ``1 / rate`` seconds.
        warmup: requests before them, not counted, evenly over ``warmup_time`` seconds.
        warmup_time: seconds of warm-up; the counted requests start then.
        median: the median of a call that is not slow, seconds.
        spread: the shape (sigma) of the lognormal latency of a call that is not slow.
        slow_share: the probability of a slow call.
        slow_time: how long a slow call takes, seconds.
        seed: seeds the calls' times.
    """
    policy = policy if policy is not None else RetryPolicy()
    _check(requests, rate, warmup, warmup_time, median, spread, slow_share, slow_time)
    draw = random.Random(f"tail:{seed}")
    mu = math.log(median)
    times = [
        [slow_time if draw.random() < slow_share else draw.lognormvariate(mu, spread)
         for _ in range(policy.max_attempts)]
        for _ in range(warmup + requests)
    ]

    async def main() -> TailResult:
        service = _TailService(times, warmup)
        watched = _WatchedBudget() if budget else None
        delays: list[float] = []

        def hook(event: RetryEvent) -> None:
            if event.kind == "hedge" and event.url == str(_URL):
                delays.append(event.wait)

        transport = AsyncRetryTransport(
            service,
            policy=policy,
            budget=watched,
            hedging=hedging,
            hooks=hook if hedging is not None else None,  # only hedges need one
        )
        latencies = [math.nan] * requests
        attempts = [0] * requests
        hedged = [False] * requests
        won = [False] * requests

        async def request(rid: int, url: httpx.URL) -> None:
            start = virtual.now()
            response = await transport.handle_async_request(
                virtual.get(url, sim_request=rid)
            )
            end = virtual.now()
            await response.aclose()
            if rid < warmup:
                return
            index = rid - warmup
            latencies[index] = end - start
            info = retry_info(response)
            if info is not None:
                attempts[index] = info.attempts
                hedged[index] = info.hedges > 0
                won[index] = any(a.hedge and a.status is not None for a in info.history)
            else:  # pragma: no cover - the transport records every response it hands over
                attempts[index] = 1

        t0 = virtual.now()
        async with transport, virtual.task_group() as nursery:
            for rid in range(warmup):
                await virtual.sleep_until(t0 + rid * warmup_time / warmup)
                nursery.start_soon(request, rid, _WARMUP_URL)
            for index in range(requests):
                await virtual.sleep_until(t0 + warmup_time + index / rate)
                nursery.start_soon(request, warmup + index, _URL)
        summary = transport.latency(_ORIGIN)
        return TailResult(
            hedging=hedging,
            policy=policy,
            budgeted=budget,
            seed=seed,
            requests=requests,
            rate=rate,
            warmup=warmup,
            warmup_time=warmup_time,
            median=median,
            spread=spread,
            slow_share=slow_share,
            slow_time=slow_time,
            latencies=tuple(latencies),
            attempts=tuple(attempts),
            hedged=sum(hedged),
            hedge_wins=sum(won),
            calls=service.calls,
            cancelled=service.cancelled,
            service_time=service.busy,
            delays=(min(delays), max(delays)) if delays else None,
            measured_p95=summary.p95 if summary is not None else None,
            budget_lowest=watched.lowest if watched is not None else None,
            budget_refused=watched.refused if watched is not None else 0,
        )

    return run_jumping(main)
