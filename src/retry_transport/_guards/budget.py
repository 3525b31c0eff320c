"""A per-client retry budget: the AWS SDK standard-mode retry quota, as a token bucket.

A retry takes tokens; a request that ends in success puts some back. While the bucket holds
fewer tokens than a retry costs, failures are handed over at once instead of retried, so a
wide outage cannot multiply the load on a struggling service: from a full bucket of 500, a
total outage allows 100 retries (50 after timeouts) and then each request is sent once.
"""

from __future__ import annotations

import threading

from .._leaves.counting import LOCK_FREE, Tally
from .._leaves.fork import track
from .._leaves.validate import check_number

__all__ = ["RetryBudget"]



def _amount(name: str, value: object, *, positive: bool = False) -> float:
    """A number of tokens: finite, >= 0 (> 0 with ``positive``)."""
    return check_number(name, value, low=0.0, open_low=positive)


class RetryBudget:
    """A thread-safe token bucket that bounds retries across all requests of a client.

    Args:
        capacity: tokens in a full bucket, and the bucket's upper bound. Default 500.
        retry_cost: tokens a retry takes. Default 5.
        timeout_retry_cost: tokens a retry after a timeout takes. Default 10.
        success_refund: tokens a request that succeeds without a retry puts back. Default 1.
            A request that succeeds after retries puts back what its last retry took.

    One budget may be shared by several transports, sync and async alike: it is guarded by a
    lock that is never held across a wait, so nothing ever blocks on an empty bucket.
    """

    __slots__ = (
        "__weakref__",
        "_lock",
        "_mark",
        "_refunds",
        "_tally",
        "_tokens",
        "capacity",
        "retry_cost",
        "success_refund",
        "timeout_retry_cost",
    )

    def __init__(
        self,
        capacity: float = 500,
        retry_cost: float = 5,
        timeout_retry_cost: float = 10,
        success_refund: float = 1,
    ) -> None:
        self.capacity = _amount("capacity", capacity, positive=True)
        self.retry_cost = _amount("retry_cost", retry_cost)
        self.timeout_retry_cost = _amount("timeout_retry_cost", timeout_retry_cost)
        self.success_refund = _amount("success_refund", success_refund)
        for name in ("retry_cost", "timeout_retry_cost"):
            if getattr(self, name) > self.capacity:
                raise ValueError(
                    f"{name} ({getattr(self, name):g}) must not exceed capacity "
                    f"({self.capacity:g}): no retry could ever be paid for"
                )
        self._tokens = self.capacity
        self._lock = threading.Lock()
        track(self)  # a forked child gets a new lock
        # Refunds of ``success_refund`` counted without the lock: the transports call
        # ``_tally()`` (C-level, no lock) for each request that succeeds at once, and every
        # read of the bucket first folds in what was counted since the last one. Refunds
        # only add and the bucket only clips at ``capacity``, so folding them in late gives
        # the tokens that adding each at once would have.
        self._refunds = Tally()
        self._tally = self._refunds.__next__ if LOCK_FREE else None

    def _renew_locks(self) -> None:
        self._lock = threading.Lock()

    def _fold(self) -> None:
        """Apply the refunds counted since the last fold (under the lock)."""
        pending = self._refunds.take()
        if pending and self._tokens < self.capacity:
            self._tokens = min(self.capacity, self._tokens + pending * self.success_refund)

    @property
    def tokens(self) -> float:
        """The tokens in the bucket now."""
        with self._lock:
            self._fold()
            return self._tokens

    def acquire(self, *, timeout: bool = False) -> float | None:
        """Take the cost of one retry; return it, or ``None`` (taking nothing) if short."""
        cost = self.timeout_retry_cost if timeout else self.retry_cost
        with self._lock:
            self._fold()
            if self._tokens < cost:
                return None
            self._tokens -= cost
        return cost

    def release(self, amount: float) -> None:
        """Put ``amount`` tokens back, never above ``capacity``."""
        if self._tokens >= self.capacity:  # the usual case: a full bucket, nothing to do
            return
        with self._lock:
            self._fold()
            self._tokens = min(self.capacity, self._tokens + amount)

    def __repr__(self) -> str:
        return (
            f"RetryBudget(tokens={self.tokens:g}, capacity={self.capacity:g}, "
            f"retry_cost={self.retry_cost:g}, timeout_retry_cost={self.timeout_retry_cost:g}, "
            f"success_refund={self.success_refund:g})"
        )
