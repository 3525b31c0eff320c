"""The retry policy: a frozen, validated description of what to retry and how long to wait."""

from __future__ import annotations

import dataclasses
import difflib
import math
import random
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, NoReturn, get_args

from .._base.validate import (
    HTTP_FIELDS,
    TOKEN,
    check_count,
    check_flag,
    check_header_name,
    check_seconds,
    check_statuses,
    is_async_function,
)
from .._wire.sse import ServerSentEvent
from .peers import peer_hint

__all__ = [
    "DEFAULT_RETRY_METHODS",
    "DEFAULT_RETRY_STATUSES",
    "NEVER_RETRIED",
    "RetryPredicate",
    "EventPredicate",
    "Jitter",
    "RetryPolicy",
    "compute_backoff",
]

Jitter = Literal["full", "equal", "decorrelated", "none"]
_JITTERS: Final = frozenset(get_args(Jitter))

#: Statuses a retry may fix: 408 Request Timeout, 429 Too Many Requests, 502 Bad Gateway,
#: 503 Service Unavailable, 504 Gateway Timeout.
DEFAULT_RETRY_STATUSES: Final = frozenset({408, 429, 502, 503, 504})
#: A policy's ``retry_if``: a plain function of an attempt's response (status 400 or above)
#: or exception, returning ``True`` (retryable), ``False`` (final) or ``None`` (the built-in
#: rules decide). (``typing.Callable``, whose alias can say that it lives in
#: ``retry_transport``.)
RetryPredicate = typing.Callable[[Any], bool | None]  # noqa: UP007
#: A policy's ``retry_event``: a plain function of one event of a ``2xx`` event stream,
#: returning ``True`` (an in-band refusal), ``False`` (content begins) or ``None`` (not yet).
EventPredicate = typing.Callable[[ServerSentEvent], bool | None]  # noqa: UP007

#: The statuses the library never retries unless the user lists them in ``retry_statuses``:
#: a server's ``x-should-retry: true`` does not make them retryable.
NEVER_RETRIED: Final = frozenset({400, 401, 403, 404, 422})

#: The idempotent methods of RFC 9110 section 9.2.2.
DEFAULT_RETRY_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})



def _number(name: str, value: object) -> float:
    return check_seconds(name, value, zero=True)


def _idempotency_header(header: object) -> str | None:
    """A header name of its own, or ``None``: never one HTTP defines (``HTTP_FIELDS``)."""
    return check_header_name(
        "idempotency_header", header, HTTP_FIELDS, or_none=True, example="Idempotency-Key",
        why="requests carry it for reasons of their own, and every one that did would count "
            "as keyed and be retried")


#: The lowest and highest status ``retry_statuses`` may hold: a retry may fix a client or a
#: server error, never a success, a redirect or an informational response.
_MIN_RETRY_STATUS: Final = 400
_MAX_RETRY_STATUS: Final = 599


