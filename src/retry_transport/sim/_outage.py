"""A sustained outage: steady traffic through one client while the service answers 503.

The model:

* Requests arrive as a Poisson process (``rate`` per second, 100) for ``duration`` seconds
  (60), all through ONE ``httpx.AsyncClient`` over one real
  :class:`~retry_transport.AsyncRetryTransport`, so they share its retry budget. Arrival
  gaps come from ``random.Random(f"outage:{seed}:arrivals")`` and the transport's jitter
  from ``random.Random(f"outage:{seed}:jitter")``, drawn in the order failures come back
  (their times are continuous random values, so no two coincide).
* Each attempt takes a virtual time drawn uniformly from ``call_time`` (10 to 100 ms), from
  a generator of its request's own, so a run does not depend on the order in which trio
  wakes tasks at one instant.
* An attempt that *starts* during the outage, ``[start, end)`` (``[0, 30 s)`` by default),
  is answered 503 without ``Retry-After`` at its end; any other attempt gets 200. The
  service has no capacity limit here: the question is how much load the clients add, not
  what that load does to the service.
* Load amplification is the attempts made by the requests that arrived during the outage
  (retries included, whenever sent) divided by the number of those requests. Recovery is
  the time from the end of the outage to the last failure the application saw.
"""

from __future__ import annotations

import random
from typing import Final

import httpx
import trio

from .._budget import RetryBudget
from .._models import RetryEvent, StopReason
from .._policy import RetryPolicy
from .._transports import AsyncRetryTransport
from ._results import OutageResult
from ._storm import BudgetFactory
from ._virtual import run_virtual

__all__ = ["run_outage"]

_URL: Final = httpx.URL("http://service.sim/work")


class _OutageService(httpx.AsyncBaseTransport):
    def __init__(
        self, t0: float, outage: tuple[float, float], call_time: tuple[float, float]
    ) -> None:
        self.t0 = t0
        self.outage = outage
        self.call_time = call_time
        self.attempts: dict[int, int] = {}
        self.rngs: dict[int, random.Random] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        now = trio.current_time() - self.t0
        rid: int = request.extensions["sim_request"]
        self.attempts[rid] = self.attempts.get(rid, 0) + 1
        low, high = self.call_time
        await trio.sleep(self.rngs[rid].uniform(low, high))
        down = self.outage[0] <= now < self.outage[1]
        return httpx.Response(503 if down else 200, request=request)


def run_outage(
    policy: RetryPolicy | None = None,
    *,
    budget: BudgetFactory | None = RetryBudget,
    rate: float = 100.0,
    duration: float = 60.0,
    outage: tuple[float, float] = (0.0, 30.0),
    call_time: tuple[float, float] = (0.01, 0.1),
    seed: int = 0,
) -> OutageResult:
    """Run the sustained-outage scenario once, in virtual time.

    Args:
        policy: the client's policy; default ``RetryPolicy()``.
        budget: builds the client's retry budget (default: ``RetryBudget``, the transport's
            own default); ``None``: no budget.
        rate: mean requests per second (Poisson arrivals).
        duration: seconds during which requests arrive; each then runs to its end.
        outage: ``(start, end)``: attempts starting in ``[start, end)`` get 503.
        call_time: ``(low, high)`` seconds: each attempt takes a uniform time in between.
        seed: seeds arrivals, call times and jitter.
    """
    policy = policy if policy is not None else RetryPolicy()
    if not rate > 0 or not duration > 0:
        raise ValueError("rate and duration must be > 0")
    if not 0 < call_time[0] <= call_time[1]:
        raise ValueError(f"call_time must be (low, high) with 0 < low <= high, got {call_time}")

    async def main() -> OutageResult:
        t0 = trio.current_time()
        service = _OutageService(t0, outage, call_time)
        refusals: list[float] = []

        def hook(event: RetryEvent) -> None:
            if event.stop_reason is StopReason.BUDGET_EXHAUSTED:
                refusals.append(trio.current_time() - t0)

        transport = AsyncRetryTransport(
            service,
            policy=policy,
            budget=budget() if budget is not None else None,
            hooks=hook,
            rng=random.Random(f"outage:{seed}:jitter"),
        )
        arrivals = random.Random(f"outage:{seed}:arrivals")
        bucket = transport.budget
        arrived: list[float] = []
        failed_at: list[float] = []
        lowest = [bucket.tokens if bucket is not None else 0.0]
        refilled: list[float] = []

        async def request(client: httpx.AsyncClient, rid: int) -> None:
            response = await client.get(_URL, extensions={"sim_request": rid})
            now = trio.current_time() - t0
            del service.rngs[rid]
            if response.status_code >= 400:
                failed_at.append(now)
            if bucket is not None:
                tokens = bucket.tokens
                lowest[0] = min(lowest[0], tokens)
                if not refilled and now >= outage[1] and tokens >= bucket.capacity:
                    refilled.append(now)

        async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
            async with trio.open_nursery() as nursery:
                now = 0.0
                rid = 0
                while True:
                    now += arrivals.expovariate(rate)
                    if now >= duration:
                        break
                    await trio.sleep_until(t0 + now)
                    arrived.append(now)
                    service.rngs[rid] = random.Random(arrivals.getrandbits(64))
                    nursery.start_soon(request, client, rid)
                    rid += 1
        in_outage = [i for i, t in enumerate(arrived) if outage[0] <= t < outage[1]]
        return OutageResult(
            policy=policy,
            budgeted=bucket is not None,
            seed=seed,
            rate=rate,
            duration=duration,
            outage=outage,
            call_time=call_time,
            requests=len(arrived),
            outage_requests=len(in_outage),
            outage_attempts=sum(service.attempts.get(i, 0) for i in in_outage),
            attempts=sum(service.attempts.values()),
            failed=len(failed_at),
            last_failure_at=max(failed_at, default=None),
            budget_tokens_min=lowest[0] if bucket is not None else None,
            budget_refilled_at=refilled[0] if refilled else None,
            first_budget_refusal_at=min(refusals, default=None),
        )

    return run_virtual(main)
