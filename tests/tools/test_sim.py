"""The storm simulator: the published retry-storm figures, reproduced through the real transport.

Every scenario runs in trio's virtual time, so nothing here sleeps. Most tests take well
under a second; the long outage with a breaker at 100 requests/s a second or two. The
20,000-run step-4 distribution is the longest (about 50 s of CPU, about 30 s on two cores): it
is run once (a module fixture) for the tests of its shape and of its median, spread over every
core by the simulator's worker processes.
The command's rate-limited, fleet and outage rows, which several tests compare against, are
run once too (the results are frozen), and so are its three tail-at-scale runs (10,000
requests each, about 6 s of CPU in all, over every core) and its three partial-overload runs
(12,000 requests each, about 2.2 s of CPU in all); the other command tests skip them.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import io
import itertools
import math
import random
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from retry_transport import (
    AdaptiveThrottle,
    CircuitBreaker,
    Hedging,
    Resume,
    RetryBudget,
    RetryPolicy,
)
from retry_transport.sim import (
    LONG_OUTAGE,
    REPRESENTATIVE_PATTERN,
    REPRESENTATIVE_SEED,
    STEPS,
    FleetResult,
    OutageResult,
    RateLimitResult,
    Reply,
    StormResult,
    StormStats,
    find_seed,
    run_fleet,
    run_outage,
    run_rate_limited,
    run_storm,
    run_storms,
    storm_stats,
)
from retry_transport.sim.__main__ import main
from retry_transport.sim._chain import DEADLINE_HEADER, _granted_ms, run_chain
from retry_transport.sim._downloads import run_downloads
from retry_transport.sim._overload import run_overload
from retry_transport.sim._results import ChainResult, OverloadResult, TailResult
from retry_transport.sim._tail import TAIL_HEDGING, run_tail

STEP1, STEP2, STEP3, STEP4 = STEPS


def _run(step_index: int, seed: int = 0, *, cooldown: bool = True) -> StormResult:
    spec = dataclasses.replace(STEPS[step_index].spec(seed), cooldown=cooldown)
    return run_storms([spec])[0]


# -- the storm's table ----------------------------------------------------------------------


def test_step1_blip_eight_attempts_five_succeed() -> None:
    run = _run(0)
    assert (run.attempts, run.succeeded) == (8, 5)
    by_client = {r.client: r for r in run.results}
    # The 503 waits base_delay = 100 ms; the 429 waits Retry-After (1 s) plus that backoff.
    assert by_client[1].waits == pytest.approx((0.1,))
    assert by_client[1].attempts == 2 and by_client[1].outcome == "200"
    assert by_client[2].waits == pytest.approx((1.1,))
    assert by_client[2].finished_at == pytest.approx(1.3)
    assert (by_client[3].attempts, by_client[3].outcome) == (1, "400")
    assert by_client[3].stop_reason == "not_retryable"
    assert [by_client[k].attempts for k in (4, 5, 6)] == [1, 1, 1]


def test_step2_retry_immediately_120_attempts_none_succeed() -> None:
    run = _run(1)
    assert (run.attempts, run.succeeded) == (120, 0)
    assert run.pattern == (20,) * 6
    assert all(r.outcome == "cut off" for r in run.results)
    assert run.peak_in_flight == 6
    # Back to back: attempt n starts at (n - 1) * 100 ms, the last one at 1.9 s.
    starts = sorted({round(c.start, 6) for c in run.calls})
    assert starts == [round(0.1 * i, 6) for i in range(20)]


def test_step3_exponential_30_attempts_in_waves() -> None:
    run = _run(2)
    assert (run.attempts, run.succeeded) == (30, 0)
    assert run.pattern == (5,) * 6
    # Every client fails together and waits 0.1, 0.2, 0.4, 0.8 s: five waves of six.
    starts = sorted({round(c.start, 6) for c in run.calls})
    assert starts == [0.0, 0.2, 0.5, 1.0, 1.9]
    assert all(c.status is None for c in run.calls)


def test_representative_seed_is_the_animation_frame() -> None:
    run = run_storm(STEP4.policy, seed=REPRESENTATIVE_SEED)
    assert run.attempts == 19
    assert run.pattern == REPRESENTATIVE_PATTERN == (3, 3, 3, 3, 3, 4)
    assert run.succeeded == 6
    assert run.recovered_at is not None and run.recovered_at <= 0.75


def test_representative_seed_is_the_first_match() -> None:
    assert find_seed(STEP4.policy) == REPRESENTATIVE_SEED


@pytest.fixture(scope="module")
def full_jitter_20000() -> StormStats:
    """Step 4 over seeds 0-19,999: as many runs as the source's own, run once for the tests
    below, over every core (the sim's worker processes; the rows do not depend on how
    many there are)."""
    return storm_stats(STEP4.policy, runs=20_000, seed=0, progress=False)


def _first_runs(stats: StormStats, runs: int) -> StormStats:
    """The distribution of ``stats``'s first ``runs`` runs: what ``storm_stats`` gives for
    ``runs=runs`` and the same seed, run ``i`` having seed ``seed + i`` either way."""
    return dataclasses.replace(
        stats,
        runs=runs,
        attempts=stats.attempts[:runs],
        succeeded=stats.succeeded[:runs],
        recovered_at=stats.recovered_at[:runs],
    )


def test_full_jitter_distribution_has_the_known_shape(full_jitter_20000: StormStats) -> None:
    # Known shape (an independent model, and 200,000 runs of this one): 18 attempts in
    # ~40% of runs, a second cluster at 23-24 (~37%), mean ~20.8 (sd ~2.9), all six succeed
    # in ~99.7%, all succeed by 0.75 s in ~51%. Bounds: 3 standard errors for 1,000 runs.
    stats = _first_runs(full_jitter_20000, 1000)  # seeds 0-999
    first = [run_storm(STEP4.policy, seed=s) for s in (0, 1, 2)]
    assert stats.attempts[:3] == tuple(r.attempts for r in first)
    assert stats.recovered_at[:3] == tuple(r.recovered_at for r in first)
    histogram = stats.histogram()
    share = {k: v / stats.runs for k, v in histogram.items()}
    assert 0.353 <= share[18] <= 0.447
    assert 0.32 <= share.get(23, 0) + share.get(24, 0) <= 0.42
    assert share.get(21, 0) + share.get(22, 0) < 0.1  # bimodal: a trough between clusters
    assert abs(stats.attempts_summary.mean - 20.8) <= 3 * 2.9 / math.sqrt(stats.runs)
    assert 2.5 <= stats.attempts_summary.stdev <= 3.3
    assert stats.attempts_summary.median in (19, 20)
    assert stats.attempts_summary.p10 == 18
    assert stats.all_succeeded_share >= 0.99
    assert 0.46 <= stats.share_recovered_within(0.75) <= 0.56
    assert min(stats.attempts) >= 18  # nobody can succeed before the third attempt
    assert max(stats.attempts) <= 30  # 6 clients x max_attempts


def test_full_jitter_median_over_the_seeds_20000_runs(full_jitter_20000: StormStats) -> None:
    """As many runs as the source's own, whose median (19) the published step 4 is one
    seeded run of. P(attempts <= 19) is about 0.50 (0.502 over
    200,000 runs of the independent model), so the median is 19 or 20; over 20,000 runs the
    share is within 3 standard errors (0.0035) of 0.502."""
    stats = full_jitter_20000
    assert (stats.runs, stats.seed, len(stats.attempts)) == (20_000, 0, 20_000)
    at_most_19 = sum(1 for a in stats.attempts if a <= 19) / stats.runs
    assert abs(at_most_19 - 0.502) <= 3 * math.sqrt(0.25 / stats.runs)
    assert stats.attempts_summary.median in (19, 20)
    assert stats.all_succeeded_share >= 0.995


# -- the model's rules ---------------------------------------------------------------------


def _reference(seed: int, policy: RetryPolicy) -> tuple[tuple[int, ...], float | None]:
    """An independent event model of the documented rules (full jitter only).

    Returns attempts per client and the time the last client succeeded (or ``None``).
    """
    clients, capacity, call_time, duration = 6, 4, 0.1, 2.0
    rngs = [random.Random(f"storm:{seed}:{k}") for k in range(1, clients + 1)]
    events: list[tuple[float, int, int]] = [(0.0, 1, k) for k in range(clients)]  # 0 = end
    attempts = [0] * clients
    done: list[float | None] = [None] * clients
    flying: dict[int, list[float | bool]] = {}
    while events:
        now, kind, k = heapq.heappop(events)
        if kind == 1:
            if now >= duration - 1e-9:
                continue
            attempts[k] += 1
            flying[k] = [now + call_time, False]
            live = [f for f in flying.values() if float(f[0]) > now + 1e-9]
            if len(live) > capacity:
                for f in live:
                    f[1] = True
            heapq.heappush(events, (now + call_time, 0, k))
            continue
        _, doomed = flying.pop(k)
        if not doomed:
            done[k] = now
        elif attempts[k] < policy.max_attempts:
            ceiling = min(policy.max_delay, policy.base_delay * 2 ** (attempts[k] - 1))
            heapq.heappush(events, (now + rngs[k].uniform(0.0, ceiling), 1, k))
    finished = [d for d in done if d is not None]
    return tuple(attempts), max(finished) if len(finished) == clients else None


def test_transport_runs_agree_with_an_independent_model() -> None:
    seeds = range(100, 160)
    runs = run_storms([STEP4.spec(s) for s in seeds])
    for seed, run in zip(seeds, runs, strict=True):
        pattern, recovered = _reference(seed, STEP4.policy)
        assert run.pattern == pattern, seed
        if recovered is None:
            assert run.recovered_at is None, seed
        else:
            assert run.recovered_at == pytest.approx(recovered, abs=1e-6), seed


def test_a_batch_gives_the_same_runs_as_single_runs() -> None:
    seeds = [3, 4, 5]
    batch = run_storms([STEP4.spec(s) for s in seeds])
    single = [run_storm(STEP4.policy, seed=s) for s in seeds]
    assert [r.calls for r in batch] == [r.calls for r in single]
    assert [r.results for r in batch] == [r.results for r in single]


def test_distribution_does_not_depend_on_the_worker_count() -> None:
    # 150 runs: two chunks of work (100 + 50), so two workers share them.
    one = storm_stats(STEP4.policy, runs=150, seed=7, workers=1, progress=False)
    two = storm_stats(STEP4.policy, runs=150, seed=7, workers=2, progress=False)
    assert one == two
    assert one.attempts[:3] == tuple(run_storm(STEP4.policy, seed=s).attempts for s in (7, 8, 9))


def test_more_than_capacity_dooms_every_call_in_flight() -> None:
    once = RetryPolicy(max_attempts=1)
    assert run_storm(once, clients=4).succeeded == 4
    five = run_storm(once, clients=5)
    assert (five.attempts, five.succeeded) == (5, 0)
    assert all(r.outcome == "ReadTimeout" for r in five.results)


def test_a_call_ending_as_another_starts_does_not_overlap_it() -> None:
    # One slot; the client retries at once, at the instant its 503 ends: ends come first.
    run = run_storm(RetryPolicy(base_delay=0.0), clients=1, capacity=1, script={1: (Reply(503),)})
    assert run.pattern == (2,)
    assert run.succeeded == 1
    assert run.calls[1].start == pytest.approx(run.calls[0].end)


def test_a_timeout_wins_over_a_scripted_reply() -> None:
    run = run_storm(RetryPolicy(max_attempts=1), clients=5, script={1: (Reply(400),)})
    assert run.results[0].outcome == "ReadTimeout"


def test_cooldown_cannot_act_in_the_storm() -> None:
    for index, seed in ((0, 0), (3, REPRESENTATIVE_SEED), (3, 5)):
        on = _run(index, seed)
        off = _run(index, seed, cooldown=False)
        assert on.calls == off.calls and on.results == off.results


def test_a_per_client_default_budget_changes_nothing_in_the_storm() -> None:
    seeds = range(10)
    plain = run_storms([STEP4.spec(s) for s in seeds])
    budgeted = run_storms([dataclasses.replace(STEP4.spec(s), budget=RetryBudget) for s in seeds])
    assert [r.calls for r in plain] == [r.calls for r in budgeted]


def test_a_small_budget_stops_retries() -> None:
    def tiny() -> RetryBudget:
        return RetryBudget(capacity=10)  # one retry after a timeout (10 tokens)

    run = run_storm(STEP2.policy, budget=tiny)
    assert run.pattern == (2,) * 6
    assert {r.stop_reason for r in run.results} == {"budget_exhausted"}


def test_refuses_to_run_in_testing_mode() -> None:
    from retry_transport.testing import retry_testing

    with retry_testing(), pytest.raises(RuntimeError, match="retry_testing"):
        run_storm(STEP4.policy)


def test_results_are_frozen() -> None:
    run = run_storm(RetryPolicy(), clients=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.seed = 1  # type: ignore[misc]


# -- the sustained outage ------------------------------------------------------------------


def test_a_budget_bounds_outage_amplification() -> None:
    # 12 s of outage at 100 requests/s: ~1,200 requests. The default bucket (500 tokens,
    # 5 per retry) pays for 100 retries, then every request is sent once. Successes put one
    # token back each: ~5 s after the outage the bucket is full again.
    budgeted = run_outage(budget=RetryBudget, rate=100.0, duration=19.0, outage=(0.0, 12.0))
    unbudgeted = run_outage(budget=None, rate=100.0, duration=19.0, outage=(0.0, 12.0))
    assert budgeted.outage_requests == unbudgeted.outage_requests > 1000
    assert budgeted.amplification <= 1.1
    assert budgeted.outage_attempts - budgeted.outage_requests == 100
    assert 2.9 <= unbudgeted.amplification <= 3.0
    # The service is back at 12 s: the application sees its last failure soon after.
    for result in (budgeted, unbudgeted):
        assert result.recovery_time < 0.5
    assert budgeted.first_budget_refusal_at is not None
    assert budgeted.first_budget_refusal_at < 2.0
    assert budgeted.budget_refilled_at is not None and 16.0 < budgeted.budget_refilled_at < 19.0
    # After the outage every request is sent once, with or without a budget.
    for result in (budgeted, unbudgeted):
        after = result.requests - result.outage_requests
        assert result.attempts - result.outage_attempts == after > 0
    assert unbudgeted.budget_tokens_min is None


def test_outage_is_reproducible() -> None:
    first = run_outage(seed=3, rate=50.0, duration=4.0, outage=(0.0, 2.0))
    assert first == run_outage(seed=3, rate=50.0, duration=4.0, outage=(0.0, 2.0))
    assert first != run_outage(seed=4, rate=50.0, duration=4.0, outage=(0.0, 2.0))


def test_outage_with_a_breaker_is_reproducible() -> None:
    scenario: dict[str, Any] = {
        "rate": 50.0, "duration": 30.0, "outage": (0.0, 20.0), "breaker": CircuitBreaker
    }
    first = run_outage(seed=3, **scenario)
    assert first == run_outage(seed=3, **scenario)
    assert first != run_outage(seed=4, **scenario)
    assert first.breaker and first.refused > 0 and first.breaker_transitions
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.refused = 0  # type: ignore[misc]


def _breaks(result: OutageResult) -> list[float]:
    opened, half_open = result.breaker_times("open"), result.breaker_times("half_open")
    # A break ends at the first request after it (Poisson arrivals: milliseconds later).
    return [round(h - o) for o, h in zip(opened, half_open, strict=False)]


def test_the_breaker_meets_its_goal_in_the_long_outage() -> None:
    """The command's breaker row: 120 s of 503 at 100 requests/s, budget + CircuitBreaker().

    Goal: attempts reaching the service during the outage <= 2% of the requests arriving in
    it, and the application sees the service again within max_break_duration (60 s)."""
    result = run_outage(**LONG_OUTAGE, breaker=CircuitBreaker)
    assert (result.duration, result.outage) == (150.0, (0.0, 120.0))
    assert result.budgeted and result.breaker
    assert 11_500 < result.outage_requests < 12_500
    assert result.attempts_in_outage <= 0.02 * result.outage_requests
    assert result.outage_load <= 0.02
    limit = CircuitBreaker().max_break_duration
    assert 0 < result.first_success_delay <= limit
    assert 0 < result.recovery_time <= limit
    # Cold start: the window fills with 20 failures within a fraction of a second; then
    # each failed probe doubles the break up to the 60 s cap, and a probe after the outage
    # closes it. Every other attempt in the outage came before it opened.
    opened = result.breaker_times("open")
    assert opened[0] < 1.0
    assert _breaks(result) == [5, 10, 20, 40, 60]
    (closed,) = result.breaker_times("close")
    assert closed == pytest.approx(result.first_success_at)
    probes = len(result.breaker_times("half_open"))
    assert result.attempts_in_outage - (probes - 1) == sum(result.attempts_per_second[:1])
    # The price: every request from the start to the first success failed, nearly all of
    # them fast; after it, none did.
    assert result.refused > 0.95 * result.failed
    assert result.failed > result.outage_requests
    assert result.last_failure_at is not None and result.first_success_at is not None
    assert result.last_failure_at <= result.first_success_at + 0.1
    assert sum(result.failed_per_second[math.ceil(result.first_success_at) + 1 :]) == 0
    assert sum(result.attempts_per_second) == result.attempts


def test_the_breaker_trades_load_for_failed_fast_requests() -> None:
    """The three rows of the command at a tenth of the traffic: the ordering of the
    trade-off (load shed against requests failed and recovery delay)."""
    scenario = {**LONG_OUTAGE, "rate": 10.0}
    plain = run_outage(budget=None, **scenario)
    budget = run_outage(budget=RetryBudget, **scenario)
    breaker = run_outage(budget=RetryBudget, breaker=CircuitBreaker, **scenario)
    assert plain.outage_requests == budget.outage_requests == breaker.outage_requests > 1000
    # Load: retries triple it without a budget; the budget holds it near 1x (its 100
    # retries are a tenth of the requests here); the breaker sheds nearly all of it.
    assert plain.outage_load > 2.9
    assert 1.0 <= budget.outage_load < 1.15
    assert breaker.attempts_in_outage < 0.05 * breaker.outage_requests
    # The price: more requests fail (those that arrive after the service is back, until
    # a probe finds it), all but a few fast, and the first success comes later.
    assert breaker.failed > budget.failed >= plain.failed
    assert plain.refused == budget.refused == 0 < breaker.refused
    assert max(plain.first_success_delay, budget.first_success_delay) < 1.0
    assert 1.0 < breaker.first_success_delay <= CircuitBreaker().max_break_duration
    assert max(plain.recovery_time, budget.recovery_time) < 1.0 < breaker.recovery_time
    for result in (plain, budget):
        assert not result.breaker and result.breaker_transitions == ()


# -- the rate-limited API ------------------------------------------------------------------

UNPACED = RetryPolicy(respect_rate_limits=False)


@pytest.fixture(scope="module")
def rate_limited() -> dict[bool, RateLimitResult]:
    """The rate-limited API with its defaults (seed 0), paced (True) and not (False): the
    command's two rows. Run once for the tests that read them (the results are frozen)."""
    return {True: run_rate_limited(seed=0), False: run_rate_limited(UNPACED, seed=0)}


