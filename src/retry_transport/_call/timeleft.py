"""The deadline's part of a request's decisions: the time left, and the end of a request
whose next attempt cannot be sent (its time ran out, or its transport was closed).

Mixed into :class:`~._call.core.RetryCall`: a request's deadline is the earlier of its policy's
``deadline`` (measured on the transport's clock from the request's start) and the ambient
one (``_deadlines``, measured on its own clock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, NoReturn

from .._base.models import CLOSED, DEADLINE, RetryInfo, StopReason, held_first
from .._wire.http import remember

if TYPE_CHECKING:
    from .controller import Controller

__all__ = ["MIN_ATTEMPT", "TimeLeft"]

#: The least time left a retry is waited for, in seconds: 1 ms, the ``deadline_header``'s
#: unit and the shortest timeout an attempt is given. A retry whose wait would leave less is
#: not waited for (stop reason ``deadline``); with a ``deadline_header``, no attempt is sent
#: with less (it would carry 0).
MIN_ATTEMPT: Final = 0.001



class TimeLeft:
    """The deadline's methods of :class:`~._call.core.RetryCall`."""

    __slots__ = ()

    _controller: Controller
    _progress: Any  # the call's progress.Progress, or None
    request: Any

    @property
    def time_left(self) -> float | None:
        """Seconds left of the request's deadline (its policy's or the ambient one, the
        earlier), or ``None`` without one."""
        progress = self._progress
        return None if progress is None else self._left(progress)

    def _left(self, progress: Any) -> float | None:
        """The time left of the effective deadline: the policy's, measured on the
        transport's clock, and the ambient one, on its own; waits skipped by testing mode
        count as waited."""
        left = None
        deadline_at = progress.deadline_at
        if deadline_at is not None:
            left = deadline_at - self._controller.clock()
        scope = progress.ambient
        if scope is not None:
            ambient = scope.left()
            if left is None or ambient < left:
                left = ambient
        if left is not None:
            left -= progress.skipped
        return left

    def _check_deadline(self, progress: Any) -> float | None:
        """Before an attempt is sent: the time left, or ``None`` without a deadline; raises
        the flavour's ``DeadlineExceeded`` (nothing sent) when none is left, or less than
        ``MIN_ATTEMPT`` with a ``deadline_header`` (it would carry 0 ms)."""
        left = self._left(progress)
        if left is not None and (
            left <= 0.0 or (left < MIN_ATTEMPT and self._controller.deadline_header is not None)
        ):
            self._expired(progress, left)
        return left

    def _unpaid(self, progress: Any) -> None:
        """The retry decided last (``progress.paid``) is not sent after all: what every
        guard's veto took for it goes back, once."""
        paid = progress.paid
        if paid is not None:
            progress.paid = None
            self._give_back(paid, 0)

    def _give_back(self, paid: list[object], start: int) -> None:
        """A retry is not sent after all: what the vetoes of the guards from index
        ``start`` on took for it (``paid``, by guard index) goes back."""
        guards = self._controller.guards
        for index in range(start, len(guards)):
            guards[index].refund(self, paid[index])  # type: ignore[arg-type]  # a RetryCall

    def _expired(self, progress: Any, left: float) -> NoReturn:
        """Raise ``DeadlineExceeded``: the deadline passed before this attempt could go."""
        shown = f"({max(left, 0.0) * 1000:.3f} ms left): not sent"
        if progress.history:
            message = (f"the deadline passed while waiting to send attempt "
                       f"{len(progress.history) + 1} {shown}")
        else:
            message = f"the deadline passed before the request could be sent {shown}"
        self._not_sent(progress, DEADLINE,
                       self._controller.flavour.deadline_error(message, request=self.request))

    def _closed(self, progress: Any) -> NoReturn:
        """Raise the flavour's ``TransportError``: the transport was closed since the
        request began, so its next attempt does not start."""
        message = (f"the transport was closed while this request was under way: attempt "
                   f"{len(progress.history) + 1} was not sent")
        self._not_sent(progress, CLOSED,
                       self._controller.flavour.transport_error(message, request=self.request))

    def _not_sent(self, progress: Any, reason: StopReason, error: BaseException,
                  what: str = "not sent") -> NoReturn:
        """End the request before an attempt is sent (its deadline passed, its transport
        was closed, a guard refused it), raising ``error`` with the request's metadata.
        Before a retry, the retry that was waited for counts in ``retries`` (as it does in
        the transport's stats), and what the guards' vetoes took for it goes back."""
        history: tuple[Any, ...] = ()
        total_wait = 0.0
        if progress is not None:
            history, total_wait = tuple(progress.history), progress.total_wait
            if progress.hold is not None:
                history = held_first(history, progress.hold.wait, progress.hold.holder)
            self._unpaid(progress)  # before a retry: it is not sent after all
        info = RetryInfo(len(history), len(history), history, total_wait, reason)
        note = None
        if history:
            note = (f"retry-transport: gave up after {len(history)} attempt(s) "
                    f"({reason.value}): the retry waited for was {what}")
        remember(error, info, note)
        self._controller.note_finish(self.request, info, failed_retryable=True)
        raise error

