"""The sans-I/O decision core shared by the sync and async transports of both flavours.

Nothing here sends, sleeps or reads a clock or a random source of its own: the drivers
(``_drivers.py``) do the I/O and the sleeping, and the clock, wall clock and random
generator are injected. No HTTP library is imported either: what the decisions need from
httpx or httpx2 (which errors a retry may fix, which bodies can be replayed) comes from the
transport's :class:`~._flavour.Flavour`. A driver runs one :class:`RetryCall` per request:

    call = RetryCall(controller, request)   # may raise ValueError (bad override)
    wait = call.start()                     # cooldown wait; may raise CooldownError
    loop:
        sleep(wait) if wait is not None
        send call.attempt_request()
        wait = call.on_response(response)   # or call.on_error(exc)
        None -> hand the response over (or re-raise the exception): metadata attached
        else -> close the response, sleep ``wait`` seconds, try again

Rules of the decision, in the order they are checked (first match wins):

1. The outcome is not retryable: a status outside ``retry_statuses`` (``success`` below
   400, else ``not_retryable``) unless the server says ``x-should-retry: true``; a
   retryable status the server declines with ``x-should-retry: false``
   (``server_declined``); or an error that a retry cannot fix (``not_retryable``).
2. The request may not be retried: disabled per request (``disabled``); a method outside
   ``retry_methods`` without an idempotency key (``unsafe_method``; with
   ``trust_should_retry``, the server's ``x-should-retry: true`` stands in for the key); a
   body that cannot be sent again (``body_not_replayable``). Failures that prove the server
   never received the request (connect errors and timeouts, pool timeouts) skip the method
   and body checks: nothing was sent, so nothing can be duplicated and the body was not
   consumed.
3. ``max_attempts`` is reached.
4. The wait is too long: the server's time (``retry-after-ms``, else ``Retry-After``, else
   the reset of an exhausted rate-limit quota) above ``max_retry_after``
   (``retry_after_too_long``), or a wait ending past the deadline (``deadline``).
5. The retry budget cannot pay for the retry (``budget_exhausted``). Checked last, so no
   tokens are spent on a retry another rule stops.
"""

from __future__ import annotations

import heapq
import inspect
import io
import itertools
import logging
import random
import re
import ssl
import sysconfig
import threading
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, NoReturn

from . import testing as _testing
from ._breaker import CircuitBreaker
from ._budget import RetryBudget
from ._flavour import URL, Flavour, Request, Response
from ._models import Attempt, RetryEvent, RetryInfo, RetryStats, StopReason
from ._policy import RetryPolicy, compute_backoff
from ._retry_after import parse_retry_after
from ._signals import exhausted_quota, parse_retry_after_ms, parse_should_retry
from ._store import MemoryStore

__all__ = ["Controller", "RetryCall", "RetryHook", "redact_url", "retry_info"]

logger: Final = logging.getLogger("retry_transport")
# A library leaves output to the application: without logging configured, say nothing.
logger.addHandler(logging.NullHandler())

RetryHook = Callable[[RetryEvent], object]

#: Statuses whose ``Retry-After`` starts a cooldown for the whole origin.
COOLDOWN_STATUSES: Final = frozenset({429, 503})

#: A discarded response whose declared body is at most this many bytes is read to the end
#: before it is closed, so its keep-alive connection goes back to the pool instead of being
#: torn down (a retry storm should not add connection handshakes to the load).
DRAIN_MAX_BYTES: Final = 64 * 1024
#: ... and draining it takes at most this many seconds: a body that trickles in (each chunk
#: just inside the read timeout) is dropped with its connection instead of holding the retry.
DRAIN_MAX_SECONDS: Final = 0.25

#: Seconds between two WARNING lines for the same stop reason and origin, when requests are
#: refused a retry (budget exhausted, unsafe method, ...): the lines in between are counted.
REFUSAL_LOG_INTERVAL: Final = 10.0

_INFO_ATTRIBUTE: Final = "_retry_transport_info"

# Enum attribute look-ups are slow (Python 3.11): the decisions use these module constants.
SUCCESS: Final = StopReason.SUCCESS
NOT_RETRYABLE: Final = StopReason.NOT_RETRYABLE
SERVER_DECLINED: Final = StopReason.SERVER_DECLINED
DISABLED: Final = StopReason.DISABLED
UNSAFE_METHOD: Final = StopReason.UNSAFE_METHOD
BODY_NOT_REPLAYABLE: Final = StopReason.BODY_NOT_REPLAYABLE
MAX_ATTEMPTS: Final = StopReason.MAX_ATTEMPTS
RETRY_AFTER_TOO_LONG: Final = StopReason.RETRY_AFTER_TOO_LONG
DEADLINE: Final = StopReason.DEADLINE
BUDGET_EXHAUSTED: Final = StopReason.BUDGET_EXHAUSTED
CIRCUIT_OPEN: Final = StopReason.CIRCUIT_OPEN
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class _LockedCount(Iterator[int]):
    """``itertools.count`` with a lock, for interpreters without a GIL to make it atomic."""

    def __init__(self) -> None:
        self._value = 0
        self._lock = threading.Lock()

    def __iter__(self) -> _LockedCount:
        return self

    def __next__(self) -> int:
        with self._lock:
            value = self._value
            self._value += 1
        return value


def _counter() -> Iterator[int]:
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return _LockedCount()
    return itertools.count()