def test_pacing_turns_429s_into_waits_with_the_same_goodput(
    rate_limited: dict[bool, RateLimitResult],
) -> None:
    # 3 callers back to back (~30 requests/s) against 10 per 1 s window, for 30 windows.
    paced, unpaced = rate_limited[True], rate_limited[False]
    assert paced.paced and not unpaced.paced
    assert len(paced.completed_per_window) == len(paced.rejected_per_window) == 30
    # Only the attempts in flight when the quota ran out meet a 429: at most callers - 1.
    assert paced.rejected_summary.high <= paced.callers - 1
    assert 0 < paced.rejected * 5 <= unpaced.rejected
    assert unpaced.rejected_summary.mean > 10
    # Nothing is lost with pacing; without it, requests run out of attempts (or budget).
    assert paced.failed == 0 and paced.failures == ()
    assert unpaced.failed > 100
    assert {reason for reason, _ in unpaced.failures} <= {"max_attempts", "budget_exhausted"}
    # Goodput does not drop: the quota is used in full in every window, either way.
    assert paced.completed_per_window == (paced.quota,) * 30
    assert paced.goodput.mean >= unpaced.goodput.mean
    assert paced.goodput.low >= unpaced.goodput.low
    assert max(unpaced.completed_per_window) <= unpaced.quota
    # The 429s became holds; the requests that ended in a 200 waited longer for it.
    assert paced.held > 0 and paced.held_time > 0 and unpaced.held == 0
    assert paced.latency.mean > unpaced.latency.mean
    assert paced.latency.count == paced.completed
    # Every attempt is answered 200 (ending its request) or 429.
    for result in (paced, unpaced):
        assert result.attempts == result.completed + result.rejected
        assert result.requests == result.completed + result.failed
        assert sum(result.rejected_per_window) <= result.rejected


