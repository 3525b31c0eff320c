"""``python -m retry_transport.sim``: the classic retry-storm table, measured, and more.

Without policy options it prints the storm's four steps as measured, the step-4 distribution,
a comparison of jitters and of the library's defaults, a two-minute outage with neither a
retry budget nor a circuit breaker, with the budget, and with both, callers against a
rate-limited API with and without pacing by its rate-limit headers, a fleet of workers
against a rate-limited API with and without a store sharing their cooldowns, and a chain of
retrying services over one that is down, with and without the users' deadline propagated
down it, a steady stream of requests to a service with a heavy latency tail, without
hedged requests, with a fixed hedging delay and with one read from the latency's 95th
percentile, and a partial overload: twice the requests a service can serve, which answers
503 at once beyond its capacity, with the budget alone, with a breaker and with adaptive
throttling, and downloads over a link that drops the connection, without resumable bodies
and with ``Resume()``. With policy options it runs that policy instead.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, cast, get_args

from retry_transport import CircuitBreaker, Hedging, Jitter, RetryBudget, RetryPolicy

from ._chain import DEADLINE_HEADER, run_chain
from ._dist import Job, outage_job, run_jobs, stats_from_rows
from ._downloads import DOWNLOAD_RESUMES, DownloadsResult, run_downloads
from ._fleet import run_fleet
from ._outage import LONG_OUTAGE
from ._overload import OVERLOAD_CONFIGS, run_overload
from ._ratelimit import run_rate_limited
from ._report import (
    chain_table,
    describe_policy,
    downloads_table,
    in_ms,
    outage_summary,
    outage_table,
    overload_table,
    rate_limit_table,
    run_table,
    seed_table,
    stats_lines,
    stats_table,
    tail_table,
    wrap,
)
from ._results import (
    ChainResult,
    FleetResult,
    OutageResult,
    OverloadResult,
    RateLimitResult,
    StormResult,
    StormStats,
    TailResult,
)
from ._steps import COMPARISONS, REPRESENTATIVE_SEED, STEPS
from ._storm import StormSpec, run_storms
from ._tail import TAIL_HEDGING, run_tail

_POLICY_OPTIONS = ("max_attempts", "jitter", "base_delay", "max_delay")
_SCENARIO_OPTIONS = ("clients", "capacity", "call_time", "duration", "budget")


def _parser() -> argparse.ArgumentParser:
    """The command line: the scenario's options, each section's switch, and the policy
    options that run one configuration instead of the default comparison."""
    parser = argparse.ArgumentParser(
        prog="python -m retry_transport.sim",
        description=(
            "Simulate the classic retry storm (six clients, a four-call service) with the real "
            "AsyncRetryTransport in virtual time. Without policy options: the storm's table, "
            "measured, then jitters, library defaults, a sustained outage, a rate-limited API, "
            "a fleet sharing cooldowns, deadline propagation, hedged requests and a partial "
            "overload (budget, breaker or adaptive throttle) compared. "
            "With any policy or scenario option: that policy alone (unset policy fields "
            "take RetryPolicy() defaults)."
        ),
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=2000,
        help="seeded runs for step 4 or your policy (default 2000)",
    )
    parser.add_argument(
        "--compare-runs",
        type=int,
        default=300,
        help="seeded runs per policy in the comparison table (default 300)",
    )
    parser.add_argument("--seed", type=int, default=0, help="first seed of the runs (default 0)")
    parser.add_argument("--workers", type=int, default=None, help="processes (default: CPUs)")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw the runs' frames, and the outage's load and failures per second, into a "
        ".png, .svg or .pdf file (matplotlib: the plot extra)",
    )
    parser.add_argument(
        "--no-outage", action="store_true", help="skip the outage scenario (budget and breaker)"
    )
    parser.add_argument(
        "--no-rate-limit",
        action="store_true",
        help="skip the rate-limited API scenario (pacing by rate-limit headers on and off)",
    )
    parser.add_argument(
        "--no-fleet",
        action="store_true",
        help="skip the fleet scenario (workers, each with its own transport, against one "
        "rate-limited API, with and without a MemoryStore sharing their cooldowns)",
    )
    parser.add_argument(
        "--no-deadline",
        action="store_true",
        help="skip the deadline propagation scenario (users calling a chain of three "
        "retrying services over one that is down, with and without their deadline sent "
        "down the chain)",
    )
    parser.add_argument(
        "--no-tail",
        action="store_true",
        help="skip the tail-at-scale scenario (10,000 requests to a service with a heavy "
        "latency tail, without hedging, with Hedging(0.05) and with Hedging(\"p95\"))",
    )
    parser.add_argument(
        "--no-overload",
        action="store_true",
        help="skip the partial overload scenario (100 requests/s for 120 s to a service that "
        "accepts 50/s and answers 503 beyond: RetryBudget() alone, with CircuitBreaker(), "
        "with AdaptiveThrottle())",
    )
    parser.add_argument(
        "--no-downloads",
        action="store_true",
        help="skip the flaky-link downloads (100 downloads of 100 MB over links that drop "
        "every 20 MB on average: without Resume and with Resume())",
    )
    policy = parser.add_argument_group(
        "your policy (any option here or below runs it instead of the storm's table)"
    )
    default = RetryPolicy()
    policy.add_argument(
        "--max-attempts",
        type=int,
        help=f"attempts per client in total, the first included (default {default.max_attempts})",
    )
    policy.add_argument(
        "--jitter",
        choices=sorted(get_args(Jitter)),
        help=f"how each backoff is randomised (default {default.jitter})",
    )
    policy.add_argument(
        "--base-delay",
        type=float,
        metavar="SECONDS",
        help=f"the first backoff step (default {default.base_delay:g})",
    )
    policy.add_argument(
        "--max-delay",
        type=float,
        metavar="SECONDS",
        help=f"the largest backoff (default {default.max_delay:g})",
    )
    policy.add_argument("--budget", action="store_true", help="give each client a RetryBudget()")
    scenario = parser.add_argument_group("your scenario")
    scenario.add_argument(
        "--clients", type=int, help="clients, each sending one call at t = 0 (default 6)"
    )
    scenario.add_argument(
        "--capacity",
        type=int,
        help="calls the service works on at once; with more in flight, every call in flight "
        "times out (default 4)",
    )
    scenario.add_argument(
        "--call-time", type=float, metavar="SECONDS", help="how long each call takes (default 0.1)"
    )
    scenario.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="attempts start only before this time (default 2)",
    )
    scenario.add_argument(
        "--outage",
        action="store_true",
        help="also run the sustained outage with your policy (no budget, budget, budget + "
        "breaker)",
    )
    return parser


def _scenario(clients: int, capacity: int | None, call_time: float, duration: float) -> str:
    limit = (
        "no capacity limit"
        if capacity is None
        else f"a service that works on {capacity} calls at once\n(more than {capacity} in "
        "flight: every call in flight times out)"
    )
    return (
        f"{clients} clients, one {call_time * 1000:g} ms call each at t = 0, {limit}, "
        f"attempts starting before {duration:g} s.\n"
        "Each client: the real AsyncRetryTransport, handed the GET an httpx.AsyncClient would "
        "hand it, in virtual time (an asyncio loop whose clock jumps to the next timer)."
    )


def _outage_intro(result: OutageResult) -> str:
    start, end = result.outage
    low, high = result.call_time
    text = (
        f"Sustained outage: Poisson arrivals, {result.rate:g} requests/s for "
        f"{result.duration:g} s, through one AsyncRetryTransport (each GET handed to it as an "
        "AsyncClient would hand it). The "
        f"service answers 503 (no Retry-After) to attempts starting in [{start:g}, {end:g}) s, "
        f"200 otherwise; each call takes {low * 1000:g}-{high * 1000:g} ms. Policy: "
        f"{describe_policy(result.policy)}; seed {result.seed} for every run. attempts in "
        "outage: attempts that reached the service during it (each answered 503), also as a "
        "share of the requests that arrived in it; failed: requests that ended in a 503 or a "
        "CircuitOpenError (failed fast: the breaker refused the request or its retry, "
        f"nothing sent); first success / last failure after: from the service's return at "
        f"{end:g} s to the first success the application saw, and to its last failure."
    )
    return textwrap.fill(text, width=112)


#: The outage's configurations: (label, run_outage keyword arguments, progress weight).
_OUTAGE_CONFIGS: Final[tuple[tuple[str, dict[str, Any], int], ...]] = (
    ("no budget, no breaker", {"budget": None}, 2800),
    ("RetryBudget()", {"budget": RetryBudget}, 1400),
    ("RetryBudget() + CircuitBreaker()", {"budget": RetryBudget, "breaker": CircuitBreaker},
     800),
)


def _outage_jobs(policy: RetryPolicy) -> list[Job]:
    return [
        outage_job(weight, f"outage: {label}", policy=policy, **LONG_OUTAGE, **kwargs)
        for label, kwargs, weight in _OUTAGE_CONFIGS
    ]


def _outage_rows(results: Sequence[Any]) -> list[tuple[str, OutageResult]]:
    runs = cast("list[OutageResult]", list(results))
    return [(label, run) for (label, _, _), run in zip(_OUTAGE_CONFIGS, runs, strict=True)]


def _outage_section(rows: list[tuple[str, OutageResult]], out: list[str]) -> None:
    out.append(_outage_intro(rows[0][1]))
    out.append(outage_table(rows))
    out.append(outage_summary(rows))


def _milliseconds(times: tuple[float, float]) -> str:
    """``(0.05, 0.15)`` as ``"50-150 ms"``."""
    return f"{times[0] * 1000:g}-{times[1] * 1000:g} ms"


def _rate_limit_intro(result: RateLimitResult) -> str:
    budget = "RetryBudget()" if result.budgeted else "no budget"
    text = (
        f"Rate-limited API: {result.callers} callers send GETs back to back for "
        f"{result.duration:g} s through one AsyncRetryTransport (each GET handed to it as an "
        "AsyncClient would hand it). The "
        f"service allows {result.quota} requests per fixed {result.window:g} s window: 200 "
        "under the quota, 429 (no Retry-After) over it, both with X-RateLimit-Remaining and "
        f"X-RateLimit-Reset (seconds to the window's end). Each call takes "
        f"{_milliseconds(result.call_time)}, so the callers offer about {result.offered:.0f} "
        f"requests/s, {round(result.load, 1):g}x the quota. Policy: "
        f"{describe_policy(result.policy)}, {budget}; seed {result.seed} for both runs. "
        "held: requests a cooldown held before their first attempt; latency: of the requests "
        "that ended in a 200, holds and retries included."
    )
    return textwrap.fill(text, width=112)


def _rate_limit_summary(rows: Sequence[tuple[str, RateLimitResult]]) -> str:
    (_, paced), (_, unpaced) = rows
    return (
        f"  Pacing: {paced.rejected:,} 429s instead of {unpaced.rejected:,}, {paced.failed:,} "
        f"failed requests instead of {unpaced.failed:,}, {paced.goodput.mean:.1f} 200s per "
        f"window against {unpaced.goodput.mean:.1f};\n  the price: {paced.held:,} requests "
        f"held ({paced.held_time:.1f} s in all) and retries that wait for the reset."
    )


def _rate_limit_jobs(policy: RetryPolicy) -> list[Job]:
    policies = [policy.replace(respect_rate_limits=flag) for flag in (True, False)]
    return [
        Job(call=(run_rate_limited, {"policy": p}), weight=40, label=label)
        for p, label in zip(policies, ("rate limit: pacing", "rate limit: no pacing"), strict=True)
    ]


def _rate_limit_rows(results: Sequence[Any]) -> list[tuple[str, RateLimitResult]]:
    paced, unpaced = cast("tuple[RateLimitResult, RateLimitResult]", tuple(results))
    return [("True (pacing)", paced), ("False", unpaced)]


def _fleet_intro(result: FleetResult) -> str:
    budget = "a RetryBudget() each" if result.budgeted else "no budget"
    text = (
        f"A fleet sharing cooldowns: {result.workers} workers send GETs back to back for "
        f"{result.duration:g} s, each through its own AsyncRetryTransport (its "
        "own cooldowns and budget, as separate processes have), with one MemoryStore shared "
        f"by their transports, and with none. The API allows {result.quota} requests per "
        f"fixed {result.window:g} s window to the fleet: 429 over it with Retry-After (the "
        "seconds to the window's end, rounded up), no X-RateLimit headers, so a worker learns "
        "that the quota is spent only from a 429, its own or, with the store, a fleet-mate's. "
        f"A 200 takes {_milliseconds(result.call_time)}, a 429 "
        f"{_milliseconds(result.reject_time)}; the fleet offers about {result.offered:.0f} "
        f"requests/s, {round(result.load, 1):g}x the quota. Policy: "
        f"{describe_policy(result.policy)}, {budget}; seed {result.seed} for both runs. held: "
        "requests a cooldown (the worker's own or one the store brought) held before their "
        "first attempt; latency: of the requests that ended in a 200."
    )
    return wrap(text)


def _fleet_summary(rows: Sequence[tuple[str, FleetResult]]) -> str:
    (_, shared), (_, alone) = rows
    text = (
        f"Sharing: {shared.rejected:,} 429s instead of {alone.rejected:,} "
        f"({shared.rejected_summary.mean:.1f} per window instead of "
        f"{alone.rejected_summary.mean:.1f}: alone, every worker meets the spent quota itself), "
        f"{shared.failed:,} failed requests instead of {alone.failed:,}, "
        f"{shared.goodput.mean:.1f} 200s per window against {alone.goodput.mean:.1f}. The 429s "
        "left are each window's first and those of fleet-mates whose attempt reached the API "
        f"while it was on its way back ({_milliseconds(shared.reject_time)}), before the store "
        "knew."
    )
    return wrap(text, first="  ", indent="  ")


def _fleet_jobs(policy: RetryPolicy) -> list[Job]:
    return [
        Job(
            call=(run_fleet, {"policy": policy, "shared": shared}),
            weight=100,
            label="fleet: " + ("MemoryStore()" if shared else "no store"),
        )
        for shared in (True, False)
    ]


def _fleet_rows(results: Sequence[Any]) -> list[tuple[str, FleetResult]]:
    shared, alone = cast("tuple[FleetResult, FleetResult]", tuple(results))
    return [("MemoryStore()", shared), ("none", alone)]


def _chain_intro(result: ChainResult) -> str:
    timeouts = [f"{t:g} s" for t in result.timeouts]
    per_service = ", ".join(timeouts[:-1]) + f" and {timeouts[-1]}"
    services = result.services
    attempts = result.policy.max_attempts
    chain = ", which calls ".join(f"service {n}" for n in range(1, services + 1))
    text = (
        f"Deadline propagation: {result.users} users, one GET each at a random time within "
        f"{result.spread:g} s (seed {result.seed}), call {chain}, which calls a bottom service "
        f"that is down: it answers every attempt 503 after {result.service_time * 1000:g} ms. "
        "Each service is a "
        "server whose handlers call the next through one AsyncClient and "
        f"AsyncRetryTransport ({describe_policy(result.policy)}; budget=None), with a "
        f"timeout per attempt of {per_service} (services 1 to {services}), so one user "
        f"request can reach the bottom {' x '.join([str(attempts)] * services)} = "
        f"{result.most_possible} times. A user waits {result.user_timeout:g} s (its client's "
        "timeout, one attempt) and gives up; a server does not notice that its caller "
        "stopped waiting, so a call that timed out goes on below. Propagated: each user's "
        f"request made inside retry_transport.deadline({result.user_timeout:g}), "
        f'deadline_header="{DEADLINE_HEADER}" on every transport, and each server\'s handler '
        "run inside the deadline the header carries (as retry_transport.asgi."
        "DeadlineMiddleware does; here on the virtual clock). Counted by arrival: attempts "
        "at the bottom while their user waited; after an answer (the user had the chain's "
        f"answer, its {result.user_timeout:g} s not yet up); after give-up (its "
        f"{result.user_timeout:g} s up); and the calls that reached services "
        f"{' and '.join(str(n) for n in range(2, services + 1))} after give-up."
    )
    return wrap(text)


def _chain_summary(rows: Sequence[tuple[str, ChainResult]]) -> str:
    (_, alone), (_, carried) = rows
    share = alone.after_give_up() / alone.calls() if alone.calls() else math.nan
    late = alone.last_after
    after = carried.after_give_up()
    levels = range(1, carried.services)
    below = " and ".join(str(level + 1) for level in levels)
    text = (
        f"Propagation: {after:,} attempts reached the bottom after their user had given up, "
        f"instead of {alone.after_give_up():,} ({100 * share:.0f}% of the {alone.calls():,} "
        f"without it, up to {max(alone.after_per_request())} per request"
        + (f", the last {late:.2f} s after its user had gone" if late is not None else "")
        + f"), and {' and '.join(f'{carried.after_give_up(n):,}' for n in levels)} calls "
        f"reached services {below} after give-up instead of "
        f"{' and '.join(f'{alone.after_give_up(n):,}' for n in levels)}; "
        f"{carried.while_waiting():,} attempts while the users waited instead of "
        f"{alone.while_waiting():,}: the deadline takes away the work nobody waits for."
    )
    answered = [(outcome, count) for outcome, count in carried.outcomes if outcome.isdigit()]
    if answered:
        got = ", ".join(f"{count} {outcome}" for outcome, count in
                        sorted(answered, key=lambda item: -item[1]))
        text += (
            f" {sum(count for _, count in answered)} of {carried.users} users got the chain's "
            f"answer ({got}) by {carried.longest_wait:.2f} s instead of waiting out their "
            "own timeout."
        )
    stray = sum(carried.after_answer(level) for level in range(carried.services + 1))
    if stray:
        text += (
            f" {stray:,} calls reached a service after their user had its answer, before "
            "its deadline (a call its caller gave up on, going on below until the deadline)."
        )
    text += (
        f" Goal: 0 attempts after give-up with propagation: {'met' if after == 0 else 'NOT met'}."
    )
    return wrap(text, first="  ", indent="  ")


def _chain_jobs(policy: RetryPolicy) -> list[Job]:
    return [
        Job(
            call=(run_chain, {"policy": policy, "propagate": propagate}),
            weight=weight,
            label="deadline: " + ("propagated" if propagate else "timeouts only"),
        )
        for propagate, weight in ((False, 60), (True, 35))
    ]


def _chain_rows(results: Sequence[Any]) -> list[tuple[str, ChainResult]]:
    alone, carried = cast("tuple[ChainResult, ChainResult]", tuple(results))
    return [("timeouts only", alone), ("propagated", carried)]


def _tail_intro(result: TailResult) -> str:
    budget = "the default RetryBudget()" if result.budgeted else "budget=None"
    low, high = (result.median * math.exp(sign * 1.96 * result.spread) for sign in (-1, 1))
    warmup = result.warmup
    text = (
        f"The tail at scale (Dean and Barroso, 2013): one client sends {result.requests:,} GETs "
        f"at a steady {result.rate:,g} requests/s (one every {1000 / result.rate:g} ms, each in "
        "a task of its own, whatever those before it are doing), "
        + (
            f"after {warmup:,} uncounted warm-up requests over {result.warmup_time:g} s that "
            "fill the transport's latency table (\"p95\" needs "
            f"{Hedging().min_samples} latencies, and is read again once a second), "
            if warmup
            else ""
        )
        + f"through one AsyncRetryTransport ({describe_policy(result.policy)}; {budget}). "
        f"Each call to the service takes a time of its own: {result.slow_time:g} s with "
        f"probability {100 * result.slow_share:g}%, else lognormal, median "
        f"{result.median * 1000:g} ms (sigma {result.spread:g}: 95% within "
        f"{low * 1000:.1f}-{high * 1000:.1f} ms). A hedge's copy is such a call too, and the "
        "loser, cancelled by the transport, frees the service at once. The three runs meet "
        f"the same calls (seed {result.seed}). Latency: at the client, from a request's start "
        "to its response; attempts/request: from retry_info, the cancelled loser included; "
        "delay: the hedging delay the transport waited (\"p95\" reads it from the latency "
        "it measured); service time: the seconds the service spent on calls, each until its "
        "answer or its cancellation; budget: the fewest tokens it held after paying for a "
        "hedge, and the hedges it could not pay for."
    )
    return wrap(text)


def _tail_summary(rows: Sequence[tuple[str, TailResult]], factor: float = 10.0,
                  extra: float = 0.1) -> str:
    """The hedged rows against the first (no hedging), and the goal: p99.9 at least
    ``factor`` times lower for at most ``extra`` more attempts per request."""
    (_, plain), *hedged = rows
    ratios = [plain.p999 / r.p999 for _, r in hedged]
    more = [r.attempts_per_request / plain.attempts_per_request - 1 for _, r in hedged]
    parts = [
        f"{in_ms(r.p999)} with {label} ({ratio:.0f}x lower), for {100 * m:.1f}% more attempts"
        for (label, r), ratio, m in zip(hedged, ratios, more, strict=True)
    ]
    medians = {in_ms(r.p50) for _, r in rows}
    text = (
        f"Hedging: p99.9 {in_ms(plain.p999)} without, " + " and ".join(parts) + "; the p50 "
        + (f"is {medians.pop()} in each row. " if len(medians) == 1 else
           "goes " + ", ".join(in_ms(r.p50) for _, r in rows) + ". ")
    )
    if plain.slow_share and any(r.longest >= plain.slow_time for _, r in hedged):
        text += (
            f"A request whose two calls were both slow (a chance of 1 in "
            f"{1 / plain.slow_share**2:,.0f}) still takes {plain.slow_time:g} s: the max. "
        )
    cut = [(label, r) for label, r in hedged
           if r.service_time_per_request < plain.service_time_per_request]
    if cut:
        text += (
            "The service spent less time per request with hedging ("
            + " and ".join(f"{in_ms(r.service_time_per_request)} with {label}" for label, r in cut)
            + f" instead of {in_ms(plain.service_time_per_request)}): each slow call that lost "
            "was cancelled after the delay and the hedge's answer instead of running its "
            f"{plain.slow_time:g} s. "
        )
    budgeted = [(label, r) for label, r in hedged if r.budgeted]
    if budgeted:
        bucket = RetryBudget()
        refused = [(label, r) for label, r in budgeted if r.budget_refused]
        text += (
            f"The default RetryBudget() ({bucket.capacity:g} tokens, {bucket.retry_cost:g} a "
            "hedge, put back when it wins, "
            f"{bucket.success_refund:g} back per success) "
        )
        if refused:
            text += (
                "refused "
                + " and ".join(f"{r.budget_refused:,} hedges with {label}" for label, r in refused)
                + ": it distorts the result (fewer hedges than the delay asks for). "
            )
        else:
            text += (
                "never refused a hedge (lowest "
                + " and ".join(f"{r.budget_lowest:.0f} tokens with {label}"
                               for label, r in budgeted)
                + "): it does not distort the result. "
            )
    verdicts = [
        f"{label}: {ratio:.1f}x for +{100 * m:.1f}%, "
        + ("met" if ratio >= factor and m <= extra + 1e-12 else "NOT met")
        for (label, _), ratio, m in zip(hedged, ratios, more, strict=True)
    ]
    text += (
        f"Goal: p99.9 at least {factor:g}x lower than without hedging, for at most "
        f"{100 * extra:g}% more attempts: " + "; ".join(verdicts) + "."
    )
    return wrap(text, first="  ", indent="  ")


def _tail_jobs() -> list[Job]:
    """The tail-at-scale runs, one job each: hedging costs the driver CPU time per request."""
    return [
        Job(call=(run_tail, {"hedging": hedging}), weight=520 if hedging is None else 1250,
            label=f"tail: {label}")
        for label, hedging in TAIL_HEDGING
    ]


def _tail_rows(results: Sequence[Any]) -> list[tuple[str, TailResult]]:
    runs = cast("list[TailResult]", list(results))
    return [(label, run) for (label, _), run in zip(TAIL_HEDGING, runs, strict=True)]


def _overload_intro(rows: Sequence[tuple[str, OverloadResult]]) -> str:
    result = rows[0][1]
    start, end = result.steady_from, result.duration
    throttled = next((r for _, r in rows if r.throttle_k is not None), None)
    throttle = "AdaptiveThrottle()"
    window = ""
    if throttled is not None and throttled.throttle_window is not None:
        throttle += (f" (k={throttled.throttle_k:g} over {throttled.throttle_window:g} s, on "
                     "the virtual clock, seeded)")
        if throttled.throttle_window >= end:
            window = ("; the throttle's window holds the whole run, as a full one would at a "
                      "constant load")
    text = (
        f"Partial overload: one client sends {result.rate:g} GETs per second, one every "
        f"{1000 / result.rate:g} ms (each in a task of its own), for {end:g} s, "
        f"{result.requests:,} requests, through one AsyncRetryTransport "
        f"({describe_policy(result.policy)}; the default RetryBudget() in every row) to a "
        f"service with a capacity of {result.capacity:g} calls per second: a token bucket of "
        f"{result.capacity:g} tokens a second, {result.burst:g} deep. An attempt that finds a "
        f"token takes it and is answered 200 after {_milliseconds(result.call_time)}; one "
        "that finds none is answered 503 at once (no Retry-After), which costs the service "
        "nothing here. The rows: the budget alone, with CircuitBreaker() (its defaults, as "
        f"in the outage) and with {throttle}; seed {result.seed} for every row. Counted "
        f"from {start:g} s to {end:g} s, the steady state (the budget's first "
        f"{RetryBudget().capacity:g} tokens and the throttle's empty counts settle within a "
        f"few seconds{window}): attempts and accepts by the second they reached the service, "
        "requests by their arrival. goodput: requests that ended in a 200; failed: the others "
        f"of the {result.steady_requests:,} that arrived then; refused, not sent: a "
        "ThrottledError or a CircuitOpenError (failed fast); retry refused: requests handed "
        "their 503 because the budget, the throttle or the breaker refused their retry."
    )
    return wrap(text)


def _overload_summary(rows: Sequence[tuple[str, OverloadResult]], ratio: float = 2.2,
                      share: float = 0.95) -> str:
    """The throttle against the budget alone and the breaker, and its goal: at most
    ``ratio`` attempts per accept, a goodput of at least ``share`` of the capacity."""
    budget = next((r for _, r in rows if not r.breaker and r.throttle_k is None), None)
    breaker = next((r for _, r in rows if r.breaker), None)
    throttle = next((r for _, r in rows if r.throttle_k is not None), None)
    if throttle is None:
        return ""
    text = ""
    if budget is not None:
        fewer = 1 - throttle.attempts_rate / budget.attempts_rate
        text += (
            f"The throttle against the budget alone: {throttle.attempts_rate:.1f} attempts/s "
            f"reached the service instead of {budget.attempts_rate:.1f} ({100 * fewer:.0f}% "
            f"fewer, {throttle.attempts_per_accept:.2f} per accept instead of "
            f"{budget.attempts_per_accept:.2f}), for a goodput of {throttle.goodput:.1f}/s "
            f"against {budget.goodput:.1f}/s. The requests the service cannot serve fail "
            f"either way ({throttle.failed:,} against {budget.failed:,}), "
            f"{throttle.refused:,} of them at once, nothing sent. A 503 costs this service "
            "nothing; one that spends capacity on saying no would lose it to the budget's "
            f"{budget.rejects_rate - throttle.rejects_rate:.1f} more 503s a second. "
        )
    if breaker is not None and len(breaker.breaker_times("open")) > 1:
        text += (
            "The breaker is all or nothing: once the share of failed attempts reaches its "
            f"failure_ratio ({CircuitBreaker().failure_ratio:g}) it opens, its probe finds "
            "the service serving, it closes and soon opens again: a goodput of "
            f"{breaker.goodput:.1f}/s ({100 * breaker.goodput / breaker.capacity:.0f}% of the "
            f"capacity), {breaker.refused:,} requests refused. "
        )
    floor = share * throttle.capacity
    ratio_met = throttle.attempts_per_accept <= ratio
    goodput_met = throttle.goodput >= floor
    text += (
        f"Goal, with the throttle: attempts <= {ratio:g} x accepts: "
        f"{throttle.attempts_per_accept:.2f}, {'met' if ratio_met else 'NOT met'}; goodput >= "
        f"{100 * share:g}% of the capacity ({floor:g}/s): {throttle.goodput:.1f}/s, "
        f"{'met' if goodput_met else 'NOT met'}."
    )
    return wrap(text, first="  ", indent="  ")


def _overload_jobs() -> list[Job]:
    """The partial-overload runs, one job each."""
    return [
        Job(call=(run_overload, kwargs), weight=weight, label=f"overload: {label}")
        for label, kwargs, weight in OVERLOAD_CONFIGS
    ]


def _overload_rows(results: Sequence[Any]) -> list[tuple[str, OverloadResult]]:
    runs = cast("list[OverloadResult]", list(results))
    return [(label, run) for (label, _, _), run in zip(OVERLOAD_CONFIGS, runs, strict=True)]


def _downloads_intro(result: DownloadsResult) -> str:
    text = (
        f"Downloads over a flaky link: {result.downloads} downloads of a "
        f"{result.size / 1e6:g} MB file, all started at once, each by an application with an "
        f"AsyncRetryTransport of its own (RetryPolicy(), RetryBudget()) over a link of its "
        f"own: {result.bandwidth / 1e6:g} MB/s, 0.1 s to each response's headers, and the "
        f"connection dropped after {result.mean_drop / 1e6:g} MB on average (exponentially "
        "distributed, whatever the connection). The server's file has a strong ETag and "
        "honours Range with If-Range. When an error reaches the application, it starts the "
        f"download again from the beginning, up to {result.tries} times in all. The rows: "
        "without resumable bodies and with Resume() (5 resumptions in a row without "
        f"progress); seed {result.seed}, the same links in every row. Time: virtual "
        "seconds from the start to a completed download's last byte."
    )
    return wrap(text)


def _downloads_summary(rows: Sequence[tuple[str, DownloadsResult]]) -> str:
    plain, best = (r for _, r in rows)
    files = best.size * best.downloads
    text = (
        f"Without resumption {len(plain.times)} of {plain.downloads} downloads complete: a "
        f"{plain.size / 1e6:g} MB body crosses a link that drops every "
        f"{plain.mean_drop / 1e6:g} MB only about once in {round(1 / _no_drop(plain)):,} "
        f"tries, so {plain.transferred / 1e9:.1f} GB cross the link for "
        f"{len(plain.times) * plain.size / 1e9:.1f} GB of files. With Resume() "
        f"{len(best.times)} of {best.downloads} complete and every byte of the files "
        f"crosses it {best.transferred / files:.2f} times, with {best.restarts:,} restarts "
        "from zero: a resumption that brings new data counts max_resumes and the backoff "
        f"from zero again, so the {best.resumes:,} resumptions, up to "
        f"{best.most_resumes:,} for one download, never run out, and the backoff starts "
        "again from its first step after each."
    )
    return wrap(text, first="  ", indent="  ")


def _no_drop(result: DownloadsResult) -> float:
    """The chance that a whole body crosses the link without a drop."""
    return math.exp(-result.size / result.mean_drop)


def _downloads_jobs() -> list[Job]:
    return [Job(call=(run_downloads, {"resume": resume}), weight=60, label=f"downloads: {label}")
            for label, resume in DOWNLOAD_RESUMES]


def _downloads_rows(results: Sequence[Any]) -> list[tuple[str, DownloadsResult]]:
    runs = cast("list[DownloadsResult]", list(results))
    return [(label, run) for (label, _), run in zip(DOWNLOAD_RESUMES, runs, strict=True)]


_Frames = tuple[list[tuple[str, StormResult]], list[tuple[str, OutageResult]]]


#: The default run's sections after the storm, by the flag that skips each.
_SECTIONS: Final = (
    ("no_outage", "the outage"), ("no_rate_limit", "the rate-limited API"),
    ("no_fleet", "the fleet"), ("no_deadline", "deadline propagation"),
    ("no_tail", "the tail at scale"), ("no_overload", "the partial overload"),
    ("no_downloads", "the downloads"),
)


def _follows(args: argparse.Namespace, compare_runs: int) -> str:
    """The line after the storm's table: what the rest of the output is, still running."""
    sections = [name for flag, name in _SECTIONS if not getattr(args, flag)]
    text = (f"The rest follows once it has run: step 4 over {args.runs:,} seeded runs, other "
            f"policies over {compare_runs:,} each")
    if sections:
        text += ", then " + ", ".join(sections[:-1]) + (" and " if sections[1:] else "")
        text += sections[-1]
    return wrap(text + " (each --no-... option skips a section).")