#: Metadata of exceptions that refuse new attributes (frozen dataclasses, ``__slots__``),
#: by ``id``: kept beside the exception while it lives, never set on it.
_side_infos: dict[int, tuple[weakref.ref[BaseException], RetryInfo]] = {}


def _remember(exc: BaseException, info: RetryInfo) -> None:
    """Attach ``info`` to ``exc``, on it when it allows, beside it otherwise."""
    try:
        setattr(exc, _INFO_ATTRIBUTE, info)
        return
    except Exception:  # FrozenInstanceError, AttributeError from __slots__, anything
        pass
    key = id(exc)

    def forget(_: object, key: int = key) -> None:
        _side_infos.pop(key, None)

    try:
        _side_infos[key] = (weakref.ref(exc, forget), info)
    except TypeError:  # an exception type without weak references: nothing is kept
        pass


def _add_note(exc: BaseException, note: str) -> None:
    add_note = getattr(exc, "add_note", None)  # Python 3.11+
    if add_note is None:
        return
    try:
        add_note(note)
    except Exception:  # an exception that refuses __notes__ goes without the note
        pass


def retry_info(obj: object) -> RetryInfo | None:
    """Return the :class:`RetryInfo` of a response or of an exception raised by a transport.

    Returns ``None`` for anything the transports did not handle.
    """
    if isinstance(obj, BaseException):
        info = getattr(obj, _INFO_ATTRIBUTE, None)
        if info is None:
            entry = _side_infos.get(id(obj))
            if entry is not None and entry[0]() is obj:
                info = entry[1]
    else:  # a response of either flavour: the record is in its extensions
        extensions = getattr(obj, "extensions", None)
        info = extensions.get("retry") if isinstance(extensions, Mapping) else None
    return info if isinstance(info, RetryInfo) else None


#: Path parameters (``;jsessionid=...``) in a path segment: dropped from logged URLs.
_PATH_PARAMETERS: Final = re.compile(r";[^/]*")


def redact_url(url: URL) -> str:
    """The URL without userinfo, path parameters, query string and fragment, which may
    hold secrets."""
    path = url.raw_path.split(b"?", 1)[0].decode("ascii")
    if ";" in path:
        path = _PATH_PARAMETERS.sub("", path)
    return f"{url.scheme}://{url.netloc.decode('ascii')}{path}"


#: Origins already spelt out, by (scheme, raw host, port): a request to a cooling table
#: looks its origin up rather than formatting it. Bounded: cleared when full.
_ORIGINS: dict[tuple[str, bytes, int | None], str] = {}
_ORIGINS_MAX: Final = 4096


def _origin(url: URL) -> str:
    """``scheme://host:port``, the port spelt out (IPv6 hosts in brackets)."""
    key = (url.scheme, url.raw_host, url.port)
    origin = _ORIGINS.get(key)
    if origin is None:
        host = f"[{url.host}]" if ":" in url.host else url.host
        port = url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)
        origin = f"{url.scheme}://{host}:{port}"
        if len(_ORIGINS) >= _ORIGINS_MAX:
            _ORIGINS.clear()
        _ORIGINS[key] = origin
    return origin


def _length(response: Response) -> int | None:
    """The declared body length, or ``None`` when absent or malformed."""
    value = _header(response, b"content-length")
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() else None


def _rewinds(file: object) -> bool:
    """Whether a file object provably goes back to its start, as httpx rewinds it before
    each send: it says it is seekable, and a trial rewind to 0 works (httpx itself
    swallows a failed rewind, and would send an empty or partial part)."""
    seekable = getattr(file, "seekable", None)
    if not callable(seekable):
        return False
    try:
        if seekable() is not True:
            return False
        file.seek(0)  # type: ignore[attr-defined]
        return bool(file.tell() == 0)  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return False


def _replayable(stream: object, flavour: Flavour) -> bool:
    """Whether a request body can be sent again, judged before each retry."""
    if isinstance(stream, flavour.byte_stream):  # bytes, str, form, JSON, or a read() body
        return True
    fields = getattr(stream, "fields", None)
    if type(stream).__name__ == "MultipartStream" and isinstance(fields, list):
        for item in fields:
            file = getattr(item, "file", None)
            if file is None or isinstance(file, (str, bytes)):
                continue
            if not _rewinds(file):
                return False
        return True
    return False


#: How deep an exception's cause chain is searched for a certificate failure.
_CAUSE_DEPTH: Final = 8


