"""A fleet of workers against one rate-limited API: cooldowns shared through a store, or not.

The model (:func:`run_fleet`), the rate-limited API's (:func:`run_rate_limited`) where not
said otherwise:

* ``workers`` (8) workers each send GETs back to back for ``duration`` seconds (300), as
  the callers of the rate-limited API do, but each through its OWN
  :class:`~retry_transport.AsyncRetryTransport`: its own cooldown table, its
  own retry budget (the default ``RetryBudget()``) and its own jitter generator, as workers
  in separate processes would have. With ``shared=True`` the transports are given one
  :class:`~retry_transport.MemoryStore` (its wallclock, and theirs, the virtual clock);
  without, nothing passes between them.
* The API allows ``quota`` (50) requests per fixed window of ``window`` seconds (10 s) and
  counts an attempt in the window it reaches the API in; the ``n``-th attempt of a window is
  answered 200 if ``n <= quota``, else ``429`` with ``Retry-After``: the seconds from the
  response to the end of its window, rounded up to a whole second (the header carries whole
  seconds; rounded up, so a client that waits for it never arrives early), ``0`` once that
  window is over. No ``X-RateLimit-*`` headers: "rate limited, come back at the reset". A
  worker learns that the quota is spent only from a 429: its own or, with the store, a
  fleet-mate's.
* A 200 takes a time uniform in ``call_time`` (50 to 150 ms); a 429 one uniform in
  ``reject_time`` (5 to 15 ms): the limiter answers without calling the service behind it.
  The 429's time is the fleet's blind spot: a fleet-mate's attempt that reaches the API
  while the first 429 of a window is on its way back meets a 429 of its own.
* Offered load: a worker alone sends about 10 requests a second, so the fleet offers about
  80 a second, 16 times the quota (5 a second): the quota is spent within a second or so of
  the fleet's return to a window, and the rest of the window is the cooldown's.
* A 429 starts the origin's cooldown until the ``Retry-After`` (the transport's default
  ``cooldown=True``); the request's retry waits for it plus its backoff (full jitter, up to
  100 ms, then 200 ms), so it lands in a later window. A cooldown holds a transport's NEW
  requests (until its end plus ``uniform(0, base_delay)``), never a retry already waiting.
  Each worker has one request at a time, so after a 429 it is quiet until the window's end.
* Without a store, each worker meets the spent quota itself: every worker collects exactly
  one 429 in every window (it keeps sending until its first 429 there, after which it is
  quiet until the window's end, and the fleet spends the quota in every window), ``workers``
  429s a window. With the store, the first 429 of a window pauses the whole fleet: the
  store hands its cooldown to every other transport at once, and each applies it at its
  next request. The window's other 429s are those of fleet-mates whose attempt reached the
  API during the first 429's ``reject_time``, and those of retries (never held) that come
  back after the fleet has spent the next window's quota.
* A request that meets a 429 on each of its ``max_attempts`` (3) fails; so does one whose
  cooldown would exceed ``max_retry_after`` (``CooldownError``, not with the defaults).
* Counting, as for the rate-limited API: goodput is the 200s per window over the
  ``duration / window`` windows of the run (attempts after them count in the totals only);
  latency runs from a request's start to its end, holds and retries included, over the
  requests that ended in a 200; held: the requests a cooldown held before their first
  attempt (their own transport's cooldown, or one the store brought).
* Determinism: worker ``k`` draws its start offset and the durations of its attempts from
  ``random.Random(f"fleet:{seed}:{k}")``, its transport's jitter from
  ``random.Random(f"fleet:{seed}:jitter:{k}")``; the API decides from recorded times, so a
  run depends on its seed alone. Both runs of the command use the same seed: the same
  workers, the same draws, until sharing changes what they do.

What sharing changes, with the defaults (seed 0): 52 429s in 30 windows instead of 240, 1.7
a window instead of 8, all of them a window's first or one of the blind spot's. Goodput does
not change (50 200s in every window, either way: the store only holds attempts that would
have met a 429), nor does the mean latency (1.59 s): each worker still sits out the rest of
every window once, held before a request instead of waiting to retry one. The store cannot
see into the blind spot: with 429s as slow as 200s (``reject_time=call_time``) most
fleet-mates have an attempt in flight when the first 429 comes back, and sharing saves few
429s (207 instead of 240). And a ``Retry-After`` in whole seconds overshoots the reset by up
to a second; with a store the whole fleet comes back with the first 429's overshoot, rather
than its earliest worker with its own, so windows not much longer than a second lose some
goodput to sharing (1 s windows and a quota of 5: 4.97 200s a window instead of 5).
"""

from __future__ import annotations

import random

from retry_transport import AsyncRetryTransport, MemoryStore, RetryBudget, RetryPolicy

from . import _virtual as virtual
from ._ratelimit import Callers, RateLimitedService, check_scenario, check_times
from ._results import FleetResult
from ._storm import BudgetFactory
from ._virtual import run_jumping

__all__ = ["run_fleet"]


def run_fleet(
    policy: RetryPolicy | None = None,
    *,
    shared: bool = True,
    budget: BudgetFactory | None = RetryBudget,
    workers: int = 8,
    quota: int = 50,
    window: float = 10.0,
    duration: float = 300.0,
    call_time: tuple[float, float] = (0.05, 0.15),
    reject_time: tuple[float, float] = (0.005, 0.015),
    seed: int = 0,
) -> FleetResult:
    """Run the fleet scenario once, in virtual time.

    Run it with ``shared`` True and False (the same seed) to compare a fleet whose
    transports share cooldowns through a :class:`~retry_transport.MemoryStore` with one whose
    workers each learn from their own 429s.

    Args:
        policy: every worker's policy; default ``RetryPolicy()``.
        shared: give the workers' transports one ``MemoryStore``.
        budget: builds each worker's retry budget (default: ``RetryBudget``, the
            transport's own default); ``None``: no budget.
        workers: workers, each one caller over its own client and transport.
        quota: requests the API allows per window, to the fleet as a whole.
        window: the length of the API's fixed windows, seconds.
        duration: seconds during which workers start requests; each then runs to its end.
            The per-window counts cover its first ``duration / window`` windows.
        call_time: ``(low, high)`` seconds: each 200 takes a uniform time in between.
        reject_time: ``(low, high)`` seconds: each 429 takes a uniform time in between.
        seed: seeds the workers' start offsets and call times, and their jitter.
    """
    policy = policy if policy is not None else RetryPolicy()
    check_scenario(workers, quota, window, duration, call_time, "workers")
    check_times("reject_time", reject_time)

    async def main() -> FleetResult:
        run = Callers(duration)
        service = RateLimitedService(
            run.t0,
            quota,
            window,
            call_time,
            reject_time=reject_time,
            quota_headers=False,
            retry_after=True,
        )
        store = MemoryStore(wallclock=virtual.now) if shared else None
        transports = [
            AsyncRetryTransport(
                service,
                policy=policy,
                budget=budget() if budget is not None else None,
                store=store,
                hooks=run.hook,
                rng=random.Random(f"fleet:{seed}:jitter:{k}"),
                clock=virtual.now,
                wallclock=virtual.now,
            )
            for k in range(1, workers + 1)
        ]
        await run.run(transports, 1, f"fleet:{seed}")
        budgeted = budget is not None
        return run.result(
            FleetResult, service, policy=policy, budgeted=budgeted, seed=seed, callers=workers,
            shared=shared, reject_time=reject_time,
        )

    return run_jumping(main)
