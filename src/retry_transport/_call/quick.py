"""The quick path: most requests are sent once and answered with a final answer.

For them the drivers make no :class:`~._call.core.RetryCall`: the transport's
:class:`QuickPath` says whether the first attempt goes as it is, counting the request when
so (:meth:`QuickPath.first`, which also says whether to time it), and whether what came
back ends the request (:meth:`QuickPath.ends`). Anything else (an error, a response that
is not final at once) is handed to ``RetryCall(controller, request, quick=True)``, which
takes over from that outcome.

**Built for the configuration.** What a success checks is chosen once, when the transport
is built, from what it has: ``first`` and ``ends`` are bound to the variant that checks
only that. A transport whose guards can never stop being idle (no guard, or only the
budget) does not look at them before the first attempt; one that reads no header of a
final answer (no rate-limit quotas read, no server's verdict) does not scan them; one with
nothing to count or settle on a success does not loop over an empty tuple. Settings that
keep every first attempt off the quick path (a deadline, a header to add, a body to read,
resumable bodies) leave it closed for good: ``first`` answers ``None`` at once. With
``retry_event``, ``ends`` never takes a ``2xx`` event stream as final: its call judges its
first events (``inband``).

**Timing.** Each origin's latency is recorded for a random ``LATENCY_SAMPLE`` of the
attempts (every attempt when a percentile of it sets the hedging delay). The quick path
draws the sample from the request's own count: ``first`` answers with the seeded pattern's
value at that count, so that deciding whether to time a request costs one look-up.

**Closed, then open.** The quick path opens after the transport's first request, whose
library is checked on its call's way (a request of the other HTTP library is refused there,
never on the quick path).

An SDK that retries above the transport (``x-stainless-retry-count``) is looked for without
a header read on the quick path: an SDK retries only what the transport handed back, a
failure. So a failure handed back for a request that carries the SDK's count turns the quick
path's watch on (:meth:`QuickPath.failed`): for ``SDK_RETRY_WINDOW`` seconds, each request's
count is read as it starts: the quick path is closed meanwhile (which ``first`` reads
anyway), so each request goes by its call, which reads the count as it starts
(``RetryCall``), until one shows the SDK's retry or the window ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from .._base.flavour import Request, Response
from .._base.models import RetryInfo
from .._guards.seam import Guard
from .._policy import testmode
from .._policy.deadlines import current as ambient_scope
from .._policy.observe import SDK_RETRY_WINDOW, Observer, sdk_retry_count
from .._policy.policy import RetryPolicy
from .._policy.rules import Outcome, never_final_at_once, signal_free
from .._wire.http import HEADER_LINES, SIGNAL_FREE, attach
from .inband import judged

__all__ = ["SAMPLE_MASK", "QuickPath"]

#: The sample pattern's length less one: a power of two, so a count is reduced by a mask.
SAMPLE_MASK = 4095


class QuickPath:
    """What the quick path reads of a transport, gathered once when the transport is built:
    the guards' idle tickets and who settles them, and whether the transport's own settings
    let a first attempt go as it is. ``first`` and ``ends`` are the variants this
    configuration needs (see the module)."""

    __slots__ = ("_as_is", "_clock", "_events", "_final", "_final_pairs", "_never",
                 "_observer", "_requests", "_sample", "_watch_until", "counts", "ends", "first",
                 "guards", "open", "reads_quotas", "settles", "source", "tickets", "wakers")

    def __init__(self, guards: tuple[Guard, ...], policy: RetryPolicy, *, sends_as_is: bool,
                 reads_quotas: bool, requests: Iterator[int], sample: tuple[bool, ...],
                 final_pairs: Mapping[int, tuple[RetryInfo, Outcome]],
                 final: Callable[[int], tuple[RetryInfo, Outcome]],
                 observer: Observer, clock: Callable[[], float]) -> None:
        #: The tickets of a first attempt while every guard is idle: (guard, its idle ticket).
        self.tickets: tuple[tuple[Guard, object], ...] = tuple(
            (guard, guard.idle_ticket) for guard in guards if guard.idle_ticket is not None)
        #: The guards that give such a ticket, in admission order.
        self.guards: tuple[Guard, ...] = tuple(guard for guard, _ in self.tickets)
        #: For a success at once: the guards' ``count_success``, and the guards without one
        #: (each settled with the request).
        self.counts: tuple[Callable[[], object], ...] = tuple(
            guard.count_success for guard in self.guards if guard.count_success is not None)
        self.settles: tuple[Guard, ...] = tuple(
            guard for guard in self.guards if guard.count_success is None)
        #: The guards that may stop being idle (a class-level ``idle = True`` never does).
        self.wakers: tuple[Guard, ...] = tuple(
            guard for guard in guards if getattr(type(guard), "idle", None) is not True)
        #: Whether a first attempt may go as it is now: never with settings that keep it
        #: off the quick path; not before the transport's first request, nor while the
        #: quick path watches for an SDK's retry (see the module).
        self.open = False
        self._as_is = sends_as_is  # the settings' own answer
        self._observer = observer
        self._clock = clock
        self._watch_until = 0.0  # the end of the watch, on ``clock``
        #: Whether an answer's headers are looked at for an exhausted rate-limit quota.
        self.reads_quotas = reads_quotas
        self._requests = requests
        self._sample = sample
        self._final_pairs = final_pairs
        self._final = final
        #: The statuses whose answer is never final at once (``never_final_at_once``).
        self._never = never_final_at_once(policy, reads_quotas)
        self._events = policy.retry_event is not None  # a 2xx event stream is judged
        #: The source of ``first`` and ``ends``, as composed for this configuration.
        self.source = ""
        self.first: Callable[[Request], bool | None]
        self.ends: Callable[[Request, Response], bool]
        self._compose()

    def opened(self) -> None:
        """The transport's first request was checked: the quick path opens, if the
        settings let first attempts go as they are."""
        self.open = self._as_is

    def _compose(self) -> None:
        """Write ``first`` and ``ends`` for this configuration, each one function with
        only the checks and the counts it needs (see the module), and compile them.

        ``first(request)``: whether the first attempt goes as it is (the transport's own
        policy: no override, no testing mode, no ambient deadline; each guard that may stop
        being idle is idle, or idle for this request), counted when so: ``None`` if not,
        else whether to time it (the sample at the request's count).

        ``ends(request, response)``: after a quick first attempt, whether ``response`` ends
        the request at once (a status the quick path may take as final, and with
        ``reads_quotas`` no header that may carry a signal); if so, its metadata is
        attached and the idle tickets are settled with its outcome (a success counted by
        the guards that count one, the others told the request)."""
        names: dict[str, object] = {
            "quick": self, "testmode": testmode, "ambient": ambient_scope,
            "requests": self._requests, "sample": self._sample, "MASK": SAMPLE_MASK,
            "never": self._never, "pairs": self._final_pairs, "final": self._final,
            "attach": attach, "signal_free": signal_free,
        }
        first = [
            "def first(request):",
            "    if (not quick.open or testmode.active is not None",
            "            or 'retry' in request.extensions or ambient() is not None):",
            "        return quick._closed(request)",
        ]
        for index, guard in enumerate(self.wakers):
            names[f"waker{index}"] = guard
            first.append(f"    if not waker{index}.idle and not waker{index}.idle_for(request):")
            first.append("        return None")
        first.append("    return sample[next(requests) & MASK]")
        ends = [
            "def ends(request, response):",
            "    status = response.status_code",
            "    if status in never:",
            "        return False",
        ]
        if self._events:  # judged by its call (``inband``)
            names["judged"] = judged
            ends += ["    if 200 <= status < 300 and judged(response):", "        return False"]
        if self.reads_quotas:  # signal_free(), called only for a name it may have to judge
            names["free"] = SIGNAL_FREE
            ends += [
                "    try:",
                f"        for _, key, _ in response.headers.{HEADER_LINES}:",
                "            if key not in free:",
                "                if not signal_free(response):",
                "                    return False",
                "                break",
                "    except (AttributeError, TypeError, ValueError):  # headers of another make",
                "        if not signal_free(response):",
                "            return False",
            ]
        ends += [
            "    try:",
            "        pair = pairs[status]",
            "    except KeyError:  # the status's first answer",
            "        pair = final(status)",
            "    try:  # attach()'s usual case, without the call",
            "        response.extensions['retry'] = pair[0]",
            "    except TypeError:  # a mapping that cannot be written to: attach() replaces it",
            "        attach(response, pair[0])",
            "    if pair[1].success:",
        ]
        success = []
        for index, count in enumerate(self.counts):
            names[f"count{index}"] = count
            success.append(f"        count{index}()")
        for index, guard in enumerate(self.settles):
            names[f"settles{index}"] = guard
            success.append(f"        settles{index}.settle_idle(request, pair[1])")
        ends.extend(success or ["        return True"])
        if success:
            ends.append("        return True")
        for index, guard in enumerate(self.guards):
            names[f"guard{index}"] = guard
            ends.append(f"    guard{index}.settle_idle(request, pair[1])")
        ends += ["    quick.failed(request)", "    return True"]
        self.source = "\n".join(first + [""] + ends) + "\n"
        exec(compile(self.source, "<retry_transport quick path>", "exec"), names)
        self.first = names["first"]  # type: ignore[assignment]
        self.ends = names["ends"]  # type: ignore[assignment]

    # -- before the first attempt --------------------------------------------------------

    def _closed(self, request: Request) -> bool | None:
        """``first`` when a check failed: ``None``, unless the quick path was closed only
        for the SDK's watch and the watch is over: it opens again, and the first attempt
        is asked again. (While the watch lasts, each request goes by its call, which reads
        the SDK's count as it starts.)"""
        if self.open or not self._as_is or self._watch_until == 0.0:
            return None  # closed by a check, by the settings, or before the first request
        if self._observer.layered or self._clock() >= self._watch_until:
            self._watch_until = 0.0
            self.open = True  # nothing more to look for
            return self.first(request)
        return None

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
        self.open = False  # (two threads arming and ending a watch at once may lose a
        # window, never the quick path: a watch left on ends with its window)

