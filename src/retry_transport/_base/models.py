"""Frozen records the transport hands to its callers: metadata, stop reasons, events, stats.

Every record here is immutable, so it can be shared between threads and tasks and kept
after the request is over without surprises.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final, Literal

__all__ = ["Attempt", "RetryEvent", "RetryInfo", "RetryStats", "StopReason", "held_first",
           "new_attempt", "new_retry_info"]


class StopReason(str, enum.Enum):
    """Why the transport stopped trying and handed over the last outcome.

    The reasons are checked in this order; the first that applies wins:

    1. ``success`` / ``not_retryable`` / ``server_declined``: the outcome is not one a
       retry could fix (``success`` when the final status is below 400), or the server said
       not to retry it (``x-should-retry: false``).
    2. ``disabled`` / ``unsafe_method`` / ``body_not_replayable``: the request may not be
       retried.
    3. ``max_attempts``: the attempt limit is reached.
    4. ``retry_after_too_long`` / ``deadline``: the wait would be too long;
       ``idle_timeout``: the server was silent longer than the policy's ``idle_timeout``
       while the caller read the body (the stream stalled, and was not resumed).
    5. ``circuit_open``: the origin's circuit breaker is open (also raised as
       ``CircuitOpenError`` before an attempt it refuses).
    6. ``throttled``: the origin's adaptive throttle refused the attempt locally (also
       raised as ``ThrottledError`` before a first attempt it refuses).
    7. ``budget_exhausted``: the client's retry budget has no tokens left (checked last, so
       no tokens are spent on a retry that another reason stops).
    8. ``closed``: the transport was closed while the request was under way; no attempt
       starts after the close (raised as the flavour's ``TransportError``, nothing sent).
    """

    SUCCESS = "success"
    NOT_RETRYABLE = "not_retryable"
    SERVER_DECLINED = "server_declined"
    DISABLED = "disabled"
    UNSAFE_METHOD = "unsafe_method"
    BODY_NOT_REPLAYABLE = "body_not_replayable"
    MAX_ATTEMPTS = "max_attempts"
    RETRY_AFTER_TOO_LONG = "retry_after_too_long"
    DEADLINE = "deadline"
    IDLE_TIMEOUT = "idle_timeout"
    CIRCUIT_OPEN = "circuit_open"
    THROTTLED = "throttled"
    BUDGET_EXHAUSTED = "budget_exhausted"
    CLOSED = "closed"

    def __str__(self) -> str:
        return self.value


# Each reason as a module constant: the decisions read a global, where an enum attribute's
# look-up is slow (Python 3.11).
SUCCESS: Final = StopReason.SUCCESS
NOT_RETRYABLE: Final = StopReason.NOT_RETRYABLE
SERVER_DECLINED: Final = StopReason.SERVER_DECLINED
DISABLED: Final = StopReason.DISABLED
UNSAFE_METHOD: Final = StopReason.UNSAFE_METHOD
BODY_NOT_REPLAYABLE: Final = StopReason.BODY_NOT_REPLAYABLE
MAX_ATTEMPTS: Final = StopReason.MAX_ATTEMPTS
RETRY_AFTER_TOO_LONG: Final = StopReason.RETRY_AFTER_TOO_LONG
DEADLINE: Final = StopReason.DEADLINE
IDLE_TIMEOUT: Final = StopReason.IDLE_TIMEOUT
CIRCUIT_OPEN: Final = StopReason.CIRCUIT_OPEN
THROTTLED: Final = StopReason.THROTTLED
BUDGET_EXHAUSTED: Final = StopReason.BUDGET_EXHAUSTED
CLOSED: Final = StopReason.CLOSED


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt of a request.

    Attributes:
        status: the response status code, or ``None`` when the attempt raised.
        error: the class name of the exception the attempt raised, or ``None``.
        retry_after: the server's time in seconds, when it sent a usable one: the floor
            of the wait after this attempt (``retry-after-ms``, ``Retry-After``, or the reset
            of an exhausted rate-limit quota).
        wait: seconds slept after this attempt before the next one (``0.0`` for the last).
        signal: the header that set ``retry_after`` (``"retry-after-ms"``,
            ``"retry-after"``, ``"ratelimit"``, ``"x-ratelimit-reset"``, ...), or ``None``.
        refused_wait: on the last attempt of a request stopped with ``deadline``, the
            wait (backoff plus the server's time) that was not slept because it would have
            ended past the deadline; ``None`` otherwise (``wait`` stays ``0.0``).
        hedge: True for a hedge: an attempt started, with :class:`~retry_transport.Hedging`,
            while an earlier one was still in flight. Default False.
        cancelled: True for an attempt that another one's answer made needless (a hedged
            request's losers): cancelled, or abandoned and its answer closed unread;
            ``status`` and ``error`` are then ``None``. Default False.
        resumed_at: for a resumption (:class:`~retry_transport.Resume`), where it asked to
            go on: the raw byte offset of its range, or the event ID it sent as
            ``Last-Event-ID``; ``None`` for every other attempt. An attempt whose body broke
            while the caller read it has its ``status``, the break's class name in
            ``error``, and the wait before the resumption in ``wait``.
        held: seconds the attempt waited before it was sent for anything but the backoff
            after an earlier attempt: a request's first attempt held by its origin's
            cooldown (another request's ``Retry-After`` or exhausted rate-limit quota).
            That time is in ``RetryInfo.total_wait`` too. Default ``0.0``.
        held_by: what held it: ``"cooldown"``; ``None`` when it was not held.
        event: for an attempt ended by an in-band refusal (``retry_event`` returned
            ``True`` for an event of its ``2xx`` event stream): the event's name and, when
            its data names one, its error type or code (``"error/overloaded_error"``);
            ``None`` for every other attempt.
    """

    status: int | None
    error: str | None
    retry_after: float | None
    wait: float
    signal: str | None = None
    refused_wait: float | None = None
    hedge: bool = False
    cancelled: bool = False
    resumed_at: int | str | None = None
    held: float = 0.0
    held_by: str | None = None
    event: str | None = None


@dataclass(frozen=True, slots=True)
class RetryInfo:
    """What the transport did for one request: ``response.extensions["retry"]``.

    Attributes:
        attempts: attempts made, the first one included.
        retries: attempts after the first (``attempts - 1``) that were not resumptions of
            the body (``resumes``, with :class:`~retry_transport.Resume`: without hedges,
            ``attempts == 1 + retries + resumes``), and a retry a guard refused after its
            wait (the breaker opened meanwhile): decided and waited for, it counts, as in
            the transport's stats, though it was not sent.
        history: one :class:`Attempt` per attempt, in the order they started.
        total_wait: seconds slept in all: between attempts, and before the first one when
            its origin was cooling down (that wait is the first ``Attempt``'s ``held``).
        stop_reason: why no further attempt was made.
        body_buffered: with ``retry_body_errors``, True when the final response's body was
            read inside the retry loop, False when it was larger than ``max_body_buffer`` and
            handed over as a stream (errors reading it are then not retried); ``None`` when
            the body was left to the caller (the option is off, or the final response has a
            retryable status that was not retried).
        hedges: the hedges among the attempts (counted in ``retries`` too). Default 0.
        resumes: resumptions of the body (:class:`~retry_transport.Resume`) after it broke
            while the caller read it: attempts, not retries, so without hedges
            ``attempts == 1 + retries + resumes`` (a resumption a guard refused after its
            wait counts here, as a refused retry counts in ``retries``). Kept current while
            the body is read. Default 0.
    """

    attempts: int
    retries: int
    history: tuple[Attempt, ...]
    total_wait: float
    stop_reason: StopReason
    body_buffered: bool | None = None
    hedges: int = 0
    resumes: int = 0


@dataclass(frozen=True, slots=True)
class RetryEvent:
    """What a hook receives: a retry was scheduled, or the transport gave up.

    Attributes:
        kind: ``"retry"`` (another attempt follows after ``wait`` seconds),
            ``"give_up"`` (the request ended unsuccessfully after or instead of a retry), or
            ``"cooldown"`` (the request waits ``wait`` seconds before its first attempt,
            because its origin asked for quiet with ``Retry-After``; ``attempt`` is 0), or
            ``"breaker_open"`` / ``"breaker_half_open"`` / ``"breaker_close"`` (the origin's
            circuit breaker changed state on this request's attempt; with ``breaker_open``,
            ``wait`` is the break in seconds), or ``"hedge"`` (attempt ``attempt`` was sent
            while an earlier one was still in flight, ``wait`` seconds after the previous
            start), or ``"throttled"`` (the origin's ``AdaptiveThrottle`` refused attempt
            ``attempt`` locally; ``stop_reason`` is ``throttled``), or ``"resume"`` (the
            body broke while the caller read it, and attempt ``attempt`` resumes it after
            ``wait`` seconds, from ``resumed_at``; ``error`` is the break's class name).
        method: the request method.
        url: the request URL without userinfo and query string.
        attempt: the number of the attempt that just failed (1 for the first).
        wait: seconds the transport will sleep before the next attempt (``0.0`` on give-up).
        status: the failed attempt's status code, or ``None`` when it raised.
        error: the failed attempt's exception class name, or ``None``.
        stop_reason: why the transport gave up (``None`` for a retry).
        signal: the header that set the floor of ``wait`` (``"retry-after"``, a rate-limit
            reset header, ...), or ``None`` when the backoff alone decided it.
        learned: True for a breaker transition learned through the breaker's store (another
            process or breaker saw it; ``method`` is then ``""``, ``url`` the origin and
            ``attempt`` 0); False for everything this transport or breaker saw itself.
        refused_wait: on a give-up with ``deadline``, the next wait that was not slept
            because it would have ended past the deadline (as in the last ``Attempt``);
            ``None`` otherwise.
        resumed_at: on a ``resume`` event, the raw byte offset or the event ID the
            resumption asks for (as in its ``Attempt``); ``None`` otherwise.
    """

    kind: Literal[
        "retry", "give_up", "cooldown", "breaker_open", "breaker_half_open", "breaker_close",
        "hedge", "throttled", "resume",
    ]
    method: str
    url: str
    attempt: int
    wait: float
    status: int | None
    error: str | None
    stop_reason: StopReason | None
    signal: str | None = None
    learned: bool = False
    refused_wait: float | None = None
    resumed_at: int | str | None = None


@dataclass(frozen=True, slots=True)
class RetryStats:
    """A snapshot of one transport's counters.

    Attributes:
        requests: requests handled: first attempts, and requests a cooldown refused before
            their first attempt.
        retries: retries scheduled (attempts after the first; one cancelled during its wait
            still counts).
        gave_up: per stop reason, requests that ended unsuccessfully after or instead of a
            retry.
        budget_tokens: tokens left in the retry budget, or ``None`` without a budget.
        retry_rate: ``retries / requests`` (``0.0`` before the first request).
        hedges: hedges sent (with :class:`~retry_transport.Hedging`; not in ``retries``).
        hedge_wins: requests whose response handed over was a hedge's, whatever its status.
        throttled: attempts the transport's ``AdaptiveThrottle`` refused locally (first
            attempts, retries and hedges); the requests it ended are in ``gave_up`` under
            ``throttled``.
        resumes: resumptions of broken bodies decided (:class:`~retry_transport.Resume`;
            not in ``retries``).
    """

    requests: int
    retries: int
    gave_up: Mapping[StopReason, int]
    budget_tokens: float | None
    retry_rate: float
    hedges: int = 0
    hedge_wins: int = 0
    throttled: int = 0
    resumes: int = 0

    def __repr__(self) -> str:
        # gave_up is a read-only view of the counts (a mappingproxy): shown as the plain
        # dict it reads as, so the repr is what one would type.
        fields = ", ".join(
            f"{name}={dict(value) if isinstance(value, Mapping) else value!r}"
            for name in self.__dataclass_fields__
            for value in [getattr(self, name)]
        )
        return f"RetryStats({fields})"


# -- quick construction ------------------------------------------------------------------------
#
# A frozen dataclass's __init__ sets each field through object.__setattr__, several times
# dearer than a plain store; a retried request builds one Attempt per attempt and a
# RetryInfo, and that was most of what deciding a retry cost. The core builds them here
# instead: the fields are stored on an unfrozen twin with the very same slots, which then
# becomes the frozen class (a __class__ assignment, allowed between classes of one layout).
# The result is indistinguishable from the constructor's (tests check it field by field).


class _AttemptDraft:
    __slots__ = Attempt.__slots__


class _RetryInfoDraft:
    __slots__ = RetryInfo.__slots__


def new_attempt(status: int | None, error: str | None, retry_after: float | None, wait: float,
            signal: str | None, refused_wait: float | None = None, hedge: bool = False,
            cancelled: bool = False, resumed_at: int | str | None = None,
            held: float = 0.0, held_by: str | None = None,
            event: str | None = None) -> Attempt:
    """``Attempt(status, error, retry_after, wait, signal, refused_wait, hedge,
    cancelled, resumed_at, held, held_by, event)``, built quickly."""
    draft = _AttemptDraft()
    draft.status = status  # type: ignore[attr-defined]
    draft.error = error  # type: ignore[attr-defined]
    draft.retry_after = retry_after  # type: ignore[attr-defined]
    draft.wait = wait  # type: ignore[attr-defined]
    draft.signal = signal  # type: ignore[attr-defined]
    draft.refused_wait = refused_wait  # type: ignore[attr-defined]
    draft.hedge = hedge  # type: ignore[attr-defined]
    draft.cancelled = cancelled  # type: ignore[attr-defined]
    draft.resumed_at = resumed_at  # type: ignore[attr-defined]
    draft.held = held  # type: ignore[attr-defined]
    draft.held_by = held_by  # type: ignore[attr-defined]
    draft.event = event  # type: ignore[attr-defined]
    draft.__class__ = Attempt  # type: ignore[assignment]
    return draft  # type: ignore[return-value]


def new_retry_info(attempts: int, retries: int, history: tuple[Attempt, ...], total_wait: float,
               stop_reason: StopReason, body_buffered: bool | None,
               hedges: int = 0, resumes: int = 0) -> RetryInfo:
    """``RetryInfo(attempts, retries, history, total_wait, stop_reason, body_buffered,
    hedges, resumes)``, built quickly."""
    draft = _RetryInfoDraft()
    draft.attempts = attempts  # type: ignore[attr-defined]
    draft.retries = retries  # type: ignore[attr-defined]
    draft.history = history  # type: ignore[attr-defined]
    draft.total_wait = total_wait  # type: ignore[attr-defined]
    draft.stop_reason = stop_reason  # type: ignore[attr-defined]
    draft.body_buffered = body_buffered  # type: ignore[attr-defined]
    draft.hedges = hedges  # type: ignore[attr-defined]
    draft.resumes = resumes  # type: ignore[attr-defined]
    draft.__class__ = RetryInfo  # type: ignore[assignment]
    return draft  # type: ignore[return-value]


def held_first(history: tuple[Attempt, ...], held: float, held_by: str) -> tuple[Attempt, ...]:
    """``history`` with its first attempt showing that it was held ``held`` seconds by
    ``held_by`` before it was sent (a hold comes before a first attempt only)."""
    if not history:
        return history
    return (replace(history[0], held=held, held_by=held_by), *history[1:])
