"""A sync transport's worker threads for the attempts of hedged requests: at most
:data:`HEDGE_WORKERS`, started when first needed, idle ones reused (``hedge_sync`` runs the
attempts on them)."""

from __future__ import annotations

import contextvars
import functools
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, Final

from .._base.fork import track

__all__ = ["HEDGE_WORKERS", "Workers"]

#: The most attempts of hedged requests a sync transport runs at once, each on a worker
#: thread of its own (started as needed, idle ones reused). While every one is busy, a new
#: request goes unhedged on the caller's thread and no new hedge starts: nothing queues.
HEDGE_WORKERS: Final = 64


class _Worker:
    """One worker thread: it waits on its own queue for the next job (``None``: stop).

    A queue, not a lock released to wake it: handing a job over is one call, and
    :meth:`Workers.close` can tell every worker to stop by putting ``None`` in its queue,
    whatever state an interrupted caller left it in (taken from the idle list and given no
    job yet, a job given and not yet taken): each one stops once it has run what it was
    given, and none waits for a job that will never come."""

    __slots__ = ("jobs", "thread")

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None


def _serve(owner: weakref.ref[Workers], worker: _Worker) -> None:
    """A worker thread's loop: run each job handed over, until told to stop. It holds its
    :class:`Workers` only while it files itself back, so that a transport dropped without
    ``close()`` is collected and its idle threads stopped (``_stop_idle``)."""
    jobs = worker.jobs
    while True:
        job = jobs.get()
        if job is None:
            return
        done = False
        try:
            job()
            done = True
        finally:  # a job that raised ends its thread (threading.excepthook reports it)
            job = None
            workers = owner()
            going_on = workers is not None and workers._back(worker, done)
            workers = None
        if not going_on:
            return


def _stop_idle(idle: list[_Worker], lock: threading.Lock) -> None:
    """Wake the idle workers with no job: each stops (their :class:`Workers` is gone)."""
    with lock:
        stopping, idle[:] = list(idle), []
    for worker in stopping:
        worker.jobs.put(None)


class Workers:
    """A sync transport's worker threads for hedged attempts, started when first needed
    (at most :data:`HEDGE_WORKERS`), idle ones reused.

    A worker is reserved before an attempt is made ready for it (:meth:`reserve`), so that
    an attempt never waits in a queue of jobs: each is handed to an idle worker (or a new
    one) of its own, through the worker's queue, with no future. :meth:`close` waits for
    the attempts still running and stops the threads; the tries under way then start no
    more attempts, and a request made afterwards (httpx's own transports may be used
    again) starts new threads.
    A transport dropped without ``close()`` leaves no thread behind either: once it is
    collected, its idle workers stop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._all: list[_Worker] = []
        self._busy = 0  # reserved, running or about to
        self.generation = 0  # one more at each close(): a try of an earlier one stops
        self._finalizer = weakref.finalize(self, _stop_idle, self._idle, self._lock)
        track(self)  # a forked child has none of the threads: it starts its own

    def reserve(self, generation: int) -> bool:
        """A worker for one attempt of a try begun in ``generation``, if one is free."""
        with self._lock:
            if generation != self.generation or self._busy >= HEDGE_WORKERS:
                return False
            self._busy += 1
            return True

    def release(self) -> None:
        """A reserved worker that was not used after all (a guard refused the hedge)."""
        with self._lock:
            self._busy -= 1

    def submit(self, fn: Callable[[Any], None], slot: Any, generation: int, *,
               reserve: bool = False) -> bool:
        """Run ``fn(slot)`` on the worker reserved for it in ``generation`` (``reserve``:
        on a worker reserved now, if one is free), in the caller's context (its trace span,
        its deadline); the worker is free again once it returns. False, the reservation
        given back: :meth:`close` stopped the workers since it was made (or none is free)."""
        job = functools.partial(contextvars.copy_context().run, fn, slot)
        with self._lock:
            if reserve:
                if generation != self.generation or self._busy >= HEDGE_WORKERS:
                    return False
                self._busy += 1
            elif generation != self.generation:  # closed since the reservation
                self._busy -= 1
                return False
            worker = self._idle.pop() if self._idle else None
            thread = None
            if worker is None:
                worker = _Worker()
                self._all.append(worker)
                thread = worker.thread = threading.Thread(
                    target=_serve, args=(weakref.ref(self), worker), daemon=True,
                    name=f"retry-transport-hedge-{len(self._all)}")
            worker.jobs.put(job)
        if thread is not None:
            thread.start()
        return True

    def _back(self, worker: _Worker, done: bool) -> bool:
        """``worker`` finished its job (``done``: without raising): whether it goes on,
        idle, or stops (close() stopped the workers while it ran, or its job raised)."""
        with self._lock:
            self._busy -= 1
            going_on = done and worker in self._all
            if going_on:
                self._idle.append(worker)
            elif worker in self._all:
                self._all.remove(worker)
            return going_on

    def close(self) -> None:
        """Stop the workers, once the attempts they run have ended."""
        with self._lock:
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            self.generation += 1
        for worker in workers:  # an idle one stops now; a busy one after its job
            worker.jobs.put(None)
        current = threading.current_thread()
        for worker in workers:
            thread = worker.thread  # never started: a caller interrupted as it started it
            if thread is not None and thread is not current and thread.is_alive():
                thread.join()

    def _renew_locks(self) -> None:  # a forked child has none of the parent's threads
        self._lock = threading.Lock()
        self._idle, self._all = [], []
        self._busy = 0
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _stop_idle, self._idle, self._lock)
