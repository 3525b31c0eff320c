"""A sustained outage: steady traffic through one client while the service answers 503.

The model:

* Requests arrive as a Poisson process (``rate`` per second, 100) for ``duration`` seconds
  (60), all through ONE real :class:`~retry_transport.AsyncRetryTransport` (each GET handed
  to it as an ``httpx.AsyncClient`` would hand it), so they share its retry budget. Arrival
  gaps come from ``random.Random(f"outage:{seed}:arrivals")`` and the transport's jitter
  from ``random.Random(f"outage:{seed}:jitter")``, drawn in the order failures come back
  (their times are continuous random values, so no two coincide).
* Each attempt takes a virtual time drawn uniformly from ``call_time`` (10 to 100 ms), from
  a generator of its request's own, so a run does not depend on the order in which the
  event loop wakes tasks at one instant.
* An attempt that *starts* during the outage, ``[start, end)`` (``[0, 30 s)`` by default),
  is answered 503 without ``Retry-After`` at its end; any other attempt gets 200. The
  service has no capacity limit here: the question is how much load the clients add, not
  what that load does to the service.
* Load amplification is the attempts made by the requests that arrived during the outage
  (retries included, whenever sent) divided by the number of those requests. Recovery is
  the time from the end of the outage to the last failure the application saw.
* With a circuit breaker (``breaker=CircuitBreaker``, built on the virtual clock), the
  client's one origin opens after enough failures and its requests fail at once with
  :class:`~retry_transport.CircuitOpenError`, never reaching the service; a failure is a
  503 the application received or a ``CircuitOpenError``. The load on the service is then
  the attempts that *start* during the outage (each answered 503), counted whichever request
  sent them, and its recovery also runs to the first success the application sees after the
  outage: the breaker's first probe after it, within ``max_break_duration`` (plus the
  gap to the next request and the probe's call time).
* :data:`LONG_OUTAGE` is the breaker's scenario: 120 s of 503 from ``t = 0``, arrivals for
  150 s. Long enough for the default breaker's breaks to double to their 60 s cap before
  the service is back; 30 s of healthy traffic after it show the recovery (the 60 s break
  running at the end of the outage ends at about 135 s).
* The outage starts with the run, so the breaker's window starts empty: its first 20
  outcomes (``min_requests``), all failures, open it within a fraction of a second. A
  breaker whose window is full of successes when the outage begins opens only once the
  failures match those successes (``failure_ratio`` 0.5 over a 30 s ``window``): with
  ``outage=(30.0, 150.0)`` and ``duration=210.0``, about 14 s into the outage.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any, Final

import httpx

from retry_transport import (
    AsyncRetryTransport,
    CircuitBreaker,
    CircuitOpenError,
    RetryBudget,
    RetryEvent,
    RetryPolicy,
    StopReason,
    retry_info,
)

from . import _virtual as virtual
from ._results import OutageResult
from ._storm import BudgetFactory
from ._virtual import run_jumping

__all__ = ["LONG_OUTAGE", "BreakerFactory", "run_outage"]

_URL: Final = httpx.URL("http://service.sim/work")
#: Every answer's empty body, as a stream: a response given none reads its content at once,
#: many times as long to build.
_EMPTY: Final = httpx.ByteStream(b"")

#: Builds the client's breaker: called with ``clock=`` the virtual clock,
#: so a class such as ``CircuitBreaker`` or a ``functools.partial`` of it (both picklable,
#: unlike a lambda, so the command can run the scenario in a worker process).
BreakerFactory = Callable[..., CircuitBreaker]

#: The long outage the breaker is measured in: ``run_outage(**LONG_OUTAGE, ...)``. 120 s of
#: 503 starting at ``t = 0``, arrivals for 150 s. The default breaker opens within the first
#: second; its breaks of 5, 10, 20 and 40 s end in failed probes, and the 60 s one that
#: follows (from about 75 s) outlasts the outage: its probe at about 135 s finds the service
#: back. 150 s rather than 180 s: the healthy tail costs as much CPU as the outage's traffic.
LONG_OUTAGE: Final[dict[str, Any]] = {"duration": 150.0, "outage": (0.0, 120.0)}


class _OutageService(httpx.AsyncBaseTransport):
    def __init__(
        self, t0: float, outage: tuple[float, float], call_time: tuple[float, float]
    ) -> None:
        self.t0 = t0
        self.outage = outage
        self.call_time = call_time
        self.attempts: dict[int, int] = {}
        self.starts: list[float] = []
        self.rngs: dict[int, random.Random] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        now = virtual.now() - self.t0
        rid: int = request.extensions["sim_request"]
        self.attempts[rid] = self.attempts.get(rid, 0) + 1
        self.starts.append(now)
        low, high = self.call_time
        await virtual.sleep(self.rngs[rid].uniform(low, high))
        down = self.outage[0] <= now < self.outage[1]
        return httpx.Response(503 if down else 200, stream=_EMPTY, request=request)


def run_outage(
    policy: RetryPolicy | None = None,
    *,
    budget: BudgetFactory | None = RetryBudget,
    breaker: BreakerFactory | None = None,
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
        breaker: builds the client's circuit breaker, called with ``clock=`` the virtual
            clock (``CircuitBreaker`` for the defaults); ``None`` (default): no breaker.
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
    if not outage[0] <= outage[1]:
        raise ValueError(f"outage must be (start, end) with start <= end, got {outage}")

    async def main() -> OutageResult:
        """The outage in virtual time: the service, the clients and their transports run
        until the load ends; the refusals and the breaker's transitions gathered."""
        t0 = virtual.now()
        service = _OutageService(t0, outage, call_time)
        refusals: list[float] = []
        transitions: list[tuple[float, str]] = []

        def hook(event: RetryEvent) -> None:
            if event.kind.startswith("breaker_"):
                transitions.append((virtual.now() - t0, event.kind.removeprefix("breaker_")))

        circuit = breaker(clock=virtual.now) if breaker is not None else None
        transport = AsyncRetryTransport(
            service,
            policy=policy,
            budget=budget() if budget is not None else None,
            breaker=circuit,
            # Only a breaker's transitions need a hook (the budget's refusals are read from
            # each response's retry_info); a transport without hooks builds no events.
            hooks=hook if circuit is not None else None,
            rng=random.Random(f"outage:{seed}:jitter"),
        )
        arrivals = random.Random(f"outage:{seed}:arrivals")
        bucket = transport.budget
        arrived: list[float] = []
        failed_at: list[float] = []
        refused = [0]
        first_success: list[float] = []
        lowest = [bucket.tokens if bucket is not None else 0.0]
        refilled: list[float] = []

        async def request(rid: int) -> None:
            budget_refused = False
            try:  # the request as an AsyncClient hands it to its transport
                request = virtual.get(_URL, sim_request=rid)
                response = await transport.handle_async_request(request)
                await response.aclose()  # an empty body: nothing to read
            except CircuitOpenError:
                failed = True
                refused[0] += 1
            else:
                failed = response.status_code >= 400
                info = retry_info(response)
                reason = info.stop_reason if info is not None else None
                budget_refused = reason is StopReason.BUDGET_EXHAUSTED
            now = virtual.now() - t0
            del service.rngs[rid]
            if budget_refused:  # the budget refused this request's retry as it ended, now
                refusals.append(now)
            if failed:
                failed_at.append(now)
            elif not first_success and now >= outage[1]:
                first_success.append(now)
            if bucket is not None:
                tokens = bucket.tokens
                lowest[0] = min(lowest[0], tokens)
                if not refilled and now >= outage[1] and tokens >= bucket.capacity:
                    refilled.append(now)

        async with transport:
            async with virtual.task_group() as nursery:
                now = 0.0
                rid = 0
                while True:
                    now += arrivals.expovariate(rate)
                    if now >= duration:
                        break
                    await virtual.sleep_until(t0 + now)
                    arrived.append(now)
                    service.rngs[rid] = random.Random(arrivals.getrandbits(64))
                    nursery.start_soon(request, rid)
                    rid += 1
        in_outage = [i for i, t in enumerate(arrived) if outage[0] <= t < outage[1]]
        starts = service.starts
        return OutageResult(
            policy=policy,
            budgeted=bucket is not None,
            breaker=circuit is not None,
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
            attempts_in_outage=sum(outage[0] <= t < outage[1] for t in starts),
            refused=refused[0],
            first_success_at=first_success[0] if first_success else None,
            breaker_transitions=tuple(transitions),
            attempts_per_second=_per_second(starts),
            failed_per_second=_per_second(failed_at),
        )

    return run_jumping(main)


def _per_second(times: list[float]) -> tuple[int, ...]:
    """How many of ``times`` fall in each second of the run: ``[0, 1)``, ``[1, 2)``, ..."""
    counts = [0] * (math.floor(max(times, default=-1.0)) + 1)
    for t in times:
        counts[math.floor(t)] += 1
    return tuple(counts)
