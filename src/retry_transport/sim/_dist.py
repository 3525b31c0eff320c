"""Many seeded storm runs, spread over processes, with an optional progress line.

Run ``i`` of a distribution uses seed ``seed + i`` whatever the number of workers or the
chunking, so results are reproducible on any machine. Each worker runs its chunk in small
batches of scenarios that share one event loop (see :func:`run_storms`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Final, TextIO

from retry_transport import RetryPolicy

from ._results import StormStats
from ._storm import BudgetFactory, StormSpec, run_storms

__all__ = ["Job", "run_jobs", "storm_stats"]

#: Scenarios per event loop: measured fastest on CPython 3.11 (larger batches slow trio's
#: scheduler down more than they save in start-up).
_BATCH: Final = 10
#: Runs per job sent to a worker: small enough to balance two workers, large enough that
#: pickling stays negligible.
_CHUNK: Final = 100

_Row = tuple[int, int, float | None]


def _storm_chunk(spec: StormSpec, first: int, count: int) -> list[_Row]:
    rows: list[_Row] = []
    end = first + count
    for start in range(first, end, _BATCH):
        specs = [dataclasses.replace(spec, seed=s) for s in range(start, min(start + _BATCH, end))]
        rows.extend((r.attempts, r.succeeded, r.recovered_at) for r in run_storms(specs))
    return rows


@dataclass(frozen=True, slots=True)
class Job:
    """Work for :func:`run_jobs`: a distribution of storm runs, or any picklable call.

    Attributes:
        spec: the storm scenario (its seed is replaced by ``seed + i`` for run ``i``), or
            ``None`` for a plain call.
        runs: number of storm runs.
        seed: the first run's seed.
        call: for a plain job, a picklable callable and its keyword arguments.
        weight: the plain job's cost in storm runs: plain jobs start longest first, and the
            progress line's percentage counts it.
        label: what the progress line calls the job (default: ``"storm"`` for a storm job,
            the function's name for a plain one).
    """

    spec: StormSpec | None = None
    runs: int = 0
    seed: int = 0
    call: tuple[Callable[..., Any], dict[str, Any]] | None = None
    weight: int = 0
    label: str = ""

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        if self.call is not None:
            return getattr(self.call[0], "__name__", "job")
        return "storm"


@dataclass(frozen=True, slots=True)
class _Task:
    """One piece of a job sent to a worker: a chunk of a storm job's runs, or a plain job."""

    job: int  # the job's index
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    weight: int  # storm runs, or the plain job's weight
    runs: int  # storm runs in the chunk; 0 for a plain job


def _tasks(jobs: Sequence[Job]) -> list[_Task]:
    """The jobs cut into tasks: plain jobs first, longest first (they are the longest, and
    must not be the tail of the pool), then the storm jobs' chunks in seed order."""
    plain = [
        _Task(index, job.call[0], (), job.call[1], job.weight, 0)
        for index, job in enumerate(jobs)
        if job.call is not None
    ]
    plain.sort(key=lambda task: -task.weight)  # stable: equal weights keep the jobs' order
    chunks = [
        _Task(index, _storm_chunk, (job.spec, first, count), {}, count, count)
        for index, job in enumerate(jobs)
        if job.spec is not None
        for first in range(job.seed, job.seed + job.runs, _CHUNK)
        for count in [min(_CHUNK, job.seed + job.runs - first)]
    ]
    return plain + chunks


def _pool(workers: int) -> Executor:
    methods = multiprocessing.get_all_start_methods()
    # fork starts workers at once with everything already imported; only safe while this
    # process has a single thread.
    if "fork" in methods and sys.platform == "linux" and threading.active_count() == 1:
        return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    return ProcessPoolExecutor(workers)


#: The progress line is redrawn at most once per this many seconds.
PROGRESS_INTERVAL: Final = 0.1
#: The clock the progress line is paced by.
_clock: Callable[[], float] = time.monotonic


class _Progress:
    """One line on a terminal: the share of the work done, the jobs under way, their runs.

    ``   41%  step 4: 1,200/2,000 runs | outage: RetryBudget()``, redrawn in place (``\\r``)
    at most every :data:`PROGRESS_INTERVAL` seconds and wiped by :meth:`close`. With no
    stream it draws nothing.
    """

    def __init__(self, jobs: Sequence[Job], tasks: Sequence[_Task], stream: TextIO | None):
        self.jobs = jobs
        self.stream = stream
        self.total = max(sum(t.weight for t in tasks), 1)
        self.done = 0
        self.runs_done = [0] * len(jobs)
        self.running: list[int] = []
        self.width = max(_columns(stream) - 1, 20) if stream is not None else 0
        self.shown = ""  # the line on the terminal
        self.drawn_at: float | None = None
        self.pending = False  # a change not drawn yet (too soon after the last one)

    def line(self) -> str:
        parts: list[str] = []
        for index in dict.fromkeys(self.running):  # each job once, in order
            job = self.jobs[index]
            if job.spec is not None:
                parts.append(f"{job.name}: {self.runs_done[index]:,}/{job.runs:,} runs")
            else:
                parts.append(job.name)
        return f"  {self.done * 100 // self.total:3d}%  {' | '.join(parts)}"[: self.width]

    def update(self, running: Sequence[_Task]) -> None:
        """The tasks now under way: redraw if it is time."""
        self.running = [task.job for task in running]
        self.pending = True
        self.draw()

    def finished(self, task: _Task) -> None:
        self.done += task.weight
        self.runs_done[task.job] += task.runs
        self.pending = True

    def delay(self) -> float | None:
        """Seconds until an undrawn change may be drawn; ``None`` if there is none."""
        if self.stream is None or not self.pending:
            return None
        if self.drawn_at is None:
            return 0.0
        return max(0.0, self.drawn_at + PROGRESS_INTERVAL - _clock())

    def draw(self) -> None:
        if self.stream is None or not self.pending:
            return
        now = _clock()
        if self.drawn_at is not None and now - self.drawn_at < PROGRESS_INTERVAL:
            return
        self.pending = False
        line = self.line()
        if line == self.shown:
            return
        self.drawn_at = now
        pad = " " * max(0, len(self.shown) - len(line))
        self.stream.write(f"\r{line}{pad}")
        self.stream.flush()
        self.shown = line

    def close(self) -> None:
        if self.stream is not None and self.shown:
            self.stream.write("\r" + " " * len(self.shown) + "\r")
            self.stream.flush()
            self.shown = ""


def _columns(stream: TextIO) -> int:
    """The width of the terminal ``stream`` writes to (80 if it cannot be told)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):  # not a real terminal's file
        columns = shutil.get_terminal_size().columns
    return columns if columns > 0 else 80  # a terminal that does not say


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _default_progress() -> TextIO | None:
    stream = sys.stderr
    return stream if stream is not None and stream.isatty() else None


def run_jobs(
    jobs: Sequence[Job], *, workers: int | None = None, progress: bool | None = None
) -> list[Any]:
    """Run ``jobs``; a storm job gives a list of ``(attempts, succeeded, recovered_at)``.

    ``workers``: processes to use (default: the CPU count; 1 runs everything here).
    ``progress``: a progress line on stderr (default: only when stderr is a terminal).
    """
    stream = _default_progress() if progress is None else (sys.stderr if progress else None)
    tasks = _tasks(jobs)
    bar = _Progress(jobs, tasks, stream)
    outputs: list[Any] = [None] * len(tasks)
    workers = workers if workers is not None else _cpus()
    try:
        if workers <= 1 or len(tasks) <= 1:
            for order, task in enumerate(tasks):
                bar.update([task])
                outputs[order] = task.fn(*task.args, **task.kwargs)
                bar.finished(task)
        else:
            _run_pool(tasks, min(workers, len(tasks)), outputs, bar)
    finally:
        bar.close()
    results: list[Any] = [[] if job.spec is not None else None for job in jobs]
    # In task order: a storm job's chunks, so its rows, stay in seed order.
    for task, output in zip(tasks, outputs, strict=True):
        if jobs[task.job].spec is not None:
            results[task.job].extend(output)
        else:
            results[task.job] = output
    return results


def _run_pool(tasks: Sequence[_Task], workers: int, outputs: list[Any], bar: _Progress) -> None:
    """Run ``tasks`` on ``workers`` processes, in order, each as soon as a worker is free.

    One task more than there are workers is handed over at a time (the pool's queue keeps a
    worker from waiting for the next one), so the oldest ``workers`` of those are the ones
    running, which the progress line shows.
    """
    queue = iter(enumerate(tasks))
    with _pool(workers) as pool:
        in_flight: dict[Future[Any], tuple[int, _Task]] = {}

        def hand_over() -> None:
            for order, task in queue:
                in_flight[pool.submit(task.fn, *task.args, **task.kwargs)] = (order, task)
                if len(in_flight) > workers:
                    return

        hand_over()
        while in_flight:
            bar.update([task for _, task in list(in_flight.values())[:workers]])
            done, _ = wait(in_flight, timeout=bar.delay(), return_when=FIRST_COMPLETED)
            for future in done:
                order, task = in_flight.pop(future)
                outputs[order] = future.result()
                bar.finished(task)
            hand_over()


def stats_from_rows(spec: StormSpec, seed: int, rows: Sequence[_Row]) -> StormStats:
    return StormStats(
        policy=spec.policy,
        seed=seed,
        runs=len(rows),
        budgeted=spec.budget is not None,
        attempts=tuple(r[0] for r in rows),
        succeeded=tuple(r[1] for r in rows),
        recovered_at=tuple(r[2] for r in rows),
        clients=spec.clients,
    )


def storm_stats(
    policy: RetryPolicy,
    *,
    runs: int = 2000,
    seed: int = 0,
    clients: int = 6,
    capacity: int | None = 4,
    call_time: float = 0.1,
    duration: float = 2.0,
    budget: BudgetFactory | None = None,
    workers: int | None = None,
    progress: bool | None = None,
) -> StormStats:
    """Run the storm scenario ``runs`` times (seeds ``seed, seed + 1, ...``) and summarise.

    The scenario arguments are those of :func:`run_storm`. ``workers`` processes share the
    runs (default: the CPU count; the result does not depend on it); ``budget`` must then be
    picklable (a class such as ``RetryBudget`` or a ``functools.partial``, not a lambda).
    ``progress`` draws a progress line on stderr (default: only when stderr is a terminal).
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs!r}")
    spec = StormSpec(
        policy,
        clients=clients,
        capacity=capacity,
        call_time=call_time,
        duration=duration,
        budget=budget,
    )
    (rows,) = run_jobs([Job(spec, runs, seed)], workers=workers, progress=progress)
    return stats_from_rows(spec, seed, rows)


def outage_job(weight: int = 800, label: str = "outage", **kwargs: Any) -> Job:
    """A :class:`Job` running :func:`run_outage` with ``kwargs``."""
    from ._outage import run_outage

    return Job(call=(run_outage, kwargs), weight=weight, label=label)