# init=False: the constructor below is written out so that it can take any iterable for the
# two collections (its types say so) while the attributes are, and are typed as, frozensets.
# dataclasses.fields(), dataclasses.replace(), __eq__, __hash__ and __repr__ work as usual.
@dataclass(frozen=True, slots=True, init=False)
class RetryPolicy:
    """What to retry, how often, and how long to wait. All times are in seconds.

    Every field can also be given as a keyword to the transports, and per request through
    ``extensions={"retry": {...}}``. A value of the wrong kind raises ``TypeError`` naming
    the field (a string where a number goes, a ``bool`` or a float where a count goes,
    anything but ``True`` or ``False`` for a flag), a wrong value ``ValueError``. An unknown
    field is a ``TypeError`` as a keyword (here, to :meth:`replace` and to the transports)
    and a ``ValueError`` in a per-request mapping; either says what another library's name
    is here (``max_retries=3``: ``max_attempts=4``) or the nearest field.

    Attributes:
        max_attempts: attempts in total, the first one included. Default 3.
        retry_statuses: response statuses worth a retry, each in 400..599 (a success, a
            redirect or an informational response is never retried). Given as any iterable
            (a set, a list...), kept as a frozenset. Default 408, 429, 502, 503, 504.
        retry_methods: methods retried without an idempotency key. Given as any iterable of
            method names, kept upper-cased as a frozenset. Default: RFC 9110's idempotent
            methods GET, HEAD, OPTIONS, TRACE, PUT, DELETE.
        idempotency_header: a request with any other method is retried only when it carries
            this header with a non-empty value. Default ``"Idempotency-Key"``; ``None`` turns
            the opt-in off. A header HTTP itself defines is refused, since requests carry
            it for reasons of their own: framing, routing, credentials, representation
            metadata, negotiation, request context, caching and conditions
            (``Content-Type``, ``Authorization``, ``Accept``, ``User-Agent``...; the list,
            from RFC 9110, 9111 and 9112: ``retry_transport._base.validate.HTTP_FIELDS``).
        base_delay: the first backoff step, seconds. Default 0.1.
        max_delay: the largest backoff, seconds, at least ``base_delay`` (a smaller one
            raises ``ValueError`` naming both). Default 20.0.
        jitter: ``"full"`` (default): ``uniform(0, min(max_delay, base_delay * 2**n))``;
            ``"equal"``: half of that fixed plus half random; ``"decorrelated"``:
            ``min(max_delay, uniform(base_delay, 3 * previous))``; ``"none"``: no randomness.
            ``n`` counts the retries made so far.
        respect_retry_after: wait at least what a ``Retry-After`` header asks. Default True.
        max_retry_after: the longest ``Retry-After`` honoured, seconds; a longer one stops at
            once and returns the response. Default 60.0.
        deadline: seconds for the whole operation, waits and retries included, > 0;
            ``None`` (default) for no deadline. A deadline bounds the operation; it does not
            extend it: ``max_attempts`` and the retry budget still apply, so a request may
            stop (``max_attempts``, ``budget_exhausted``) long before its deadline. A wait
            that would end past the deadline is not slept: the request stops at once with
            ``deadline`` (the refused wait is ``Attempt.refused_wait``), however much time is
            left. To keep trying until the deadline, raise ``max_attempts`` (such as
            ``max_attempts=100``) and give the transport a budget that can pay for it (a
            larger ``RetryBudget``, or ``budget=None``).
        retry_body_errors: read the response body inside the retry loop, so that an error
            while reading it (a connection dropped mid-body) is retried like any transient
            failure. Default False: responses stream as usual.
        max_body_buffer: with ``retry_body_errors``, the most bytes read inside the loop; a
            larger body is handed over as a stream, unretried
            (``RetryInfo.body_buffered`` is False). Default 10 MiB.
        should_retry_header: the header in which a server gives its verdict on a retry
            (``true`` / ``false``, any case; read on responses with status >= 400):
            ``false`` stops a retryable outcome (``server_declined``), ``true`` makes any
            status >= 400 retryable for requests the other rules allow, except 400, 401,
            403, 404 and 422 (``NEVER_RETRIED``), which only ``retry_statuses`` can make
            retryable. Default
            ``"x-should-retry"``; ``None`` ignores it.
        trust_should_retry: let ``should_retry_header: true`` stand in for an idempotency
            key: the server asserts the request had no effect, so an unsafe request without
            a key may be retried. Default False.
        unapplied_statuses: statuses by which the server says it refused the request before
            acting on it (a rate limiter's 429, an overloaded 529, a 425 Too Early): a
            retryable response with one of them may be retried whatever the method, without
            an idempotency key (RFC 9110 section 9.2.2: the client knows the request was not
            applied). A one-shot body is still never sent twice, and a server's
            ``x-should-retry: false`` still stops it. Each in 100..599 (one below 400 is
            never retryable). Default: none.
        retry_if: a predicate of your own, ``retry_if(response_or_exception)``: ``True``
            (retryable), ``False`` (final: handed over now, stop reason ``not_retryable``)
            or ``None`` (the built-in rules decide). It is shown every exception an attempt
            raises (not the transport's own refusals, nor cancellations) and every response
            with a status of 400 or above, hedges' included, before the status and error
            sets are consulted; a response below 400 is never shown to it. It decides only
            whether an outcome is retryable: the method and key rules, the one-shot body
            rule, ``unapplied_statuses``, a server's ``x-should-retry: false``,
            ``max_attempts``, the deadline and the guards still apply, and the breaker and
            the throttle judge an origin's health by the built-in sets. A plain function,
            sync and async alike: it must not block, do I/O or read the response's body.
            An exception it raises, or an answer of another kind (a ``TypeError``), reaches
            the caller with a note naming ``retry_if``; nothing more is sent. Default
            ``None``.
        respect_rate_limits: read rate-limit headers (``RateLimit``, ``X-RateLimit-*``,
            OpenAI's and Anthropic's families): when a response says the quota is exhausted,
            the origin cools down until it resets. Default True.
        idle_timeout: the longest silence of the server, in seconds (finite, > 0), while
            the caller reads the streamed body of a final response: for an event stream
            (``text/event-stream``), the time to the next event with data (comments, blank
            lines and blocks of only ``id``/``retry`` do not count); for any other body,
            the time to the next chunk. Only time spent waiting on the network for the
            caller's reads counts. Past it the response is closed and the read raises
            ``StreamIdleTimeout`` (a ``ReadTimeout``; stop reason ``idle_timeout``), or,
            with ``Resume``, the body is resumed as after any break. ``None`` (default): no
            bound (the inner transport's read timeout still applies to each read).
        retry_event: a judge of your own for refusals sent inside a ``200``,
            ``retry_event(event)``, shown each :class:`~retry_transport.ServerSentEvent` of
            a ``2xx`` ``text/event-stream`` response that would be final (any method),
            before it is handed over: ``None`` (not content yet: the event is held back and
            the next one read), ``False`` (content begins: the response is handed over with
            every held event, byte for byte, then the rest of its stream) or ``True`` (an
            in-band refusal: the attempt ends as if its status were in
            ``unapplied_statuses``, retried whatever the method, without a key, its
            ``Retry-After`` and ``retry-after-ms`` honoured; the refused response is closed,
            or, when no further attempt is allowed, handed over with its events as it
            came). At most 64 events or 256 KiB are held: past either, the response is
            handed over unjudged, as is one under a content coding. A break before the
            verdict is the attempt's error. A plain function, sync and async alike; what it
            raises reaches the caller with a note naming ``retry_event``, the response
            closed. ``Attempt.event`` names a refusing event. Default ``None``: no event is
            judged (``presets`` set one for their API).
    """

    # The defaults are repeated in __init__ (a test checks that they agree), so that
    # dataclasses.fields() reports them as before.
    max_attempts: int = 3
    retry_statuses: frozenset[int] = DEFAULT_RETRY_STATUSES
    retry_methods: frozenset[str] = DEFAULT_RETRY_METHODS
    idempotency_header: str | None = "Idempotency-Key"
    base_delay: float = 0.1
    max_delay: float = 20.0
    jitter: Jitter = "full"
    respect_retry_after: bool = True
    max_retry_after: float = 60.0
    deadline: float | None = None
    retry_body_errors: bool = False
    max_body_buffer: int = 10 * 1024 * 1024
    should_retry_header: str | None = "x-should-retry"
    trust_should_retry: bool = False
    respect_rate_limits: bool = True
    unapplied_statuses: frozenset[int] = frozenset()
    retry_if: RetryPredicate | None = None
    idle_timeout: float | None = None
    retry_event: EventPredicate | None = None

    def __init__(
        self,
        max_attempts: int = 3,
        retry_statuses: Iterable[int] = DEFAULT_RETRY_STATUSES,
        retry_methods: Iterable[str] = DEFAULT_RETRY_METHODS,
        idempotency_header: str | None = "Idempotency-Key",
        base_delay: float = 0.1,
        max_delay: float = 20.0,
        jitter: Jitter = "full",
        respect_retry_after: bool = True,
        max_retry_after: float = 60.0,
        deadline: float | None = None,
        retry_body_errors: bool = False,
        max_body_buffer: int = 10 * 1024 * 1024,
        should_retry_header: str | None = "x-should-retry",
        trust_should_retry: bool = False,
        respect_rate_limits: bool = True,
        unapplied_statuses: Iterable[int] = frozenset(),
        retry_if: RetryPredicate | None = None,
        idle_timeout: float | None = None,
        retry_event: EventPredicate | None = None,
        **unknown: NoReturn,
    ) -> None:
        """Validate the fields (see the class docstring); the collections become frozensets.
        Any other keyword is refused (typed ``NoReturn``, so that a type checker refuses it
        too), saying what it is here when another library spells a field so."""
        if unknown:
            raise TypeError(f"RetryPolicy() got {unknown_keywords(unknown, FIELDS)}")
        set_ = object.__setattr__  # the dataclass is frozen
        set_(self, "max_attempts", check_count("max_attempts", max_attempts))
        set_(self, "retry_statuses", _statuses(retry_statuses))
        set_(self, "retry_methods", _methods(retry_methods))
        set_(self, "idempotency_header", _idempotency_header(idempotency_header))
        set_(self, "base_delay", _number("base_delay", base_delay))
        set_(self, "max_delay", _number("max_delay", max_delay))
        if self.base_delay > self.max_delay:
            raise ValueError(
                f"base_delay ({base_delay!r}) must not be greater than max_delay "
                f"({max_delay!r}): the first backoff step is capped by the largest; raise "
                "max_delay too"
            )
        if not isinstance(jitter, str):
            # backoff's jitter=backoff.full_jitter is a function: the name is the same
            hint = ' (jitter="full" draws each wait at random)' if callable(jitter) else ""
            raise TypeError(f"jitter must be one of {sorted(_JITTERS)}, got {jitter!r}{hint}")
        if jitter not in _JITTERS:
            raise ValueError(f"jitter must be one of {sorted(_JITTERS)}, got {jitter!r}")
        set_(self, "jitter", jitter)
        for name, flag in (("respect_retry_after", respect_retry_after),
                           ("retry_body_errors", retry_body_errors),
                           ("trust_should_retry", trust_should_retry),
                           ("respect_rate_limits", respect_rate_limits)):
            set_(self, name, check_flag(name, flag))
        set_(self, "max_retry_after", _number("max_retry_after", max_retry_after))
        set_(self, "deadline", None if deadline is None
             else check_seconds("deadline", deadline, or_none=True))
        set_(self, "max_body_buffer", check_count("max_body_buffer", max_body_buffer, low=0,
                                                  what="a number of bytes"))
        set_(self, "should_retry_header", check_header_name(
            "should_retry_header", should_retry_header, {}, why="", example="", or_none=True))
        set_(self, "unapplied_statuses", check_statuses("unapplied_statuses", unapplied_statuses))
        if retry_if is not None and (not callable(retry_if) or is_async_function(retry_if)):
            raise TypeError(
                f"retry_if must be a plain function of a response or an exception returning "
                f"True, False or None, got {retry_if!r}"
            )
        set_(self, "retry_if", retry_if)
        set_(self, "idle_timeout", None if idle_timeout is None
             else check_seconds("idle_timeout", idle_timeout, or_none=True))
        if retry_event is not None and (not callable(retry_event)
                                        or is_async_function(retry_event)):
            raise TypeError(
                "retry_event must be a plain function of a ServerSentEvent returning True, "
                f"False or None, got {retry_event!r}"
            )
        set_(self, "retry_event", retry_event)

    def __repr__(self) -> str:
        """The fields as the dataclass shows them; ``retry_if`` and ``retry_event`` by
        their qualified names."""
        shown = []
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if spec.name in ("retry_if", "retry_event") and value is not None:
                text = qualified_name(value)
            else:
                text = repr(value)
            shown.append(f"{spec.name}={text}")
        return f"RetryPolicy({', '.join(shown)})"

    def replace(self, **changes: Any) -> RetryPolicy:
        """Return a copy with some fields changed; an unknown field raises ``TypeError``, as
        an unexpected keyword does, saying what it is here."""
        if not changes.keys() <= FIELDS:
            unknown = {name: value for name, value in changes.items() if name not in FIELDS}
            raise TypeError(f"replace() got {unknown_keywords(unknown, FIELDS)}")
        return dataclasses.replace(self, **changes)

    def with_override(self, override: object) -> RetryPolicy:
        """Apply a per-request override: a ``RetryPolicy`` or a mapping of fields (an unknown
        one is a ``ValueError``: the mapping is the extension's value)."""
        if isinstance(override, RetryPolicy):
            return override
        if isinstance(override, Mapping):
            if not all(isinstance(key, str) for key in override):
                raise TypeError(f"retry override keys must be field names, got {override!r}")
            if not override.keys() <= FIELDS:
                unknown = {name: value for name, value in override.items()
                           if name not in FIELDS}
                said = unknown_keywords(unknown, FIELDS, "field")
                raise ValueError(f"extensions['retry'] has {said}")
            return dataclasses.replace(self, **override)
        raise TypeError(
            "extensions['retry'] must be a RetryPolicy, a mapping of policy fields, "
            f"True or False, got {override!r}"
        )


