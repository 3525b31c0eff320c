"""Frozen records the simulator returns: one call, one client, one run, a distribution."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from retry_transport import Hedging, RetryPolicy, StopReason

__all__ = [
    "Call",
    "ChainResult",
    "ClientResult",
    "Distribution",
    "FleetResult",
    "OutageResult",
    "OverloadResult",
    "RateLimitResult",
    "Reply",
    "StormResult",
    "StormStats",
    "TailResult",
]


@dataclass(frozen=True, slots=True)
class Reply:
    """A scripted answer of the storm's service to one attempt.

    Attributes:
        status: the response status.
        retry_after: the ``Retry-After`` header to send with it, or ``None``.
    """

    status: int
    retry_after: str | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """One attempt as the service saw it.

    Attributes:
        client: the client that sent it (1-based).
        attempt: the client's attempt number (1-based).
        start: virtual seconds since the run began.
        end: when the service answered (``start + call_time``).
        status: the response status, or ``None`` when the call timed out.
    """

    client: int
    attempt: int
    start: float
    end: float
    status: int | None

    @property
    def ok(self) -> bool:
        """Whether the call got a response below 400."""
        return self.status is not None and self.status < 400

    @property
    def outcome(self) -> str:
        """``"timeout"`` or the status code as text."""
        return "timeout" if self.status is None else str(self.status)


@dataclass(frozen=True, slots=True)
class ClientResult:
    """What one client's request came to.

    Attributes:
        client: the client (1-based).
        attempts: attempts the service received from it before the run ended.
        succeeded: whether the request ended in a response below 400.
        outcome: the final outcome: a status (``"200"``, ``"400"``), an exception class name
            (``"ReadTimeout"``), or ``"cut off"`` when the run ended while it still retried.
        stop_reason: the transport's :class:`~retry_transport.StopReason` value, or
            ``"run_over"`` when the run ended first.
        finished_at: when the request ended, or ``None`` when the run ended first.
        waits: the seconds the transport waited after each failed attempt, in order.
    """

    client: int
    attempts: int
    succeeded: bool
    outcome: str
    stop_reason: str
    finished_at: float | None
    waits: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class StormResult:
    """One run of the storm scenario.

    Attributes:
        policy: the clients' retry policy.
        seed: the run's seed (client ``k`` draws its jitter from its own generator,
            ``random.Random(f"storm:{seed}:{k}")``).
        clients: number of clients.
        capacity: calls the service works on at once, or ``None`` for no limit.
        call_time: seconds one call takes.
        duration: seconds the run lasts; attempts starting later are not sent.
        budgeted: whether each client had a retry budget.
        calls: every attempt, in order of start time (then client).
        results: one per client, in client order.
    """

    policy: RetryPolicy
    seed: int
    clients: int
    capacity: int | None
    call_time: float
    duration: float
    budgeted: bool
    calls: tuple[Call, ...]
    results: tuple[ClientResult, ...]

    @property
    def attempts(self) -> int:
        """Attempts the service received, all clients together."""
        return len(self.calls)

    @property
    def succeeded(self) -> int:
        """Clients whose request succeeded."""
        return sum(r.succeeded for r in self.results)

    @property
    def pattern(self) -> tuple[int, ...]:
        """Attempts per client, in client order."""
        return tuple(r.attempts for r in self.results)

    @property
    def recovered_at(self) -> float | None:
        """When the last client succeeded, if every client did; else ``None``."""
        if not self.results or not all(r.succeeded for r in self.results):
            return None
        return max(r.finished_at or 0.0 for r in self.results)

    @property
    def peak_in_flight(self) -> int:
        """The most calls in flight at one moment."""
        return max((n for _, n in self.in_flight()), default=0)

    def in_flight(self) -> list[tuple[float, int]]:
        """Calls in flight as a step function: ``(time, count from then on)`` pairs.

        Calls occupy ``[start, end)``: at an instant where one call ends and another
        starts, the end comes first.
        """
        events = sorted(
            [(c.start, 1) for c in self.calls] + [(c.end, -1) for c in self.calls],
            key=lambda e: (e[0], e[1]),
        )
        steps: list[tuple[float, int]] = []
        count = 0
        for time, delta in events:
            count += delta
            if steps and math.isclose(steps[-1][0], time, abs_tol=1e-9):
                steps[-1] = (steps[-1][0], count)
            else:
                steps.append((time, count))
        return steps


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile by the nearest-rank method (a value that occurred)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True, slots=True)
class Distribution:
    """A summary of many values: count, mean, standard deviation and quantiles.

    Quantiles use the nearest-rank method, so each is a value that occurred (for a median of
    attempts, an attempt count). An empty sample gives ``nan`` everywhere.
    """

    count: int
    mean: float
    stdev: float
    p10: float
    median: float
    p90: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution:
        ordered = sorted(values)
        if not ordered:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan)
        return cls(
            count=len(ordered),
            mean=statistics.fmean(ordered),
            stdev=statistics.stdev(ordered) if len(ordered) > 1 else 0.0,
            p10=_quantile(ordered, 0.1),
            median=_quantile(ordered, 0.5),
            p90=_quantile(ordered, 0.9),
            low=ordered[0],
            high=ordered[-1],
        )


@dataclass(frozen=True, slots=True)
class StormStats:
    """Many seeded runs of the storm scenario with one policy.

    Attributes:
        policy: the clients' retry policy.
        seed: the first run's seed; run ``i`` uses ``seed + i``.
        runs: the number of runs.
        budgeted: whether each client had a retry budget.
        attempts: attempts per run, in seed order.
        succeeded: clients that succeeded per run, in seed order.
        recovered_at: per run, when the last client succeeded (``None`` if one failed).
        clients: clients per run.
    """

    policy: RetryPolicy
    seed: int
    runs: int
    budgeted: bool
    attempts: tuple[int, ...]
    succeeded: tuple[int, ...]
    recovered_at: tuple[float | None, ...]
    clients: int

    @property
    def attempts_summary(self) -> Distribution:
        """Attempts per run: mean, spread and quantiles."""
        return Distribution.of(self.attempts)

    @property
    def recovery_summary(self) -> Distribution:
        """Recovery times of the runs in which every client succeeded."""
        return Distribution.of([t for t in self.recovered_at if t is not None])

    @property
    def all_succeeded_share(self) -> float:
        """The share of runs in which every client succeeded."""
        if not self.runs:
            return math.nan
        return sum(s == self.clients for s in self.succeeded) / self.runs

    def share_at_most(self, attempts: int) -> float:
        """The share of runs with at most ``attempts`` attempts."""
        return sum(a <= attempts for a in self.attempts) / self.runs if self.runs else math.nan

    def share_recovered_within(self, seconds: float) -> float:
        """The share of all runs in which every client succeeded by ``seconds``."""
        if not self.runs:
            return math.nan
        return sum(t is not None and t <= seconds + 1e-9 for t in self.recovered_at) / self.runs

    def histogram(self) -> dict[int, int]:
        """Runs per attempt count, in increasing attempt count."""
        counts: dict[int, int] = {}
        for a in sorted(self.attempts):
            counts[a] = counts.get(a, 0) + 1
        return counts


@dataclass(frozen=True, slots=True)
class OutageResult:
    """One run of the sustained-outage scenario.

    Attributes:
        policy: the client's retry policy.
        budgeted: whether the client had a retry budget.
        breaker: whether the client had a circuit breaker.
        seed: the run's seed.
        rate: mean arrivals per second (Poisson).
        duration: seconds of arrivals.
        outage: the outage ``(start, end)``: attempts starting inside it are answered 503.
        call_time: ``(low, high)``: each attempt took a uniform time in between, seconds.
        requests: requests that arrived.
        outage_requests: requests that arrived during the outage.
        outage_attempts: attempts those requests made (retries included, whenever sent).
        attempts: attempts in all.
        failed: requests that ended in failure (the application saw a 503 or a
            ``CircuitOpenError``).
        last_failure_at: when the last failed request ended, or ``None``.
        budget_tokens_min: the fewest tokens the budget held (``None`` without a budget).
        budget_refilled_at: when the budget was full again after the outage, or ``None``.
        first_budget_refusal_at: when the budget first refused a retry, or ``None``.
        attempts_in_outage: attempts that reached the service during the outage (started in
            it, so answered 503), whichever request sent them: the load the outage met.
        refused: requests the breaker failed fast (``CircuitOpenError``: the request, or its
            next retry, was not sent). Included in ``failed``.
        first_success_at: when the application first saw a success at or after the end of
            the outage, or ``None`` if it never did within the run.
        breaker_transitions: the breaker's state changes, in order, as ``(time, state)``
            pairs with ``state`` ``"open"``, ``"half_open"`` or ``"close"`` (empty without
            a breaker).
        attempts_per_second: attempts that reached the service, per second of the run by
            their start (entry ``i`` counts ``[i, i + 1)``), up to the last one.
        failed_per_second: failures the application saw, per second by when they ended.
    """

    policy: RetryPolicy
    budgeted: bool
    breaker: bool
    seed: int
    rate: float
    duration: float
    outage: tuple[float, float]
    call_time: tuple[float, float]
    requests: int
    outage_requests: int
    outage_attempts: int
    attempts: int
    failed: int
    last_failure_at: float | None
    budget_tokens_min: float | None
    budget_refilled_at: float | None
    first_budget_refusal_at: float | None
    attempts_in_outage: int
    refused: int
    first_success_at: float | None
    breaker_transitions: tuple[tuple[float, str], ...]
    attempts_per_second: tuple[int, ...]
    failed_per_second: tuple[int, ...]

    @property
    def amplification(self) -> float:
        """Attempts per request, for the requests that arrived during the outage."""
        return self.outage_attempts / self.outage_requests if self.outage_requests else math.nan

    @property
    def outage_load(self) -> float:
        """Attempts that reached the service during the outage, per request arriving in it."""
        if not self.outage_requests:
            return math.nan
        return self.attempts_in_outage / self.outage_requests

    @property
    def recovery_time(self) -> float:
        """Seconds from the end of the outage to the last failure the application saw."""
        if self.last_failure_at is None:
            return 0.0
        return max(0.0, self.last_failure_at - self.outage[1])

    @property
    def first_success_delay(self) -> float:
        """Seconds from the end of the outage to the first success the application saw
        (``nan`` if none came within the run)."""
        if self.first_success_at is None:
            return math.nan
        return self.first_success_at - self.outage[1]

    def breaker_times(self, state: str) -> tuple[float, ...]:
        """When the breaker went to ``state`` (``"open"``, ``"half_open"``, ``"close"``)."""
        return tuple(t for t, s in self.breaker_transitions if s == state)


@dataclass(frozen=True, slots=True)
class RateLimitResult:
    """One run of the rate-limited API scenario.

    Attributes:
        policy: the client's retry policy (``policy.respect_rate_limits``: whether it paced).
        budgeted: whether the client had a retry budget.
        seed: the run's seed.
        callers: tasks sending requests back to back through the one client.
        quota: requests the service allowed per window.
        window: the length of the service's fixed windows, seconds.
        duration: seconds during which callers started requests.
        call_time: ``(low, high)``: each attempt took a uniform time in between, seconds.
        requests: requests the callers started.
        completed: requests that ended in a 200.
        failures: the other requests, as ``(stop reason, count)`` pairs sorted by reason
            (``"max_attempts"``, ``"budget_exhausted"``, ...).
        attempts: attempts the service received, retries included.
        rejected: attempts it answered 429.
        held: requests a cooldown held before their first attempt.
        held_time: the seconds those holds lasted, all together.
        completed_per_window: attempts answered 200, per window of the run, in order.
        rejected_per_window: attempts answered 429, per window of the run, in order.
        latency: seconds from start to end of the requests that ended in a 200, holds and
            retries included.
    """

    policy: RetryPolicy
    budgeted: bool
    seed: int
    callers: int
    quota: int
    window: float
    duration: float
    call_time: tuple[float, float]
    requests: int
    completed: int
    failures: tuple[tuple[str, int], ...]
    attempts: int
    rejected: int
    held: int
    held_time: float
    completed_per_window: tuple[int, ...]
    rejected_per_window: tuple[int, ...]
    latency: Distribution

    @property
    def offered(self) -> float:
        """Requests a second the callers offer while nothing holds them: each sends one
        after the other, a mean call time apart."""
        low, high = self.call_time
        return self.callers / ((low + high) / 2)

    @property
    def load(self) -> float:
        """The offered requests as a multiple of the quota."""
        return self.offered / (self.quota / self.window)

    @property
    def paced(self) -> bool:
        """Whether the client read the quota headers (``policy.respect_rate_limits``)."""
        return self.policy.respect_rate_limits

    @property
    def failed(self) -> int:
        """Requests that did not end in a 200."""
        return sum(count for _, count in self.failures)

    @property
    def goodput(self) -> Distribution:
        """200s per window: mean, spread, lowest and highest."""
        return Distribution.of(self.completed_per_window)

    @property
    def rejected_summary(self) -> Distribution:
        """429s per window: mean, spread, lowest and highest."""
        return Distribution.of(self.rejected_per_window)


@dataclass(frozen=True, slots=True)
class FleetResult(RateLimitResult):
    """One run of the fleet scenario: workers, each with its own transport, against one
    rate-limited API, sharing cooldowns through a store or not.

    The attributes of :class:`RateLimitResult` count the whole fleet (``callers`` is the
    number of workers, each one caller over its own client and transport); and:

    Attributes:
        shared: whether the workers' transports shared one ``MemoryStore``.
        reject_time: ``(low, high)``: each 429 took a uniform time in between, seconds.
    """

    shared: bool
    reject_time: tuple[float, float]

    @property
    def workers(self) -> int:
        """The fleet's workers (each one caller with its own transport)."""
        return self.callers