def _permanent(exc: BaseException) -> bool:
    """Whether a transport error is one no retry can fix: a TLS certificate that failed
    verification (the next handshake meets the same certificate)."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < _CAUSE_DEPTH:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return False


def _clipped_timeouts(current: object, remaining: float) -> dict[str, float]:
    """httpx timeouts (connect, read, write, pool) that all end within ``remaining`` seconds."""
    remaining = max(remaining, 0.001)
    timeouts: dict[str, float] = {}
    for key in ("connect", "read", "write", "pool"):
        value = current.get(key) if isinstance(current, Mapping) else None
        timeouts[key] = remaining if value is None else min(value, remaining)
    return timeouts


class Controller:
    """The state one transport keeps across requests: policy, budget, cooldowns, counters."""

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        flavour: Flavour,
        budget: RetryBudget | None,
        cooldown: bool,
        hooks: Sequence[RetryHook],
        rng: random.Random,
        clock: Callable[[], float],
        wallclock: Callable[[], float],
        contact: str | None = None,
        auto_idempotency_key: bool = False,
        breaker: CircuitBreaker | None = None,
        attempt_header: str | None = None,
        store: MemoryStore | None = None,
    ) -> None:
        self.policy = policy
        self.attempt_header = attempt_header
        self.breaker = breaker
        self.flavour = flavour
        self.budget = budget
        self.cooldown = cooldown
        self.hooks = tuple(hooks)
        self.rng = rng
        self.clock = clock
        self.wallclock = wallclock
        self.contact = contact
        self.auto_idempotency_key = auto_idempotency_key
        # origin -> clock time until which it asked for quiet
        self.cooldowns: dict[str, float] = {}
        # origin -> the header that started its cooldown ("retry-after", a rate-limit reset)
        self.cooldown_signals: dict[str, str] = {}
        # (until, origin), soonest first: expires cooldowns without scanning the table.
        self._expiry: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        # Counters bumped with next(), which the GIL makes atomic, so the hot path takes no
        # lock; stats() draws from them too (under the lock) and subtracts its own draws.
        self.request_counter = _counter()
        self._retries = _counter()
        self._draws = 0
        self._gave_up: dict[StopReason, int] = {}
        # (stop reason, origin) -> [clock time of the last WARNING line, refusals since]
        self._refusals: dict[tuple[StopReason, str], list[float]] = {}  # [time, count]
        # RetryInfo of a first-attempt outcome that is not retried, by status: immutable,
        # so one object serves every such response.
        self.single_infos: dict[int, RetryInfo] = {}
        # Cooldowns other members of the store started, in wall-clock time: origin ->
        # (until, signal), the latest per origin, so an idle transport's inbox stays as
        # small as the store's table. Filled by whichever thread delivers them, emptied by
        # the next request, which turns them into this transport's clock (an event loop's).
        self.inbox: dict[str, tuple[float, str]] = {}
        self._inbox_lock = threading.Lock()
        self.store = store if cooldown else None
        if self.store is not None:
            self.store._join_cooldowns(self)

    # -- per request -------------------------------------------------------------------

    def prepare(self, request: Request, policy: RetryPolicy) -> None:
        """Add the headers a polite client sends: ``From`` and an idempotency key."""
        if self.contact is not None and "from" not in request.headers:
            request.headers["From"] = self.contact
        header = policy.idempotency_header
        if (
            self.auto_idempotency_key
            and header
            and request.method not in policy.retry_methods
            and not request.headers.get(header, "").strip()
        ):
            request.headers[header] = f'"{uuid.uuid4()}"'

    def single_info(self, status: int) -> RetryInfo:
        """The metadata of a first-attempt outcome that is not retried (shared, immutable)."""
        info = self.single_infos.get(status)
        if info is None:
            reason = SUCCESS if status < 400 else NOT_RETRYABLE
            info = RetryInfo(1, 0, (Attempt(status, None, None, 0.0),), 0.0, reason)
            self.single_infos[status] = info
        return info

    # -- cooldowns ---------------------------------------------------------------------

    def cooldown_left(self, origin: str, now: float) -> float:
        """Seconds of quiet ``origin`` still asks for (0.0: none). O(log n) at worst."""
        expiry = self._expiry
        if expiry and expiry[0][0] <= now:
            self._expire(now)
        until = self.cooldowns.get(origin)
        if until is None or until <= now:
            return 0.0
        return until - now

    def _expire(self, now: float) -> None:
        """Drop the cooldowns that are over, soonest first, so that requests go back to the
        quick path once every cooldown is over and the table does not grow without bound.
        Each entry is pushed and popped once: no scan of the table."""
        with self._lock:
            expiry, cooldowns = self._expiry, self.cooldowns
            while expiry and expiry[0][0] <= now:
                until, origin = heapq.heappop(expiry)
                if cooldowns.get(origin) == until:
                    del cooldowns[origin]
                    self.cooldown_signals.pop(origin, None)

    def start_cooldown(
        self, origin: str, until: float, signal: str | None = None, *, share: bool = True
    ) -> None:
        """``origin`` asked for quiet until ``until`` (clock time), by the header ``signal``.
        With a store, a cooldown that ends later than the one known is shared (``share``)."""
        signal = signal or "retry-after"
        with self._lock:
            if until <= self.cooldowns.get(origin, 0.0):
                return
            self.cooldowns[origin] = until
            self.cooldown_signals[origin] = signal
            # A later cooldown of the same origin leaves its old entry in the heap;
            # _expire skips it, as it no longer matches the table.
            heapq.heappush(self._expiry, (until, origin))
        if share and self.store is not None:
            self.store._cooldown(self, origin, until - self.clock(), signal)

    def receive_cooldown(self, origin: str, until: float, signal: str) -> None:
        """Another member of the store started a cooldown until ``until`` (wall-clock
        seconds): applied at this transport's next request (any thread may call this)."""
        with self._inbox_lock:
            known = self.inbox.get(origin)
            if known is None or until > known[0]:
                self.inbox[origin] = (until, signal)

    def take_inbox(self) -> None:
        """Apply the cooldowns received, as if this transport had started them."""
        with self._inbox_lock:
            inbox, self.inbox = self.inbox, {}
        store = self.store
        if store is None or not inbox:
            return
        wall, now = store.wallclock(), self.clock()
        for origin, (until, signal) in inbox.items():
            if until > wall:
                self.start_cooldown(origin, now + (until - wall), signal, share=False)

    # -- bookkeeping -------------------------------------------------------------------

    def note_retry(
        self,
        call: RetryCall,
        attempt: int,
        wait: float,
        status: int | None,
        error: str | None,
        signal: str | None = None,
    ) -> None:
        next(self._retries)
        log = logger.isEnabledFor(logging.INFO)
        if not log and not self.hooks:
            return
        method, url = call.request.method, redact_url(call.request.url)
        if log:
            logger.info(
                "Retrying %s %s after %s (attempt %d of %d) in %.3f s",
                method, url, status or error, attempt, call.policy.max_attempts, wait,
            )
        if self.hooks:
            self._emit(
                RetryEvent("retry", method, url, attempt, wait, status, error, None, signal)
            )

    def note_cooldown(self, call: RetryCall, origin: str, wait: float) -> None:
        log = logger.isEnabledFor(logging.INFO)
        if not log and not self.hooks:
            return
        method, url = call.request.method, redact_url(call.request.url)
        signal = self.cooldown_signals.get(origin, "retry-after")
        if log:
            logger.info(
                "Holding %s %s for %.3f s: %s asked for quiet (%s)",
                method, url, wait, origin, _display(signal),
            )
        if self.hooks:
            self._emit(RetryEvent("cooldown", method, url, 0, wait, None, None, None, signal))

    def note_finish(self, call: RetryCall, info: RetryInfo, failed_retryable: bool) -> None:
        reason = info.stop_reason
        gave_up = reason is not SUCCESS and (info.retries > 0 or failed_retryable)
        if gave_up:
            with self._lock:
                self._gave_up[reason] = self._gave_up.get(reason, 0) + 1
        if not gave_up and info.retries == 0:
            return  # the quiet path: nothing to log, nothing to tell the hooks
        last = info.history[-1] if info.history else None
        outcome = (last.status or last.error) if last is not None else "no attempt"
        method = call.request.method
        if reason is SUCCESS:
            if logger.isEnabledFor(logging.INFO):
                url = redact_url(call.request.url)
                logger.info("%s %s succeeded after %d attempts", method, url, info.attempts)
            return
        if info.retries > 0:
            level = logging.ERROR
        elif reason is DISABLED or (reason is CIRCUIT_OPEN and info.attempts == 0):
            level = logging.DEBUG  # refused by an open breaker: its transition was logged
        else:
            level = logging.WARNING
        log = logger.isEnabledFor(level)
        if not self.hooks and not log:
            return
        url = redact_url(call.request.url)
        if level == logging.WARNING and log:
            self._log_refusal(call, reason, url, info, outcome)
        elif log:
            logger.log(
                level,
                "Giving up on %s %s after %d attempt(s): %s (%s)",
                method, url, info.attempts, outcome, reason.value,
            )
        if gave_up and self.hooks:
            self._emit(
                RetryEvent(
                    "give_up",
                    method,
                    url,
                    info.attempts,
                    0.0,
                    last.status if last else None,
                    last.error if last else None,
                    reason,
                )
            )

    def note_breaker(
        self,
        call: RetryCall,
        transitions: list[str],
        origin: str,
        status: int | None = None,
        error: str | None = None,
    ) -> None:
        """One line and one event per transition of ``origin``'s breaker, to this
        transport's hooks and the breaker's own (never one per refused request)."""
        breaker = call.breaker
        if breaker is None:
            return
        method, url = call.request.method, redact_url(call.request.url)
        attempt = len(call._progress.history) + 1 if call._progress is not None else 1
        for kind in transitions:
            wait = breaker.opened_for(origin) if kind == "breaker_open" else 0.0
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
            self._emit(event, self.hooks + breaker.hooks)

    def _log_refusal(
        self, call: RetryCall, reason: StopReason, url: str, info: RetryInfo, outcome: object
    ) -> None:
        """A retryable failure refused without a retry: the first per stop reason and origin
        is logged, then at most one line per ``REFUSAL_LOG_INTERVAL`` seconds with the count
        since the last line (an outage would otherwise log one WARNING per request)."""
        origin = _origin(call.request.url)
        key = (reason, origin)
        now = self.clock()
        with self._lock:
            entry = self._refusals.get(key)
            count, since = 0, 0.0
            if entry is None:
                self._refusals[key] = [now, 0]
            else:
                entry[1] += 1
                if now - entry[0] < REFUSAL_LOG_INTERVAL:
                    return
                count, since = int(entry[1]), now - entry[0]
                entry[0], entry[1] = now, 0
        if count == 0:
            logger.warning(
                "Giving up on %s %s after %d attempt(s): %s (%s)",
                call.request.method, url, info.attempts, outcome, reason.value,
            )
        else:
            logger.warning(
                "Gave up on %d more request(s) to %s without a retry in the last %.0f s (%s)",
                count, origin, since, reason.value,
            )

    def _emit(self, event: RetryEvent, hooks: tuple[RetryHook, ...] | None = None) -> None:
        """Give ``event`` to each hook (default: this transport's); one that raises is logged."""
        for hook in self.hooks if hooks is None else hooks:
            try:
                hook(event)
            except Exception:
                logger.warning("Retry hook %r raised on %s event", hook, event.kind, exc_info=True)

    def stats(self) -> RetryStats:
        with self._lock:
            requests = next(self.request_counter) - self._draws
            retries = next(self._retries) - self._draws
            self._draws += 1
            gave_up = dict(self._gave_up)
        return RetryStats(
            requests=requests,
            retries=retries,
            gave_up=MappingProxyType(gave_up),
            budget_tokens=None if self.budget is None else self.budget.tokens,
            retry_rate=retries / requests if requests else 0.0,
        )