def qualified_name(function: object) -> str:
    """A callable's qualified name (its type's, for an object without one)."""
    return getattr(function, "__qualname__", None) or type(function).__qualname__


def unknown_keywords(unknown: Mapping[str, object], known: Iterable[str],
                     noun: str = "keyword argument", listing: str | None = None) -> str:
    """What to say of unknown keywords (``name -> value``): ``"an unexpected keyword
    argument 'max_retries' (the OpenAI and Anthropic SDKs'...): ... max_attempts=4"``,
    each with what another library's name is here (:func:`~.peers.peer_hint`) or the
    nearest ``known`` name; ``listing`` (default: the policy's fields) follows when one has
    neither."""
    said = []
    lost = False
    for name, value in sorted(unknown.items()):
        hint = peer_hint(name, value)
        near = "" if hint is not None else did_you_mean([name], known)
        lost = lost or (hint is None and not near)
        said.append(f"{name!r} {hint}" if hint is not None else f"{name!r}{near}")
    if len(said) == 1:
        spelt, separator = f"an unexpected {noun} {said[0]}", "; "
    else:  # one line each
        spelt, separator = f"unexpected {noun}s:" + "".join(f"\n  {line}" for line in said), "\n"
    if lost:
        spelt += listing if listing is not None else (
            f"{separator}known fields: {', '.join(sorted(FIELDS))}")
    return spelt


