# Generated from _async_hedging.py by `python scripts/unasync.py`: do not edit. Edit the
# source, then run the command again (CI checks with `python scripts/unasync.py --check`).
"""The loop of a transport with hedging, written once: ``_async_hedging.py`` is the source,
and ``_sync_hedging.py`` is generated from it by ``python scripts/unasync.py``, as
``_async_loop.py``'s twin is.

A transport built with ``hedging=`` runs this loop (its class is its flavour's transport
with :class:`SyncHedgingLoop` mixed in, chosen once when it is built: ``drivers.py``); one
without runs ``_async_loop.py``'s, which names no race. A request that may not be hedged
goes as without hedging. Any other's first try is raced (its attempts in tasks,
``hedge_async.py``, or on worker threads, ``hedge_sync.py``, and the delays); when every
attempt of the try failed retryably, the call's retries are the plain loop's
(:meth:`SyncLoop._attempts`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .._call.hedged_call import hedgeable
from ._sync_loop import SyncLoop
from .hedge_shared import Raced, Unready

if TYPE_CHECKING:
    from .._base.flavour import Request, Response
    from .._call.hedged_call import HedgedCall
    from .hedge_sync import SyncHedger
    from .hedge_shared import Ended

__all__ = ["SyncHedgingLoop"]


class SyncHedgingLoop(SyncLoop):
    """The loop of an ``RetryTransport`` with hedging."""

    #: Made by the driver's ``__init__`` or ``_first`` (the first request, which goes by a
    #: call, asks :func:`hedgeable` in full before that).
    _hedger: SyncHedger = cast("SyncHedger", Unready)

    if TYPE_CHECKING:  # the driver's own hook (``drivers.py``)
        def _hedged_try(self, call: HedgedCall) -> Ended: ...

    def handle_request(self, request: Request) -> Response:
        """Send ``request`` until an outcome is final, and hand that over: its first try
        raced against the hedging delay when it may be hedged, as without hedging when not.
        It decides nothing: the quick path, the ``HedgedCall`` and the race do."""
        controller, hedger, stream = self._controller, self._hedger, request.stream
        if (request.method not in hedger.methods  # not hedgeable at a glance: asked in full
                or not isinstance(stream, self._memory)):
            if not hedgeable(controller.policy, request, self._memory):
                return SyncLoop.handle_request(self, request)
        closes = controller.closes
        quick = self._quick
        timed = quick.first(request)
        if timed is None:  # a call decides from the first attempt on
            return self._hedged(self._call(request, closes))  # type: ignore[arg-type]
        # The attempt's own exception is its outcome, returned (judged outside any handler:
        # no later error is chained to it); the race's own errors are raised.
        outcome = hedger.first(self._transport, request, closes, stream, timed)
        if isinstance(outcome, hedger.response):  # an answer (told at once: no other is)
            if quick.ends(request, outcome):
                if type(outcome.stream) is not self._memory:  # streamed: may break later
                    self._streamed(request, stream, outcome)
                return outcome
        elif isinstance(outcome, Raced):  # hedged (or run whole): the try's outcome
            return self._hedged(outcome.call, outcome)  # type: ignore[arg-type]
        return self._attempts(self._begin(request, stream, closes), outcome)

    def _hedged(self, call: HedgedCall, race: Raced | None = None) -> Response:
        """``call``'s first try (hedged, unless it may not be: then as without hedging), or
        the outcome of the ``race`` that took a quick first attempt over; then, when every
        attempt of the try failed retryably, the call's retries."""
        ended: Ended
        if race is None and not call.hedged:
            return self._attempts(call, None, call.wait)
        try:
            if race is not None:
                ended = race.outcome()
            else:
                if call.wait is not None:
                    self._pause(call.wait, call.closes)
                ended = self._hedged_try(call)
        except BaseException:  # a cancel, an interrupt, or the try's error handed over
            call.abandon()
            raise
        done, wait = ended
        if done is not None:
            return self._handed(call, done)
        return self._attempts(call, None, wait)
