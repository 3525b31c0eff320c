"""The decision, stated once: what an outcome means, and when a request stops.

Rules of the decision, in the order they are checked (first match wins); :data:`RULES` holds
them as data, and the docs that list them are tested against it:

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
   (``retry_after_too_long``), or a wait ending past the deadline (``deadline``). The
   server's silence too long while the caller read a body handed over ends that body
   (``idle_timeout``, the policy's ``idle_timeout``; not a retry: the body is resumed with
   ``Resume`` where it may be, and this is its stop reason when it is not).
5. A guard vetoes the retry, in the order of its stop reason: the origin's circuit breaker
   is open (``circuit_open``); the origin's adaptive throttle refuses it (``throttled``);
   the retry budget cannot pay for the retry (``budget_exhausted``), asked last so that no
   tokens are spent on a retry another rule stops.
6. The transport was closed since the request began (``closed``): no attempt of it starts
   after a close, checked before each attempt is sent.

Before an attempt, the guards may also refuse it outright (an open breaker raises
``CircuitOpenError``; a cooldown longer than the request may wait raises ``CooldownError``
with ``retry_after_too_long`` or ``deadline``). Sans-I/O: nothing here sends, sleeps, or
reads a clock of its own; the wall clock is passed in.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple, cast

from .._base.flavour import Flavour, Response
from .._base.models import (
    BODY_NOT_REPLAYABLE,
    DISABLED,
    MAX_ATTEMPTS,
    NOT_RETRYABLE,
    RETRY_AFTER_TOO_LONG,
    SERVER_DECLINED,
    SUCCESS,
    UNSAFE_METHOD,
    StopReason,
)
from .._wire.http import (
    HEADER_LINES,
    SIGNAL_FREE,
    TIMING_HEADERS,
    add_note,
    encoded,
    header,
    is_signal_free,
    items,
    permanent,
    replayable,
    scan,
)
from .._wire.retry_after import parse_retry_after
from .._wire.signals import exhausted_quota, parse_retry_after_ms, parse_should_retry
from .policy import NEVER_RETRIED, RetryPolicy, qualified_name

__all__ = [
    "COOLDOWN_STATUSES",
    "ORDER",
    "RULES",
    "Outcome",
    "Rule",
    "classify_error",
    "classify_response",
    "final_at_once",
    "never_final_at_once",
    "signal_free",
    "may_retry",
]


class Rule(NamedTuple):
    """One rule: its group in the list above, the stop reason it gives, and when."""

    group: int
    reason: StopReason
    when: str


#: Every stop reason, in the order the decision checks them.
RULES: Final = (
    Rule(1, StopReason.SUCCESS, "a final status below 400"),
    Rule(1, StopReason.NOT_RETRYABLE, "a status or an error a retry cannot fix"),
    Rule(1, StopReason.SERVER_DECLINED, "the server declines a retry (x-should-retry: false)"),
    Rule(2, StopReason.DISABLED, "retries are off for this request"),
    Rule(2, StopReason.UNSAFE_METHOD, "a method outside retry_methods without a key"),
    Rule(2, StopReason.BODY_NOT_REPLAYABLE, "a body that cannot be sent again"),
    Rule(3, StopReason.MAX_ATTEMPTS, "max_attempts reached"),
    Rule(4, StopReason.RETRY_AFTER_TOO_LONG, "the server's time is over max_retry_after"),
    Rule(4, StopReason.DEADLINE, "the wait would end past the deadline"),
    Rule(4, StopReason.IDLE_TIMEOUT, "the server was silent longer than idle_timeout"),
    Rule(5, StopReason.CIRCUIT_OPEN, "the origin's circuit breaker is open"),
    Rule(5, StopReason.THROTTLED, "the origin's adaptive throttle refuses the attempt"),
    Rule(5, StopReason.BUDGET_EXHAUSTED, "the retry budget cannot pay for the retry"),
    Rule(6, StopReason.CLOSED, "the transport was closed before the attempt could start"),
)
ORDER: Final = tuple(rule.reason for rule in RULES)

#: Statuses whose ``Retry-After`` starts a cooldown for the whole origin.
COOLDOWN_STATUSES: Final = frozenset({429, 503})



class Outcome:
    """What one attempt came to, as the guards and the decision see it.

    Attributes:
        status: the response's status, or ``None`` for an error.
        error: the error's class name, or ``None`` for a response.
        failure: whether the attempt says the dependency is unhealthy: a transient error,
            or a status in ``retry_statuses`` or >= 500; ``None``: no verdict (an error a
            retry cannot fix says nothing of the server, nor does a pool timeout: the
            client's own pool was full and nothing was sent). Every guard that judges
            health (the breaker, the throttle) reads it, and only it.
        success: a final status below 400 (nothing follows it).
        timeout: the error was a timeout (a retry after one costs the budget more).
        never_sent: the error proves the request never reached the server.
        stop: the stop reason when the outcome itself ends the request (rule 1); ``None``
            when a retry could fix it (the request's own rules are asked next).
        floor: the server's time in seconds (the least wait before a retry), or ``None``
            (always for an outcome that is neither retryable nor declined).
        signal: the header that gave the server's time, or ``None``.
        quiet: seconds the origin asks every client to keep quiet, or ``None``.
        trusted: the server's ``x-should-retry: true`` stands in for an idempotency key.
        ignored: a ``Retry-After`` value that was malformed and ignored (for a DEBUG line),
            or ``None``.
        event: for an in-band refusal (a ``2xx`` event stream's event ``retry_event``
            refused), what ``Attempt.event`` says of the event; such an outcome is retried
            as an unapplied status is (whatever the method, without a key). ``None``
            otherwise.
    """

    __slots__ = ("error", "event", "failure", "floor", "ignored", "never_sent", "quiet",
                 "signal", "status", "stop", "success", "timeout", "trusted")

    def __init__(self, status: int | None, error: str | None, failure: bool | None, *,
                 stop: StopReason | None = None, timeout: bool = False,
                 never_sent: bool = False, floor: float | None = None,
                 signal: str | None = None, quiet: float | None = None,
                 trusted: bool = False) -> None:
        self.status = status
        self.error = error
        self.failure = failure
        self.success = stop is SUCCESS
        self.stop = stop
        self.timeout = timeout
        self.never_sent = never_sent
        self.floor = floor
        self.signal = signal
        self.quiet = quiet
        self.trusted = trusted
        self.ignored: str | None = None
        self.event: str | None = None

    def __repr__(self) -> str:
        return f"<Outcome {self.status or self.error} stop={self.stop} floor={self.floor}>"


def final(status: int) -> Outcome:
    """The outcome of a status outside ``retry_statuses`` that carries no signal."""
    return Outcome(status, None, status >= 500,
                   stop=SUCCESS if status < 400 else NOT_RETRYABLE)


#: The outcomes of responses that carry no signal, by (status, retryable): they depend on
#: nothing else, and no one writes to an Outcome, so one serves them all. Bounded by the
#: statuses there are (100 to 999), twice.
_BARE: dict[tuple[int, bool], Outcome] = {}


def _bare(status: int, retryable: bool) -> Outcome:
    outcome = _BARE.get((status, retryable))
    if outcome is None:
        if retryable:
            outcome = Outcome(status, None, True)
        else:
            outcome = final(status)
        _BARE[(status, retryable)] = outcome
    return outcome


def final_at_once(response: Response, status: int, policy: RetryPolicy, reads_quotas: bool) -> bool:
    """Whether a first attempt's response is final without a closer look (the quick path):
    a status outside ``retry_statuses`` and ``COOLDOWN_STATUSES`` (below 400 with a
    ``retry_if``), and no header that could change that (the server's verdict; with
    ``reads_quotas``, an exhausted rate-limit quota). Reads header names only."""
    if status in policy.retry_statuses:
        return False
    if status >= 400:
        if status in COOLDOWN_STATUSES or policy.retry_if is not None:
            return False  # its Retry-After may cool the origin; the predicate is asked
        verdict = policy.should_retry_header
    else:
        verdict = None
    if verdict is None and not reads_quotas:
        return True
    return signal_free(response, None if verdict is None else encoded(verdict))


def never_final_at_once(policy: RetryPolicy, reads_quotas: bool) -> frozenset[int]:
    """For the quick path, built once: the statuses whose answer it never takes as final,
    so that for any other status :func:`final_at_once` reduces to :func:`signal_free` (with
    ``reads_quotas``) or to nothing. Those of :func:`final_at_once`, and every status from
    400 when a header of the answer may make it retryable (the server's verdict) or
    ``retry_if`` is asked: such an answer is judged by the call, which reads it whole (the
    outcome is the same, only the path is longer)."""
    never = set(policy.retry_statuses) | COOLDOWN_STATUSES
    if policy.should_retry_header is not None or policy.retry_if is not None:
        never |= set(range(400, 1000))
    return frozenset(never)


def signal_free(response: Response, verdict: bytes | None = None) -> bool:
    """Whether no header of ``response`` may carry a signal (a time to wait, a rate-limit
    quota, or the server's verdict in the header named ``verdict``, lower case): one pass
    over the header names, each looked up among those known to carry none."""
    free = SIGNAL_FREE
    names = getattr(response.headers, HEADER_LINES, None)  # what items() reads, unless odd
    for _, key, _ in names if type(names) is list else items(response):
        if key in free:  # the usual case: a name known to carry no signal
            if verdict is not None and key == verdict:
                return False
        elif key == verdict or (not is_signal_free(key) and key not in TIMING_HEADERS):
            return False
    return True


def classify_response(response: Response, status: int, policy: RetryPolicy,
                      wallclock: Callable[[], float], cooling: bool) -> Outcome:
    """What a response means: retryable or final, the server's time, the origin's quiet.

    Precedence: ``retry-after-ms`` over ``Retry-After`` over an exhausted rate-limit
    quota's reset, for the floor of the wait and for the origin's cooldown (``cooling``:
    the transport keeps cooldowns); the server's verdict (``x-should-retry``) decides
    whether the outcome is retryable at all.
    """
    verdict_name = policy.should_retry_header if status >= 400 else None
    found = scan(response, verdict_name)
    retryable = status in policy.retry_statuses
    if found is None and 100 <= status <= 999:  # no signal: the status says it all
        return _BARE.get((status, retryable)) or _bare(status, retryable)
    signals = found or {}
    verdict = None
    if verdict_name is not None:
        value = signals.get(verdict_name.lower())
        verdict = None if value is None else parse_should_retry(value)
    floor, signal, ignored, quota = _server_time(signals, response, policy, wallclock)
    quiet: float | None = None
    if floor is not None and cooling and floor <= policy.max_retry_after and (
            quota or status in COOLDOWN_STATUSES):
        quiet = floor
    failure = retryable or status >= 500
    if verdict is True and not retryable:
        retryable = status not in NEVER_RETRIED  # the library's promise stands
    elif verdict is False and retryable:
        return Outcome(status, None, failure, stop=SERVER_DECLINED,
                       floor=floor, signal=signal, quiet=quiet)
    if not retryable:
        stop = SUCCESS if status < 400 else NOT_RETRYABLE
        return Outcome(status, None, failure, stop=stop, quiet=quiet,
                       signal=signal)
    outcome = Outcome(status, None, failure, floor=floor, signal=signal,
                      quiet=quiet, trusted=verdict is True and policy.trust_should_retry)
    outcome.ignored = ignored
    return outcome


def _server_time(signals: Mapping[str, str], response: Response, policy: RetryPolicy,
                 wallclock: Callable[[], float]
                 ) -> tuple[float | None, str | None, str | None, bool]:
    """The server's time in ``signals`` (a response's): the floor of the wait and the
    header that gave it (``retry-after-ms`` over ``Retry-After`` over an exhausted rate-limit
    quota's reset), a malformed ``Retry-After`` ignored, and whether the time is a quota's."""
    floor: float | None = None
    signal: str | None = None
    ignored: str | None = None
    if policy.respect_retry_after:
        value = signals.get("retry-after-ms")
        if value is not None:
            floor = parse_retry_after_ms(value)
            signal = None if floor is None else "retry-after-ms"
        value = signals.get("retry-after")
        if floor is None and value is not None:
            date = None if value.strip(" \t").isdigit() else header(response, b"date")
            floor = parse_retry_after(value, now=wallclock(), date=date)
            signal = None if floor is None else "retry-after"
            if floor is None:
                ignored = value
    if floor is None and policy.respect_rate_limits and signals:
        quota = _quota(signals, response, wallclock())
        if quota is not None and quota[0] > 0.0:
            return quota[0], quota[1], ignored, True
    return floor, signal, ignored, False


def refused(response: Response, policy: RetryPolicy, wallclock: Callable[[], float],
            event: str) -> Outcome:
    """The outcome of an in-band refusal: ``response`` (a ``2xx`` event stream) refused by
    its event ``event`` (``Attempt.event``'s label), judged as a status in
    ``unapplied_statuses`` is: retryable whatever the method, a failure of the origin, its
    server's time read from its headers (``retry-after-ms``, ``Retry-After``, an exhausted
    rate-limit quota's reset)."""
    found = scan(response, None)
    floor, signal, ignored, _ = _server_time(found or {}, response, policy, wallclock)
    outcome = Outcome(response.status_code, None, True, floor=floor, signal=signal)
    outcome.ignored = ignored
    outcome.event = event
    return outcome


def asked(outcome: Outcome, result: Response | Exception, policy: RetryPolicy,
          wallclock: Callable[[], float], cooling: bool, flavour: Flavour) -> Outcome:
    """``outcome`` as the policy's ``retry_if`` answers for ``result`` (a response of status
    400 or above, or an exception): ``True`` makes it retryable, ``False`` final, ``None``
    leaves it. A server's ``x-should-retry: false`` still stops it; the health verdict
    (``failure``) stays the built-in one. Raises what the predicate raises, and a
    ``TypeError`` for an answer of another kind (an awaitable closed first), each with a
    note naming ``retry_if``."""
    predicate = cast(Callable[[object], object], policy.retry_if)
    try:
        answer = predicate(result)
    except Exception as exc:
        add_note(exc, "retry-transport: raised by the policy's retry_if "
                      f"({qualified_name(predicate)})")
        raise
    if answer is None:
        return outcome
    if answer is not True and answer is not False:
        message = f"retry_if must return True, False or None, got {answer!r}"
        if inspect.isawaitable(answer):  # a plain function calling an async one
            close = getattr(answer, "close", None)
            if callable(close):
                close()  # never awaited: closed, so no "never awaited" warning follows
            message += " (an awaitable: retry_if is called, never awaited)"
        error = TypeError(message)
        add_note(error, f"retry-transport: the policy's retry_if is {qualified_name(predicate)}")
        raise error
    stop = outcome.stop
    if answer is False:
        if stop is not None:
            return outcome
        return Outcome(outcome.status, outcome.error, outcome.failure, stop=NOT_RETRYABLE,
                       quiet=outcome.quiet, signal=outcome.signal)
    if stop is None or stop is SERVER_DECLINED:
        return outcome
    if isinstance(result, Exception):
        return Outcome(None, outcome.error, outcome.failure,
                       timeout=isinstance(result, flavour.timeouts),
                       never_sent=isinstance(result, flavour.never_sent))
    status = result.status_code
    if not 400 <= status <= 599:  # no status a policy may list: retryable, with no time
        return Outcome(status, None, outcome.failure, quiet=outcome.quiet)
    # Read again as if listed: the server's time and its verdict.
    listed = policy.replace(retry_if=None, retry_statuses=policy.retry_statuses | {status})
    again = classify_response(result, status, listed, wallclock, cooling)
    if again.stop is not None:  # the server declined it
        return again
    return Outcome(status, None, outcome.failure, floor=again.floor, signal=again.signal,
                   quiet=outcome.quiet, trusted=again.trusted)


def _quota(signals: Mapping[str, str], response: Response, now: float
           ) -> tuple[float, str] | None:
    """Seconds until an exhausted rate-limit quota resets, and the header that says so."""
    limits = {key: value for key, value in signals.items() if "ratelimit" in key}
    if not limits:
        return None
    return exhausted_quota(limits, now=now, date=header(response, b"date"))


def classify_error(exc: Exception, flavour: Flavour) -> Outcome:
    """What an error means: transient (a retry may fix it) or not, and whether it is a
    verdict on the origin's health: a transient error is one, unless it is the client's own
    (``flavour.no_verdict``: a pool timeout, retried as ever but judged by no guard)."""
    name = type(exc).__name__
    if not isinstance(exc, flavour.retryable) or permanent(exc):
        return Outcome(None, name, None, stop=NOT_RETRYABLE)
    return Outcome(None, name, None if isinstance(exc, flavour.no_verdict) else True,
                   timeout=isinstance(exc, flavour.timeouts),
                   never_sent=isinstance(exc, flavour.never_sent))


def idempotent(method: str, headers: Mapping[str, str], policy: RetryPolicy) -> bool:
    """A method in ``retry_methods``, or a request that carries an idempotency key."""
    if method in policy.retry_methods:
        return True
    name = policy.idempotency_header
    return bool(name and headers.get(name, "").strip())


def may_retry(outcome: Outcome, policy: RetryPolicy, enabled: bool, method: str,
              headers: Mapping[str, str], stream: object, flavour: Flavour,
              attempt: int) -> StopReason | None:
    """Rules 2 to 4 before the wait is known: the reason a retryable ``outcome`` of attempt
    number ``attempt`` is not retried, or ``None``."""
    if not enabled:
        return DISABLED
    sent = not outcome.never_sent
    if (sent and not outcome.trusted and method not in policy.retry_methods
            and not idempotent(method, headers, policy)
            and outcome.status not in policy.unapplied_statuses and outcome.event is None):
        return UNSAFE_METHOD
    if sent and type(stream) is not flavour.byte_stream and not replayable(stream, flavour):
        return BODY_NOT_REPLAYABLE
    if attempt >= policy.max_attempts:
        return MAX_ATTEMPTS
    floor = outcome.floor
    if floor is not None and floor > policy.max_retry_after:
        return RETRY_AFTER_TOO_LONG
    return None
