"""Callers against a rate-limited API: paced by its quota headers, or met by 429 after 429.

The model (:func:`run_rate_limited`):

* ``callers`` (3) tasks each send GETs back to back for ``duration`` seconds (30): a caller
  sends its next request as soon as its last one has ended, in success or failure. All of
  them go through ONE real :class:`~retry_transport.AsyncRetryTransport` (each GET handed to
  it as an ``httpx.AsyncClient`` would hand it), so they share its cooldowns and its retry
  budget. Caller ``k`` starts after an offset uniform in ``[0, 100 ms)`` and starts
  requests only before ``duration``; each request then runs to its end, retries included.
* The service allows ``quota`` (10) requests per fixed window of ``window`` seconds (1 s):
  window ``i`` is ``[i * window, (i + 1) * window)``. An attempt counts against the window in
  which it reaches the service (its start); the ``n``-th attempt of a window is answered 200
  if ``n <= quota``, else 429 without ``Retry-After``.
* Each attempt, 429 or 200, takes a time uniform in ``call_time`` (50 to 150 ms). Its
  response carries ``X-RateLimit-Limit: quota``, ``X-RateLimit-Remaining: max(0, quota -
  n)`` and ``X-RateLimit-Reset``: the seconds from the response to the end of the attempt's
  window, rounded up to the millisecond (so a client that waits for it never arrives early),
  ``0.000`` once that window is over (which the transport ignores). So the response that
  spends the last unit (``n == quota``) is a 200 that says the quota is exhausted.
* Offered load: a caller alone sends about 10 requests a second (a call takes 100 ms on
  average), so three callers offer about 30 a second, 3x the quota, whenever they are not
  held.
* Pacing (``respect_rate_limits=True``, the default): the first response that says
  ``remaining: 0`` starts the origin's cooldown until the window's end. New requests wait for
  it, plus the policy's first jittered backoff step (``uniform(0, base_delay)``); the attempts
  already in flight when the quota ran out are answered 429, and their retries wait for the
  reset plus their backoff. Each caller has one attempt in flight at a time and the one that
  spent the quota learns it first, so a window sees at most ``callers - 1`` 429s; with fewer
  callers than the quota, each retry is among the first attempts of the next window and gets
  a 200, so no request fails.
* Without pacing (``respect_rate_limits=False``) a 429 without ``Retry-After`` is retried
  after the backoff alone (full jitter: up to 100 ms, then 200 ms), into the same spent
  window; a request that meets a 429 on each of its ``max_attempts`` (3) fails, and its caller
  moves on to the next one. The retries drain the transport's default ``RetryBudget`` (500
  tokens, 5 a retry; a success puts back 1, or what its last retry took), and once it is
  empty a 429 is not retried at all (``budget_exhausted``). ``budget=None`` removes it.
* Counting: goodput is the 200s per window, over the ``duration / window`` windows of the
  run; attempts after the last of them (made by requests started before ``duration``) count
  in the totals only. Latency runs from the request's start to its end, holds and retries
  included, over the requests that ended in a 200.
* Determinism: caller ``k`` draws its start offset and the durations of its attempts (one
  at a time) from ``random.Random(f"ratelimit:{seed}:{k}")``; the transport's jitter comes
  from ``random.Random(f"ratelimit:{seed}:jitter")``, drawn in the order failures come back
  and held requests start (times are continuous random values, so no two coincide). The
  service decides from recorded times (a 1 ns tolerance absorbs float drift), never from the
  order in which trio wakes tasks at one instant, so a run depends on its seed alone.

Why a closed loop and not Poisson arrivals: an open stream at 3x the quota must turn away
two thirds of its requests whatever the client does, and the requests a cooldown holds are
all released at the reset, where everything past the quota still meets a 429. Pacing then
moves the 429s to the start of each window rather than removing them. A fixed pool of
callers, the usual shape of a batch job or a worker pool against an API, is where the quota
headers can replace the 429s with waits.

The fleet scenario (:func:`~retry_transport.sim.run_fleet`) runs these callers and this
service too, one caller per transport and with ``Retry-After`` in place of the quota headers.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from typing import Any, Final, TypeVar

import httpx

from retry_transport import (
    AsyncRetryTransport,
    CooldownError,
    RetryBudget,
    RetryEvent,
    RetryPolicy,
    retry_info,
)

from . import _virtual as virtual
from ._results import Distribution, RateLimitResult
from ._storm import BudgetFactory
from ._virtual import EPSILON, run_jumping

__all__ = ["run_rate_limited"]

_URL: Final = httpx.URL("http://api.sim/items")
#: Every answer's empty body, as a stream (a response given none reads it at once).
_EMPTY: Final = httpx.ByteStream(b"")
#: Callers start after an offset uniform in [0, this) seconds.
_START_SPREAD: Final = 0.1

R = TypeVar("R", bound=RateLimitResult)


class RateLimitedService(httpx.AsyncBaseTransport):
    """A fixed-window rate limiter in front of a service that never fails otherwise.

    ``quota_headers``: every response carries ``X-RateLimit-*``; ``retry_after``: a 429
    carries ``Retry-After``, the whole seconds to the window's end rounded up. A 200 takes
    a time uniform in ``call_time``, a 429 one uniform in ``reject_time`` (default: the same).
    """

    def __init__(
        self,
        t0: float,
        quota: int,
        window: float,
        call_time: tuple[float, float],
        *,
        reject_time: tuple[float, float] | None = None,
        quota_headers: bool = True,
        retry_after: bool = False,
    ) -> None:
        self.t0 = t0
        self.quota = quota
        self.window = window
        self.call_time = call_time
        self.reject_time = reject_time if reject_time is not None else call_time
        self.quota_headers = quota_headers
        self.retry_after = retry_after
        self.counts: dict[int, int] = {}  # window -> attempts it received
        self.ok: dict[int, int] = {}  # window -> attempts answered 200
        self.rejected: dict[int, int] = {}  # window -> attempts answered 429
        self.attempts = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        arrived = virtual.now() - self.t0
        index = math.floor((arrived + EPSILON) / self.window)
        n = self.counts.get(index, 0) + 1
        self.counts[index] = n
        self.attempts += 1
        over = n > self.quota
        rng: random.Random = request.extensions["sim_rng"]
        await virtual.sleep(rng.uniform(*(self.reject_time if over else self.call_time)))
        now = virtual.now() - self.t0
        reset = max(0.0, (index + 1) * self.window - now)
        headers: dict[str, str] = {}
        if self.quota_headers:
            headers["X-RateLimit-Limit"] = str(self.quota)
            headers["X-RateLimit-Remaining"] = str(max(0, self.quota - n))
            # Rounded up: a client that waits for the reset never arrives before it.
            headers["X-RateLimit-Reset"] = f"{math.ceil(reset * 1000 - EPSILON) / 1000:.3f}"
        if over and self.retry_after:
            headers["Retry-After"] = str(math.ceil(reset - EPSILON))  # rounded up, too
        tally = self.rejected if over else self.ok
        tally[index] = tally.get(index, 0) + 1
        return httpx.Response(429 if over else 200, headers=headers, stream=_EMPTY,
                              request=request)


def check_scenario(
    callers: int,
    quota: int,
    window: float,
    duration: float,
    call_time: tuple[float, float],
    who: str = "callers",
) -> None:
    """Validate a rate-limited scenario's arguments (``who``: what ``callers`` counts)."""
    if callers < 1 or quota < 1:
        raise ValueError(f"{who} and quota must be >= 1, got {callers!r} and {quota!r}")
    if not window > 0 or not duration >= window:
        raise ValueError(
            f"window must be > 0 and duration at least one window, got {window!r}, {duration!r}"
        )
    check_times("call_time", call_time)


