"""Testing mode's state: the blocks of ``retry_testing`` now open, and the log the
transports read (``retry_transport.testing`` is the public face).

Kept here, below the call and the guards, so that they read it without importing a public
module; ``retry_testing`` opens and closes the blocks with :func:`open_block` and
:func:`close_block`.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Literal

from .._base import fork as _fork
from .policy import RetryPolicy

__all__ = ["TestingLog", "active", "close_block", "open_block"]


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


def open_block(log: TestingLog) -> None:
    """A ``retry_testing`` block begins: its log is the one the transports use."""
    global active
    with _lock:
        _open.append(log)
        active = log


def close_block(log: TestingLog) -> None:
    """A block ends, in any order: the most recently opened one still open takes over."""
    global active
    with _lock:
        _open.remove(log)
        active = _open[-1] if _open else None
