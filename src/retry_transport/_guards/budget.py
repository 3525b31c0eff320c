"""A per-client retry budget: the AWS SDK standard-mode retry quota, as a token bucket.

A retry takes tokens; a request that ends in success puts some back. While the bucket holds
fewer tokens than a retry costs, failures are handed over at once instead of retried, so a
wide outage cannot multiply the load on a struggling service: from a full bucket of 500, a
total outage allows 100 retries (50 after timeouts) and then each request is sent once.

The bucket takes no lock: it holds its tokens (``_base/counting.py``'s ``Bucket``), and a
retry paid for, a cost put back, a success's refund are each one C call on it (see
:class:`RetryBudget`).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import TYPE_CHECKING, Final

from .._base.counting import LOCK_FREE, Bucket, Tally
from .._base.fork import track
from .._base.models import BUDGET_EXHAUSTED
from .._base.validate import check_number
from .seam import FIRST, HEDGE, AttemptKind, CallView, Guard, Refusal

if TYPE_CHECKING:
    from .._base.flavour import Request
    from .._policy.rules import Outcome

__all__ = ["MAX_UNITS", "BudgetGuard", "RetryBudget"]

#: The most units a bucket holds as tokens, without a lock (a token takes some 8 bytes): a
#: finer bucket is counted under a lock.
MAX_UNITS: Final = 1 << 16


def _amount(name: str, value: object, *, positive: bool = False) -> float:
    """A number of tokens: finite, >= 0 (> 0 with ``positive``)."""
    return check_number(name, value, low=0.0, open_low=positive)


def _units(amounts: tuple[float, ...]) -> tuple[float, list[int]]:
    """The largest amount of which each of ``amounts`` (finite, >= 0, one > 0) is a whole
    number, and how many of it each is: exact, as floats are (a float is a whole number over
    a power of two, and so is the unit)."""
    ratios = [amount.as_integer_ratio() for amount in amounts]
    below = max(denominator for _, denominator in ratios)  # powers of two: the lcm
    wholes = [numerator * (below // denominator) for numerator, denominator in ratios]
    common = math.gcd(*wholes)
    return common / below, [whole // common for whole in wholes]


class RetryBudget:
    """A thread-safe token bucket that bounds retries across all requests of a client.

    Args:
        capacity: tokens in a full bucket, and the bucket's upper bound. Default 500.
        retry_cost: tokens a retry takes. Default 5.
        timeout_retry_cost: tokens a retry after a timeout takes. Default 10.
        success_refund: tokens a request that succeeds without a retry puts back. Default 1.
            A request that succeeds after retries puts back what its last retry took.

    One budget may be shared by several transports, sync and async alike, and by any
    number of threads; nothing ever waits on it.

    **Without a lock.** The bucket holds its tokens: counted in the largest *unit* of which
    the four amounts are whole numbers (1 with the defaults), it is a ``deque`` of at most
    ``capacity`` units (``_base/counting.py``'s ``Bucket``). A retry takes its cost in one C
    call that first looks for the cost's last unit and takes nothing if it is missing; a
    success's refund (the quick path's count) and a cost put back are one ``extend`` that
    drops what does not fit. With a GIL no other thread runs inside a C call, so the
    changes happen one at a time, whole, in some order; and so, at every read of
    :attr:`tokens` (``len()`` times the unit, nothing to fold in): **the tokens are those
    that making each change alone, in that order, gives, between 0 and ``capacity``; a
    retry is paid for exactly when the bucket holds its cost at that point, so never more
    retries than the tokens allow.** Every figure is a whole number of units, which the
    arithmetic of floats gives exactly too (a unit is a whole number over a power of two).

    A bucket of more than :data:`MAX_UNITS` units (a capacity of many units, amounts that
    are not whole numbers of a coarse unit), or an interpreter without a GIL, counts under
    a lock instead, as a float: each retry and each cost put back takes it; a success's
    refund, counted without it, is folded in at the next read.
    """

    __slots__ = (
        "__weakref__",
        "_bucket",
        "_count_refund",
        "_gives",
        "_lock",
        "_refunds",
        "_takes",
        "_tokens",
        "_unit",
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
        amounts = (self.retry_cost, self.timeout_retry_cost, self.success_refund)
        self._unit, counts = _units((self.capacity, *amounts))
        units = dict(zip((self.capacity, *amounts), counts, strict=True))
        self._lock = threading.Lock()
        track(self, "_lock")  # a forked child gets a new lock
        # Counted under the lock, as a float (see the class): the tokens at the last read,
        # and the refunds of ``success_refund`` counted since without the lock (the
        # transports call ``_count_refund()``, C-level, for each request that succeeds at
        # once). Every read first folds them in: refunds only add and the bucket only clips
        # at ``capacity``, so folding them in late gives the tokens that adding each at once
        # would have.
        self._tokens = self.capacity
        self._refunds = Tally()
        self._bucket: Bucket | None = None
        #: Take a retry's cost, and a timeout retry's: one C call each (see :meth:`acquire`),
        #: or ``None`` when counted under the lock.
        self._takes: tuple[Iterator[object], Iterator[object]] | None = None
        #: Put back an amount (a retry's cost, the refund), by amount: one C call on the
        #: bucket, or :meth:`release`.
        self._gives: dict[float, Callable[[], object]]
        self._count_refund: Callable[[], object] | None
        if LOCK_FREE and units[self.capacity] <= MAX_UNITS:
            bucket = self._bucket = Bucket(units[self.capacity])
            self._takes = (bucket.taker(units[self.retry_cost]),
                           bucket.taker(units[self.timeout_retry_cost]))
            self._gives = {amount: bucket.putter(units[amount]) for amount in amounts}
            self._count_refund = self._gives[self.success_refund]
        else:
            self._gives = {amount: functools.partial(self.release, amount) for amount in amounts}
            self._count_refund = self._refunds.__next__ if LOCK_FREE else None

    def _fold(self) -> None:
        """Apply the refunds counted since the last fold (under the lock)."""
        pending = self._refunds.take()
        if pending and self._tokens < self.capacity:
            self._tokens = min(self.capacity, self._tokens + pending * self.success_refund)

    @property
    def tokens(self) -> float:
        """The tokens in the bucket now."""
        bucket = self._bucket
        if bucket is not None:
            return len(bucket) * self._unit
        with self._lock:
            self._fold()
            return self._tokens

    def acquire(self, *, timeout: bool = False) -> float | None:
        """Take the cost of one retry; return it, or ``None`` (taking nothing) if short."""
        takes = self._takes
        if takes is not None:
            try:
                next(takes[1 if timeout else 0])
            except IndexError:  # fewer tokens than the cost: none taken
                return None
            return self.timeout_retry_cost if timeout else self.retry_cost
        cost = self.timeout_retry_cost if timeout else self.retry_cost
        with self._lock:
            self._fold()
            if self._tokens < cost:
                return None
            self._tokens -= cost
        return cost

    def release(self, amount: float) -> None:
        """Put ``amount`` tokens back, never above ``capacity``. A bucket that holds its
        tokens (see the class) takes back a whole number of its units (any whole number
        of tokens with whole-number amounts): ``ValueError`` else."""
        amount = _amount("amount", amount)
        bucket = self._bucket
        if bucket is not None:
            units = Fraction(amount) / Fraction(self._unit)
            if units.denominator != 1:
                raise ValueError(f"amount must be a whole number of the budget's unit, "
                                 f"{self._unit:g} tokens, got {amount!r}")
            bucket.putter(min(int(units), MAX_UNITS))()  # more than fill it: fill it
            return
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


def _nothing() -> None:
    """What a ticket that stands for no tokens puts back."""


class _Gives(dict[object, Callable[[], object]]):
    """What a success puts back, by ticket (``gives[ticket]()``): the refund, or the cost
    the retry took, each one C call on the bucket. A number that is neither (a cost that a
    subclass's ``acquire()`` answered) goes back through ``release()``."""

    __slots__ = ("budget",)

    def __init__(self, budget: RetryBudget) -> None:
        gives = budget._gives
        super().__init__({
            _REFUND: gives[budget.success_refund],
            budget.retry_cost: gives[budget.retry_cost],
            budget.timeout_retry_cost: gives[budget.timeout_retry_cost],
        })
        self.budget = budget

    def __missing__(self, ticket: object) -> Callable[[], object]:
        if isinstance(ticket, (int, float)) and not isinstance(ticket, bool):
            return functools.partial(self.budget.release, ticket)
        return _nothing


class BudgetGuard(Guard):
    """A :class:`~retry_transport.RetryBudget` as a guard: a retry must be paid for; a
    request that succeeds puts back what its last retry took (``success_refund`` without
    a retry)."""

    reason = BUDGET_EXHAUSTED
    idle = True  # a first attempt is never refused
    idle_ticket = _REFUND

    def __init__(self, budget: RetryBudget) -> None:
        self.budget = budget
        # A success at once puts back success_refund: one C call on the bucket (or counted,
        # folded in at the next read).
        self.count_success = budget._count_refund
        self._gives = _Gives(budget)
        # A budget whose acquire() is its own pays for a retry here, with its takes (one C
        # call); a subclass's acquire() is asked.
        self._takes = budget._takes if type(budget).acquire is RetryBudget.acquire else None
        self._costs = (budget.retry_cost, budget.timeout_retry_cost)

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
        if outcome is not None and outcome.success:
            self._gives[ticket]()

    def settle_idle(self, request: Request, outcome: Outcome) -> None:
        if outcome.success:
            self._gives[_REFUND]()

    def veto(self, call: CallView, outcome: Outcome) -> object:
        takes = self._takes
        timeout = outcome.timeout
        if takes is None:
            cost = self.budget.acquire(timeout=timeout)
            return BUDGET_EXHAUSTED if cost is None else cost
        try:
            next(takes[timeout])  # as RetryBudget.acquire() takes it
        except IndexError:  # fewer tokens than the cost: none taken
            return BUDGET_EXHAUSTED
        return self._costs[timeout]

    def refund(self, call: CallView, paid: object) -> None:
        self._gives[paid]()  # the cost the veto took for the retry