def did_you_mean(names: Iterable[str], known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known name nearest to one of ``names``, as Python
    says for a misspelt attribute; ``""`` when none is near."""
    candidates = sorted(known)
    for name in names:
        close = difflib.get_close_matches(name, candidates, n=1)
        if close:
            return f" (did you mean {close[0]!r}?)"
    return ""


#: The public field names of :class:`RetryPolicy`.
FIELDS: Final = frozenset(f.name for f in dataclasses.fields(RetryPolicy) if f.init)


def _statuses(value: Iterable[int]) -> frozenset[int]:
    return check_statuses("retry_statuses", value, _MIN_RETRY_STATUS, _MAX_RETRY_STATUS,
                          "; only an error status is worth a retry")


def _methods(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"retry_methods must be a set of method names (strs), got {value!r}")
    result = set()
    for method in value:
        if not isinstance(method, str):
            raise TypeError(f"retry_methods must hold method names (strs), got {method!r}")
        if not TOKEN.fullmatch(method):
            raise ValueError(f"retry_methods must hold method tokens, got {method!r}")
        result.add(method.upper())
    return frozenset(result)


def _exponential(base: float, cap: float, n: int) -> float:
    """``min(cap, base * 2**n)``, safe for any ``n``."""
    if base <= 0:
        return 0.0
    if n >= 1100:  # 2.0**1100 overflows a float whatever the base
        return cap
    try:
        return min(cap, math.ldexp(base, n))
    except OverflowError:
        return cap


def compute_backoff(
    policy: RetryPolicy, retries: int, previous: float, rng: random.Random
) -> float:
    """Seconds to wait before retry number ``retries + 1``, following ``policy.jitter``.

    ``retries`` is the number of retries made so far (0 before the first retry) and
    ``previous`` the last backoff (``policy.base_delay`` before the first retry; only
    decorrelated jitter uses it). The result is finite, ``>= 0`` and at most
    ``max(policy.max_delay, 0)``.
    """
    jitter = policy.jitter
    cap = policy.max_delay
    if jitter == "decorrelated":
        low = policy.base_delay
        high = max(low, 3.0 * previous)
        return min(cap, rng.uniform(low, high))
    base = policy.base_delay
    if base <= 0.0:
        ceiling = 0.0
    elif retries < 64:  # the usual case, without a call: a power of two multiplies exactly,
        ceiling = min(cap, base * (1 << retries))  # so this is what _exponential gives
    else:
        ceiling = _exponential(base, cap, retries)
    if jitter == "full":
        return rng.uniform(0.0, ceiling)
    if jitter == "equal":
        half = ceiling / 2.0
        return half + rng.uniform(0.0, half)
    return ceiling
