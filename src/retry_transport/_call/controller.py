"""What one transport keeps across requests: its settings, its guards, its counters.

The per-request decisions are in ``_core``; the cooldown table in ``_cooldowns``; what is
logged and told to hooks in ``_observe``. The controller builds the guards tuple once, in
admission order (breaker, throttle, cooldowns, budget), and the order their vetoes are asked
in, from the rule order of ``_rules``.
"""

from __future__ import annotations

import functools
import itertools
import random
import threading
import uuid
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from .._base.counting import counter
from .._base.flavour import Flavour, Request
from .._base.fork import track
from .._base.models import NOT_RETRYABLE, SUCCESS, Attempt, RetryInfo, RetryStats, StopReason
from .._guards.breaker import BreakerGuard
from .._guards.budget import BudgetGuard
from .._guards.cooldowns import CooldownTable
from .._guards.seam import Guard
from .._guards.throttle import ThrottleGuard
from .._policy.observe import Observer
from .._policy.policy import RetryPolicy
from .._policy.rules import ORDER, Outcome, final
from .hedging import Delays
from .latency import LatencyTable
from .quick import SAMPLE_MASK, QuickPath

if TYPE_CHECKING:
    from .options import Settings

__all__ = ["Controller"]


#: The share of attempts whose latency a transport without hedging records: a random
#: sample, so that timing costs the success path little (two clock readings and a histogram
#: update for one attempt in eight).
LATENCY_SAMPLE: Final = 0.125
#: The sample is a pattern of this many draws, seeded (the same attempts are timed in every
#: run), gone through in a cycle: one C call per attempt decides. A request pattern aliases
#: with it only if its period is a multiple of this.
_PATTERN: Final = SAMPLE_MASK + 1
_SAMPLE_SEED: Final = 0x1A7E


@functools.cache
def _pattern(share: float) -> tuple[bool, ...]:
    """Which of the seeded draws time an attempt, made once per share and process: the
    quick path reads it at each request's count (``QuickPath.first``), the attempts of
    calls go through it from the transport's start (:func:`timings`)."""
    draw = random.Random(_SAMPLE_SEED).random
    return tuple(draw() < share for _ in range(_PATTERN))


def timings(share: float) -> Callable[[], bool]:
    """What says whether to time an attempt: True for a random ``share`` of the calls."""
    if share >= 1.0:
        return itertools.repeat(True).__next__
    return itertools.cycle(_pattern(share)).__next__


