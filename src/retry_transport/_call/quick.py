"""The quick path: most requests are sent once and answered with a final answer.

For them the drivers make no :class:`~._call.core.RetryCall`: the transport's
:class:`QuickPath` says whether the first attempt goes as it is, counting the request when
so (:meth:`QuickPath.counted_first`), and whether what came back ends the request
(:meth:`QuickPath.ends`). Anything else (an error, a response that is not final at once) is
handed to ``RetryCall(controller, request, quick=True)``, which takes over from that outcome.

An SDK that retries above the transport (``x-stainless-retry-count``) is looked for without
a header read on the quick path: an SDK retries only what the transport handed back, a
failure. So a failure handed back for a request that carries the SDK's count turns the quick
path's watch on (:meth:`QuickPath.failed`): for ``SDK_RETRY_WINDOW`` seconds, each request's
count is read as it starts (``sends_as_is`` is off meanwhile, which the quick path reads
anyway), until one shows the SDK's retry or the window ends. A request the quick path does
not send as it is has its count read as its call starts (``RetryCall``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .._base.flavour import Request, Response
from .._base.models import RetryInfo
from .._guards.seam import Guard
from .._policy import testmode
from .._policy.deadlines import current as ambient_scope
from .._policy.observe import SDK_RETRY_WINDOW, Observer, sdk_retry_count
from .._policy.policy import RetryPolicy
from .._policy.rules import Outcome, final_at_once
from .._wire.http import attach

__all__ = ["QuickPath"]


class QuickPath:
    """What the quick path reads of a transport, gathered once when the transport is built:
    the guards' idle tickets and who settles them, and whether the transport's own settings
    let a first attempt go as it is."""

    __slots__ = ("_as_is", "_clock", "_final", "_final_pairs", "_observer", "_policy",
                 "_requests", "_watch_until", "guards", "may_wake", "reads_quotas",
                 "sends_as_is", "success_counts", "tickets", "uncounted")

    def __init__(self, guards: tuple[Guard, ...], policy: RetryPolicy, *, sends_as_is: bool,
                 reads_quotas: bool, requests: Iterator[int],
                 final_pairs: dict[int, tuple[RetryInfo, Outcome]],
                 final: Callable[[int], tuple[RetryInfo, Outcome]],
                 observer: Observer, clock: Callable[[], float]) -> None:
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
        #: add, no deadline to clip timeouts by, no body to read before handing it over;
        #: off too while the quick path watches for an SDK's retry (see the module).
        self.sends_as_is = sends_as_is
        self._as_is = sends_as_is  # the settings' own answer
        self._observer = observer
        self._clock = clock
        self._watch_until = 0.0  # the end of the watch, on ``clock``
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
        if not self.sends_as_is:
            if not self._as_is:
                return False
            self._watch(request)  # a failure was handed back lately
        if (
            testmode.active is not None
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
            self.failed(request)
        return True

    # -- an SDK retrying above the transport -------------------------------------------

    def failed(self, request: Request) -> None:
        """A failure was handed back for ``request`` (a status of 400 or more, or an
        exception): when it carries an SDK's retry count, the SDK may retry it, and the
        retry may be answered at once on the quick path; each request of the next
        ``SDK_RETRY_WINDOW`` seconds has its count read as it starts. Nothing to do once
        the transport has warned, or when every request leaves the quick path (each is
        read as it starts)."""
        if not self._as_is or self._observer.layered:
            return
        if sdk_retry_count(request) is None:
            return  # no SDK's request: none of its retries to look for
        self._watch_until = self._clock() + SDK_RETRY_WINDOW
        self.sends_as_is = False

    def _watch(self, request: Request) -> None:
        """While the quick path watches: ``request``'s count told to the observer (which
        warns once per transport), until the window is over or it has warned. (Two
        threads arming and ending a watch at once may lose a window, never the quick
        path: a watch left on ends with its window.)"""
        observer = self._observer
        if observer.layered or self._clock() >= self._watch_until:
            self.sends_as_is = True  # nothing more to look for
            return
        observer.sdk_retries(request)