class _Progress:
    """What happened to a request beyond a plain first attempt: created when first needed,
    so a request that succeeds at once never pays for it."""

    __slots__ = ("body", "budget_cost", "deadline_at", "extensions", "history", "previous",
                 "skipped", "total_wait")

    def __init__(self, base_delay: float) -> None:
        self.history: list[Attempt] = []
        self.total_wait = 0.0
        self.previous = base_delay  # the last backoff (decorrelated jitter builds on it)
        self.budget_cost: float | None = None  # what the last retry took from the budget
        self.deadline_at: float | None = None  # clock time
        self.body: bool | None = None  # RetryInfo.body_buffered
        # The caller's extensions, while attempts carry clipped timeouts (deadline).
        self.extensions: dict[str, Any] | None = None
        # Seconds of waiting that testing mode skipped: the deadline still counts them.
        self.skipped = 0.0


class RetryCall:
    """The decisions for one request, from its first attempt to its final outcome."""

    __slots__ = ("_controller", "_origin_key", "_probe", "_progress", "_refused", "_stream",
                 "_testing", "breaker", "enabled", "policy", "request")

    def __init__(self, controller: Controller, request: Request) -> None:
        """Start one request. Raises ``ValueError`` for an invalid per-request override."""
        self._controller = controller
        self.request = request
        # The body as it is before the first attempt: whether it can be sent again is
        # judged from this stream, whatever the inner transport does to the request.
        self._stream = request.stream
        self._progress: _Progress | None = None
        self.enabled = True
        policy = controller.policy
        override = request.extensions.get("retry")
        if override is not None:
            if override is False:
                self.enabled = False
            elif override is not True:
                policy = policy.with_override(override)
        testing = self._testing = _testing.active
        breaker = self.breaker = controller.breaker
        if testing is not None:
            policy = testing.policy(policy)
            if testing.breakers == "off":
                breaker = self.breaker = None
        self.policy = policy
        if breaker is not None:  # set only with a breaker: the quick path sets nothing more
            self._origin_key: str | None = None  # the origin, once a breaker needs it
            self._probe = 0  # the half-open period this attempt probes (0: no probe)
            self._refused: BaseException | None = None
        if controller.contact is not None or controller.auto_idempotency_key:
            controller.prepare(request, policy)
        next(controller.request_counter)

    def _state(self) -> _Progress:
        progress = self._progress
        if progress is None:
            progress = self._progress = _Progress(self.policy.base_delay)
        return progress

    # -- before the first attempt ------------------------------------------------------

    def start(self) -> float | None:
        """Seconds to wait before the first attempt (an origin's cooldown), or ``None``.

        Raises :class:`CooldownError` when the cooldown is longer than the request may wait.
        """
        controller = self._controller
        deadline = self.policy.deadline
        if self.breaker is not None:
            self._admit()
        if controller.inbox:
            controller.take_inbox()
        if deadline is None and not controller.cooldowns:
            return None
        now = controller.clock()
        if deadline is not None:
            progress = self._state()
            progress.deadline_at = now + deadline
            progress.extensions = self.request.extensions
        if not controller.cooldowns or not self.enabled or not self.policy.respect_retry_after:
            return None
        origin = _origin(self.request.url)
        remaining = controller.cooldown_left(origin, now)
        if remaining <= 0.0:
            return None
        limit = self.policy.max_retry_after
        if remaining > limit:
            self._refuse_cooldown(
                origin, remaining, RETRY_AFTER_TOO_LONG, f"more than max_retry_after={limit:g} s"
            )
        # The origin's time is the floor; each held request adds the policy's first
        # jittered backoff step on top, so that the requests it held do not all come back
        # in the same instant (the herd that jitter exists to break up).
        rng = controller.rng if self._testing is None else self._testing.rng
        wait = remaining + compute_backoff(self.policy, 0, self.policy.base_delay, rng)
        if deadline is not None and wait >= deadline:
            why = f"past the deadline of {deadline:g} s"
            self._refuse_cooldown(origin, remaining, DEADLINE, why)
        self._state().total_wait += wait
        controller.note_cooldown(self, origin, wait)
        return self._to_sleep(wait)

    def _refuse_cooldown(
        self, origin: str, remaining: float, reason: StopReason, why: str
    ) -> NoReturn:
        error = self._controller.flavour.cooldown_error(
            f"{origin} asked for quiet "
            f"({_display(self._controller.cooldown_signals.get(origin, 'retry-after'))}) "
            f"for {remaining:.3f} s more, {why}: not sent",
            origin=origin,
            remaining=remaining,
            request=self.request,
        )
        info = RetryInfo(0, 0, (), 0.0, reason)
        _remember(error, info)
        self._controller.note_finish(self, info, failed_retryable=True)
        raise error

    def attempt_request(self) -> Request:
        """The request to send now: with a deadline, its timeouts end within the time left;
        a retry carries its attempt number as ``extensions["retry_attempt"]`` (2 for the
        first retry; a first try carries nothing); with ``attempt_header``, every attempt
        carries its number in that header."""
        request = self.request
        header = self._controller.attempt_header
        progress = self._progress
        if progress is None:
            if header is not None:
                request.headers[header] = "1"
            return request
        retry = len(progress.history) + 1 if progress.history else 0
        if retry and self.breaker is not None:
            self._admit()  # the breaker may have opened while this request waited
        if header is not None:
            request.headers[header] = str(retry or 1)
        deadline_at = progress.deadline_at
        if not retry and deadline_at is None:
            return request
        # The same request object every time (whatever the inner transport caches on it,
        # such as a body it read, stays with it); the caller's extensions come back after
        # each attempt.
        if progress.extensions is None:
            progress.extensions = request.extensions
        extensions = {**progress.extensions}
        if deadline_at is not None:
            remaining = deadline_at - self._controller.clock() - progress.skipped
            extensions["timeout"] = _clipped_timeouts(extensions.get("timeout"), remaining)
        if retry:
            extensions["retry_attempt"] = retry
        request.extensions = extensions
        return request

    def _admit(self) -> None:
        """Ask the breaker to let this attempt through; raise ``CircuitOpenError`` if not."""
        breaker = self.breaker
        assert breaker is not None
        origin = self._origin_key
        if origin is None:
            origin = self._origin_key = _origin(self.request.url)
        testing = self._testing
        if testing is not None and testing.breakers == "open":
            refusal: float | None = breaker.break_duration
        else:
            refusal, self._probe, transitions = breaker.admit(origin)
            if transitions:
                self._controller.note_breaker(self, transitions, origin)
        if refusal is None:
            return
        progress = self._progress
        history = tuple(progress.history) if progress is not None else ()
        info = RetryInfo(
            len(history), max(len(history) - 1, 0), history,
            progress.total_wait if progress is not None else 0.0, CIRCUIT_OPEN,
        )
        error = self._controller.flavour.circuit_open_error(
            f"{origin}: circuit breaker open"
            + (f", next probe in {refusal:.3f} s" if refusal else ", every probe slot taken")
            + ": not sent",
            origin=origin,
            remaining=refusal,
            request=self.request,
        )
        _remember(error, info)
        self._refused = error
        self._controller.note_finish(self, info, failed_retryable=True)
        raise error

    def _verdict(self, failure: bool | None, status: int | None = None,
                 error: str | None = None) -> None:
        """Tell the breaker how this attempt went: failure, success, or no verdict (None)."""
        breaker = self.breaker
        if breaker is None:
            return
        origin = self._origin_key
        if origin is None:
            origin = self._origin_key = _origin(self.request.url)
        probe = self._probe
        if probe:
            self._probe = 0
        if failure is None:
            if probe:
                breaker.release(origin, probe)
            return
        transitions = breaker.record(origin, failure, probe)
        if transitions:
            self._controller.note_breaker(self, transitions, origin, status, error)

    # -- after an attempt --------------------------------------------------------------

    def body_limit(self, response: Response) -> int | None:
        """With ``retry_body_errors``: the most bytes of this response's body to read inside
        the retry loop before handing it over; ``None``: leave the body to the caller.

        Only a response that will be handed over is read (a retryable status is closed
        unread). When the declared length is over the limit, the answer is 0 and the body is
        handed over as a stream.
        """
        policy = self.policy
        if not policy.retry_body_errors or response.status_code in policy.retry_statuses:
            return None
        limit = policy.max_body_buffer
        length = _length(response)
        if length is not None and length > limit:
            self._state().body = False
            return 0
        return limit

    def should_drain(self, response: Response) -> bool:
        """Whether to read a discarded response's body before closing it: a small declared
        body (``DRAIN_MAX_BYTES``), and no deadline (a slow body could outlast it)."""
        progress = self._progress
        if progress is not None and progress.deadline_at is not None:
            return False
        if isinstance(response.stream, self._controller.flavour.byte_stream):
            return False  # already in memory (a mock, an ASGI app): no connection to keep
        length = _length(response)
        return length is not None and length <= DRAIN_MAX_BYTES

    def body_read(self, complete: bool) -> None:
        """The driver read the body: whole (True), or only up to the limit (False)."""
        self._state().body = complete

    def _attempt_over(self) -> None:
        """The caller's own extensions (timeouts) go back on the request after each attempt."""
        progress = self._progress
        if progress is not None and progress.extensions is not None:
            self.request.extensions = progress.extensions

    def abandon(self) -> None:
        """Something ended the request outside the decisions (a cancellation, an interrupt,
        an error of the driver's own): the caller's extensions go back on the request, and a
        probe's slot goes back to the breaker."""
        self._attempt_over()
        if self.breaker is not None and self._probe:
            self._verdict(None)

    def on_response(self, response: Response) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: hand ``response`` over."""
        status = response.status_code
        policy = self.policy
        controller = self._controller
        retryable = status in policy.retry_statuses
        if self.breaker is not None:
            self._verdict(retryable or status >= 500, status)
        verdict_name = policy.should_retry_header if status >= 400 else None
        quick = not retryable and self._progress is None
        if quick and (
            (policy.respect_rate_limits and controller.cooldown) or verdict_name is not None
        ):
            # A final answer, unless it shows an exhausted quota or the server's verdict:
            # one pass over the raw headers finds out, decoding nothing when neither is there.
            quick = _scan(response, verdict_name, timing=False) is None
        if quick:
            # The common case, kept short: one attempt, nothing waited, nothing to retry.
            info = controller.single_infos.get(status) or controller.single_info(status)
            try:
                response.extensions["retry"] = info
            except TypeError:
                _attach(response, info)
            budget = controller.budget
            if budget is not None and status < 400:
                budget.release(budget.success_refund)
            return None
        self._attempt_over()
        return self._decide(response, status, _scan(response, verdict_name) or {})

    def _decide(self, response: Response, status: int, signals: dict[str, str]) -> float | None:
        """A response that carries server signals, or that may be retried.

        Precedence: ``retry-after-ms`` over ``Retry-After`` over an exhausted rate-limit
        quota's reset, for the floor of the wait and for the origin's cooldown; the server's
        verdict (``x-should-retry``) decides whether the outcome is retryable at all.
        """
        policy = self.policy
        controller = self._controller
        retryable = status in policy.retry_statuses
        verdict = None
        if status >= 400 and policy.should_retry_header is not None:
            value = signals.get(policy.should_retry_header.lower())
            verdict = None if value is None else parse_should_retry(value)
        floor: float | None = None
        signal: str | None = None
        if policy.respect_retry_after:
            value = signals.get("retry-after-ms")
            if value is not None:
                floor = parse_retry_after_ms(value)
                signal = None if floor is None else "retry-after-ms"
            value = signals.get("retry-after")
            if floor is None and value is not None:
                date = None if value.strip(" \t").isdigit() else _header(response, b"date")
                floor = parse_retry_after(value, now=controller.wallclock(), date=date)
                signal = None if floor is None else "retry-after"
        cooling = controller.cooldown and self._testing is None  # time stands still in tests
        if floor is not None:
            if cooling and status in COOLDOWN_STATUSES and floor <= policy.max_retry_after:
                controller.start_cooldown(
                    _origin(self.request.url), controller.clock() + floor, signal
                )
        elif policy.respect_rate_limits and signals:
            quota = _quota(signals, response, controller.wallclock())
            if quota is not None and quota[0] > 0.0:
                floor, signal = quota
                if cooling and floor <= policy.max_retry_after:
                    controller.start_cooldown(
                        _origin(self.request.url), controller.clock() + floor, signal
                    )
        if verdict is True and not retryable:
            retryable = True
        elif verdict is False and retryable:
            self._finish(SERVER_DECLINED, response, status, None, floor, signal,
                         failed_retryable=True)
            return None
        if not retryable:
            reason = SUCCESS if status < 400 else NOT_RETRYABLE
            self._finish(reason, response, status, None, None, None, failed_retryable=False)
            return None
        return self._retry_or_stop(
            response, status, None, floor, signal, timeout=False, never_sent=False,
            trusted=verdict is True and policy.trust_should_retry,
        )

    def on_error(self, exc: Exception) -> float | None:
        """Seconds to wait before the next attempt, or ``None``: re-raise ``exc``."""
        self._attempt_over()
        if self.breaker is not None and exc is self._refused:
            return None  # the breaker refused the attempt: its error is already complete
        name = type(exc).__name__
        flavour = self._controller.flavour
        transient = isinstance(exc, flavour.retryable) and not _permanent(exc)
        if self.breaker is not None:
            self._verdict(True if transient else None, error=name)
        if not transient:
            self._finish(NOT_RETRYABLE, exc, None, name, None, None, failed_retryable=False)
            return None
        return self._retry_or_stop(
            exc,
            None,
            name,
            None,
            None,
            timeout=isinstance(exc, flavour.timeouts),
            never_sent=isinstance(exc, flavour.never_sent),
        )

    # -- the decision ------------------------------------------------------------------

    def _idempotent(self) -> bool:
        policy = self.policy
        if self.request.method in policy.retry_methods:
            return True
        header = policy.idempotency_header
        return bool(header and self.request.headers.get(header, "").strip())

    def _retry_or_stop(
        self,
        outcome: Response | Exception,
        status: int | None,
        error: str | None,
        retry_after: float | None,
        signal: str | None,
        *,
        timeout: bool,
        never_sent: bool,
        trusted: bool = False,
    ) -> float | None:
        policy = self.policy
        controller = self._controller
        progress = self._state()
        attempt = len(progress.history) + 1
        reason: StopReason | None = None
        wait = backoff = 0.0
        cost: float | None = None
        if not self.enabled:
            reason = DISABLED
        elif not never_sent and not trusted and not self._idempotent():
            reason = UNSAFE_METHOD
        elif not never_sent and not _replayable(self._stream, controller.flavour):
            reason = BODY_NOT_REPLAYABLE
        elif attempt >= policy.max_attempts:
            reason = MAX_ATTEMPTS
        elif retry_after is not None and retry_after > policy.max_retry_after:
            reason = RETRY_AFTER_TOO_LONG
        else:
            rng = controller.rng if self._testing is None else self._testing.rng
            backoff = compute_backoff(policy, attempt - 1, progress.previous, rng)
            wait = backoff + (retry_after or 0.0)
            deadline_at = progress.deadline_at
            now = controller.clock() + progress.skipped
            if deadline_at is not None and now + wait >= deadline_at:
                reason = DEADLINE
            elif self.breaker is not None and self.breaker.is_open(self._origin_key):
                reason = CIRCUIT_OPEN
            elif controller.budget is not None:
                cost = controller.budget.acquire(timeout=timeout)
                if cost is None:
                    reason = BUDGET_EXHAUSTED
        if reason is not None:
            self._finish(reason, outcome, status, error, retry_after, signal,
                         failed_retryable=True)
            return None
        progress.previous = backoff
        progress.budget_cost = cost
        progress.total_wait += wait
        progress.history.append(Attempt(status, error, retry_after, wait, signal))
        controller.note_retry(self, attempt, wait, status, error, signal)
        return self._to_sleep(wait)

    def _to_sleep(self, wait: float) -> float:
        """What the driver sleeps: the wait, or nothing under testing mode (which logs it)."""
        if self._testing is None:
            return wait
        self._testing.record(wait)
        self._state().skipped += wait
        return 0.0

    def _finish(
        self,
        reason: StopReason,
        outcome: Response | Exception,
        status: int | None,
        error: str | None,
        retry_after: float | None,
        signal: str | None,
        *,
        failed_retryable: bool,
    ) -> None:
        progress = self._state()
        progress.history.append(Attempt(status, error, retry_after, 0.0, signal))
        history = tuple(progress.history)
        info = RetryInfo(
            len(history), len(history) - 1, history, progress.total_wait, reason, progress.body
        )
        controller = self._controller
        budget = controller.budget
        if budget is not None and reason is SUCCESS:
            cost = progress.budget_cost
            budget.release(cost if cost is not None else budget.success_refund)
        if isinstance(outcome, BaseException):
            _remember(outcome, info)
            if failed_retryable:
                _add_note(
                    outcome,
                    f"retry-transport: gave up after {info.attempts} attempt(s) ({reason.value})",
                )
        else:
            _attach(outcome, info)
        controller.note_finish(self, info, failed_retryable)


#: The headers a response's signals are read from, besides the names that contain
#: ``ratelimit`` and the policy's ``should_retry_header``.
_SIGNAL_HEADERS: Final = frozenset({b"retry-after", b"retry-after-ms"})
_ENCODED: dict[str, bytes] = {}


def _scan(
    response: Response, verdict: str | None, *, timing: bool = True
) -> dict[str, str] | None:
    """The response's signal headers by lower-case name, in one pass over the raw headers;
    ``None`` when it has none (the usual case, kept cheap: nothing is decoded). Without
    ``timing``, only rate-limit headers and the verdict count (a final answer's
    ``Retry-After`` is no signal)."""
    name = None
    if verdict is not None:
        name = _ENCODED.get(verdict)
        if name is None:
            name = _ENCODED[verdict] = verdict.lower().encode("ascii")
    found: dict[str, str] | None = None
    headers = response.headers
    # httpx and httpx2 keep each header as (raw name, lower-case name, value) in _list:
    # reading it spares building .raw and lower-casing every name on every response.
    items = getattr(headers, "_list", None)
    if not isinstance(items, list):
        items = [(key, key.lower(), value) for key, value in headers.raw]
    for _, key, value in items:
        if b"ratelimit" in key or key == name or (timing and key in _SIGNAL_HEADERS):
            if found is None:
                found = {}
            name_text, text = key.decode("latin-1"), value.decode("latin-1")
            if name_text == "ratelimit" and name_text in found:
                text = f"{found[name_text]}, {text}"  # a list field on several lines (RFC 9110)
            found[name_text] = text
    return found


def _quota(
    signals: Mapping[str, str], response: Response, now: float
) -> tuple[float, str] | None:
    """Seconds until an exhausted rate-limit quota resets, and the header that says so."""
    limits = {key: value for key, value in signals.items() if "ratelimit" in key}
    if not limits:
        return None
    return exhausted_quota(limits, now=now, date=_header(response, b"date"))


def _display(signal: str) -> str:
    """A signal's header name as logs spell it."""
    return "Retry-After" if signal == "retry-after" else signal