class Controller:
    """The state one transport keeps across requests: settings, guards, counters."""

    def __init__(self, policy: RetryPolicy, *, flavour: Flavour, settings: Settings,
                 clock: Callable[[], float]) -> None:
        self.policy = policy
        self.flavour = flavour
        #: How many times the transport was closed: a request begun before the last close
        #: starts no attempt after it (``RetryCall.attempt_request``).
        self.closes = 0
        self.settings = settings
        budget = self.budget = settings.budget
        breaker = self.breaker = settings.breaker
        cooldown = self.cooldown = settings.cooldown
        self.rng = settings.rng
        self.clock = clock
        self.wallclock = settings.wallclock
        self.contact = settings.contact
        self.auto_idempotency_key = settings.auto_idempotency_key
        self.attempt_header = settings.attempt_header
        self.deadline_header = settings.deadline_header
        #: Hedged requests (``None``: none), and the delays read from the latency.
        self.hedging = settings.hedging
        self.hedge_delays = Delays()
        #: Resumable bodies (``None``: none): a ``Resume``.
        self.resume = settings.resume
        #: Each origin's latency (sending an attempt to its response's headers), on ``clock``:
        #: the attempts ``timed()`` says (every attempt when a percentile of it sets the
        #: hedging delay; else a random ``LATENCY_SAMPLE`` of them).
        self.latency = LatencyTable(clock)
        hedging = self.hedging
        share = LATENCY_SAMPLE if hedging is None or hedging.quantile is None else 1.0
        self.timed = timings(share)
        #: Whether requests get headers added (``From``, an idempotency key).
        self.prepares = self.contact is not None or self.auto_idempotency_key
        hooks = settings.hooks
        self.observer = Observer(hooks, clock)
        self.cooldowns = CooldownTable(clock, settings.store) if cooldown else None
        guards: list[Guard] = []
        if breaker is not None:
            guards.append(BreakerGuard(breaker, self.observer))
        #: The throttle's guard (its refusals are counted there), or ``None``.
        self.throttle = None
        if settings.throttle is not None:
            self.throttle = ThrottleGuard(settings.throttle, self.observer)
            guards.append(self.throttle)
        if self.cooldowns is not None:
            guards.append(self.cooldowns)
        if budget is not None:
            guards.append(BudgetGuard(budget))
        self.guards: tuple[Guard, ...] = tuple(guards)
        #: The guards that learn from what responses say (an origin asking for quiet).
        self.learners: tuple[Guard, ...] = tuple(g for g in guards if g.learns)
        #: Indexes into ``guards`` of those that veto retries, in the rule order.
        self.vetoes: tuple[int, ...] = tuple(sorted(
            (index for index, guard in enumerate(guards) if guard.reason is not None),
            key=lambda index: ORDER.index(guards[index].reason),
        ))
        self._lock = threading.Lock()
        track(self, "_lock")  # a forked child gets a new lock
        # Counters bumped with next(), which the GIL makes atomic, so the hot path takes no
        # lock; stats() draws from them too (under the lock) and subtracts its own draws.
        self.request_counter = counter()
        self.retry_counter = counter()
        self._hedges = counter()
        self._hedge_wins = counter()
        self._resumes = counter()
        self._draws = 0
        self._gave_up: dict[StopReason, int] = {}
        # RetryInfo and Outcome of a first-attempt answer that is final at once, by status:
        # immutable, so one pair serves every such response; made at a status's first.
        self.final_pairs: dict[int, tuple[RetryInfo, Outcome]] = {}
        #: The quick path: a first attempt sent as it is and answered at once.
        self.quick = QuickPath(
            self.guards, policy,
            sends_as_is=(not self.prepares and self.attempt_header is None
                    and policy.deadline is None and not policy.retry_body_errors
                    and self.resume is None),
            reads_quotas=cooldown and policy.respect_rate_limits,
            requests=self.request_counter, sample=_pattern(share),
            final_pairs=self.final_pairs, final=self.final, observer=self.observer,
            clock=clock)

    def prepare(self, request: Request, policy: RetryPolicy) -> None:
        """Add the headers a polite client sends: ``From`` and an idempotency key."""
        if self.contact is not None and "from" not in request.headers:
            request.headers["From"] = self.contact
        header = policy.idempotency_header
        if (
            self.auto_idempotency_key
            and header
            and request.method not in policy.retry_methods
            and not request.headers.get(header, "").strip()
        ):
            request.headers[header] = f'"{uuid.uuid4()}"'

    def final(self, status: int) -> tuple[RetryInfo, Outcome]:
        """The metadata and the outcome of a first-attempt answer that is final at once
        (shared, immutable)."""
        pair = self.final_pairs.get(status)
        if pair is None:
            reason = SUCCESS if status < 400 else NOT_RETRYABLE
            info = RetryInfo(1, 0, (Attempt(status, None, None, 0.0),), 0.0, reason)
            pair = self.final_pairs[status] = (info, final(status))
        return pair

    # -- bookkeeping -------------------------------------------------------------------

    def note_hedge(self, request: Request, attempt: int, delay: float) -> None:
        next(self._hedges)
        self.observer.hedge(request, attempt, delay)

    def note_hedge_win(self) -> None:
        next(self._hedge_wins)

    def note_resume(self, request: Request, attempt: int, wait: float, status: int | None,
                    error: str | None, resumed_at: int | str | None) -> None:
        next(self._resumes)
        self.observer.resume(request, attempt, wait, status, error, resumed_at)

    def note_resume_end(self, request: Request, info: RetryInfo, detail: str) -> None:
        """A broken body is not resumed (further): counted as given up, and told; the
        break reaches the caller, a failure an SDK above may retry."""
        self._count_gave_up(info.stop_reason)
        self.observer.resume_ended(request, info, detail)
        self.quick.failed(request)

    def note_finish(self, request: Request, info: RetryInfo, failed_retryable: bool,
                    detail: str | None = None) -> None:
        """Count and tell a request's end; ``detail``: why a rule stopped it, for the log.
        Anything but a success is a failure handed back, which an SDK above may retry."""
        reason = info.stop_reason
        gave_up = reason is not SUCCESS and (info.retries > 0 or failed_retryable)
        if gave_up:
            self._count_gave_up(reason)
        if gave_up or info.retries > 0:
            self.observer.finish(request, info, gave_up, detail)
        if reason is not SUCCESS:
            self.quick.failed(request)

    def _count_gave_up(self, reason: StopReason) -> None:
        with self._lock:
            self._gave_up[reason] = self._gave_up.get(reason, 0) + 1

    def stats(self) -> RetryStats:
        with self._lock:
            requests = next(self.request_counter) - self._draws
            retries = next(self.retry_counter) - self._draws
            hedges = next(self._hedges) - self._draws
            throttled = 0 if self.throttle is None else next(self.throttle.refused) - self._draws
            hedge_wins = next(self._hedge_wins) - self._draws
            resumes = next(self._resumes) - self._draws
            self._draws += 1
            gave_up = dict(self._gave_up)
        return RetryStats(
            requests=requests,
            retries=retries,
            gave_up=MappingProxyType(gave_up),
            budget_tokens=None if self.budget is None else self.budget.tokens,
            retry_rate=retries / requests if requests else 0.0,
            hedges=hedges,
            hedge_wins=hedge_wins,
            throttled=throttled,
            resumes=resumes,
        )
