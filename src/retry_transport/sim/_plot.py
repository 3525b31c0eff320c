"""Animation frames as a picture: calls in flight and each client's attempts, per step;
then, if given, the sustained outage: the load on the service and the failures the
application saw, second by second, per configuration.

matplotlib is an optional extra (``pip install 'retry-transport[plot]'``), imported only
when a plot is asked for.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from typing import Any

from ._results import Call, OutageResult, StormResult

__all__ = ["plot_runs"]

_OK = "#2e7d32"
_FAILED = "#c62828"
_FLIGHT = "#1565c0"
#: One colour per outage configuration, in order (no budget, budget, budget + breaker).
_CONFIGS = ("#c62828", "#ef6c00", "#1565c0", "#6a1b9a", "#2e7d32")


def _pyplot() -> Any:
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise RuntimeError(
            "--plot needs matplotlib: pip install 'retry-transport[plot]' "
            "(or pip install 'matplotlib>=3.7')"
        ) from None
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def check_matplotlib() -> None:
    """Raise ``RuntimeError`` saying what to install when matplotlib is missing."""
    _pyplot()


def plot_runs(
    runs: Sequence[tuple[str, StormResult]],
    path: str,
    *,
    outage: Sequence[tuple[str, OutageResult]] = (),
) -> None:
    """Draw one frame per run into the image file ``path`` (its suffix picks the format).

    Each frame has two panels sharing the time axis: the calls in flight against the
    capacity line, and one row per client with each attempt as a bar from its start to its
    end, green for a success and red for a failure (a timeout or an error status), labelled
    with the attempt number.

    ``outage``: runs of the outage scenario, one per configuration, drawn below the frames
    in two panels sharing their time axis: attempts reaching the service per second (a
    log scale: the breaker's few probes against thousands of retries) and requests failed
    per second, with the outage shaded: the load shed, and what it costs.
    """
    plt = _pyplot()
    rows = len(runs)
    ratios = [1, 1.4] * rows + ([1.6, 1.2] if outage else [])
    height = 3.6 * rows + (5.6 if outage else 0)
    fig = plt.figure(figsize=(11, height), layout="constrained")
    grid = fig.add_gridspec(len(ratios), 1, height_ratios=ratios)
    for i, (title, run) in enumerate(runs):
        top = fig.add_subplot(grid[2 * i])
        bottom = fig.add_subplot(grid[2 * i + 1], sharex=top)
        _flight(top, run, title)
        _clients(bottom, run)
    if outage:
        load = fig.add_subplot(grid[2 * rows])
        failed = fig.add_subplot(grid[2 * rows + 1], sharex=load)
        _outage(load, failed, outage)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _per_second_steps(counts: Sequence[int], end: float) -> tuple[list[float], list[int]]:
    """Counts per second as the points of a step line over ``[0, end)``."""
    seconds = max(len(counts), int(end))
    padded = list(counts) + [0] * (seconds - len(counts))
    return [float(t) for t in range(seconds + 1)], padded + [padded[-1] if padded else 0]


def _outage(load: Any, failed: Any, rows: Sequence[tuple[str, OutageResult]]) -> None:
    first = rows[0][1]
    start, end = first.outage
    span = max(max(r.duration, len(r.attempts_per_second), len(r.failed_per_second))
               for _, r in rows)
    for ax in (load, failed):
        ax.axvspan(start, end, color="#9e9e9e", alpha=0.15, linewidth=0)
        ax.set_xlim(0, span)
        ax.grid(axis="both", alpha=0.3)
    for (label, r), color in zip(rows, _CONFIGS, strict=False):
        times, counts = _per_second_steps(r.attempts_per_second, span)
        load.step(
            times, counts, where="post", color=color, linewidth=1.2,
            label=f"{label}: {r.attempts_in_outage:,} in the outage "
            f"({100 * r.outage_load:.{2 if r.outage_load < 0.1 else 1}f}% of its requests)",
        )
        times, counts = _per_second_steps(r.failed_per_second, span)
        delay = r.first_success_delay
        back = "no success after it" if math.isnan(delay) else f"first success +{delay:.2f} s"
        failed.step(
            times, counts, where="post", color=color, linewidth=1.2,
            label=f"{label}: {r.failed:,} failed ({r.refused:,} fast), {back}",
        )
        if r.first_success_at is not None and r.breaker:
            for ax in (load, failed):
                ax.axvline(r.first_success_at, color=color, linestyle=":", linewidth=1)
    # Headroom above the lines for the legends.
    most = max(max(r.attempts_per_second, default=0) for _, r in rows)
    load.set_yscale("symlog", linthresh=1)
    load.set_ylim(0, max(most, 1) * 40)
    load.set_ylabel("attempts reaching\nthe service per s")
    load.set_title(
        f"Sustained outage: {first.rate:g} requests/s for {first.duration:g} s, 503 in "
        f"[{start:g}, {end:g}) s (shaded): the load the outage met (log scale)",
        loc="left",
        fontsize=10,
    )
    load.legend(loc="upper right", fontsize=8)
    load.tick_params(labelbottom=False)
    failed.set_ylim(0, max(max(max(r.failed_per_second, default=0) for _, r in rows), 1) * 2)
    failed.set_ylabel("requests failed\nper s")
    failed.set_title(
        "...and the failures the application saw (dotted: the breaker's first success after "
        "the outage)",
        loc="left",
        fontsize=10,
    )
    failed.legend(loc="upper right", fontsize=8)
    failed.set_xlabel("virtual time (s)")


def _flight(ax: Any, run: StormResult, title: str) -> None:
    steps = run.in_flight()
    times = [0.0] + [t for t, _ in steps] + [run.duration]
    counts = [0] + [n for _, n in steps] + [steps[-1][1] if steps else 0]
    ax.step(times, counts, where="post", color=_FLIGHT, label="calls in flight")
    if run.capacity is not None:
        ax.axhline(run.capacity, color=_FAILED, linestyle="--", linewidth=1, label="capacity")
    ax.set_ylim(0, max(run.clients, run.capacity or 0) + 1)
    ax.set_xlim(0, run.duration)
    ax.set_ylabel("in flight")
    recovered = run.recovered_at
    tail = f", all ok at {recovered:.2f} s" if recovered is not None else ""
    if run.capacity is None:
        tail += " (no capacity limit: the failures are scripted)"
    ax.set_title(
        f"{title}: {run.attempts} attempts, {run.succeeded} of {run.clients} succeeded{tail}",
        loc="left",
        fontsize=10,
    )
    ax.legend(loc="upper right", fontsize=8)
    ax.tick_params(labelbottom=False)


def _label(call: Call) -> str:
    """The attempt number, with "ok" on a success and the status on an error response."""
    if call.ok:
        return f"{call.attempt} ok"
    return str(call.attempt) if call.status is None else f"{call.attempt}: {call.status}"


def _clients(ax: Any, run: StormResult) -> None:
    for call in run.calls:
        color = _OK if call.ok else _FAILED
        ax.broken_barh(
            [(call.start, call.end - call.start)],
            (call.client - 0.35, 0.7),
            facecolors=color,
            edgecolors="white",
        )
        ax.text(
            call.start + (call.end - call.start) / 2,
            call.client,
            _label(call),
            ha="center",
            va="center",
            fontsize=6,
            color="white",
        )
    ax.set_yticks(range(1, run.clients + 1))
    ax.set_yticklabels([f"client {k}" for k in range(1, run.clients + 1)], fontsize=8)
    ax.set_ylim(run.clients + 0.6, 0.4)
    ax.set_xlabel("virtual time (s)")
    ax.grid(axis="x", alpha=0.3)
