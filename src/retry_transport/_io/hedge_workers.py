"""A sync transport's worker threads for the attempts of hedged requests: at most
:data:`HEDGE_WORKERS`, started when first needed, idle ones reused (``hedge_sync`` runs the
attempts on them).

Handing an attempt to an idle worker takes no lock: it is taken from the idle ones (a
``deque.pop``, which the GIL makes atomic) and given its job through its own queue, and it
puts itself back when the job is done. Only starting a thread, and ``close()``, take
the lock.
"""

from __future__ import annotations

import collections
import contextvars
import queue
import threading
import weakref
from collections.abc import Callable
from contextvars import copy_context
from typing import Any, Final, Protocol

from .._base.fork import track

__all__ = ["HEDGE_WORKERS", "Outcomes", "Workers"]

#: The most attempts of hedged requests a sync transport runs at once, each on a worker
#: thread of its own (started as needed, idle ones reused). While every one is busy, a new
#: request goes unhedged on the caller's thread and no new hedge starts: nothing queues.
HEDGE_WORKERS: Final = 64


class Outcomes(Protocol):
    """Where a worker hands a job's outcome over: ``(tag, outcome)`` put in it; once it is
    :attr:`over`, no one reads it any more, and the worker calls :meth:`discard`."""

    over: bool

    def put(self, item: tuple[Any, Any]) -> None: ...
    def discard(self) -> None: ...


#: What a worker runs: ``fn(arg)`` in ``context`` (the caller's: its trace span, its
#: deadline), its outcome (a value, or what it raised) handed to the inbox with the tag.
Job = tuple[contextvars.Context, Callable[[Any], object], Any, Outcomes, Any]


class _Pool:
    """A :class:`Workers`' threads from one ``close()`` to the next (a generation): the idle
    ones, all of them, and whether the generation is over (closed, or its ``Workers``
    collected). A worker holds its generation's pool, never its ``Workers``, so that a
    transport dropped without ``close()`` is collected and its idle threads stopped."""

    __slots__ = ("all", "generation", "idle", "over")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.idle: collections.deque[_Worker] = collections.deque()  # no resizing: a deque
        self.all: list[_Worker] = []
        self.over = False


class _Worker:
    """One worker thread: it waits on its own queue for the next job (``None``: stop).

    A queue, not a lock released to wake it: handing a job over is one call, and
    :meth:`Workers.close` can tell every worker to stop by putting ``None`` in its queue,
    whatever state an interrupted caller left it in (taken from the idle list and given no
    job yet, a job given and not yet taken): each one stops once it has run what it was
    given, and none waits for a job that will never come. A job handed over as it stops
    (its caller took it from the idle list just before ``close()``) is run, or taken back
    by its caller (:meth:`Workers.submit`): never left in the queue unseen."""

    __slots__ = ("jobs", "pool", "stopping", "thread")

    def __init__(self, pool: _Pool) -> None:
        self.jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.pool = pool
        self.stopping = False
        self.thread: threading.Thread | None = None


def _serve(worker: _Worker) -> None:
    """A worker thread's loop: run each job handed over, hand its outcome over (an
    interrupt in it too: its try raises it), and go back on the idle list, until told to
    stop, or its generation is over as it goes back; then run the jobs still in its queue
    (handed over as it stopped), and end. An outcome whose hand-over raises (a body that
    fails to close) ends the thread (``threading.excepthook`` reports it)."""
    jobs, pool = worker.jobs, worker.pool
    idle = pool.idle
    take: Callable[[], Job | None] = jobs.get  # then, once it stops, jobs.get_nowait
    stopping = False
    while True:
        try:
            job = take()
        except queue.Empty:  # stopping, and nothing more was handed over
            return
        if job is None:
            worker.stopping = stopping = True
            take = jobs.get_nowait
            continue
        context, fn, arg, inbox, tag = job
        try:
            outcome = context.run(fn, arg)
        except BaseException as exc:
            outcome = exc
        try:
            inbox.put((tag, outcome))
            if inbox.over:  # no one reads it any more
                inbox.discard()
        except BaseException:
            pool.all.remove(worker)  # it stops: its place is free
            raise
        del job, context, fn, arg, inbox, tag, outcome  # nothing held while it waits
        if stopping:
            continue
        idle.append(worker)
        if pool.over:  # closed or collected as it ran: it may have missed its stop
            worker.stopping = stopping = True
            take = jobs.get_nowait


