"""A per-client retry budget: the AWS SDK standard-mode retry quota, as a token bucket.

A retry takes tokens; a request that ends in success puts some back. While the bucket holds
fewer tokens than a retry costs, failures are handed over at once instead of retried, so a
wide outage cannot multiply the load on a struggling service: from a full bucket of 500, a
total outage allows 100 retries (50 after timeouts) and then each request is sent once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final

from .._base.counting import LOCK_FREE, Tally
from .._base.fork import track
from .._base.models import BUDGET_EXHAUSTED
from .._base.validate import check_number
from .seam import FIRST, HEDGE, AttemptKind, CallView, Guard, Refusal

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._policy.rules import Outcome

__all__ = ["BudgetGuard", "RetryBudget"]



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
        "_count_refund",
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
        track(self, "_lock")  # a forked child gets a new lock
        # Refunds of ``success_refund`` counted without the lock: the transports call
        # ``_count_refund()`` (C-level, no lock) for each request that succeeds at once, and every
        # read of the bucket first folds in what was counted since the last one. Refunds
        # only add and the bucket only clips at ``capacity``, so folding them in late gives
        # the tokens that adding each at once would have.
        self._refunds = Tally()
        self._count_refund = self._refunds.__next__ if LOCK_FREE else None

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


#: The ticket of a first attempt: a success puts back ``success_refund``.
_REFUND: Final = object()


class BudgetGuard(Guard):
    """A :class:`~retry_transport.RetryBudget` as a guard: a retry must be paid for; a
    request that succeeds puts back what its last retry took (``success_refund`` without
    a retry)."""

    reason = BUDGET_EXHAUSTED
    idle = True  # a first attempt is never refused
    idle_ticket = _REFUND

    def __init__(self, budget: RetryBudget) -> None:
        self.budget = budget
        # A success at once puts back success_refund: counted, folded in at the next read.
        self.count_success = budget._count_refund

    def idle_for(self, request: Request) -> bool:
        return True

    def admit(self, call: CallView, kind: AttemptKind, paid: object) -> object:
        if kind is HEDGE:  # paid for as a retry is; refunded if it wins
            cost = self.budget.acquire(timeout=False)
            if cost is None:
                return Refusal(BUDGET_EXHAUSTED, None,
                               "no hedge: the retry budget cannot pay for one")
            return cost
        return _REFUND if kind is FIRST else paid

    def settle(self, call: CallView, ticket: object, outcome: Outcome | None) -> None:
        budget = self.budget
        if outcome is not None and outcome.success and budget._tokens < budget.capacity:
            if ticket is _REFUND:
                budget.release(budget.success_refund)
            elif isinstance(ticket, (int, float)):
                budget.release(ticket)

    def settle_idle(self, request: Request, outcome: Outcome) -> None:
        budget = self.budget
        if outcome.success and budget._tokens < budget.capacity:
            budget.release(budget.success_refund)


    def veto(self, call: CallView, outcome: Outcome) -> object:
        cost = self.budget.acquire(timeout=outcome.timeout)
        return BUDGET_EXHAUSTED if cost is None else cost

    def refund(self, call: CallView, paid: object) -> None:
        if isinstance(paid, (int, float)):  # the cost the veto took for the retry
            self.budget.release(paid)
