"""What happened to a request beyond a quick first attempt (:class:`Progress`): its
attempts' records, its waits, its deadline and what the guards answered for its next attempt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._base.models import Attempt
    from .._guards.seam import Hold
    from .._policy.deadlines import Scope

__all__ = ["Progress"]


class Progress:
    """What happened to a request beyond a quick first attempt: created when first needed,
    so a request that succeeds at once never pays for it. Its fields start as the class's
    values (a new one sets only what differs: a request that retries pays for no more)."""

    history: list[Attempt]
    total_wait = 0.0
    previous: float  # the last backoff (decorrelated jitter builds on it)
    # What the guards' vetoes answered for the next attempt (by guard index), or None.
    paid: list[object] | None = None
    deadline_at: float | None = None  # clock time: the policy's deadline
    ambient: Scope | None = None  # the ambient deadline (its own clock)
    body: bool | None = None  # RetryInfo.body_buffered
    # The caller's extensions, while attempts carry clipped timeouts (deadline).
    extensions: dict[str, Any] | None = None
    # Seconds of waiting that testing mode skipped: the deadline still counts them.
    skipped = 0.0
    hedges = 0  # hedges sent (RetryInfo.hedges)
    # Where the next record goes in ``history`` (None: at the end): a hedged try keeps
    # its attempts in the order they started, whichever answered last.
    place: int | None = None
    # A guard's hold before the first attempt (its wait is in total_wait): the first
    # record shows it when the history is handed over (``held_first``).
    hold: Hold | None = None

    def __init__(self, base_delay: float) -> None:
        self.history = []
        self.previous = base_delay
