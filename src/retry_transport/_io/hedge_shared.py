"""What a hedged try's I/O keeps alike on both drivers: how a try ends (:data:`Ended`), the
race that hands a quick first attempt's try over (:class:`Raced`), and the reading of a
call's verdict (:func:`ended`).

A hedged try runs until one attempt's outcome is final (its response is handed over, or its
exception raised) or every attempt has failed retryably (the driver then goes on with
ordinary retries). Whatever happens, no response of the try is left open: an attempt that
answers after the try is over has its response closed unread. The decisions are
:class:`~._call.hedged_call.HedgedCall`'s; ``hedge_sync`` runs the attempts on worker
threads (``hedge_workers``), ``hedge_async`` in tasks (``hedge_group``, once hedged).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, cast

from .._base.flavour import Flavour, Response
from .._call.hedged_call import hedged_methods

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._call.controller import Controller
    from .._call.hedged_call import HedgedCall
    from .._call.hedging import Hedging

__all__ = ["Ended", "Hedger", "Raced", "Ran", "Unready", "ended", "response_class"]

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


class Unready:
    """A hedging transport's hedger before its first request makes it (an async one's
    needs the event loop): it hedges no method at a glance."""

    methods: frozenset[str] = frozenset()


def response_class(flavour: Flavour) -> type[Any]:
    """``flavour``'s ``Response`` class: an outcome that is one (or a subclass's) is an
    answer, told by a test that succeeds (one that fails costs more: it looks further)."""
    return cast(type, sys.modules[flavour.name].Response)


class Hedger:
    """What a hedger of either driver keeps of its transport, read once when it is made."""

    __slots__ = ("clock", "controller", "delay", "flavour", "hedging", "methods", "record",
                 "response")

    def __init__(self, controller: Controller, record: Callable[[str, float, float], None],
                 clock: Callable[[], float]) -> None:
        self.controller = controller
        self.hedging: Hedging = controller.hedging  # type: ignore[assignment]
        #: The methods of the requests hedged whenever their body is in memory.
        self.methods = hedged_methods(controller.policy)
        #: The flavour's ``Response`` class: what an answer is.
        self.response = response_class(controller.flavour)
        #: The hedging delay when it is fixed (read from the latency: ``None``).
        self.delay = (cast(float, self.hedging.delay) if self.hedging.quantile is None
                      else None)
        self.flavour = controller.flavour
        self.record = record
        self.clock = clock


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


class Ran(Raced):
    """A call's try run whole where a race would have started (no timer to race with, or
    the transport closed meanwhile): the call, and how its try ended."""

    __slots__ = ("_ended", "call")

    def __init__(self, call: HedgedCall, ended: Ended | BaseException) -> None:
        self.call = call
        self._ended = ended
