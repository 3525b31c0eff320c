"""The storm's four steps as data, and the search that found the representative seed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from retry_transport import RetryBudget, RetryPolicy

from ._results import Reply, StormResult
from ._storm import BudgetFactory, StormSpec, run_storms

__all__ = [
    "COMPARISONS",
    "REPRESENTATIVE_PATTERN",
    "REPRESENTATIVE_SEED",
    "STEPS",
    "UNCAPPED",
    "Comparison",
    "Step",
    "find_seed",
]

#: ``max_attempts`` for "no attempt cap": more than any client can make in the run.
UNCAPPED: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class Step:
    """One row of the storm's table: a policy and the scenario it runs in."""

    number: int
    label: str
    policy: RetryPolicy
    capacity: int | None = 4
    script: Mapping[int, Sequence[Reply]] = field(default_factory=dict)
    random: bool = False

    def spec(self, seed: int = 0) -> StormSpec:
        return StormSpec(self.policy, seed=seed, capacity=self.capacity, script=self.script)


STEPS: Final = (
    # The blip is scripted, not overload: six first calls at once would overload a 4-call
    # service, so the capacity rule is off. Exponential backoff without jitter waits
    # base_delay = 100 ms after the 503; after the 429 it waits Retry-After + that backoff.
    Step(
        1,
        "blip: one 503, one 429 (Retry-After: 1), one 400, three clean",
        RetryPolicy(base_delay=0.1, max_delay=0.8, jitter="none"),
        capacity=None,
        script={1: (Reply(503),), 2: (Reply(429, retry_after="1"),), 3: (Reply(400),)},
    ),
    Step(
        2,
        "retry immediately (wait 0, no attempt cap)",
        RetryPolicy(max_attempts=UNCAPPED, base_delay=0.0, jitter="none"),
    ),
    Step(
        3,
        "exponential min(0.8, 0.1*2**n) s, no jitter, no cap",
        RetryPolicy(max_attempts=UNCAPPED, base_delay=0.1, max_delay=0.8, jitter="none"),
    ),
    Step(
        4,
        "full jitter uniform(0, min(0.8, 0.1*2**n)) s, max 5",
        RetryPolicy(max_attempts=5, base_delay=0.1, max_delay=0.8, jitter="full"),
        random=True,
    ),
)

#: The animation's step-4 frame: five clients succeed on attempt 3 of 5, one on attempt 4.
REPRESENTATIVE_PATTERN: Final = (3, 3, 3, 3, 3, 4)

#: The step-4 run shown as the animation's frame. Found by ``find_seed(STEPS[3].policy)``: the
#: first seed from 0 up whose run takes 19 attempts, clients 1 to 5 succeeding on attempt 3
#: and client 6 on attempt 4 (the animation's order), all by 0.75 s. Not tuned otherwise.
REPRESENTATIVE_SEED: Final = 21


@dataclass(frozen=True, slots=True)
class Comparison:
    """A policy for the beyond-the-seed table."""

    label: str
    policy: RetryPolicy
    budget: BudgetFactory | None = None


COMPARISONS: Final = (
    Comparison("full jitter, max 5 (step 4)", STEPS[3].policy),
    Comparison("equal jitter, max 5", STEPS[3].policy.replace(jitter="equal")),
    Comparison("decorrelated jitter, max 5", STEPS[3].policy.replace(jitter="decorrelated")),
    Comparison("RetryPolicy() defaults, no budget", RetryPolicy()),
    Comparison("RetryPolicy() defaults + RetryBudget()", RetryPolicy(), RetryBudget),
)


def find_seed(
    policy: RetryPolicy,
    *,
    pattern: Sequence[int] = REPRESENTATIVE_PATTERN,
    within: float = 0.75,
    start: int = 0,
    limit: int = 10_000,
) -> int:
    """The first seed from ``start`` whose storm run matches a frame of the animation.

    A match has every client succeed by ``within`` seconds, client ``k`` making
    ``pattern[k - 1]`` attempts (so ``sum(pattern)`` in all). Raises ``LookupError`` when
    none of ``limit`` seeds matches.
    """
    want = tuple(pattern)
    batch = 10
    for first in range(start, start + limit, batch):
        specs = [
            StormSpec(policy, seed=s, clients=len(want))
            for s in range(first, min(first + batch, start + limit))
        ]
        for run in run_storms(specs):
            if _matches(run, want, within):
                return run.seed
    raise LookupError(f"no seed in {start}..{start + limit - 1} gives the pattern {want}")


def _matches(run: StormResult, pattern: tuple[int, ...], within: float) -> bool:
    recovered = run.recovered_at
    return run.pattern == pattern and recovered is not None and recovered <= within + 1e-9