def _default(args: argparse.Namespace, out: list[str]) -> _Frames:
    """The command without policy options: the retry-storm table at once, then every
    section's runs (in parallel workers) and their summaries, appended to ``out``."""
    step4 = STEPS[3]
    compare_runs = min(args.compare_runs, args.runs)
    specs = [step4.spec()] + [StormSpec(c.policy, budget=c.budget) for c in COMPARISONS[1:]]
    runs = [args.runs] + [compare_runs] * (len(specs) - 1)
    labels = [f"step {step4.number}"] + [c.label for c in COMPARISONS[1:]]
    jobs = [
        Job(spec, n, args.seed, label=label)
        for spec, n, label in zip(specs, runs, labels, strict=True)
    ]
    if not args.no_outage:
        jobs += _outage_jobs(RetryPolicy())
    if not args.no_rate_limit:
        jobs += _rate_limit_jobs(RetryPolicy())
    if not args.no_fleet:
        jobs += _fleet_jobs(RetryPolicy())
    if not args.no_deadline:
        jobs += _chain_jobs(RetryPolicy())
    if not args.no_tail:
        jobs += _tail_jobs()
    if not args.no_overload:
        jobs += _overload_jobs()
    if not args.no_downloads:
        jobs += _downloads_jobs()
    fixed = run_storms([s.spec() for s in STEPS[:3]] + [step4.spec(REPRESENTATIVE_SEED)])
    steps = list(zip(STEPS, fixed, strict=True))

    # The table first, at once (flushed: a pipe or a file would hold it until the end), and
    # what is coming; the runs behind the rest take most of the command's time.
    out.append("The retry-storm table, measured: " + _scenario(6, 4, 0.1, 2.0))
    out.append("")
    out.append(seed_table(steps))
    out.append("")
    out.append(_follows(args, compare_runs))
    print("\n".join(out), flush=True)
    out.clear()
    results = run_jobs(jobs, workers=args.workers)

    out.append("")
    step4_stats = stats_from_rows(specs[0], args.seed, results[0])
    out.append("Step 4 " + stats_lines(step4_stats, mark=19))
    out.append(
        "  (the published step 4, 19 attempts, is one seeded run whose attempt count is the "
        "median of the source's own 20,000 runs; P(attempts <= 19) is close to 0.5 in this "
        "model, so the median of a sample here is 19 or 20)"
    )
    out.append("")
    rows: list[tuple[str, StormStats]] = [
        (COMPARISONS[0].label, stats_from_rows(specs[0], args.seed, results[0][:compare_runs]))
    ]
    found_rows = results[1 : len(specs)]
    for comparison, spec, found in zip(COMPARISONS[1:], specs[1:], found_rows, strict=True):
        rows.append((comparison.label, stats_from_rows(spec, args.seed, found)))
    out.append(
        f"Beyond the table: other policies in the same storm ({compare_runs:,} runs each, "
        f"seeds {args.seed}-{args.seed + compare_runs - 1})"
    )
    out.append(stats_table(rows))
    plain, budgeted = rows[-2][1], rows[-1][1]
    same = plain.attempts == budgeted.attempts and plain.succeeded == budgeted.succeeded
    default, bucket = RetryPolicy(), RetryBudget()
    most = (default.max_attempts - 1) * max(bucket.retry_cost, bucket.timeout_retry_cost)
    out.append(
        f"  RetryPolicy(): {describe_policy(default)}. Each client has its own RetryBudget() "
        f"({bucket.capacity:g} tokens)"
    )
    out.append(
        f"  and sends one request, so it can spend at most {most:g} tokens: "
        + ("the runs are identical with and without it." if same else "some runs differ.")
    )
    extra = len(specs)
    outage_rows: list[tuple[str, OutageResult]] = []
    if not args.no_outage:
        out.append("")
        outage_rows = _outage_rows(results[extra : extra + len(_OUTAGE_CONFIGS)])
        extra += len(_OUTAGE_CONFIGS)
        _outage_section(outage_rows, out)
    if not args.no_rate_limit:
        out.append("")
        rate_rows = _rate_limit_rows(results[extra : extra + 2])
        extra += 2
        out.append(_rate_limit_intro(rate_rows[0][1]))
        out.append(rate_limit_table(rate_rows))
        out.append(_rate_limit_summary(rate_rows))
    if not args.no_fleet:
        out.append("")
        fleet_rows = _fleet_rows(results[extra : extra + 2])
        extra += 2
        out.append(_fleet_intro(fleet_rows[0][1]))
        out.append(rate_limit_table(fleet_rows, "store"))
        out.append(_fleet_summary(fleet_rows))
    if not args.no_deadline:
        out.append("")
        chain_rows = _chain_rows(results[extra : extra + 2])
        extra += 2
        out.append(_chain_intro(chain_rows[0][1]))
        out.append(chain_table(chain_rows))
        out.append(_chain_summary(chain_rows))
    if not args.no_tail:
        out.append("")
        tail_rows = _tail_rows(results[extra : extra + len(TAIL_HEDGING)])
        extra += len(TAIL_HEDGING)
        out.append(_tail_intro(tail_rows[0][1]))
        out.append(tail_table(tail_rows))
        out.append(_tail_summary(tail_rows))
    if not args.no_overload:
        out.append("")
        overload_rows = _overload_rows(results[extra : extra + len(OVERLOAD_CONFIGS)])
        extra += len(OVERLOAD_CONFIGS)
        out.append(_overload_intro(overload_rows))
        out.append(overload_table(overload_rows))
        out.append(_overload_summary(overload_rows))
    if not args.no_downloads:
        out.append("")
        download_rows = _downloads_rows(results[extra : extra + len(DOWNLOAD_RESUMES)])
        out.append(_downloads_intro(download_rows[0][1]))
        out.append(downloads_table(download_rows))
        out.append(_downloads_summary(download_rows))
    return [(f"step {s.number}", run) for s, run in steps], outage_rows