def test_pacing_holds_429s_to_callers_minus_one_per_window_over_seeds() -> None:
    for seed in range(1, 11):
        paced = run_rate_limited(seed=seed, duration=8.0)
        unpaced = run_rate_limited(UNPACED, seed=seed, duration=8.0)
        assert paced.rejected_summary.high <= paced.callers - 1, seed
        assert paced.failed == 0, seed
        assert paced.rejected * 3 <= unpaced.rejected, seed
        assert paced.goodput.low >= unpaced.goodput.low, seed
        assert paced.goodput.mean >= unpaced.goodput.mean, seed


def test_under_the_quota_nothing_is_held_or_rejected() -> None:
    # One caller with 200-300 ms calls sends at most 5 requests a window: never out of quota.
    result = run_rate_limited(callers=1, call_time=(0.2, 0.3), duration=5.0)
    assert (result.rejected, result.held, result.failed) == (0, 0, 0)
    assert result.attempts == result.requests == result.completed
    assert all(3 <= n <= 5 for n in result.completed_per_window)


def test_rate_limited_is_reproducible() -> None:
    first = run_rate_limited(seed=3, duration=5.0)
    assert first == run_rate_limited(seed=3, duration=5.0)
    assert first != run_rate_limited(seed=4, duration=5.0)
    unpaced = run_rate_limited(UNPACED, seed=3, duration=5.0)
    assert unpaced == run_rate_limited(UNPACED, seed=3, duration=5.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.rejected = 0  # type: ignore[misc]


def test_rate_limited_rejects_a_bad_scenario() -> None:
    with pytest.raises(ValueError, match="callers"):
        run_rate_limited(callers=0)
    with pytest.raises(ValueError, match="window"):
        run_rate_limited(window=2.0, duration=1.0)
    with pytest.raises(ValueError, match="call_time"):
        run_rate_limited(call_time=(0.2, 0.1))


# -- a fleet sharing cooldowns -------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet() -> dict[bool, FleetResult]:
    """The fleet with its defaults (seed 0), with a shared store (True) and without (False):
    the command's two rows. Run once for the tests that read them (the results are frozen)."""
    return {shared: run_fleet(shared=shared, seed=0) for shared in (True, False)}


def test_a_shared_store_cuts_the_fleets_429s(fleet: dict[bool, FleetResult]) -> None:
    """8 workers, each with its own transport, against 50 requests per 10 s window, 30 windows.

    Alone, each worker keeps sending until it meets the spent quota itself, then is quiet until
    the window's end (the Retry-After reaches it, and a worker has one request at a time), and
    the fleet spends the quota in every window (it is back within about 1.1 s of the reset
    and sends 50 requests/s at the least): exactly one 429 per worker and window, 240, whatever
    the seed. With the store a window's 429s are its first one, without which nobody learns,
    plus those of fleet-mates whose attempt reaches the API while that 429 is on its way back
    (5-15 ms). A fleet-mate's attempts come 100 ms apart on average, so each of the 7 does so
    with a chance of about 15 ms / 100 ms = 0.15 at most: at most 1 + 7 * 0.15 = 2.05 429s
    per window expected, 61.5 in 30 windows (a standard deviation of about 5), against the
    80 (8 / 3 per window) asserted. Measured: 52.
    """
    shared, alone = fleet[True], fleet[False]
    assert shared.shared and not alone.shared
    assert shared.workers == alone.workers == 8
    windows = 30
    assert len(shared.rejected_per_window) == len(alone.rejected_per_window) == windows
    assert alone.rejected_per_window == (alone.workers,) * windows
    assert all(1 <= n <= shared.workers for n in shared.rejected_per_window)
    assert 3 * shared.rejected <= alone.rejected
    # The 429s avoided are attempts not sent: the same requests, fewer attempts.
    assert shared.requests == alone.requests
    assert alone.attempts - shared.attempts == alone.rejected - shared.rejected
    # Sharing holds the fleet's requests instead: alone, nothing holds a worker but its own
    # 429's retry (never held), so no request is held at all.
    assert shared.held > 0 and alone.held == 0
    assert shared.failed == alone.failed == 0
    for result in (shared, alone):
        assert result.completed_per_window == (result.quota,) * windows
        assert result.attempts == result.completed + result.rejected
        assert result.latency.count == result.completed


def test_sharing_does_not_reduce_goodput() -> None:
    """Goodput is the quota in every window, with the store or without: a hold ends by the
    window's first Retry-After (at most 1 s after the reset: whole seconds, rounded up) plus
    one backoff step (at most 100 ms), and what is left of the window is long enough for the
    fleet to spend the quota (the condition checked first). The store only keeps back
    attempts that would have met a 429. (With windows barely longer than a Retry-After's
    rounding, the fleet's one late return could cost goodput: not so here.) The last
    scenario's 429s take as long as its 200s, so the store learns too late to spare many."""
    scenarios: list[dict[str, Any]] = [
        {"workers": 8, "quota": 50},
        {"workers": 4, "quota": 20, "window": 5.0},
        {"workers": 12, "quota": 100, "call_time": (0.1, 0.3)},
        {"workers": 2, "quota": 10, "window": 3.0, "reject_time": (0.05, 0.15)},
    ]
    for seed, scenario in enumerate(scenarios, 1):
        window = scenario.get("window", 10.0)
        slowest = scenario.get("call_time", (0.05, 0.15))[1]
        assert scenario["workers"] * (window - 1.1) / slowest > scenario["quota"]
        duration = 6 * window
        shared = run_fleet(shared=True, seed=seed, duration=duration, **scenario)
        alone = run_fleet(shared=False, seed=seed, duration=duration, **scenario)
        assert shared.goodput.mean >= alone.goodput.mean, scenario
        assert shared.goodput.low >= alone.goodput.low, scenario
        assert shared.completed_per_window == (scenario["quota"],) * 6, scenario
        # Never more 429s either: at most one per worker and window, with the store or not.
        assert alone.rejected_per_window == (scenario["workers"],) * 6, scenario
        assert max(shared.rejected_per_window) <= scenario["workers"], scenario


def test_fleet_is_reproducible() -> None:
    for shared in (True, False):
        first = run_fleet(shared=shared, seed=3, duration=50.0)
        assert first == run_fleet(shared=shared, seed=3, duration=50.0)
        assert first != run_fleet(shared=shared, seed=4, duration=50.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.rejected = 0  # type: ignore[misc]


def test_fleet_rejects_a_bad_scenario() -> None:
    with pytest.raises(ValueError, match="workers"):
        run_fleet(workers=0)
    with pytest.raises(ValueError, match="reject_time"):
        run_fleet(reject_time=(0.0, 0.01))
    with pytest.raises(ValueError, match="window"):
        run_fleet(window=20.0, duration=10.0)


# -- the command ---------------------------------------------------------------------------


def test_command_prints_the_storm_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--runs", "40", "--compare-runs", "20", "--workers", "1", "--no-outage", "--no-fleet"]
    args += ["--no-tail", "--no-overload", "--no-downloads"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("The retry-storm table, measured")
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("step  policy"))
    rows = [line.split() for line in lines[header + 1 : header + 5]]
    assert [row[0] for row in rows] == ["1", "2", "3", "4"]
    measured = [(row[row.index("of") - 2], row[row.index("of") - 1]) for row in rows]
    assert measured == [("8", "5"), ("120", "0"), ("30", "0"), ("19", "6")]
    assert f"seed {REPRESENTATIVE_SEED}: attempts 3,3,3,3,3,4" in out
    assert "decorrelated jitter" in out
    # The published figure is one seeded run (19 attempts) at the source's median, not a
    # median of this model's runs, which is 19 or 20.
    assert "median 19 of 20,000" not in out
    assert ("the published step 4, 19 attempts, is one seeded run whose attempt count is "
            "the median of the source's own 20,000 runs" in " ".join(out.split()))


def test_command_prints_the_rate_limit_table(
    capsys: pytest.CaptureFixture[str], rate_limited: dict[bool, RateLimitResult]
) -> None:
    args = ["--runs", "10", "--compare-runs", "5", "--workers", "1", "--no-outage", "--no-fleet"]
    args += ["--no-tail", "--no-overload", "--no-downloads"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Rate-limited API: 3 callers" in out and "3x the quota" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("respect_rate_limits"))
    for line, paced in zip(lines[header + 1 : header + 3], (True, False), strict=True):
        result = rate_limited[paced]
        row = line.split()
        assert row[0] == str(paced)
        cells = row[2:] if paced else row[1:]  # "True (pacing)" is two words
        assert cells[0] == f"{result.rejected:,}"
        assert cells[3] == f"{result.goodput.mean:.1f}"
        assert cells[5] == f"{result.completed:,}" and cells[6] == f"{result.failed:,}"
        assert f"{result.attempts:,}" in cells
    assert "Pacing: " in out and "429s instead of" in out
    assert main([*args, "--no-rate-limit"]) == 0
    assert "Rate-limited API" not in capsys.readouterr().out


def test_command_prints_the_fleet_table(
    capsys: pytest.CaptureFixture[str], fleet: dict[bool, FleetResult]
) -> None:
    args = ["--runs", "10", "--compare-runs", "5", "--workers", "1", "--no-outage", "--no-tail"]
    args += ["--no-overload", "--no-downloads"]
    assert main([*args, "--no-rate-limit"]) == 0
    out = capsys.readouterr().out
    assert "A fleet sharing cooldowns: 8 workers" in out and "16x the quota" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("store  "))
    for line, shared in zip(lines[header + 1 : header + 3], (True, False), strict=True):
        result = fleet[shared]
        row = line.split()
        assert row[0] == ("MemoryStore()" if shared else "none")
        assert row[1] == f"{result.rejected:,}"
        assert row[2] == f"{result.rejected_summary.mean:.1f}"
        assert row[4] == f"{result.goodput.mean:.1f}"
        assert row[6:9] == [f"{result.completed:,}", f"{result.failed:,}", f"{result.attempts:,}"]
        assert row[9] == f"{result.held:,}" and row[10] == f"{result.latency.mean:.3f}"
    assert "Sharing: " in out and "429s instead of" in out
    assert main([*args, "--no-fleet"]) == 0
    out = capsys.readouterr().out
    assert "A fleet sharing cooldowns" not in out and "Rate-limited API" in out


SMALL_OUTAGE: dict[str, Any] = {"duration": 60.0, "outage": (0.0, 30.0), "rate": 20.0}
#: The command's outage rows: label, run_outage keyword arguments.
OUTAGE_CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("no budget, no breaker", {"budget": None}),
    ("RetryBudget()", {}),
    ("RetryBudget() + CircuitBreaker()", {"breaker": CircuitBreaker}),
]


@pytest.fixture(scope="module")
def small_outages() -> list[OutageResult]:
    """The command's three outage configurations in SMALL_OUTAGE, in its order. Run once for
    the tests that read them (the results are frozen)."""
    return [run_outage(**SMALL_OUTAGE, **kwargs) for _, kwargs in OUTAGE_CONFIGS]


def test_command_prints_the_outage_table(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    small_outages: list[OutageResult],
) -> None:
    import retry_transport.sim.__main__ as command

    monkeypatch.setattr(command, "LONG_OUTAGE", SMALL_OUTAGE)  # the table's form, faster
    args = ["--runs", "10", "--compare-runs", "5", "--workers", "1", "--no-rate-limit"]
    args += ["--no-fleet", "--no-tail", "--no-overload", "--no-downloads"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Sustained outage: Poisson arrivals, 20 requests/s for 60 s" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("configuration"))
    results = small_outages
    for line, (label, _), result in zip(lines[header + 1 :], OUTAGE_CONFIGS, results, strict=False):
        assert line.startswith(label + "  ")
        cells = line[len(label) :].split()
        assert cells[:2] + cells[3:5] == [
            f"{result.outage_requests:,}",
            f"{result.attempts_in_outage:,}",
            f"{result.failed:,}",
            f"{result.refused:,}",
        ]
        assert float(cells[2].removesuffix("%")) == pytest.approx(
            100 * result.outage_load, abs=0.05
        )
        assert cells[5:] == [
            f"{result.first_success_delay:.2f}", "s", f"{result.recovery_time:.2f}", "s"
        ]
    assert "the breaker opened at" in out and "breaks of 5, 10, 20 s" in out
    assert "The breaker's trade-off:" in out
    # At 20 requests/s the breaker's ~25 attempts are over 2% of the outage's requests.
    breaker = results[2]
    summary = " ".join(out[out.index("The breaker's trade-off:") :].split())
    assert f"of its requests: {100 * breaker.outage_load:.2f}%, NOT met;" in summary
    delay = max(breaker.first_success_delay, breaker.recovery_time)
    assert f"recovery <= max_break_duration (60 s): {delay:.2f} s, met." in summary


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self) -> bool:
        return True


_PROGRESS_ARGS = ["--runs", "25", "--compare-runs", "5", "--no-outage", "--no-rate-limit"]
_PROGRESS_ARGS += ["--no-fleet", "--no-deadline", "--no-tail", "--no-overload",
                   "--no-downloads"]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Storm jobs cut into chunks of 10 runs (not 100): _PROGRESS_ARGS's 25 runs of step 4
    are three chunks, so the progress line has something to count."""
    import retry_transport.sim._dist as dist

    monkeypatch.setattr(dist, "_CHUNK", 10)


def _frames(written: str) -> list[str]:
    """What a terminal showed, line after line: each ``\\r`` redraws the line."""
    assert "\n" not in written  # the line is redrawn in place, never a new one
    return [frame.rstrip() for frame in written.split("\r")]


@pytest.mark.usefixtures("small_chunks")
def test_command_shows_its_progress_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import retry_transport.sim._dist as dist

    ticks = itertools.count()
    monkeypatch.setattr(dist, "_clock", lambda: float(next(ticks)))  # a second per look
    monkeypatch.setenv("COLUMNS", "100")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main([*_PROGRESS_ARGS, "--workers", "1"]) == 0
    assert capsys.readouterr().out.startswith("The retry-storm table, measured")
    written = terminal.getvalue()
    # One process: each job's chunks in turn (10, 10 and 5 runs of step 4, then 5 runs of
    # each other policy); the share counts runs (45 in all).
    assert _frames(written) == [
        "",
        "    0%  step 4: 0/25 runs",
        "   22%  step 4: 10/25 runs",
        "   44%  step 4: 20/25 runs",
        "   55%  equal jitter, max 5: 0/5 runs",
        "   66%  decorrelated jitter, max 5: 0/5 runs",
        "   77%  RetryPolicy() defaults, no budget: 0/5 runs",
        "   88%  RetryPolicy() defaults + RetryBudget(): 0/5 runs",
        "",
        "",
    ]
    # Each frame covers the one before, and the last one wipes the line.
    frames = written.split("\r")[1:]
    assert all(len(b) >= len(a.rstrip()) for a, b in itertools.pairwise(frames))
    assert frames[-2] == " " * len(frames[-3]) and frames[-1] == ""


@pytest.mark.usefixtures("small_chunks")
def test_command_progress_is_drawn_at_most_ten_times_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import retry_transport.sim._dist as dist

    monkeypatch.setattr(dist, "_clock", lambda: 100.0)  # no time passes: one frame only
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main([*_PROGRESS_ARGS, "--workers", "1"]) == 0
    assert _frames(terminal.getvalue()) == ["", "    0%  step 4: 0/25 runs", "", ""]


@pytest.mark.usefixtures("small_chunks")
def test_command_progress_with_worker_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    import retry_transport.sim._dist as dist

    ticks = itertools.count()
    monkeypatch.setattr(dist, "_clock", lambda: float(next(ticks)))
    monkeypatch.setenv("COLUMNS", "100")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main([*_PROGRESS_ARGS, "--workers", "2"]) == 0
    frames = _frames(terminal.getvalue())
    assert frames[0] == "" and frames[-2:] == ["", ""]
    shown = frames[1:-2]
    # Two workers: the line names the jobs under way (two at most), and the share grows.
    pattern = re.compile(r" {2}( {0,2}\d{1,2})%  (.+)")
    shares = []
    for frame in shown:
        found = pattern.fullmatch(frame)
        assert found is not None, frame
        shares.append(int(found.group(1)))
        assert 1 <= len(found.group(2).split(" | ")) <= 2, frame
    assert shares == sorted(shares) and shares[0] == 0
    assert any(re.search(r"step 4: \d+/25 runs", frame) for frame in shown)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.usefixtures("small_chunks")
def test_command_writes_nothing_on_stderr_that_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    stderr = io.StringIO()  # isatty() is False: a file or a pipe
    monkeypatch.setattr(sys, "stderr", stderr)
    assert main([*_PROGRESS_ARGS, "--workers", workers]) == 0
    assert capsys.readouterr().out.startswith("The retry-storm table, measured")
    assert stderr.getvalue() == ""


class _Pipe(io.StringIO):
    """A stdout that is no terminal (a pipe, a file): a reader has what was flushed."""

    flushed = ""

    def flush(self) -> None:
        self.flushed = self.getvalue()


def test_command_flushes_the_storm_table_before_its_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The storm's table and a line saying that the rest follows reach a pipe before the
    runs behind the rest start (it printed nothing until the end: tens of seconds)."""
    import retry_transport.sim.__main__ as command

    pipe = _Pipe()
    monkeypatch.setattr(sys, "stdout", pipe)
    read_then: list[str] = []
    run_jobs = command.run_jobs

    def recorded(*args: Any, **kwargs: Any) -> Any:
        read_then.append(pipe.flushed)
        return run_jobs(*args, **kwargs)

    monkeypatch.setattr(command, "run_jobs", recorded)
    assert main([*_PROGRESS_ARGS, "--workers", "1"]) == 0
    (first,) = read_then
    assert first, "nothing reached the pipe before the runs"
    lines = first.splitlines()
    assert lines[0].startswith("The retry-storm table, measured")
    header = lines.index(next(line for line in lines if line.startswith("step  policy")))
    assert [line.split()[0] for line in lines[header + 1 : header + 5]] == ["1", "2", "3", "4"]
    assert " ".join(lines[header + 6 :]) == (
        "The rest follows once it has run: step 4 over 25 seeded runs, other policies over 5 "
        "each (each --no-... option skips a section)."
    )
    assert pipe.getvalue().startswith(first)
    assert "Step 4 over 25 runs" in pipe.getvalue()[len(first) :]


def test_command_runs_your_policy(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--max-attempts", "4", "--jitter", "decorrelated", "--base-delay", "0.05"]
    assert main([*args, "--runs", "30", "--seed", "2", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "max_attempts=4" in out and "jitter='decorrelated'" in out
    expected = run_storm(
        RetryPolicy(max_attempts=4, jitter="decorrelated", base_delay=0.05), seed=2
    )
    assert f"One run (seed 2): {expected.attempts} attempts" in out
    assert "over 30 runs" in out.lower()


def test_every_command_option_is_described(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every option the usage line lists has a description in --help."""
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    usage, _, body = capsys.readouterr().out.partition("\n\n")
    listed = set(re.findall(r"\[(--[a-z][\w-]*)", usage))
    assert {"--runs", "--plot", "--max-attempts", "--jitter", "--clients", "--outage"} <= listed
    # An option's line gives its description after two spaces or more, or the next line does.
    option = re.compile(r"^  (?:-\w, )?(--[a-z][\w-]*)(?: \S+)?(?: {2,}(\S.*))?$")
    lines = body.splitlines() + [""]
    described: dict[str, str] = {}
    for line, following in itertools.pairwise(lines):
        if found := option.match(line):
            wrapped = following.strip() if following.startswith(" " * 4) else ""
            described[found.group(1)] = found.group(2) or wrapped
    assert sorted(name for name in listed if not described.get(name)) == []


def test_plot_without_matplotlib_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from retry_transport.sim import plot_runs

    real = importlib.import_module

    def no_matplotlib(name: str, package: str | None = None) -> object:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", no_matplotlib)
    with pytest.raises(RuntimeError, match="pip install"):
        plot_runs([("step 2", _run(1))], "unused.png")
    # The command says so before it simulates anything.
    with pytest.raises(SystemExit) as exit_info:
        main(["--plot", "unused.png", "--max-attempts", "2", "--runs", "1"])
    assert exit_info.value.code == 2


def test_plot_draws_a_file(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from retry_transport.sim import plot_runs

    path = tmp_path / "frames.png"
    plot_runs([("step 1", _run(0)), ("step 4", _run(3, REPRESENTATIVE_SEED))], str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_draws_the_outage_panels(
    tmp_path: Path, small_outages: list[OutageResult]
) -> None:
    pytest.importorskip("matplotlib")
    from retry_transport.sim import plot_runs

    rows = [("no budget, no breaker", small_outages[0]), ("budget + breaker", small_outages[2])]
    path = tmp_path / "frames.png"
    plot_runs([("step 1", _run(0))], str(path), outage=rows)
    with_outage = path.read_bytes()
    assert with_outage[:8] == b"\x89PNG\r\n\x1a\n"
    plot_runs([("step 1", _run(0))], str(path))
    assert len(path.read_bytes()) < len(with_outage)


def test_outage_counts_per_second_add_up(small_outages: list[OutageResult]) -> None:
    result = small_outages[2]  # budget + breaker
    assert sum(result.attempts_per_second) == result.attempts
    assert sum(result.failed_per_second) == result.failed
    assert sum(result.attempts_per_second[:30]) == result.attempts_in_outage
    assert result.first_success_at is not None and result.first_success_at >= 30.0


def test_recovery_time_is_the_last_success() -> None:
    run = run_storm(STEP4.policy, seed=REPRESENTATIVE_SEED)
    ends = [c.end for c in run.calls if c.ok]
    assert run.recovered_at == pytest.approx(max(ends))
    assert statistics.fmean(r.attempts for r in run.results) == pytest.approx(19 / 6)


# -- deadline propagation down a chain of services --------------------------------------------


@pytest.fixture(scope="module")
def chains() -> dict[bool, ChainResult]:
    """The command's two runs (seed 0): propagated (True) and timeouts only (False)."""
    return {flag: run_chain(propagate=flag) for flag in (True, False)}


def test_propagating_the_deadline_leaves_no_attempt_after_give_up(
    chains: dict[bool, ChainResult],
) -> None:
    """Three services of 3 attempts over a bottom that answers 503 after 100 ms; users wait
    2 s. Without propagation nothing below service 1 times out (service 3's call of 3
    attempts takes at most 3 x 0.1 + 0.1 + 0.2 = 0.6 s, under service 2's 1 s; service 2's
    at most 3 x 0.6 + 0.3 = 2.1 s, over service 1's 1.5 s, but a timed-out call goes on), so
    every request reaches the bottom 3 x 3 x 3 = 27 times, and takes more than 2 s to: much
    of it after the user is gone. With it, the calls stop at the user's deadline."""
    carried, alone = chains[True], chains[False]
    assert alone.users == carried.users == 20 and alone.most_possible == 27
    assert alone.per_request() == (27,) * 20
    assert alone.outcomes == (("ReadTimeout", 20),)  # each user's own timeout
    assert alone.waited == pytest.approx((2.0,) * 20)
    assert alone.after_answer() == 0  # no user had an answer to stop waiting for
    assert alone.after_give_up() + alone.while_waiting() == alone.calls() == 540
    assert alone.after_give_up() > alone.calls() / 3
    assert all(n > 0 for n in alone.after_per_request())
    assert alone.after_give_up(1) > 0 and alone.after_give_up(2) > 0  # services 2 and 3
    assert alone.last_after is not None and alone.last_after > 1.0
    # Propagated: nothing reaches any service, nor the bottom, once the user's 2 s are up.
    for level in range(carried.services + 1):
        assert carried.after_give_up(level) == 0, level
    assert carried.last_after is None
    assert max(carried.waited) <= 2.0 + 1e-9
    # The chain answers (504: a service's call ran out of time; 503: a service whose next
    # backoff would end past the deadline relayed the bottom's), just before the 2 s.
    assert {outcome for outcome, _ in carried.outcomes} <= {"503", "504"}
    assert all(0 < n <= 27 for n in carried.per_request())
    # It takes away only the work after give-up: the attempts while users wait are alike.
    assert carried.while_waiting() == pytest.approx(alone.while_waiting(), rel=0.1)
    assert carried.calls() == carried.while_waiting() + carried.after_answer()


@pytest.mark.parametrize(
    "scenario",
    [
        {"seed": 1},
        {"seed": 2, "service_time": 0.0},  # the bottom answers at once
        {"seed": 3, "service_time": 0.3, "timeouts": (0.5, 0.5, 0.5)},
        {"seed": 4, "user_timeout": 1.0, "users": 10},
        {"seed": 5, "policy": RetryPolicy(max_attempts=4), "timeouts": (2.0, 1.0)},
    ],
)
def test_the_propagated_deadline_holds_whatever_the_scenario(scenario: dict[str, Any]) -> None:
    """No call reaches a service or the bottom after its user's deadline, and no user waits
    longer than it: every attempt carries the milliseconds left, rounded down, so a deadline
    down the chain never ends after the one above it, and no attempt goes with under 1 ms."""
    result = run_chain(propagate=True, **scenario)
    limit = result.user_timeout
    for level in range(result.services + 1):
        assert result.after_give_up(level) == 0, level
        assert all(t < limit for times in result.arrivals[level] for t in times)
    assert max(result.waited) <= limit + 1e-9


def test_chain_is_reproducible() -> None:
    for propagate in (True, False):
        first = run_chain(propagate=propagate, seed=3, users=6)
        assert first == run_chain(propagate=propagate, seed=3, users=6)
        assert first != run_chain(propagate=propagate, seed=4, users=6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.users = 0  # type: ignore[misc]


def test_chain_rejects_a_bad_scenario() -> None:
    with pytest.raises(ValueError, match="users"):
        run_chain(users=0)
    with pytest.raises(ValueError, match="user_timeout"):
        run_chain(user_timeout=0.0)
    with pytest.raises(ValueError, match="timeouts"):
        run_chain(timeouts=())
    with pytest.raises(ValueError, match="timeouts"):
        run_chain(timeouts=(1.0, -1.0))


def test_a_server_reads_the_deadline_header_as_the_middlewares_do() -> None:
    def granted(*values: str) -> int | None:
        return _granted_ms(httpx.Headers([(DEADLINE_HEADER, v) for v in values]))

    assert (granted("1500"), granted(" 7 "), granted("0")) == (1500, 7, 0)
    assert [granted(v) for v in ("", "-1", "1.5", "12ms", "1" * 16)] == [None] * 5
    assert granted() is None and granted("1", "2") is None


def test_command_prints_the_deadline_table(
    capsys: pytest.CaptureFixture[str], chains: dict[bool, ChainResult]
) -> None:
    args = ["--runs", "10", "--compare-runs", "5", "--workers", "1", "--no-outage"]
    args += ["--no-rate-limit", "--no-fleet", "--no-tail", "--no-overload", "--no-downloads"]
    assert main(args) == 0
    out = capsys.readouterr().out
    intro = " ".join(out[out.index("Deadline propagation:") :].split())
    assert intro.startswith("Deadline propagation: 20 users, one GET each at a random time "
                            "within 10 s (seed 0), call service 1, which calls service 2")
    assert "503 after 100 ms" in intro and "1.5 s, 1 s and 0.5 s" in intro
    assert "3 x 3 x 3 = 27 times" in intro and "retry_transport.deadline(2)" in intro
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("deadline  "))
    for line, (label, propagate) in zip(
        lines[header + 1 : header + 3], [("timeouts only", False), ("propagated", True)],
        strict=True,
    ):
        result = chains[propagate]
        assert line.startswith(label + "  ")
        cells = line.split(" s  ", 1)[1].split()  # after "... by 2.00 s"
        assert cells[:4] == [
            f"{result.calls():,}",
            f"{result.while_waiting():,}",
            f"{result.after_answer():,}",
            f"{result.after_give_up():,}",
        ]
    assert "Goal: 0 attempts after give-up with propagation: met." in intro
    alone = chains[False]
    assert f"instead of {alone.after_give_up():,} (" in intro
    assert main([*args, "--no-deadline"]) == 0
    assert "Deadline propagation" not in capsys.readouterr().out


# -- the tail at scale: hedged requests against a heavy latency tail ---------------------------


@pytest.fixture(scope="module")
def tails() -> list[tuple[str, TailResult]]:
    """The command's three runs (seed 0): no hedging, Hedging(0.05), Hedging("p95"), in its
    order. Run once, over every core (the command's jobs; the results do not depend on how
    many workers there are)."""
    from retry_transport.sim.__main__ import _tail_jobs, _tail_rows
    from retry_transport.sim._dist import run_jobs

    return _tail_rows(run_jobs(_tail_jobs(), progress=False))


def test_hedging_cuts_the_tail_for_a_few_more_attempts(
    tails: list[tuple[str, TailResult]],
) -> None:
    """1% of calls take 1 s: without hedging they are the p99.9. A hedge after 50 ms or
    after the measured p95 (about 16 ms) is an independent call, fast 99 times in 100, so
    the p99.9 falls more than tenfold for under 10% more attempts, and the p50 stays."""
    (_, plain), (_, fixed), (_, p95) = tails
    assert plain.requests == fixed.requests == p95.requests == 10_000
    assert plain.p999 == pytest.approx(1.0) and plain.attempts == (1,) * 10_000
    assert (plain.hedged, plain.calls, plain.cancelled, plain.delays) == (0, 10_000, 0, None)
    assert 0.009 <= plain.p50 <= 0.011
    for hedged in (fixed, p95):
        assert plain.p999 / hedged.p999 >= 10
        assert hedged.attempts_per_request <= 1.1 * plain.attempts_per_request
        assert hedged.p50 == plain.p50  # the same calls: a fast first call is never hedged
        assert hedged.longest <= plain.longest
        # Each hedged try has two calls: the service saw them all, and one was cancelled.
        assert sum(hedged.attempts) == hedged.calls == hedged.requests + hedged.hedged
        assert hedged.cancelled == hedged.hedged
        assert 0 < hedged.hedge_wins <= hedged.hedged
        assert (hedged.budget_refused, hedged.budgeted) == (0, True)
        assert hedged.budget_lowest is not None and hedged.budget_lowest > 400
    assert p95.p999 < fixed.p999 < 0.1
    # Every call that is not slow takes under 50 ms, so Hedging(0.05) hedges exactly the
    # requests whose first call was slow (the same calls as without hedging), and its hedge
    # loses only when it is slow too: the first one answers at 1 s, before it.
    assert fixed.delays == (0.05, 0.05)
    assert fixed.hedged == sum(t > 0.05 for t in plain.latencies)
    assert fixed.hedged - fixed.hedge_wins == sum(t >= 1.0 for t in fixed.latencies)
    # "p95": the delay read from the latency the transport measured (within its 5%), about
    # 16 ms after the warm-up, so a few percent of the requests hedge.
    assert p95.delays is not None and p95.measured_p95 is not None
    # the top of the p95's histogram bucket: never short of it, at most 10% above
    assert p95.measured_p95 <= p95.delays[0] <= 1.1 * p95.measured_p95
    assert 0.012 <= p95.delays[0] <= p95.delays[1] <= 0.02
    assert 0.02 <= p95.hedged_share <= 0.08
    # A cancelled loser frees the service: each slow call that lost ran ~60 ms, not 1 s.
    assert plain.service_time - fixed.service_time > 0.85 * fixed.hedge_wins
    assert p95.service_time_per_request < plain.service_time_per_request


def test_a_hedge_is_an_independent_call_that_the_service_stops_when_cancelled() -> None:
    """Every call slow: a hedge does not help (its own draw is slow too), and the loser is
    cancelled at the winner's answer, so the service spends no more than the request's
    latency on it."""
    result = run_tail(Hedging(0.05), requests=50, warmup=0, slow_share=1.0)
    assert result.latencies == pytest.approx((1.0,) * 50)
    assert result.hedged == result.cancelled == 50 and result.hedge_wins == 0
    assert result.service_time == pytest.approx(50 * (1.0 + 0.95))


def test_the_budget_refuses_hedges_it_cannot_pay_for() -> None:
    """A hedge after 1 ms goes with every request and mostly loses (5 tokens each, 1 back
    per success): the default budget runs dry, refuses hedges, and the summary says the
    result is distorted. budget=False: no budget to run dry."""
    from retry_transport.sim.__main__ import _tail_summary

    starved = run_tail(Hedging(0.001), requests=400, warmup=0)
    assert starved.budget_refused > 0
    assert starved.budget_lowest is not None and starved.budget_lowest < 5
    assert starved.hedged < 400
    free = run_tail(Hedging(0.001), requests=400, warmup=0, budget=False)
    assert (free.budget_lowest, free.budget_refused, free.hedged) == (None, 0, 400)
    plain = run_tail(None, requests=400, warmup=0)
    summary = " ".join(_tail_summary([("none", plain), ("Hedging(0.001)", starved)]).split())
    assert f"refused {starved.budget_refused:,} hedges with Hedging(0.001)" in summary
    assert "it distorts the result" in summary


def test_tail_is_reproducible() -> None:
    small: dict[str, Any] = {"requests": 300, "warmup": 60, "rate": 500.0, "slow_share": 0.05}
    for hedging in (None, Hedging(0.05), Hedging("p95")):
        first = run_tail(hedging, **small)
        assert first == run_tail(hedging, **small)
        assert first != run_tail(hedging, **small, seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.requests = 0  # type: ignore[misc]


def test_tail_rejects_a_bad_scenario() -> None:
    with pytest.raises(ValueError, match="requests"):
        run_tail(requests=0)
    with pytest.raises(ValueError, match="rate"):
        run_tail(rate=0.0)
    with pytest.raises(ValueError, match="warmup_time"):
        run_tail(warmup=10, warmup_time=0.0)
    with pytest.raises(ValueError, match="slow_share"):
        run_tail(slow_share=1.5)
    with pytest.raises(ValueError, match="median"):
        run_tail(median=0.0)


def test_command_prints_the_tail_table(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tails: list[tuple[str, TailResult]],
) -> None:
    import retry_transport.sim.__main__ as command

    def cached(hedging: Hedging | None = None, **kwargs: Any) -> TailResult:
        assert not kwargs  # the command's runs are the defaults
        return next(r for (_, h), (_, r) in zip(TAIL_HEDGING, tails, strict=True) if h == hedging)

    monkeypatch.setattr(command, "run_tail", cached)  # the fixture's runs: the same, faster
    args = ["--runs", "10", "--compare-runs", "5", "--workers", "1", "--no-outage"]
    args += ["--no-rate-limit", "--no-fleet", "--no-deadline", "--no-overload", "--no-downloads"]
    assert main(args) == 0
    out = capsys.readouterr().out
    text = " ".join(out[out.index("The tail at scale") :].split())
    assert text.startswith("The tail at scale (Dean and Barroso, 2013): one client sends "
                           "10,000 GETs at a steady 1,000 requests/s")
    assert "1 s with probability 1%, else lognormal, median 10 ms" in text
    assert "the default RetryBudget()" in text
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("hedging  "))
    for line, (label, result) in zip(lines[header + 1 : header + 4], tails, strict=True):
        assert line.startswith(label + "  ")
        cells = line[len(label) :].split()
        assert cells[:8] == [
            f"{result.p50 * 1000:,.1f}", "ms", f"{result.p99 * 1000:,.1f}", "ms",
            f"{result.p999 * 1000:,.1f}", "ms", f"{result.longest * 1000:,.1f}", "ms",
        ]
        assert cells[8] == f"{result.attempts_per_request:.4f}"
        assert f"{result.budget_lowest:.0f} tokens, 0 refused" in line
    (_, plain), *hedged = tails
    for label, result in hedged:
        ratio = plain.p999 / result.p999
        more = 100 * (result.attempts_per_request - 1)
        assert f"{label}: {ratio:.1f}x for +{more:.1f}%, met" in text
    assert "NOT met" not in text and "never refused a hedge" in text
    assert main([*args, "--no-tail"]) == 0
    assert "The tail at scale" not in capsys.readouterr().out


# -- partial overload: budget, breaker or adaptive throttle -----------------------------------


@pytest.fixture(scope="module")
def overloads() -> list[tuple[str, OverloadResult]]:
    """The command's three runs (seed 0): the budget alone, with CircuitBreaker(), with
    AdaptiveThrottle(), in its order. Run once (about 2.2 s of CPU in all), over every core
    (the command's jobs; the results do not depend on how many workers there are)."""
    from retry_transport.sim.__main__ import _overload_jobs, _overload_rows
    from retry_transport.sim._dist import run_jobs

    return _overload_rows(run_jobs(_overload_jobs(), progress=False))


def test_the_throttle_meets_its_goal_under_partial_overload(
    overloads: list[tuple[str, OverloadResult]],
) -> None:
    """100 requests/s to a service that accepts 50/s. Goal, with the throttle, from 10 s on:
    attempts reaching the service at most 2.2 times what it accepts, a goodput of at least
    95% of its capacity. The budget alone lets more through (it pays for retries from the
    successes' refunds); the breaker opens and closes, serving a fraction of the capacity."""
    (_, budget), (_, breaker), (_, throttle) = overloads
    for result in (budget, breaker, throttle):
        assert result.requests == 12_000 and result.steady_requests == 11_000
        assert result.budgeted and result.steady_seconds == 110
        # a token bucket: never more accepted than capacity * t + burst
        for t in range(1, len(result.accepts_per_second) + 1):
            assert sum(result.accepts_per_second[:t]) <= 50 * t + 5
        # every request that arrived in the steady state is counted once
        served = result.steady(result.succeeded_per_second)
        assert served + result.failed == result.steady_requests
        assert result.refused <= result.failed
    assert throttle.attempts_per_accept <= 2.2
    assert throttle.goodput >= 47.5
    assert budget.goodput >= 47.5 and budget.attempts_per_accept > throttle.attempts_per_accept
    assert throttle.attempts_rate < 0.9 * budget.attempts_rate
    assert budget.refused == 0 and throttle.refused > 0
    assert dict(budget.retries_refused)["budget"] > 0
    assert dict(throttle.retries_refused)["throttle"] > 0
    # The breaker: all or nothing. It opens again and again (its probes find the service
    # able to serve), refuses most requests, and serves a fraction of the capacity.
    assert len(breaker.breaker_times("open")) > 10
    assert breaker.goodput < 0.2 * 50 and breaker.refused > breaker.steady_requests / 2
    assert breaker.throttle_counts is None and breaker.throttled == 0


def test_the_throttle_counts_what_the_service_saw(
    overloads: list[tuple[str, OverloadResult]],
) -> None:
    """Its window (120 s) holds the whole run: every attempt sent is a request when its
    answer comes back, every refusal one at once, every 200 an accept; the probability is
    the rule's, (requests - k * accepts) / (requests + 1)."""
    _, throttle = overloads[2]
    assert throttle.throttle_counts is not None and throttle.throttle_probability is not None
    requests, accepts = throttle.throttle_counts
    assert requests == sum(throttle.attempts_per_second) + throttle.throttled
    assert accepts == sum(throttle.accepts_per_second)
    assert throttle.throttle_probability == pytest.approx((requests - 2 * accepts) / (requests + 1))
    # a refused first attempt is a request refused: some of the refusals ended requests
    # before anything was sent, the others refused retries
    assert sum(throttle.refused_per_second) + dict(throttle.retries_refused)["throttle"] <= (
        throttle.throttled
    )


def test_the_throttle_holds_with_its_window_rolling() -> None:
    """The command's window never fills. With a 12 s one, rolling from about 12.6 s, the
    steady state is the same: the goal holds, and the throttle forgot what left it."""
    result = run_overload(throttle=functools.partial(AdaptiveThrottle, window=12.0),
                          duration=40.0, steady_from=20.0)
    assert result.attempts_per_accept <= 2.2
    assert result.goodput >= 47.5
    assert result.throttle_counts is not None
    assert result.throttle_counts[0] < (sum(result.attempts_per_second) + result.throttled) / 2


def test_overload_is_reproducible() -> None:
    small: dict[str, Any] = {"duration": 12.0, "steady_from": 2.0}
    for config in ({"throttle": AdaptiveThrottle}, {"breaker": CircuitBreaker}):
        first = run_overload(**small, **config)
        assert first == run_overload(**small, **config)
        assert first != run_overload(**small, **config, seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.requests = 0  # type: ignore[misc]


@pytest.mark.parametrize("module, run", [
    ("_overload", lambda: [run_overload(duration=8.0, steady_from=2.0, **config) for config in
                           ({}, {"throttle": AdaptiveThrottle}, {"breaker": CircuitBreaker})]),
    ("_storm", lambda: run_storms([STEP4.spec(seed) for seed in range(30)])),
    ("_outage", lambda: run_outage(duration=10.0, outage=(0.0, 5.0))),
    ("_tail", lambda: run_tail(Hedging("p95"), requests=300, warmup=60)),
    ("_downloads", lambda: run_downloads(Resume(), downloads=10)),
    ("_ratelimit", lambda: run_rate_limited(duration=5.0)),
    ("_fleet", lambda: run_fleet(duration=20.0, shared=True)),
])
def test_the_jumping_loop_gives_the_runs_of_trios_mock_clock(
    monkeypatch: pytest.MonkeyPatch, module: str, run: Callable[[], object],
) -> None:
    """The scenarios run on an asyncio loop whose clock jumps to the next timer when no task
    is ready (``run_jumping``); run on trio under ``MockClock(autojump_threshold=0)``
    instead, they give the same runs, to the last digit."""
    import importlib

    from retry_transport.sim._virtual import run_virtual

    jumping = run()
    monkeypatch.setattr(importlib.import_module(f"retry_transport.sim.{module}"),
                        "run_jumping", run_virtual)
    assert run() == jumping


def test_overload_rejects_a_bad_scenario() -> None:
    with pytest.raises(ValueError, match="rate"):
        run_overload(rate=0.0)
    with pytest.raises(ValueError, match="burst"):
        run_overload(burst=0.5)
    with pytest.raises(ValueError, match="call_time"):
        run_overload(call_time=(0.0, 0.01))
    with pytest.raises(ValueError, match="whole seconds"):
        run_overload(duration=10.5)
    with pytest.raises(ValueError, match="whole seconds"):
        run_overload(duration=10.0, steady_from=10.0)


def test_command_prints_the_overload_table(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    overloads: list[tuple[str, OverloadResult]],
) -> None:
    import retry_transport.sim.__main__ as command

    def cached(**kwargs: Any) -> OverloadResult:
        found = [run for (_, config, _), (_, run) in zip(command.OVERLOAD_CONFIGS, overloads,
                                                           strict=True) if config == kwargs]
        assert len(found) == 1  # the command's runs are the fixture's
        return found[0]

    monkeypatch.setattr(command, "run_overload", cached)  # the fixture's runs: the same, faster
    args = ["--runs", "10", "--compare-runs", "5", "--workers", "1", "--no-outage"]
    args += ["--no-rate-limit", "--no-fleet", "--no-deadline", "--no-tail"]
    assert main(args) == 0
    out = capsys.readouterr().out
    text = " ".join(out[out.index("Partial overload:") :].split())
    assert text.startswith("Partial overload: one client sends 100 GETs per second, one every "
                           "10 ms")
    assert "12,000 requests" in text and "a token bucket of 50 tokens a second, 5 deep" in text
    assert "AdaptiveThrottle() (k=2 over 120 s" in text
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("configuration  "))
    for line, (label, result) in zip(lines[header + 1 : header + 4], overloads, strict=True):
        assert line.startswith(label + "  ")
        cells = line[len(label) :].split()
        assert cells[:8] == [
            f"{result.attempts_rate:.1f}", f"{result.accepts_rate:.1f}",
            f"{result.attempts_per_accept:.2f}", f"{result.rejects_rate:.1f}",
            f"{result.goodput:.1f}", f"{result.failed:,}", f"{result.refused:,}",
            f"{result.retries_refused[0][1]:,}",
        ]
    _, throttle = overloads[2]
    assert f"attempts <= 2.2 x accepts: {throttle.attempts_per_accept:.2f}, met;" in text
    assert f"(47.5/s): {throttle.goodput:.1f}/s, met." in text
    assert "NOT met" not in text and "The breaker is all or nothing" in text
    assert "the breaker opened" in text and "the throttle refused" in text
    assert main([*args, "--no-overload", "--no-downloads"]) == 0
    assert "Partial overload" not in capsys.readouterr().out


# -- downloads over a flaky link ---------------------------------------------------------------


def test_downloads_over_a_flaky_link() -> None:
    """The same links in every configuration; resumption sends each byte once, and since
    a resumption that brings new data counts max_resumes from zero again, a download
    resumed many more times than max_resumes never starts again from zero."""
    small = {"downloads": 20, "size": 20_000_000, "mean_drop": 2_000_000, "tries": 4}
    plain = run_downloads(None, **small)
    files = small["downloads"] * small["size"]
    assert plain.resumes == 0 and plain.failed > 0 and plain.restarts > 0
    resumed = run_downloads(Resume(), **small)
    assert (resumed.failed, resumed.restarts, resumed.transferred) == (0, 0, files)
    assert resumed.resumes > 100  # about size / mean_drop each
    assert resumed.most_resumes > 2 * 5  # more than twice what it allows in a row
    # the first download's time: its bytes at 10 MB/s, a round trip per attempt, the waits
    assert min(resumed.times) >= small["size"] / 10_000_000
    assert run_downloads(Resume(), **small) == resumed  # deterministic
