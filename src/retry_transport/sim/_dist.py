"""Many seeded storm runs, spread over processes, with an optional progress bar.

Run ``i`` of a distribution uses seed ``seed + i`` whatever the number of workers or the
chunking, so results are reproducible on any machine. Each worker runs its chunk in small
batches of scenarios that share one event loop (see :func:`run_storms`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
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
        weight: the plain job's cost in storm runs, for the progress bar.
    """

    spec: StormSpec | None = None
    runs: int = 0
    seed: int = 0
    call: tuple[Callable[..., Any], dict[str, Any]] | None = None
    weight: int = 0


def _pool(workers: int) -> Executor:
    methods = multiprocessing.get_all_start_methods()
    # fork starts workers at once with everything already imported; only safe while this
    # process has a single thread.
    if "fork" in methods and sys.platform == "linux" and threading.active_count() == 1:
        return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    return ProcessPoolExecutor(workers)


class _Progress:
    def __init__(self, total: int, stream: TextIO | None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.shown = -1

    def advance(self, amount: int) -> None:
        self.done += amount
        if self.stream is None:
            return
        percent = min(100, self.done * 100 // self.total)
        if percent != self.shown:
            self.shown = percent
            bar = "#" * (percent * 30 // 100)
            self.stream.write(f"\rsimulating [{bar:<30}] {percent:3d}%")
            self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.write("\r" + " " * 50 + "\r")
            self.stream.flush()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _default_progress() -> TextIO | None:
    return sys.stderr if sys.stderr is not None and sys.stderr.isatty() else None


def run_jobs(
    jobs: Sequence[Job], *, workers: int | None = None, progress: bool | None = None
) -> list[Any]:
    """Run ``jobs``; a storm job gives a list of ``(attempts, succeeded, recovered_at)``.

    ``workers``: processes to use (default: the CPU count; 1 runs everything here).
    ``progress``: draw a bar on stderr (default: only when stderr is a terminal).
    """
    stream = _default_progress() if progress is None else (sys.stderr if progress else None)
    tasks: list[tuple[int, Callable[..., Any], tuple[Any, ...], dict[str, Any], int]] = []
    # Plain jobs first: they are the longest, and must not be the tail of the pool.
    for index, job in enumerate(jobs):
        if job.call is not None:
            fn, kwargs = job.call
            tasks.append((index, fn, (), kwargs, job.weight))
    for index, job in enumerate(jobs):
        if job.spec is not None:
            for first in range(job.seed, job.seed + job.runs, _CHUNK):
                count = min(_CHUNK, job.seed + job.runs - first)
                tasks.append((index, _storm_chunk, (job.spec, first, count), {}, count))
    bar = _Progress(sum(t[4] for t in tasks), stream)
    results: list[Any] = [[] if job.spec is not None else None for job in jobs]
    workers = workers if workers is not None else _cpus()
    try:
        if workers <= 1 or len(tasks) <= 1:
            for index, fn, args, kwargs, weight in tasks:
                _collect(results, jobs, index, fn(*args, **kwargs))
                bar.advance(weight)
        else:
            with _pool(min(workers, len(tasks))) as pool:
                futures: list[tuple[int, Future[Any], int]] = [
                    (index, pool.submit(fn, *args, **kwargs), weight)
                    for index, fn, args, kwargs, weight in tasks
                ]
                weights = {future: weight for _, future, weight in futures}
                for future in as_completed(weights):
                    bar.advance(weights[future])
                # Collected in submission order: a distribution's rows stay in seed order.
                for index, future, _ in futures:
                    _collect(results, jobs, index, future.result())
    finally:
        bar.close()
    return results


def _collect(results: list[Any], jobs: Sequence[Job], index: int, value: Any) -> None:
    if jobs[index].spec is not None:
        results[index].extend(value)
    else:
        results[index] = value


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
    ``progress`` draws a bar on stderr (default: only when stderr is a terminal).
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


def outage_job(weight: int = 800, **kwargs: Any) -> Job:
    """A :class:`Job` running :func:`run_outage` with ``kwargs``."""
    from ._outage import run_outage

    return Job(call=(run_outage, kwargs), weight=weight)