def _custom(args: argparse.Namespace, out: list[str]) -> _Frames:
    fields = {name: getattr(args, name) for name in _POLICY_OPTIONS}
    fields = {name: value for name, value in fields.items() if value is not None}
    policy = RetryPolicy().replace(**fields)
    spec = StormSpec(
        policy,
        seed=args.seed,
        clients=args.clients if args.clients is not None else 6,
        capacity=args.capacity if args.capacity is not None else 4,
        call_time=args.call_time if args.call_time is not None else 0.1,
        duration=args.duration if args.duration is not None else 2.0,
        budget=RetryBudget if args.budget else None,
    )
    jobs = [Job(spec, args.runs, args.seed, label="your policy")]
    if args.outage:
        jobs += _outage_jobs(policy)
    results = run_jobs(jobs, workers=args.workers)
    (run,) = run_storms([spec])
    stats = stats_from_rows(spec, args.seed, results[0])
    given = ", ".join(f"{name}={value!r}" for name, value in fields.items())
    out.append(f"Your policy: RetryPolicy({given})")
    budget = ", RetryBudget() per client" if args.budget else ""
    out.append(f"  {describe_policy(policy)}{budget}")
    out.append(_scenario(spec.clients, spec.capacity, spec.call_time, spec.duration))
    out.append("")
    out.append(
        f"One run (seed {run.seed}): {run.attempts} attempts, {run.succeeded} of "
        f"{run.clients} succeeded, peak {run.peak_in_flight} in flight"
    )
    out.append(run_table(run))
    out.append("")
    out.append(stats_lines(stats).replace("over", "Over", 1))
    outage_rows: list[tuple[str, OutageResult]] = []
    if args.outage:
        out.append("")
        outage_rows = _outage_rows(results[1:])
        _outage_section(outage_rows, out)
    return [(f"your policy, seed {run.seed}", run)], outage_rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.runs < 1 or args.compare_runs < 1:
        parser.error("--runs and --compare-runs must be >= 1")
    custom = any(getattr(args, n) is not None for n in _POLICY_OPTIONS + _SCENARIO_OPTIONS[:-1])
    custom = custom or args.budget or args.outage
    if args.plot:
        from ._plot import check_matplotlib

        try:
            check_matplotlib()  # before the work, not after it
        except RuntimeError as exc:
            parser.error(str(exc))
        target = Path(args.plot)
        if not target.parent.is_dir():
            parser.error(f"--plot: no such directory: {target.parent}")
        if target.suffix.lower() not in {".png", ".svg", ".pdf"}:
            parser.error(f"--plot: give a .png, .svg or .pdf file name, got {args.plot!r}")
    started = time.perf_counter()
    out: list[str] = []
    try:
        frames, outage_rows = _custom(args, out) if custom else _default(args, out)
    except ValueError as exc:
        parser.error(str(exc))
    elapsed = time.perf_counter() - started
    out.append("")
    out.append(f"({elapsed:.1f} s of real time)")
    print("\n".join(out))
    if args.plot:
        from ._plot import plot_runs

        plot_runs(frames, args.plot, outage=outage_rows)
        print(f"Frames drawn in {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