def _stop_idle(pool: _Pool) -> None:
    """The generation is over: its idle workers are woken with no job, and stop; a busy
    one stops when it has run its job (it sees :attr:`_Pool.over`)."""
    pool.over = True
    while True:
        try:
            worker = pool.idle.pop()
        except IndexError:
            return
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
        self._lock = threading.Lock()  # starting a thread, and close()
        self._pool = _Pool(0)
        #: One more at each :meth:`close`: a try begun in an earlier one starts no more
        #: attempts (the current pool's).
        self.generation = 0
        self._finalizer = weakref.finalize(self, _stop_idle, self._pool)
        track(self)  # a forked child has none of the threads: it starts its own

    def reserve(self, generation: int) -> _Worker | None:
        """A worker for one attempt of a try begun in ``generation``, if one is free: an
        idle one, or a new one while there are fewer than :data:`HEDGE_WORKERS`."""
        pool = self._pool
        if pool.generation != generation:
            return None
        try:
            return pool.idle.pop()
        except IndexError:
            return self._new(pool)

    def _new(self, pool: _Pool) -> _Worker | None:
        """A new worker of ``pool``'s generation, its thread started; ``None`` when there
        are :data:`HEDGE_WORKERS` already, or the generation is over."""
        with self._lock:
            if pool is not self._pool or len(pool.all) >= HEDGE_WORKERS:
                return None
            worker = _Worker(pool)
            pool.all.append(worker)
            thread = worker.thread = threading.Thread(
                target=_serve, args=(worker,), daemon=True,
                name=f"retry-transport-hedge-{len(pool.all)}")
        thread.start()
        return worker

    @staticmethod
    def release(worker: _Worker) -> None:
        """A reserved worker that was not used after all (a guard refused the hedge): idle
        again."""
        worker.pool.idle.append(worker)

    def submit(self, fn: Callable[[Any], object], arg: Any, inbox: Outcomes, tag: object,
               worker: _Worker | None = None) -> bool:
        """Run ``fn(arg)`` on ``worker``, reserved for it (``None``: on a free worker, taken
        now), in the caller's context (its trace span, its deadline), and hand its outcome
        to ``inbox`` as ``(tag, outcome)``; the worker is free again after that. False: no
        worker is free (nothing queues), or :meth:`close` stopped the workers meanwhile
        (:attr:`generation` has changed): one reserved, or taken, before it is given the
        job back unrun."""
        if worker is None:
            try:
                worker = self._pool.idle.pop()
            except IndexError:  # none idle: a new one, if there may be more
                worker = self.reserve(self.generation)
                if worker is None:
                    return False
        jobs = worker.jobs
        jobs.put((copy_context(), fn, arg, inbox, tag))
        if worker.stopping:  # it stops: it ran the job as it did, or the job is still here
            try:
                jobs.get_nowait()
            except queue.Empty:
                return True
            return False
        return True

    def close(self) -> None:
        """Stop the workers, once the attempts they run have ended."""
        with self._lock:
            pool = self._pool
            self._pool = _Pool(pool.generation + 1)
            self.generation = pool.generation + 1
            self._finalizer.detach()
            self._finalizer = weakref.finalize(self, _stop_idle, self._pool)
        pool.over = True
        workers = list(pool.all)
        for worker in workers:  # an idle one stops now; a busy one after its job
            worker.jobs.put(None)
        current = threading.current_thread()
        for worker in workers:
            thread = worker.thread  # never started: a caller interrupted as it started it
            if thread is not None and thread is not current and thread.is_alive():
                thread.join()

    def _renew_locks(self) -> None:  # a forked child has none of the parent's threads
        self._lock = threading.Lock()
        self._pool = _Pool(self._pool.generation)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _stop_idle, self._pool)
