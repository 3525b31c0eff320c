"""Helpers for testing code that uses the retry transports, without waiting.

Inside :func:`retry_testing`, every ``RetryTransport`` and ``AsyncRetryTransport`` in the
process records its waits instead of sleeping them, draws its jitter from a seeded random
source, and can be made to try fewer (or exactly N) times::

    from retry_transport.testing import retry_testing

    def test_client_survives_a_blip(httpx_mock):
        httpx_mock.add_response(status_code=503)
        httpx_mock.add_response(json={"ok": True})
        with retry_testing(attempts=2) as log:
            assert my_api_call() == {"ok": True}
        assert len(log.waits) == 1

With pytest, the ``retry_testing`` fixture (installed with the package) does the same for a
whole test. Deadlines and metadata see the planned waits; only the sleeping is skipped.
Since time stands still, no origin cooldown is started while testing mode is on. The retry
budget is spent as usual: a transport shared between tests shares its budget too.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from ._leaves import fork as _fork
from ._meaning.policy import RetryPolicy

__all__ = ["TestingLog", "retry_testing"]


@dataclass
class TestingLog:
    """What the transports did while testing mode was on.

    Attributes:
        waits: every wait, in seconds, that would have been slept (cooldown waits
            included), in order.
        attempts: the attempt limit in force (``None``: each policy's own).
        cap: whether ``attempts`` caps each policy's limit instead of replacing it.
        rng: the seeded random source all jitter is drawn from.
        breakers: ``"on"`` (circuit breakers work as usual), ``"off"`` (they let every
            request through and count nothing), or ``"open"`` (every breaker refuses every
            request with ``CircuitOpenError``: the way to test a fallback path).
        throttles: ``"on"`` (adaptive throttles work as usual), ``"off"`` (they refuse
            nothing; outcomes are still counted), or a probability in [0, 1] that every
            attempt is refused with (1.0: all of them, with ``ThrottledError``).
    """

    __test__ = False  # not a test class, whatever pytest thinks of the name

    attempts: int | None
    cap: bool
    rng: random.Random
    breakers: Literal["on", "off", "open"] = "on"
    throttles: Literal["on", "off"] | float = "on"
    waits: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def policy(self, policy: RetryPolicy) -> RetryPolicy:
        """The policy a transport uses under testing mode."""
        if self.attempts is None:
            return policy
        attempts = min(policy.max_attempts, self.attempts) if self.cap else self.attempts
        if attempts == policy.max_attempts:
            return policy
        return policy.replace(max_attempts=attempts)

    def record(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(seconds)


_lock = threading.Lock()


def _renew_lock() -> None:
    global _lock
    _lock = threading.Lock()


_fork.module_locks(_renew_lock)  # a forked child gets a new one
#: The blocks now open, oldest first. Threads and tasks may close them in any order.
_open: list[TestingLog] = []
#: The log of the most recently opened block still open, read by the transports.
active: TestingLog | None = None


@contextmanager
def retry_testing(
    attempts: int | None = None,
    *,
    cap: bool = False,
    seed: int = 0,
    breakers: Literal["on", "off", "open"] = "on",
    throttles: Literal["on", "off"] | float = "on",
) -> Iterator[TestingLog]:
    """Turn testing mode on for every retry transport until the block ends.

    Args:
        attempts: make every request try exactly this many times in all (``max_attempts``);
            ``None`` (default) keeps each policy's own limit.
        cap: with ``attempts``, only lower a policy's limit, never raise it. Default False.
        seed: the seed of the random source jitter is drawn from. Default 0.
        breakers: ``"on"`` (default: circuit breakers as usual), ``"off"`` (no breaker
            refuses or counts anything), ``"open"`` (every breaker refuses every request,
            to test fallback paths).
        throttles: ``"on"`` (default: adaptive throttles as usual), ``"off"`` (no throttle
            refuses anything), or a probability in [0, 1] for every throttle's refusals
            (1.0 refuses every attempt, to test what a caller does with ``ThrottledError``).

    Yields:
        The :class:`TestingLog` that collects the waits. Blocks nest, and may be closed in any
        order (threads, tasks): the transports use the most recently opened block still open.
    """
    global active
    if attempts is not None and (
        isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1
    ):
        raise ValueError(f"attempts must be an integer >= 1 or None, got {attempts!r}")
    if breakers not in ("on", "off", "open"):
        raise ValueError(f"breakers must be 'on', 'off' or 'open', got {breakers!r}")
    if throttles not in ("on", "off") and (
        isinstance(throttles, bool) or not isinstance(throttles, (int, float))
        or not 0.0 <= throttles <= 1.0
    ):
        raise ValueError(f"throttles must be 'on', 'off' or a probability in [0, 1], "
                         f"got {throttles!r}")
    log = TestingLog(attempts=attempts, cap=cap, rng=random.Random(seed), breakers=breakers,
                     throttles=throttles if isinstance(throttles, str) else float(throttles))
    with _lock:
        _open.append(log)
        active = log
    try:
        yield log
    finally:
        with _lock:
            _open.remove(log)
            active = _open[-1] if _open else None
