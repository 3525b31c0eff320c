"""Plain-text tables of measured results."""

from __future__ import annotations

import math
import re
import statistics
import textwrap
from collections.abc import Sequence

from retry_transport import CircuitBreaker, RetryPolicy

from ._downloads import DownloadsResult
from ._results import (
    ChainResult,
    OutageResult,
    OverloadResult,
    RateLimitResult,
    StormResult,
    StormStats,
    TailResult,
)
from ._steps import UNCAPPED, Step

__all__ = [
    "chain_table",
    "describe_policy",
    "in_ms",
    "outage_summary",
    "outage_table",
    "overload_table",
    "rate_limit_table",
    "run_table",
    "seed_table",
    "stats_lines",
    "stats_table",
    "table",
    "tail_table",
    "wrap",
]


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell; columns in ``right`` are right-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _seconds(value: float | None, digits: int = 2) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.{digits}f} s"


def _percent(share: float) -> str:
    return "-" if math.isnan(share) else f"{100 * share:.1f}%"


def _number(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def describe_policy(policy: RetryPolicy) -> str:
    """A one-line summary of the fields the storm depends on."""
    attempts = "no cap" if policy.max_attempts >= UNCAPPED else f"max {policy.max_attempts}"
    return (
        f"{policy.jitter} jitter, base {policy.base_delay:g} s, cap {policy.max_delay:g} s, "
        f"{attempts} attempts"
    )


def _share_in_flight(run: StormResult) -> tuple[float, float]:
    """Shares of the run's duration spent over capacity and with nothing in flight."""
    steps = run.in_flight()
    over = idle = 0.0
    limit = run.capacity if run.capacity is not None else math.inf
    for (start, count), (end, _) in zip(steps, [*steps[1:], (run.duration, 0)], strict=True):
        start, end = min(start, run.duration), min(max(end, start), run.duration)
        if count > limit:
            over += end - start
        elif count == 0:
            idle += end - start
    first = steps[0][0] if steps else run.duration
    idle += min(first, run.duration)
    return over / run.duration, idle / run.duration


def _waves(run: StormResult) -> int | None:
    """The number of waves when every attempt starts at once with all clients', else None."""
    groups: list[list[float]] = []
    for start in sorted(c.start for c in run.calls):
        if groups and start - groups[-1][0] < 1e-9:
            groups[-1].append(start)
        else:
            groups.append([start])
    return len(groups) if all(len(g) == run.clients for g in groups) else None


def _note(step: Step, run: StormResult) -> str:
    if step.script:
        parts = []
        for result in run.results:
            script = step.script.get(result.client)
            if not script:
                continue
            reply = script[0]
            name = str(reply.status)
            if reply.retry_after is not None:
                name += f" (Retry-After: {reply.retry_after})"
            if result.waits:
                waited = ", ".join(f"{w:.3g} s" for w in result.waits)
                parts.append(f"{name} waited {waited}, then {result.outcome}")
            else:
                parts.append(f"{name} not retried ({result.stop_reason})")
        return "; ".join(parts)
    if step.random:
        pattern = ",".join(str(a) for a in run.pattern)
        return f"seed {run.seed}: attempts {pattern}; all ok at {_seconds(run.recovered_at)}"
    over, idle = _share_in_flight(run)
    flight = f"peak {run.peak_in_flight} in flight, over capacity {_percent(over)} of the time"
    waves = _waves(run)
    if waves is not None:
        return f"{waves} waves of {run.clients} calls, idle {_percent(idle)}, {flight}"
    return f"idle {_percent(idle)}, {flight}"


def seed_table(steps: Sequence[tuple[Step, StormResult]]) -> str:
    """The storm's table: step, policy, attempts, succeeded, note."""
    rows = [
        [
            str(step.number),
            step.label,
            str(run.attempts),
            f"{run.succeeded} of {run.clients}",
            _note(step, run),
        ]
        for step, run in steps
    ]
    return table(["step", "policy", "attempts", "succeeded", "note"], rows, right=[2])


def stats_lines(stats: StormStats, within: float = 0.75, mark: int | None = None) -> str:
    """A few lines summarising a distribution of storm runs.

    ``mark``: also give the share of runs with at most this many attempts.
    """
    a = stats.attempts_summary
    r = stats.recovery_summary
    histogram = "  ".join(f"{k}: {v}" for k, v in stats.histogram().items())
    mode = max(stats.histogram().items(), key=lambda kv: kv[1])
    last = stats.seed + stats.runs - 1
    return "\n".join(
        [
            f"over {stats.runs:,} runs (seeds {stats.seed:,}-{last:,}): attempts median "
            f"{_number(a.median)} (p10 {_number(a.p10)}, p90 {_number(a.p90)}), mean "
            f"{a.mean:.2f} (sd {a.stdev:.2f}); {mode[0]} attempts in "
            f"{_percent(mode[1] / stats.runs)} of runs"
            + (
                f", at most {mark} in {_percent(stats.share_at_most(mark))}"
                if mark is not None
                else ""
            ),
            f"  all {stats.clients} succeed in {_percent(stats.all_succeeded_share)} of runs; "
            f"last client succeeds at: median {_seconds(r.median)} (p10 {_seconds(r.p10)}, "
            f"p90 {_seconds(r.p90)}), by {within:g} s in "
            f"{_percent(stats.share_recovered_within(within))} of runs",
            f"  runs per attempt count: {histogram}",
        ]
    )


def stats_table(rows: Sequence[tuple[str, StormStats]], within: float = 0.75) -> str:
    """One row per policy: attempts median (p10-p90), mean, success and recovery shares."""
    body = []
    for label, stats in rows:
        a = stats.attempts_summary
        r = stats.recovery_summary
        mean_ok = sum(stats.succeeded) / stats.runs
        body.append(
            [
                label,
                f"{_number(a.median)} ({_number(a.p10)}-{_number(a.p90)})",
                f"{a.mean:.1f}",
                f"{mean_ok:.2f}",
                _percent(stats.all_succeeded_share),
                _percent(stats.share_recovered_within(within)),
                f"{_seconds(r.median)} ({_seconds(r.p90)})",
            ]
        )
    header = [
        "policy",
        "attempts median (p10-p90)",
        "mean",
        "clients ok",
        "all succeed",
        f"all by {within:g} s",
        "recovery median (p90)",
    ]
    return table(header, body, right=[2, 3, 4, 5])


def run_table(run: StormResult) -> str:
    """Each client of one run: attempts, outcome, waits."""
    rows = [
        [
            str(r.client),
            str(r.attempts),
            r.outcome,
            r.stop_reason,
            _seconds(r.finished_at, 3),
            ", ".join(f"{w:.3f}" for w in r.waits) or "-",
        ]
        for r in run.results
    ]
    return table(
        ["client", "attempts", "outcome", "stop reason", "ended at", "waits (s)"], rows, right=[1]
    )


def _share(share: float) -> str:
    """A percentage with two decimals below 10% (a breaker's load is a fraction of one)."""
    if math.isnan(share):
        return "-"
    return f"{100 * share:.2f}%" if share < 0.1 else f"{100 * share:.1f}%"


def _breaker_note(r: OutageResult) -> str:
    """When the breaker opened, how long its breaks lasted, and when it closed."""
    opened = r.breaker_times("open")
    if not opened:
        return "the breaker never opened"
    # Each break ends when the breaker goes half-open (and a probe goes out).
    breaks = [h - o for o, h in zip(opened, r.breaker_times("half_open"), strict=False)]
    closed = [t for t in r.breaker_times("close") if t >= r.outage[1]]
    probes = len(breaks)
    text = f"the breaker opened at {_seconds(opened[0])}"
    if breaks:
        lengths = ", ".join(f"{b:.0f}" for b in breaks)
        text += f"; breaks of {lengths} s, each ended by a probe ({probes} in all"
        text += ", the last one answered 200)" if closed else ")"
    return text + (f"; closed at {_seconds(closed[0])}" if closed else "; open at the end")


def _budget_note(r: OutageResult) -> str:
    if r.first_budget_refusal_at is None:
        low = r.budget_tokens_min
        return "the budget never refused a retry" + (
            f" (lowest {low:.0f} tokens)" if low is not None else ""
        )
    return (
        f"the budget first refused a retry at {_seconds(r.first_budget_refusal_at)}, was full "
        f"again at {_seconds(r.budget_refilled_at, 1)}"
    )


def outage_table(rows: Sequence[tuple[str, OutageResult]]) -> str:
    """One row per configuration of the outage scenario: the load the outage met, the
    failures the application saw, and how long after the outage it saw them end; then a
    line per configuration on its budget and breaker."""
    body = []
    notes = []
    for label, r in rows:
        body.append(
            [
                label,
                f"{r.outage_requests:,}",
                f"{r.attempts_in_outage:,}",
                _share(r.outage_load),
                f"{r.failed:,}",
                f"{r.refused:,}",
                _seconds(r.first_success_delay, 2),
                _seconds(r.recovery_time, 2),
            ]
        )
        parts = ([_breaker_note(r)] if r.breaker else []) + (
            [_budget_note(r)] if r.budgeted else []
        )
        if parts:
            notes.append(_fill(f"{label}: " + "; ".join(parts) + ".", "    "))
    header = [
        "configuration",
        "requests in outage",
        "attempts in outage",
        "of requests",
        "failed",
        "failed fast",
        "first success after",
        "last failure after",
    ]
    return "\n".join([table(header, body, right=[1, 2, 3, 4, 5, 6, 7]), *notes])


def outage_summary(rows: Sequence[tuple[str, OutageResult]], goal_share: float = 0.02) -> str:
    """The trade-off between the budget alone and budget + breaker, and the breaker's goal:
    at most ``goal_share`` of the outage's requests reach the service, and the recovery
    within the default ``max_break_duration``. Empty unless both rows are there."""
    budget = next((r for _, r in rows if r.budgeted and not r.breaker), None)
    breaker = next((r for _, r in rows if r.breaker), None)
    if budget is None or breaker is None:
        return ""
    plain = next((r for _, r in rows if not r.budgeted and not r.breaker), None)
    limit = CircuitBreaker().max_break_duration
    shed = 1 - breaker.attempts_in_outage / budget.attempts_in_outage
    against = f" and {plain.attempts_in_outage:,} with neither" if plain is not None else ""
    first, last = breaker.first_success_delay, breaker.recovery_time
    share_met = breaker.outage_load <= goal_share
    delay_met = not math.isnan(first) and max(first, last) <= limit
    text = (
        f"The breaker's trade-off: {breaker.attempts_in_outage:,} attempts met the outage "
        f"instead of {budget.attempts_in_outage:,} with the budget alone{against} "
        f"({_share(shed)} of the budget's load shed). The price: {breaker.failed:,} failed "
        f"requests instead of {budget.failed:,} ({breaker.failed - budget.failed:+,}: the "
        f"breaker still refuses after the service is back, until a probe finds it), "
        f"{breaker.refused:,} of them failed fast (never sent), and the application's first "
        f"success {_seconds(first)} after the service was back instead of "
        f"{_seconds(budget.first_success_delay)} (its last failure: {_seconds(last)} after). "
        f"Goal: attempts in the outage <= "
        f"{_share(goal_share)} of its requests: {_share(breaker.outage_load)}, "
        f"{'met' if share_met else 'NOT met'}; recovery <= max_break_duration "
        f"({limit:g} s): {_seconds(max(first, last))}, {'met' if delay_met else 'NOT met'}."
    )
    return _fill(text, "  ")


def _fill(text: str, indent: str) -> str:
    """Wrap at 110 columns after two spaces, never between a number and its unit."""
    return wrap(text, 110, "  ", indent)


def wrap(text: str, width: int = 112, first: str = "", indent: str = "") -> str:
    """Wrap at ``width`` columns, the first line after ``first``, the others after
    ``indent``, never between a number and its unit."""
    text = re.sub(r"(\d) (s|ms|tokens)\b", "\\1\xa0\\2", text)
    wrapped = textwrap.fill(text, width=width, initial_indent=first, subsequent_indent=indent)
    return wrapped.replace("\xa0", " ")


def rate_limit_table(
    rows: Sequence[tuple[str, RateLimitResult]], label_header: str = "respect_rate_limits"
) -> str:
    """One row per run of the rate-limited API scenario (with and without pacing), or of
    the fleet scenario (with and without a store): ``label_header`` heads the labels' column."""
    body = []
    for label, r in rows:
        rejected, goodput = r.rejected_summary, r.goodput
        why = ", ".join(f"{reason} {count:,}" for reason, count in r.failures)
        body.append(
            [
                label,
                f"{r.rejected:,}",
                f"{rejected.mean:.1f} ({_number(rejected.high)})",
                f"{goodput.mean:.1f} ({_number(goodput.low)}-{_number(goodput.high)})",
                f"{r.completed:,}",
                f"{r.failed:,}" + (f" ({why})" if why else ""),
                f"{r.attempts:,}",
                f"{r.held:,}",
                f"{_seconds(r.latency.mean, 3)} ({_seconds(r.latency.high, 3)})",
            ]
        )
    header = [
        label_header,
        "429s",
        "429s/window mean (max)",
        "200s/window mean (min-max)",
        "completed",
        "failed (stop reason)",
        "attempts",
        "held",
        "latency mean (max)",
    ]
    return table(header, body, right=[1, 2, 3, 4, 6, 7])


def chain_table(rows: Sequence[tuple[str, ChainResult]]) -> str:
    """One row per run of the deadline-propagation scenario: what the users got, and the
    attempts that reached the bottom service while they waited and after they gave up."""
    body = []
    for label, r in rows:
        outcomes = sorted(r.outcomes, key=lambda item: -item[1])  # the most frequent first
        got = ", ".join(f"{count} {outcome}" for outcome, count in outcomes)
        after = r.after_per_request()
        middle = " / ".join(f"{r.after_give_up(level):,}" for level in range(1, r.services))
        body.append(
            [
                label,
                f"{got} by {_seconds(r.longest_wait)}",
                f"{r.calls():,}",
                f"{r.while_waiting():,}",
                f"{r.after_answer():,}",
                f"{r.after_give_up():,}",
                f"{sum(after) / len(after):.1f} ({max(after)})",
                _seconds(r.last_after),
                middle,
            ]
        )
    below = " / ".join(str(level + 1) for level in range(1, rows[0][1].services)) if rows else ""
    header = [
        "deadline",
        "the users got",
        "attempts at the bottom",
        "while waiting",
        "after an answer",
        "after give-up",
        "after give-up per request (max)",
        "latest after give-up",
        f"calls to services {below} after give-up",
    ]
    return table(header, body, right=[2, 3, 4, 5, 6, 7, 8])


def in_ms(seconds: float | None) -> str:
    """Seconds as milliseconds, one decimal: ``"21.1 ms"``."""
    if seconds is None or math.isnan(seconds):
        return "-"
    return f"{seconds * 1000:,.1f} ms"


def _delays(r: TailResult) -> str:
    """The hedging delays the transport waited: one value, a range, or ``-``."""
    if r.delays is None:
        return "-"
    low, high = r.delays
    if math.isclose(low, high, rel_tol=1e-3):
        return in_ms(low)
    return f"{low * 1000:.1f}-{high * 1000:.1f} ms"


def downloads_table(rows: Sequence[tuple[str, DownloadsResult]]) -> str:
    """One row per configuration of the flaky-link downloads: how many completed, the
    bytes that crossed the link, the time to complete, the resumptions and restarts."""
    body = []
    for label, r in rows:
        times = sorted(r.times)
        median = _seconds(statistics.median(times), 1) if times else "-"
        p90 = _seconds(times[math.ceil(0.9 * len(times)) - 1], 1) if times else "-"
        body.append([
            label, f"{len(times)} of {r.downloads}", f"{r.transferred / 1e9:.2f} GB",
            f"{r.transferred / (r.size * r.downloads):.2f}x", median, p90,
            _seconds(times[-1], 1) if times else "-", f"{r.resumes:,}", f"{r.restarts:,}",
        ])
    header = ["resume", "completed", "transferred", "x the files", "time: p50", "p90", "max",
              "resumptions", "restarts"]
    return table(header, body, right=[1, 2, 3, 4, 5, 6, 7, 8])


def tail_table(rows: Sequence[tuple[str, TailResult]]) -> str:
    """One row per run of the tail-at-scale scenario: the client's latency percentiles,
    attempts per request, the hedges and what they cost the service and the budget."""
    body = []
    for label, r in rows:
        budget = "-"
        if r.budgeted:
            budget = f"{r.budget_lowest:.0f} tokens, {r.budget_refused:,} refused"
        body.append(
            [
                label,
                in_ms(r.p50),
                in_ms(r.p99),
                in_ms(r.p999),
                in_ms(r.longest),
                f"{r.attempts_per_request:.4f}",
                _delays(r),
                f"{r.hedged:,} ({_share(r.hedged_share)})",
                f"{r.hedge_wins:,}",
                in_ms(r.service_time_per_request),
                budget,
            ]
        )
    header = [
        "hedging",
        "p50",
        "p99",
        "p99.9",
        "max",
        "attempts/request",
        "delay",
        "hedged",
        "won by the hedge",
        "service time/request",
        "budget: lowest, refused",
    ]
    return table(header, body, right=[1, 2, 3, 4, 5, 6, 7, 8, 9])


def _closed_share(r: OverloadResult) -> float:
    """The share of the steady state during which the breaker was closed."""
    start, end = r.steady_from, r.duration
    closed, since, state = 0.0, 0.0, "close"
    for t, new in [*r.breaker_transitions, (math.inf, "end")]:
        if state == "close":
            closed += max(0.0, min(t, end) - max(since, start))
        since, state = t, new
    return closed / (end - start)


def _overload_notes(label: str, r: OverloadResult) -> list[str]:
    """A line on the breaker's cycles or on the throttle's counts, if the row has either."""
    notes = []
    if r.breaker:
        opened = r.breaker_times("open")
        text = "the breaker never opened"
        if opened:
            text = f"the breaker opened {len(opened)} times, first at {_seconds(opened[0])}"
            states = [state for _, state in r.breaker_transitions]
            probes = states.count("half_open")
            passed = sum(1 for a, b in zip(states, states[1:], strict=False)
                         if (a, b) == ("half_open", "close"))
            breaks = sorted({round(h - o) for o, h in
                             zip(opened, r.breaker_times("half_open"), strict=False)})
            if probes:
                lengths = f"{breaks[0]}" + (f"-{breaks[-1]}" if len(breaks) > 1 else "")
                text += (f"; its breaks of {lengths} s ended in probes, {passed} of {probes} "
                         "accepted")
            closes = r.breaker_times("close")
            reopen = [o - c for c, o in zip(closes, opened[1:], strict=False) if o > c]
            if reopen:
                text += (f", and it opened again {_seconds(statistics.fmean(reopen))} after "
                         "closing, on average")
            text += f": closed {_percent(_closed_share(r))} of the steady time"
        notes.append(text)
    if r.throttle_counts is not None and r.throttle_probability is not None:
        requests, accepts = r.throttle_counts
        notes.append(
            f"the throttle refused {r.throttled:,} attempts over the run; at the end it counted "
            f"{requests:,} requests and {accepts:,} accepts, so it refused with probability "
            f"({requests:,} - {r.throttle_k:g} x {accepts:,}) / {requests + 1:,} = "
            f"{r.throttle_probability:.3f}"
        )
    return [_fill(f"{label}: " + "; ".join(notes) + ".", "    ")] if notes else []


def overload_table(rows: Sequence[tuple[str, OverloadResult]]) -> str:
    """One row per configuration of the partial-overload scenario, over its steady state:
    the load on the service, what it accepted, the goodput and the requests that failed,
    those refused locally among them; then a line on the breaker's or the throttle's run."""
    body = []
    notes: list[str] = []
    for label, r in rows:
        refusers = ", ".join(f"{count:,} ({who})" for who, count in r.retries_refused)
        body.append(
            [
                label,
                f"{r.attempts_rate:.1f}",
                f"{r.accepts_rate:.1f}",
                f"{r.attempts_per_accept:.2f}",
                f"{r.rejects_rate:.1f}",
                f"{r.goodput:.1f}",
                f"{r.failed:,}",
                f"{r.refused:,}",
                refusers or "0",
            ]
        )
        notes.extend(_overload_notes(label, r))
    header = [
        "configuration",
        "attempts/s",
        "accepts/s",
        "attempts/accept",
        "503s/s",
        "goodput/s",
        "failed",
        "refused, not sent",
        "retry refused (by)",
    ]
    return "\n".join([table(header, body, right=[1, 2, 3, 4, 5, 6, 7]), *notes])