#: Two virtual times closer than this are the same instant (as ``_virtual.EPSILON``).
_INSTANT: Final = 1e-9


@dataclass(frozen=True, slots=True)
class ChainResult:
    """One run of the deadline-propagation scenario: users calling a chain of retrying
    services over a bottom service that is down.

    A call that reached a service or the bottom is counted, by when it arrived, *while
    waiting* (before its user's request ended), *after give-up* (once the user's
    ``user_timeout`` had passed since its request started: it had given up by then, or had
    its answer earlier), or *after an answer* (in between: the user had its answer, before
    it would have given up). Within ``1e-9`` s of either limit counts as the later class.

    Attributes:
        policy: every service's retry policy (the users' transports make one attempt).
        propagated: whether the users' deadline went down the chain (the users' requests
            inside ``retry_transport.deadline``, ``deadline_header`` on every transport, each
            server's handler inside the deadline the header carried).
        seed: the run's seed.
        users: users, one request each.
        spread: the users started at uniform random times in ``[0, spread)`` seconds.
        user_timeout: how long a user waited at most, seconds (its deadline, when
            propagated).
        timeouts: each service's timeout per attempt of its calls, service 1's first.
        service_time: seconds the bottom service took to answer each attempt 503.
        starts: when each user sent its request, in order (user ``i`` is the ``i``-th).
        waited: per user, the seconds from its request's start to its end (its timeout or
            an answer): when it stopped waiting.
        outcomes: what the users got, as ``(outcome, count)`` pairs sorted by outcome: a
            status (``"503"``) or an exception class name (``"ReadTimeout"``).
        arrivals: per level (service 1, service 2, ..., then the bottom service), per user,
            the times at which that user's calls reached it, in seconds since the user's
            request started, in increasing order.
    """

    policy: RetryPolicy
    propagated: bool
    seed: int
    users: int
    spread: float
    user_timeout: float
    timeouts: tuple[float, ...]
    service_time: float
    starts: tuple[float, ...]
    waited: tuple[float, ...]
    outcomes: tuple[tuple[str, int], ...]
    arrivals: tuple[tuple[tuple[float, ...], ...], ...]

    @property
    def services(self) -> int:
        """The retrying services between the users and the bottom service."""
        return len(self.timeouts)

    @property
    def most_possible(self) -> int:
        """The most attempts one user request can bring the bottom: ``max_attempts`` to the
        power of the number of services (27 for 3 services of 3 attempts)."""
        return int(self.policy.max_attempts**self.services)

    def calls(self, level: int = -1) -> int:
        """Calls that reached ``level`` (0: service 1; -1, the default: the bottom)."""
        return sum(len(times) for times in self.arrivals[level])

    def while_waiting(self, level: int = -1) -> int:
        """Calls that reached ``level`` while their user was still waiting."""
        return sum(
            t < waited - _INSTANT
            for times, waited in zip(self.arrivals[level], self.waited, strict=True)
            for t in times
        )

    def after_give_up(self, level: int = -1) -> int:
        """Calls that reached ``level`` once their user's ``user_timeout`` had passed."""
        return sum(self.after_per_request(level))

    def after_answer(self, level: int = -1) -> int:
        """Calls that reached ``level`` after their user had its answer, before it would
        have given up."""
        return self.calls(level) - self.while_waiting(level) - self.after_give_up(level)

    def per_request(self, level: int = -1) -> tuple[int, ...]:
        """Calls that reached ``level``, per user request, in user order."""
        return tuple(len(times) for times in self.arrivals[level])

    def after_per_request(self, level: int = -1) -> tuple[int, ...]:
        """Calls that reached ``level`` after give-up, per user request, in user order."""
        limit = self.user_timeout - _INSTANT
        return tuple(sum(t >= limit for t in times) for times in self.arrivals[level])

    @property
    def last_after(self) -> float | None:
        """The longest after give-up a call reached the bottom, seconds; ``None`` if none
        did."""
        limit = self.user_timeout - _INSTANT
        late = [t for times in self.arrivals[-1] for t in times if t >= limit]
        return max(0.0, max(late) - self.user_timeout) if late else None

    @property
    def longest_wait(self) -> float:
        """The longest a user waited, seconds."""
        return max(self.waited, default=math.nan)


