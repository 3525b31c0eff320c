"""The quick path: most requests are sent once and answered with a final answer.

For them the drivers make no :class:`~._call.core.RetryCall`: the transport's
:class:`QuickPath` says whether the first attempt goes as it is, counting the request when
so (:meth:`QuickPath.counted_first`), and whether what came back ends the request
(:meth:`QuickPath.ends`). Anything else (an error, a response that is not final at once) is
handed to ``RetryCall(controller, request, quick=True)``, which takes over from that outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .._guards.seam import Guard
from .._leaves.flavour import Request, Response
from .._leaves.models import RetryInfo
from .._meaning import testmode
from .._meaning.deadlines import current as ambient_scope
from .._meaning.policy import RetryPolicy
from .._meaning.rules import Outcome, final_at_once
from .._wire.http import attach

__all__ = ["QuickPath"]


class QuickPath:
    """What the quick path reads of a transport, gathered once when the transport is built:
    the guards' idle tickets and who settles them, and whether the transport's own settings
    let a first attempt go as it is."""

    __slots__ = ("_final", "_final_pairs", "_policy", "_requests", "guards", "may_wake",
                 "reads_quotas", "sends_as_is", "success_counts", "tickets", "uncounted")

    def __init__(self, guards: tuple[Guard, ...], policy: RetryPolicy, *, sends_as_is: bool,
                 reads_quotas: bool, requests: Iterator[int],
                 final_pairs: dict[int, tuple[RetryInfo, Outcome]],
                 final: Callable[[int], tuple[RetryInfo, Outcome]]) -> None:
        #: The tickets of a first attempt while every guard is idle: (guard, its idle ticket).
        self.tickets: tuple[tuple[Guard, object], ...] = tuple(
            (guard, guard.idle_ticket) for guard in guards if guard.idle_ticket is not None)
        #: The guards that give such a ticket, in admission order.
        self.guards: tuple[Guard, ...] = tuple(guard for guard, _ in self.tickets)
        #: For a success at once: the guards' success_counts, and the guards without one.
        self.success_counts: tuple[Callable[[], object], ...] = tuple(
            guard.count_success for guard in self.guards if guard.count_success is not None)
        self.uncounted: tuple[Guard, ...] = tuple(
            guard for guard in self.guards if guard.count_success is None)
        #: The guards that may stop being idle (a class-level ``idle = True`` never does).
        self.may_wake: tuple[Guard, ...] = tuple(
            guard for guard in guards if getattr(type(guard), "idle", None) is not True)
        #: Whether the transport's settings let a first attempt go as it is: no header to
        #: add, no deadline to clip timeouts by, no body to read before handing it over.
        self.sends_as_is = sends_as_is
        #: Whether an answer's headers are looked at for an exhausted rate-limit quota.
        self.reads_quotas = reads_quotas
        self._policy = policy
        self._requests = requests
        self._final_pairs = final_pairs
        self._final = final

    def counted_first(self, request: Request) -> bool:
        """Whether ``request``'s first attempt goes as it is, the guards' idle tickets given
        (the transport's own policy: no override, no testing mode, no ambient deadline;
        every guard idle, or idle for this request); the request is counted when so."""
        if (
            not self.sends_as_is
            or testmode.active is not None
            or request.extensions.get("retry") is not None
            or ambient_scope() is not None
        ):
            return False
        for guard in self.may_wake:
            if not guard.idle and not guard.idle_for(request):
                return False
        next(self._requests)
        return True

    def ends(self, request: Request, response: Response) -> bool:
        """After a quick first attempt: whether ``response`` ends the request at once; if
        so, its metadata is attached and the idle tickets are settled with its outcome."""
        status = response.status_code
        if not final_at_once(response, status, self._policy, self.reads_quotas):
            return False
        info, outcome = self._final_pairs.get(status) or self._final(status)
        try:  # attach()'s usual case, without the call
            response.extensions["retry"] = info
        except TypeError:  # a mapping that cannot be written to: attach() replaces it
            attach(response, info)
        if outcome.success:
            for count in self.success_counts:
                count()
            for guard in self.uncounted:
                guard.settle_idle(request, outcome)
        else:
            for guard in self.guards:
                guard.settle_idle(request, outcome)
        return True
