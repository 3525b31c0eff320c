"""The one emitter: every log line the package writes about requests and breakers, and every
call of a hook.

The core, the guards and the breaker tell an :class:`Observer` what happened, as plain data
(the request, numbers, names); it decides what is worth a line at which
level, throttles repeated refusals, and hands a :class:`RetryEvent` to the hooks. A hook that
raises is logged and never breaks a request.
"""

from __future__ import annotations

import logging
import threading
import typing
import warnings
from collections.abc import Callable, Sequence
from typing import Final, Literal

from .._base.counting import PRUNE_AT, next_prune_at
from .._base.errors import LayeredRetriesWarning
from .._base.flavour import Request
from .._base.fork import track
from .._base.models import (
    CIRCUIT_OPEN,
    CLOSED,
    DISABLED,
    SUCCESS,
    THROTTLED,
    RetryEvent,
    RetryInfo,
    StopReason,
)
from .._wire.http import HEADER_LINES, origin as origin_of, redact_url

__all__ = ["REFUSAL_LOG_INTERVAL", "SDK_RETRY_COUNT", "SDK_RETRY_WINDOW", "RetryHook",
           "Observer", "emit", "logger", "sdk_retry_count"]

logger: Final = logging.getLogger("retry_transport")
# A library leaves output to the application: without logging configured, say nothing.
logger.addHandler(logging.NullHandler())

#: A hook: a plain function given each :class:`RetryEvent`. (``typing.Callable``, whose
#: alias can say that it lives in ``retry_transport``.)
RetryHook = typing.Callable[[RetryEvent], object]

#: Seconds between two WARNING lines for the same stop reason and origin, when requests are
#: refused a retry (budget exhausted, unsafe method, ...): the lines in between are counted.
REFUSAL_LOG_INTERVAL: Final = 10.0

#: (origin, value) pairs of malformed ``Retry-After`` values already logged: cleared when
#: this many are held, so the memory stays bounded whatever the servers send.
_IGNORED_MAX: Final = 1024



def emit(event: RetryEvent, hooks: Sequence[RetryHook]) -> None:
    """Give ``event`` to each hook; one that raises is logged and the others still run."""
    for hook in hooks:
        try:
            hook(event)
        except Exception:
            logger.warning("Retry hook %r raised on %s event", hook, event.kind, exc_info=True)


#: The request header in which the OpenAI and Anthropic SDKs number their own retries.
SDK_RETRY_COUNT: Final = "x-stainless-retry-count"
#: Seconds after a failure handed back during which an SDK's retry of it may come: the
#: OpenAI and Anthropic SDKs wait at most 60 s before one (a ``Retry-After`` they honour;
#: their own backoff stops at 8 s), and a few more for their own work.
SDK_RETRY_WINDOW: Final = 65.0
_SDK_RETRY_COUNT_KEY: Final = SDK_RETRY_COUNT.encode("ascii")


def sdk_retry_count(request: Request) -> str | None:
    """The value of ``request``'s ``x-stainless-retry-count`` (its first line), or ``None``:
    read from the lower-case names httpx and httpx2 keep (``_wire.http.items``), without
    ``Headers.get``, which raises and catches a ``KeyError`` when the header is absent."""
    lines = getattr(request.headers, HEADER_LINES, None)
    if type(lines) is not list:
        found: str | None = request.headers.get(SDK_RETRY_COUNT)
        return found
    for _, key, raw in lines:
        if key == _SDK_RETRY_COUNT_KEY:
            return raw.decode("latin-1")  # type: ignore[no-any-return]
    return None


def display(signal: str) -> str:
    """A signal's header name as logs spell it."""
    return "Retry-After" if signal == "retry-after" else signal


