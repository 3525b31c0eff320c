"""Animation frames as a picture: calls in flight and each client's attempts, per step.

matplotlib is an optional extra (``pip install 'retry-transport[plot]'``), imported only
when a plot is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from ._results import Call, StormResult

__all__ = ["plot_runs"]

_OK = "#2e7d32"
_FAILED = "#c62828"
_FLIGHT = "#1565c0"


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


def plot_runs(runs: Sequence[tuple[str, StormResult]], path: str) -> None:
    """Draw one frame per run into the image file ``path`` (its suffix picks the format).

    Each frame has two panels sharing the time axis: the calls in flight against the
    capacity line, and one row per client with each attempt as a bar from its start to its
    end, green for a success and red for a failure (a timeout or an error status), labelled
    with the attempt number.
    """
    plt = _pyplot()
    rows = len(runs)
    fig = plt.figure(figsize=(11, 3.6 * rows), layout="constrained")
    grid = fig.add_gridspec(rows * 2, 1, height_ratios=[1, 1.4] * rows)
    for i, (title, run) in enumerate(runs):
        top = fig.add_subplot(grid[2 * i])
        bottom = fig.add_subplot(grid[2 * i + 1], sharex=top)
        _flight(top, run, title)
        _clients(bottom, run)
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
