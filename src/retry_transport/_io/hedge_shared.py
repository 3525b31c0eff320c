"""What a hedged try's I/O keeps alike on both drivers: how a try ends (:data:`Ended`), the
race that hands a quick first attempt's try over (:class:`Raced`), and the reading of a
call's verdict (:func:`ended`).

A hedged try runs until one attempt's outcome is final (its response is handed over, or its
exception raised) or every attempt has failed retryably (the driver then goes on with
ordinary retries). Whatever happens, no response of the try is left open: an attempt that
answers after the try is over has its response closed unread. The decisions are
:class:`~._call.hedged_call.HedgedCall`'s; ``hedge_sync`` runs the attempts on worker
threads (``hedge_workers``), ``hedge_async`` in tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base.flavour import Response

if TYPE_CHECKING:
    from .._call.hedged_call import HedgedCall

__all__ = ["Ended", "Raced", "ended"]

#: What a try ends with: ``(response, None)`` to hand over, or ``(None, wait)`` to retry
#: after ``wait`` seconds (an exception to hand over is raised).
Ended = tuple[Response | None, float | None]


def ended(verdict: str, result: Response | BaseException, wait: float | None) -> Ended:
    """How a try ends on ``result``, its last outcome, judged ``verdict`` (``wait``: the
    wait before a retry): an exception to hand over is raised."""
    if verdict == "retry":
        return None, wait
    if isinstance(result, BaseException):
        raise result
    return result, None


class Raced:
    """What a race of either kind keeps of a hedged try's end, once its first attempt was
    taken over: an outcome to hand over, or the exception to raise."""

    __slots__ = ()

    _ended: Ended | BaseException
    #: The call that took the first attempt over, once the try was hedged.
    call: HedgedCall | None

    def outcome(self) -> Ended:
        """How a hedged try ended: ``(response, None)`` to hand over, ``(None, wait)`` to
        retry after ``wait``; an exception to hand over is raised."""
        ended = self._ended
        if isinstance(ended, BaseException):
            raise ended
        return ended