class Observer:
    """What one transport says about its requests: log lines and events for its hooks."""

    def __init__(self, hooks: tuple[RetryHook, ...], clock: Callable[[], float]) -> None:
        self.hooks = hooks
        self._clock = clock
        self._lock = threading.Lock()
        track(self, "_lock")  # a forked child gets a new lock
        # (stop reason, origin) -> [clock time of the last WARNING line, refusals since]
        self._refusals: dict[tuple[StopReason, str], list[float]] = {}
        self._prune_at = PRUNE_AT
        self._ignored: set[tuple[str, str]] = set()
        #: Whether the WARNING that an SDK retries above the transport was logged.
        self.layered = False

    def sdk_retries(self, request: Request) -> None:
        """The OpenAI and Anthropic SDKs number their own attempts in
        ``x-stainless-retry-count``: a value above 0 means the SDK retries above this
        transport, multiplying its attempts. Once per transport, a WARNING line and a
        :class:`LayeredRetriesWarning` say so (the line alone reaches no one without
        logging configured: the library's logger has only a ``NullHandler``). Called
        before anything of the request is started: a warning turned into an error
        (``-W error``) leaves nothing behind."""
        value = sdk_retry_count(request)
        if value is None or not value.isascii() or not value.isdigit() or not value.strip("0"):
            return  # no count, or 0 (read without int(): a number of any length)
        with self._lock:
            if self.layered:
                return
            self.layered = True
        message = (f"The SDK retries above this retry transport ({SDK_RETRY_COUNT}: "
                   f"{value[:20]}): each of its retries makes the transport's attempts "
                   "again. Turn the SDK's retries off (max_retries=0) and let the transport "
                   "retry.")
        logger.warning("%s", message)
        warnings.warn(message, LayeredRetriesWarning, stacklevel=2)

    def ignored_retry_after(self, origin: str, value: str) -> None:
        """A malformed ``Retry-After`` was ignored (the backoff applies): one DEBUG line per
        origin and value."""
        if not logger.isEnabledFor(logging.DEBUG):
            return
        key = (origin, value[:200])
        with self._lock:
            if key in self._ignored:
                return
            if len(self._ignored) >= _IGNORED_MAX:
                self._ignored.clear()
            self._ignored.add(key)
        logger.debug("Ignoring a malformed Retry-After from %s: %r (the backoff applies)",
                     origin, key[1])

    def retry(self, request: Request, attempt: int, of: int, wait: float,
              status: int | None, error: str | None, signal: str | None) -> None:
        """Attempt ``attempt`` (of at most ``of``) failed; the next one follows in ``wait``."""
        if not self.hooks and not logger.isEnabledFor(logging.INFO):
            return  # nothing to say, and no one to tell
        self._tell("retry", request, attempt, wait, status, error, signal,
                   "Retrying %s %s after %s (attempt %d of %d) in %.3f s",
                   status or error, attempt, of, wait)

    def cooldown(self, request: Request, origin: str, wait: float, signal: str) -> None:
        """A request waits ``wait`` seconds before its first attempt: ``origin`` cools down."""
        self._tell("cooldown", request, 0, wait, None, None, signal,
                   "Holding %s %s for %.3f s: %s asked for quiet (%s)",
                   wait, origin, display(signal))

    def hedge(self, request: Request, attempt: int, delay: float) -> None:
        """Attempt ``attempt`` goes while an earlier one is in flight (``delay``: the hedging
        delay in seconds): a DEBUG line and a ``hedge`` event."""
        log = logger.isEnabledFor(logging.DEBUG)
        if not log and not self.hooks:
            return
        method, url = request.method, redact_url(request.url)
        if log:
            logger.debug("Hedging %s %s: attempt %d sent while an earlier one is in flight "
                         "(delay %.3f s)", method, url, attempt, delay)
        if self.hooks:
            emit(RetryEvent("hedge", method, url, attempt, delay, None, None, None), self.hooks)

    def resume(self, request: Request, attempt: int, wait: float, status: int | None,
               error: str | None, resumed_at: int | str | None) -> None:
        """The body broke while being read (``error``) and attempt ``attempt`` resumes it
        from ``resumed_at`` after ``wait``: an INFO line and a ``resume`` event."""
        log = logger.isEnabledFor(logging.INFO)
        if not log and not self.hooks:
            return
        method, url = request.method, redact_url(request.url)
        if log:
            where = (f"byte {resumed_at}" if isinstance(resumed_at, int)
                     else f"event ID {resumed_at!r}")
            logger.info("Resuming %s %s from %s after %s (attempt %d) in %.3f s",
                        method, url, where, error, attempt, wait)
        if self.hooks:
            emit(RetryEvent("resume", method, url, attempt, wait, status, error, None,
                            resumed_at=resumed_at), self.hooks)

    def resume_ended(self, request: Request, info: RetryInfo, detail: str) -> None:
        """A broken body is not resumed (further): a WARNING line and a ``give_up`` event."""
        log = logger.isEnabledFor(logging.WARNING)
        if not log and not self.hooks:
            return
        method, url = request.method, redact_url(request.url)
        reason = info.stop_reason
        broken = next((a for a in reversed(info.history) if a.error is not None), None)
        error = broken.error if broken is not None else None
        if log:
            logger.warning("Not resuming %s %s after %d resumption(s): %s (%s: %s)",
                           method, url, info.resumes, error, reason.value, detail)
        if self.hooks:
            emit(RetryEvent("give_up", method, url, info.attempts, 0.0, None, error, reason),
                 self.hooks)

    def throttled(self, request: Request, attempt: int, extra: Sequence[RetryHook]) -> None:
        """Attempt ``attempt`` was refused by the origin's throttle: a ``throttled`` event
        for the transport's hooks and the throttle's own (``extra``). Its log line is the
        give-up's (one WARNING per origin, then a summary per interval), or none for a
        hedge that was not sent."""
        if not self.hooks and not extra:
            return
        event = RetryEvent("throttled", request.method, redact_url(request.url), attempt, 0.0,
                           None, None, THROTTLED)
        if self.hooks:
            emit(event, self.hooks)
        if extra:
            emit(event, extra)

    def _tell(self, kind: Literal["retry", "cooldown"], request: Request, attempt: int,
              wait: float, status: int | None, error: str | None, signal: str | None,
              message: str, *details: object) -> None:
        """An INFO line (the method and the redacted URL, then ``details``) and an event."""
        log = logger.isEnabledFor(logging.INFO)
        if not log and not self.hooks:
            return
        method, url = request.method, redact_url(request.url)
        if log:
            logger.info(message, method, url, *details)
        if self.hooks:
            emit(RetryEvent(kind, method, url, attempt, wait, status, error, None, signal),
                 self.hooks)

    def finish(self, request: Request, info: RetryInfo, gave_up: bool,
               detail: str | None = None) -> None:
        """A request ended after retries, or unsuccessfully instead of one (``gave_up``);
        ``detail``: why a rule stopped it (the refused wait and its limit), for the line."""
        reason = info.stop_reason
        method = request.method
        if reason is SUCCESS:
            if logger.isEnabledFor(logging.INFO):
                url = redact_url(request.url)
                logger.info("%s %s succeeded after %d attempts", method, url, info.attempts)
            return
        last = info.history[-1] if info.history else None
        outcome: object = (last.status or last.error) if last is not None else "no attempt"
        why = reason.value if detail is None else f"{reason.value}: {detail}"
        if reason is THROTTLED:
            level = logging.WARNING  # the throttle sheds load: never a line per refusal
        elif reason is CLOSED:
            level = logging.INFO  # the application closed the transport: no failure
        elif info.retries > 0:
            level = logging.ERROR
        elif reason is DISABLED or (reason is CIRCUIT_OPEN and info.attempts == 0):
            level = logging.DEBUG  # refused by an open breaker: its transition was logged
        else:
            level = logging.WARNING
        log = logger.isEnabledFor(level)
        if not log and not self.hooks:
            return
        url = redact_url(request.url)
        if log:
            if level == logging.WARNING:
                self._refusal(method, url, origin_of(request.url), reason, info.attempts,
                              outcome, why)
            else:
                logger.log(
                    level,
                    "Giving up on %s %s after %d attempt(s): %s (%s)",
                    method, url, info.attempts, outcome, why,
                )
        if gave_up and self.hooks:
            emit(RetryEvent(
                "give_up", method, url, info.attempts, 0.0,
                last.status if last else None, last.error if last else None, reason,
                refused_wait=last.refused_wait if last else None,
            ), self.hooks)

    def breaker(self, kinds: Sequence[str], request: Request, origin: str, attempt: int,
                opened_for: float, status: int | None, error: str | None,
                breaker_hooks: tuple[RetryHook, ...]) -> None:
        """One line and one event per transition of ``origin``'s breaker, to this
        transport's hooks and the breaker's own (never one per refused request)."""
        method, url = request.method, redact_url(request.url)
        for kind in kinds:
            wait = opened_for if kind == "breaker_open" else 0.0
            if kind == "breaker_open":
                logger.warning(
                    "Circuit breaker opened for %s after %s: no request is sent for %.3f s",
                    origin, status or error or "failures", wait,
                )
            elif kind == "breaker_close":
                logger.info("Circuit breaker closed for %s: it answered a probe", origin)
            else:
                logger.info("Circuit breaker half-open for %s: sending a probe", origin)
            event = RetryEvent(kind, method, url, attempt, wait, status, error, None)  # type: ignore[arg-type]
            emit(event, self.hooks + breaker_hooks)

    def _refusal(self, method: str, url: str, origin: str, reason: StopReason, attempts: int,
                 outcome: object, why: str) -> None:
        """A retryable failure refused without a retry: the first per stop reason and origin
        is logged, then at most one line per ``REFUSAL_LOG_INTERVAL`` seconds with the count
        since the last line (an outage would otherwise log one WARNING per request)."""
        key = (reason, origin)
        now = self._clock()
        summaries: list[tuple[tuple[StopReason, str], list[float]]] = []
        with self._lock:
            entry = self._refusals.get(key)
            count, since = 0, 0.0
            if entry is None:
                if len(self._refusals) >= self._prune_at:
                    summaries = self._prune(now)
                self._refusals[key] = [now, 0]
            else:
                entry[1] += 1
                if now - entry[0] < REFUSAL_LOG_INTERVAL:
                    return
                count, since = int(entry[1]), now - entry[0]
                entry[0], entry[1] = now, 0
        for (old_reason, old_origin), (at, old_count) in summaries:
            _more(int(old_count), old_origin, now - at, old_reason)
        if count == 0:
            logger.warning(
                "Giving up on %s %s after %d attempt(s): %s (%s)",
                method, url, attempts, outcome, why,
            )
        else:
            _more(count, origin, since, reason)

    def _prune(self, now: float) -> list[tuple[tuple[StopReason, str], list[float]]]:
        """Forget the (reason, origin) pairs whose last line is older than the interval
        (under the lock), so the table follows the origins refused lately; returns those
        that still had refusals to report, for one line each now."""
        table = self._refusals
        reported = []
        for key, entry in list(table.items()):
            if now - entry[0] >= REFUSAL_LOG_INTERVAL:
                del table[key]
                if entry[1]:
                    reported.append((key, entry))
        self._prune_at = next_prune_at(len(table))
        return reported


def _more(count: int, origin: str, since: float, reason: StopReason) -> None:
    logger.warning(
        "Gave up on %d more request(s) to %s without a retry in the last %.0f s (%s)",
        count, origin, since, reason.value,
    )


def learned(kind: str, origin: str, remaining: float, break_for: float,
            hooks: tuple[RetryHook, ...]) -> None:
    """A breaker learned a transition of ``origin`` from its store: an INFO line, and a
    ``learned`` event for the breaker's hooks."""
    if kind == "open":
        logger.info(
            "Circuit breaker opened for %s by another member of its store: no request "
            "is sent for %.3f s", origin, remaining,
        )
    else:
        logger.info(
            "Circuit breaker closed for %s by another member of its store: it answered "
            "a probe", origin,
        )
    emit(RetryEvent(
        "breaker_open" if kind == "open" else "breaker_close", "", origin, 0,
        break_for if kind == "open" else 0.0, None, None, None, learned=True,
    ), hooks)