def check_times(name: str, times: tuple[float, float]) -> None:
    if not 0 < times[0] <= times[1]:
        raise ValueError(f"{name} must be (low, high) with 0 < low <= high, got {times}")


class Callers:
    """The callers' side of a run: closed-loop callers, and what their requests came to.

    Made inside the run (in virtual time): the run starts when it is made."""

    def __init__(self, duration: float) -> None:
        self.t0 = virtual.now()
        self.duration = duration
        self.latencies: list[float] = []
        self.failures: dict[str, int] = {}
        self.started = 0
        self.held: list[float] = []  # the waits of the requests a cooldown held

    def hook(self, event: RetryEvent) -> None:
        """The transports' hook: counts the holds."""
        if event.kind == "cooldown":
            self.held.append(event.wait)

    async def _request(self, transport: AsyncRetryTransport, rng: random.Random) -> None:
        began = virtual.now()
        self.started += 1
        try:  # the GET as an httpx.AsyncClient hands it to its transport
            response = await transport.handle_async_request(virtual.get(_URL, sim_rng=rng))
            await response.aclose()  # an empty body: nothing to read
        except CooldownError as exc:  # a reset longer than max_retry_after
            info = retry_info(exc)
            reason = info.stop_reason.value if info is not None else type(exc).__name__
            self.failures[reason] = self.failures.get(reason, 0) + 1
            return
        if response.status_code == 200:
            self.latencies.append(virtual.now() - began)
            return
        info = retry_info(response)
        reason = info.stop_reason.value if info is not None else str(response.status_code)
        self.failures[reason] = self.failures.get(reason, 0) + 1

    async def _caller(self, transport: AsyncRetryTransport, rng: random.Random) -> None:
        await virtual.sleep(rng.uniform(0.0, _START_SPREAD))
        while virtual.now() - self.t0 < self.duration - EPSILON:
            await self._request(transport, rng)

    async def run(
        self, transports: Sequence[AsyncRetryTransport], callers_each: int, tag: str
    ) -> None:
        """Run ``callers_each`` callers through a client over each transport, until the
        callers' last requests end; caller ``k`` (1-based, across transports in order)
        draws from ``random.Random(f"{tag}:{k}")``."""
        async with contextlib.AsyncExitStack() as stack:
            for transport in transports:
                await stack.enter_async_context(transport)
            async with virtual.task_group() as nursery:
                for k in range(len(transports) * callers_each):
                    transport = transports[k // callers_each]
                    nursery.start_soon(self._caller, transport,
                                       random.Random(f"{tag}:{k + 1}"))

    def result(self, cls: type[R], service: RateLimitedService, **scenario: Any) -> R:
        """The run's record: the service's quota and windows, ``scenario`` (the other fields
        that describe the run) and the counts; the windows counted are those of the run."""
        windows = math.floor(self.duration / service.window + EPSILON)
        return cls(
            **scenario,
            quota=service.quota,
            window=service.window,
            duration=self.duration,
            call_time=service.call_time,
            requests=self.started,
            completed=len(self.latencies),
            failures=tuple(sorted(self.failures.items())),
            attempts=service.attempts,
            rejected=sum(service.rejected.values()),
            held=len(self.held),
            held_time=sum(self.held),
            completed_per_window=tuple(service.ok.get(i, 0) for i in range(windows)),
            rejected_per_window=tuple(service.rejected.get(i, 0) for i in range(windows)),
            latency=Distribution.of(self.latencies),
        )


def run_rate_limited(
    policy: RetryPolicy | None = None,
    *,
    budget: BudgetFactory | None = RetryBudget,
    callers: int = 3,
    quota: int = 10,
    window: float = 1.0,
    duration: float = 30.0,
    call_time: tuple[float, float] = (0.05, 0.15),
    seed: int = 0,
) -> RateLimitResult:
    """Run the rate-limited API scenario once, in virtual time.

    Run it with ``policy.respect_rate_limits`` True and False (the same seed) to compare
    pacing by the quota headers with retrying on 429 alone.

    Args:
        policy: the client's policy; default ``RetryPolicy()`` (which paces).
        budget: builds the client's retry budget (default: ``RetryBudget``, the transport's
            own default); ``None``: no budget.
        callers: tasks sending requests back to back through the one client.
        quota: requests the service allows per window.
        window: the length of the service's fixed windows, seconds.
        duration: seconds during which callers start requests; each then runs to its end.
            The per-window counts cover its first ``duration / window`` windows.
        call_time: ``(low, high)`` seconds: each attempt takes a uniform time in between.
        seed: seeds the callers' start offsets and call times, and the jitter.
    """
    policy = policy if policy is not None else RetryPolicy()
    check_scenario(callers, quota, window, duration, call_time)

    async def main() -> RateLimitResult:
        run = Callers(duration)
        service = RateLimitedService(run.t0, quota, window, call_time)
        transport = AsyncRetryTransport(
            service,
            policy=policy,
            budget=budget() if budget is not None else None,
            hooks=run.hook,
            rng=random.Random(f"ratelimit:{seed}:jitter"),
        )
        await run.run([transport], callers, f"ratelimit:{seed}")
        budgeted = transport.budget is not None
        return run.result(
            RateLimitResult, service, policy=policy, budgeted=budgeted, seed=seed, callers=callers
        )

    return run_jumping(main)