def _header(response: Response, name: bytes) -> str | None:
    """One response header, found by its lower-case name (cheaper than ``Headers.get``,
    which works out the headers' encoding anew for every response)."""
    raw: list[tuple[bytes, bytes]] = response.headers.raw
    for key, value in raw:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _attach(response: Response, info: RetryInfo) -> None:
    extensions: Any = response.extensions
    try:
        extensions["retry"] = info
    except TypeError:  # an immutable mapping from some inner transport
        response.extensions = {**extensions, "retry": info}


def is_async_function(function: object) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(function) or (
        callable(function) and inspect.iscoroutinefunction(type(function).__call__)
    )


def _hooks(value: Iterable[RetryHook] | RetryHook | None) -> tuple[RetryHook, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise ValueError(
            f"hooks must be a callable or a list of callables, got the string {value!r}"
        )
    if callable(value):
        value = [value]
    try:
        hooks = tuple(value)
    except TypeError:
        raise ValueError(f"hooks must be a callable or a list of them, got {value!r}") from None
    for hook in hooks:
        if not callable(hook):
            raise ValueError(f"hooks must be callables, got {hook!r}")
        if is_async_function(hook):
            raise ValueError(
                f"hooks must be plain functions, got the coroutine function {hook!r}: "
                "a hook is called, never awaited (hand the event to a queue or task instead)"
            )
    return hooks