@dataclass(frozen=True, slots=True)
class TailResult:
    """One run of the tail-at-scale scenario: a steady stream of requests to a service
    whose latency has a heavy tail, hedged or not.

    Everything counts the requests after the warm-up only.

    Attributes:
        hedging: the transport's ``hedging=``, or ``None``.
        policy: the transport's retry policy.
        budgeted: whether the transport had the default ``RetryBudget()``.
        seed: the run's seed.
        requests: the requests counted.
        rate: requests per second.
        warmup: requests sent before them over ``warmup_time`` seconds, not counted.
        warmup_time: seconds of warm-up.
        median: the median latency of a call that is not slow, seconds.
        spread: the shape (sigma) of that lognormal latency.
        slow_share: the probability that a call is slow.
        slow_time: how long a slow call takes, seconds.
        latencies: per request, in order, seconds from its start to its response.
        attempts: per request, in order, the attempts its ``retry_info`` counts (a
            cancelled loser included).
        hedged: requests that sent a hedge.
        hedge_wins: requests whose response was a hedge's.
        calls: calls that reached the service.
        cancelled: those the transport cancelled (the losers).
        service_time: the seconds calls spent at the service, each from its arrival to its
            answer or its cancellation, all together.
        delays: the lowest and the highest hedging delay the transport waited, seconds
            (``None``: no hedge).
        measured_p95: the 95th percentile of the latency the transport measured for the
            origin at the end of the run (the last minute; ``None``: no latency).
        budget_lowest: the fewest tokens the budget held after paying for a hedge or a
            retry, over the whole run (``None`` without a budget).
        budget_refused: hedges or retries the budget could not pay for, over the whole run.
    """

    hedging: Hedging | None
    policy: RetryPolicy
    budgeted: bool
    seed: int
    requests: int
    rate: float
    warmup: int
    warmup_time: float
    median: float
    spread: float
    slow_share: float
    slow_time: float
    latencies: tuple[float, ...]
    attempts: tuple[int, ...]
    hedged: int
    hedge_wins: int
    calls: int
    cancelled: int
    service_time: float
    delays: tuple[float, float] | None
    measured_p95: float | None
    budget_lowest: float | None
    budget_refused: int

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the latency (nearest rank: a latency that occurred)."""
        return _quantile(sorted(self.latencies), q)

    @property
    def p50(self) -> float:
        return self.quantile(0.5)

    @property
    def p99(self) -> float:
        return self.quantile(0.99)

    @property
    def p999(self) -> float:
        return self.quantile(0.999)

    @property
    def longest(self) -> float:
        """The longest latency, seconds."""
        return max(self.latencies, default=math.nan)

    @property
    def attempts_per_request(self) -> float:
        """Attempts per request, on average."""
        return sum(self.attempts) / self.requests if self.requests else math.nan

    @property
    def hedged_share(self) -> float:
        """The share of the requests that sent a hedge."""
        return self.hedged / self.requests if self.requests else math.nan

    @property
    def service_time_per_request(self) -> float:
        """Seconds the service spent on calls, per request."""
        return self.service_time / self.requests if self.requests else math.nan


#: The stop reasons of a request whose retry was refused locally, by the refuser's name.
_REFUSERS: Final[dict[str, str]] = {
    StopReason.BUDGET_EXHAUSTED.value: "budget",
    StopReason.THROTTLED.value: "throttle",
    StopReason.CIRCUIT_OPEN.value: "breaker",
}


@dataclass(frozen=True, slots=True)
class OverloadResult:
    """One run of the partial-overload scenario: a steady stream of requests to a service
    with a fraction of the capacity it needs, which answers 503 at once beyond it.

    The steady figures (the properties) count from ``steady_from`` to ``duration``:
    attempts and accepts by the second they reached the service, requests by the second
    they arrived.

    Attributes:
        policy: the client's retry policy.
        budgeted: whether the client had a retry budget.
        breaker: whether it had a circuit breaker.
        throttle_k: its adaptive throttle's ``k`` (``None``: no throttle).
        throttle_window: the throttle's window, seconds (``None``: no throttle).
        seed: the run's seed.
        rate: requests per second, evenly spaced.
        duration: seconds of arrivals.
        capacity: the service's tokens per second.
        burst: the depth of its token bucket.
        call_time: ``(low, high)``: an accepted attempt took a uniform time in between.
        steady_from: the first second counted as steady.
        requests: requests sent, ``rate * duration``.
        attempts_per_second: attempts that reached the service, per second of the run
            (entry ``i`` counts ``[i, i + 1)``), up to the last one (retries may come after
            ``duration``).
        accepts_per_second: those it accepted (answered 200), likewise.
        succeeded_per_second: requests that ended in a 200, per second of their arrival.
        refused_per_second: requests refused before anything was sent (``ThrottledError``
            or ``CircuitOpenError``), per second of their arrival.
        failed_per_second: requests that failed (refused, or a 503 handed over), per second
            of their arrival.
        steady_stops: the stop reasons of the requests that arrived in the steady state
            and ended in a 503, with their counts, the most frequent first.
        throttled: attempts the throttle refused over the run (``transport.stats``).
        throttle_counts: the throttle's ``(requests, accepts)`` at the end (``None``: no
            throttle).
        throttle_probability: its probability of refusing an attempt at the end.
        breaker_transitions: the breaker's state changes, in order, as ``(time, state)``
            pairs with ``state`` ``"open"``, ``"half_open"`` or ``"close"``.
    """

    policy: RetryPolicy
    budgeted: bool
    breaker: bool
    throttle_k: float | None
    throttle_window: float | None
    seed: int
    rate: float
    duration: float
    capacity: float
    burst: float
    call_time: tuple[float, float]
    steady_from: float
    requests: int
    attempts_per_second: tuple[int, ...]
    accepts_per_second: tuple[int, ...]
    succeeded_per_second: tuple[int, ...]
    refused_per_second: tuple[int, ...]
    failed_per_second: tuple[int, ...]
    steady_stops: tuple[tuple[str, int], ...]
    throttled: int
    throttle_counts: tuple[int, int] | None
    throttle_probability: float | None
    breaker_transitions: tuple[tuple[float, str], ...]

    def steady(self, per_second: Sequence[int]) -> int:
        """The sum of ``per_second`` over the steady seconds."""
        return sum(per_second[int(self.steady_from) : int(self.duration)])

    @property
    def steady_seconds(self) -> float:
        return self.duration - self.steady_from

    @property
    def steady_requests(self) -> int:
        """Requests that arrived in the steady state."""
        return sum(1 for i in range(self.requests) if i / self.rate >= self.steady_from)

    @property
    def attempts_rate(self) -> float:
        """Attempts that reached the service per second."""
        return self.steady(self.attempts_per_second) / self.steady_seconds

    @property
    def accepts_rate(self) -> float:
        """Attempts the service accepted per second."""
        return self.steady(self.accepts_per_second) / self.steady_seconds

    @property
    def rejects_rate(self) -> float:
        """Attempts the service answered 503 per second."""
        return self.attempts_rate - self.accepts_rate

    @property
    def attempts_per_accept(self) -> float:
        accepts = self.steady(self.accepts_per_second)
        return self.steady(self.attempts_per_second) / accepts if accepts else math.nan

    @property
    def goodput(self) -> float:
        """Requests that succeeded per second."""
        return self.steady(self.succeeded_per_second) / self.steady_seconds

    @property
    def failed(self) -> int:
        """Requests of the steady state that failed."""
        return self.steady(self.failed_per_second)

    @property
    def refused(self) -> int:
        """Requests of the steady state refused before anything was sent."""
        return self.steady(self.refused_per_second)

    @property
    def retries_refused(self) -> tuple[tuple[str, int], ...]:
        """Requests of the steady state that ended with a 503 because their retry was
        refused locally, by refuser (``"budget"``, ``"throttle"``, ``"breaker"``)."""
        return tuple((_REFUSERS[reason], count) for reason, count in self.steady_stops
                     if reason in _REFUSERS)

    def breaker_times(self, state: str) -> tuple[float, ...]:
        """When the breaker went to ``state`` (``"open"``, ``"half_open"``, ``"close"``)."""
        return tuple(t for t, s in self.breaker_transitions if s == state)
