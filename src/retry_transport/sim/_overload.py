"""Partial overload: a steady stream to a service with half the capacity it needs.

Between an outage (every attempt fails: the budget and the breaker's case) and a healthy
service lies the common case: a service that serves what it can and turns the rest away
at once. The model (:func:`run_overload`):

* One client sends ``rate`` (100) GETs per second for ``duration`` (120 s): request ``i``
  at ``i / rate`` seconds, each in a task of its own whatever those before it are doing,
  12,000 in all, through one real :class:`~retry_transport.AsyncRetryTransport`
  (``policy``: ``RetryPolicy()``, so at most 3 attempts, full jitter from
  ``random.Random(f"overload:{seed}:jitter")``; ``budget``: the default ``RetryBudget()``).
  Each request is handed to the transport's ``handle_async_request`` as an
  ``httpx.AsyncClient`` hands it (the client adds nothing to what is measured, and CPU
  time to every request).
* The service's capacity is a token bucket, not slots of a fixed length: ``capacity`` (50)
  tokens a second, ``burst`` (5) deep, full at the start. An attempt that finds a token
  takes it and is answered 200 after its call time; one that finds none is answered 503
  at once, without ``Retry-After`` (no cooldown holds the client: the budget, the breaker
  or the throttle alone act), and costs the service nothing. A bucket, because what
  reaches the service is a stream thinned at random by the client: with fixed slots of
  one call each, a slot that no attempt happens to reach is capacity lost to the model
  rather than to the client; five tokens keep unused capacity for 100 ms, as real rate
  limiters do, and the service still accepts at most ``capacity * t + burst`` attempts in
  any ``t`` seconds. (The same server as the real-server throttling test, at twice the
  rate.)
* Call times: the ``k``-th attempt of request ``i`` takes the ``k``-th of
  ``policy.max_attempts`` times drawn for that request, uniformly from ``call_time`` (10
  to 50 ms), in request order, from ``random.Random(f"overload:{seed}:calls")``: the rows
  meet the same calls. Every event of a run happens at an instant of its own (arrivals at
  multiples of 10 ms, answers and backoffs at continuous random times), so the order in
  which the event loop runs tasks that wake together never matters, and a run depends on
  its seed.
* The rows: the budget alone; with ``breaker=CircuitBreaker`` (its defaults, as in the
  outage section; built on the virtual clock); with ``throttle=AdaptiveThrottle`` (its
  defaults, ``k=2`` over 120 s, built on the virtual clock with
  ``rng=random.Random(f"overload:{seed}:throttle")``).
* Counting: over the steady state, from ``steady_from`` (10 s) to ``duration``: attempts
  and accepts by the second they reached the service, requests by the second they
  arrived. In the first second the budget's 500 tokens pay for a burst of retries and the
  throttle's counts start empty; both settle within a few seconds. The throttle's window
  (120 s, forgotten in twentieths) never fills within the run: it counts everything since
  the start, which at a constant load is what a full window holds: with a 12 s window,
  rolling from 12.6 s, 40 s of the same load give 1.91 attempts per accept from 20 s on
  instead of 1.87, and a goodput of 49.9/s (see the tests).

With the defaults (seed 0), from 10 s to 120 s: the budget alone, 112.6 attempts/s reach
the service, which accepts 50.0 (2.25 per accept; the budget pays for about 12 retries a
second); with the breaker, which opens whenever half the attempts fail (at twice the
capacity, always), 5.5 attempts/s and a goodput of 3.0/s: its probes find the service
healthy, it closes and opens again; with the throttle, 93.5 attempts/s (1.87 per accept) and
a goodput of 50.0/s, the capacity. A run takes 0.6 to 0.9 s of CPU time (the breaker's
least: most of its requests are refused at once), the three about 2.2 s.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from typing import Any, Final, TypeVar

import httpx

from retry_transport import (
    AdaptiveThrottle,
    AsyncRetryTransport,
    CircuitBreaker,
    CircuitOpenError,
    RetryBudget,
    RetryEvent,
    RetryPolicy,
    ThrottledError,
    retry_info,
)

from . import _virtual as virtual
from ._outage import BreakerFactory
from ._results import OverloadResult
from ._storm import BudgetFactory
from ._virtual import run_jumping

__all__ = ["OVERLOAD_CONFIGS", "ThrottleFactory", "run_overload"]

T = TypeVar("T")

_URL: Final = httpx.URL("http://service.sim/work")
#: Every answer's empty body, as a stream: a response given none reads its content at once.
_EMPTY: Final = httpx.ByteStream(b"")

#: Builds the client's throttle: called with ``clock=`` the virtual clock and ``rng=`` a
#: seeded ``random.Random``; a class such as ``AdaptiveThrottle`` or a ``functools.partial``
#: of it (picklable, so the command can run the scenario in a worker process).
ThrottleFactory = Callable[..., AdaptiveThrottle]

#: The command's rows: (label, run_overload keyword arguments, progress weight).
OVERLOAD_CONFIGS: Final[tuple[tuple[str, dict[str, Any], int], ...]] = (
    ("RetryBudget()", {}, 400),
    ("RetryBudget() + CircuitBreaker()", {"breaker": CircuitBreaker}, 300),
    ("RetryBudget() + AdaptiveThrottle()", {"throttle": AdaptiveThrottle}, 450),
)


class _BucketService(httpx.AsyncBaseTransport):
    """A token bucket of ``capacity`` tokens a second, ``burst`` deep: 200 after the
    attempt's call time for an attempt that finds a token, 503 at once for one that does
    not. Counts, per second of the run, the attempts that reached it and those it accepted."""

    def __init__(self, t0: float, capacity: float, burst: float,
                 times: list[list[float]]) -> None:
        self.t0 = t0
        self.capacity = capacity
        self.burst = burst
        self.times = times
        self.seen = [0] * len(times)  # attempts per request so far
        self.tokens = burst
        self.refilled = 0.0
        self.attempts: list[int] = []
        self.accepts: list[int] = []

    def _count(self, counts: list[int], second: int) -> None:
        if second >= len(counts):
            counts.extend([0] * (second + 1 - len(counts)))
        counts[second] += 1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        now = virtual.now() - self.t0
        rid: int = request.extensions["sim_request"]
        k = self.seen[rid]
        self.seen[rid] = k + 1
        second = math.floor(now)
        self._count(self.attempts, second)
        tokens = min(self.burst, self.tokens + (now - self.refilled) * self.capacity)
        self.refilled = now
        if tokens < 1.0:
            self.tokens = tokens
            return httpx.Response(503, stream=_EMPTY, request=request)
        self.tokens = tokens - 1.0
        self._count(self.accepts, second)
        await virtual.sleep(self.times[rid][k])
        return httpx.Response(200, stream=_EMPTY, request=request)


def _check(rate: float, duration: float, capacity: float, burst: float,
           call_time: tuple[float, float], steady_from: float) -> None:
    if not rate > 0 or not capacity > 0:
        raise ValueError("rate and capacity must be > 0")
    if not burst >= 1:
        raise ValueError(f"burst must be >= 1 (a token per attempt), got {burst!r}")
    if not 0 < call_time[0] <= call_time[1]:
        raise ValueError(f"call_time must be (low, high) with 0 < low <= high, got {call_time}")
    whole = duration == int(duration) and steady_from == int(steady_from)
    if not (whole and 0 <= steady_from < duration):
        raise ValueError(
            "duration and steady_from must be whole seconds with 0 <= steady_from < duration, "
            f"got {duration!r} and {steady_from!r}"
        )


def run_overload(
    policy: RetryPolicy | None = None,
    *,
    budget: BudgetFactory | None = RetryBudget,
    breaker: BreakerFactory | None = None,
    throttle: ThrottleFactory | None = None,
    rate: float = 100.0,
    duration: float = 120.0,
    capacity: float = 50.0,
    burst: float = 5.0,
    call_time: tuple[float, float] = (0.01, 0.05),
    steady_from: float = 10.0,
    seed: int = 0,
) -> OverloadResult:
    """Run the partial-overload scenario once, in virtual time.

    Args:
        policy: the client's policy; default ``RetryPolicy()``.
        budget: builds the client's retry budget (default ``RetryBudget``); ``None``: none.
        breaker: builds the client's circuit breaker, called with ``clock=`` and ``hooks=``
            (``CircuitBreaker`` for the defaults); ``None`` (default): no breaker.
        throttle: builds the client's adaptive throttle, called with ``clock=`` and
            ``rng=`` (``AdaptiveThrottle`` for the defaults); ``None`` (default): none.
        rate: requests per second, one every ``1 / rate`` seconds.
        duration: seconds of arrivals, whole (``rate * duration`` requests).
        capacity: the service's tokens per second: the attempts it accepts.
        burst: the depth of its bucket (full at the start).
        call_time: ``(low, high)`` seconds: an accepted attempt takes a uniform time in
            between; a refused one is answered at once.
        steady_from: the first second counted as steady (whole).
        seed: seeds the call times, the jitter and the throttle's draws.
    """
    policy = policy if policy is not None else RetryPolicy()
    _check(rate, duration, capacity, burst, call_time, steady_from)
    requests = round(rate * duration)
    draw = random.Random(f"overload:{seed}:calls")
    low, high = call_time
    times = [[draw.uniform(low, high) for _ in range(policy.max_attempts)]
             for _ in range(requests)]

    async def main() -> OverloadResult:
        """The overload in virtual time: the bucket-limited service and its clients run
        until the load ends; the throttle's transitions gathered."""
        t0 = virtual.now()
        service = _BucketService(t0, capacity, burst, times)
        transitions: list[tuple[float, str]] = []

        def hook(event: RetryEvent) -> None:
            transitions.append((virtual.now() - t0, event.kind.removeprefix("breaker_")))

        circuit = breaker(clock=virtual.now, hooks=hook) if breaker is not None else None
        valve = (
            throttle(clock=virtual.now, rng=random.Random(f"overload:{seed}:throttle"))
            if throttle is not None
            else None
        )
        transport = AsyncRetryTransport(
            service,
            policy=policy,
            budget=budget() if budget is not None else None,
            breaker=circuit,
            throttle=valve,
            rng=random.Random(f"overload:{seed}:jitter"),
        )
        # Per request: "200", "refused" (nothing sent) or the stop reason of its last 503.
        outcomes = [""] * requests

        async def request(rid: int) -> None:
            await virtual.sleep_until(t0 + rid / rate)
            try:
                response = await transport.handle_async_request(
                    virtual.get(_URL, sim_request=rid)
                )
            except (ThrottledError, CircuitOpenError):
                outcomes[rid] = "refused"
                return
            await response.aclose()
            if response.status_code < 400:
                outcomes[rid] = "200"
                return
            info = retry_info(response)
            reason = info.stop_reason if info is not None else None
            outcomes[rid] = str(reason) if reason is not None else "?"

        # The requests of each second start together, each sleeping until its arrival: one
        # wake per request, not one for a loop that starts them and one for each request.
        per_batch = max(1, round(rate))
        async with transport, virtual.task_group() as nursery:
            for first in range(0, requests, per_batch):
                await virtual.sleep_until(t0 + first / rate)
                for rid in range(first, min(requests, first + per_batch)):
                    nursery.start_soon(request, rid)

        seconds = int(duration)
        succeeded = [0] * seconds
        refused = [0] * seconds
        failed = [0] * seconds
        stops: Counter[str] = Counter()
        steady = int(steady_from)
        for rid, outcome in enumerate(outcomes):
            second = math.floor(rid / rate)
            if outcome == "200":
                succeeded[second] += 1
                continue
            failed[second] += 1
            if outcome == "refused":
                refused[second] += 1
            elif second >= steady:
                stops[outcome] += 1
        counts = valve.counts(_URL) if valve is not None else None
        return OverloadResult(
            policy=policy,
            budgeted=transport.budget is not None,
            breaker=circuit is not None,
            throttle_k=valve.k if valve is not None else None,
            throttle_window=valve.window if valve is not None else None,
            seed=seed,
            rate=rate,
            duration=duration,
            capacity=capacity,
            burst=burst,
            call_time=call_time,
            steady_from=steady_from,
            requests=requests,
            attempts_per_second=tuple(service.attempts),
            accepts_per_second=tuple(service.accepts),
            succeeded_per_second=tuple(succeeded),
            refused_per_second=tuple(refused),
            failed_per_second=tuple(failed),
            steady_stops=tuple(sorted(stops.items(), key=lambda item: (-item[1], item[0]))),
            throttled=transport.stats.throttled,
            throttle_counts=counts,
            throttle_probability=valve.probability(_URL) if valve is not None else None,
            breaker_transitions=tuple(transitions),
        )

    return run_jumping(main)

