"""A process forked while other threads are inside a transport: the child's first requests
must not wait on a lock that a thread of the parent held at the fork (that thread does not
exist in the child). Real forks, real threads; every wait is bounded."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import httpx
import pytest

import retry_transport as rt
from retry_transport import testing

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork only")


@pytest.fixture(autouse=True)
def _silent() -> object:
    """No log lines while the threads run: a thread writing to a captured stream at the fork
    would leave the stream's own buffer lock held in the child, which is not the package's
    to renew (what these tests are about is the package's locks)."""
    logger = logging.getLogger("retry_transport")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    yield
    logger.setLevel(level)

CHILDREN = 20
#: Seconds a child may take for its requests: they need microseconds.
CHILD_LIMIT = 2.0


def _flaky(request: httpx.Request) -> httpx.Response:
    # Half the attempts fail, so the busy threads keep taking the budget's and the
    # breaker's locks (a failure is counted under the lock, a retry paid for under one).
    return httpx.Response(503 if time.perf_counter_ns() % 2 else 200)


def _fork_while_busy(make: object) -> tuple[int, int]:
    """Fork CHILDREN times while four threads run requests through ``make()``'s transport;
    each child sends requests through the same transport, the budget, the breaker and the
    store it inherited. Returns (children that finished, children that hung)."""
    transport = make()  # type: ignore[operator]
    stop = threading.Event()

    def busy() -> None:
        request = httpx.Request("GET", "https://api.example.com/")
        while not stop.is_set():
            try:
                transport.handle_request(request)
            except rt.CircuitOpenError:
                pass

    threads = [threading.Thread(target=busy, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    finished = hung = 0
    try:
        for _ in range(CHILDREN):
            time.sleep(0.002)  # let the threads get back into the locks
            pid = os.fork()
            if pid == 0:  # the child: a few requests, then out, whatever happens
                code = 1
                try:
                    for _ in range(5):
                        try:
                            transport.handle_request(
                                httpx.Request("GET", "https://other.example.com/"))
                        except rt.CircuitOpenError:
                            pass
                    assert transport.stats.requests > 0  # the counters' lock too
                    with testing.retry_testing():  # and the testing module's
                        pass
                    code = 0
                finally:
                    os._exit(code)
            deadline = time.monotonic() + CHILD_LIMIT
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    assert os.waitstatus_to_exitcode(status) == 0
                    finished += 1
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    hung += 1
                    break
                time.sleep(0.001)
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
    return finished, hung


def _no_sleep(seconds: float) -> None:
    return None


def test_a_child_forked_under_load_is_never_stuck_on_a_lock() -> None:
    store = rt.MemoryStore()

    def make() -> rt.RetryTransport:
        return rt.RetryTransport(
            httpx.MockTransport(_flaky), sleep=_no_sleep, store=store,
            breaker=rt.CircuitBreaker(store=store, min_requests=1000),
            budget=rt.RetryBudget(capacity=10**9),
        )

    assert _fork_while_busy(make) == (CHILDREN, 0)


def test_a_child_forked_under_load_with_the_defaults_is_never_stuck() -> None:
    def make() -> rt.RetryTransport:
        return rt.RetryTransport(httpx.MockTransport(_flaky), sleep=_no_sleep)

    assert _fork_while_busy(make) == (CHILDREN, 0)
