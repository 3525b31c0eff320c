"""Every keyword of the transports, declared once.

:class:`Settings` declares each keyword the transports take besides the policy's fields and
the inner transport's: its name, its default, its check and a one-line doc. The drivers'
signatures are written out keyword by keyword (so that a type checker catches a misspelt
one) and are tested against these declarations, as is the option table of docs/policy.md; the
drivers' docstrings and the controller's settings are derived from them.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict

from .._base.contact import check_contact
from .._base.flavour import Flavour
from .._base.validate import (
    ATTEMPT_HEADER_REFUSED,
    check_attempt_header,
    check_callable,
    check_flag,
    check_header_name,
    check_hooks,
    check_instance,
    function_kind,
)
from .._guards.breaker import CircuitBreaker
from .._guards.budget import RetryBudget
from .._guards.throttle import AdaptiveThrottle
from .._policy.observe import RetryHook
from .._policy.peers import retry_object
from .._policy.policy import (
    FIELDS,
    EventPredicate,
    Jitter,
    RetryPolicy,
    RetryPredicate,
    unknown_keywords,
)
from .._stores.memory import MemoryStore
from .hedging import Hedging
from .resume import Resume

__all__ = [
    "DEFAULT_BUDGET",
    "OPTIONS",
    "TRANSPORT_KEYWORDS",
    "BudgetArg",
    "Settings",
    "TransportOptions",
    "configure",
]


class _Default(enum.Enum):
    BUDGET = "default budget"

    def __repr__(self) -> str:
        # What it stands for, as help() shows it: not one shared default budget.
        return "<a new RetryBudget() for each transport>"


#: The default for ``budget=``: each transport owns a fresh ``RetryBudget()``.
DEFAULT_BUDGET: Final = _Default.BUDGET

BudgetArg = RetryBudget | None | Literal[_Default.BUDGET]

#: Keywords forwarded to the inner ``HTTPTransport`` / ``AsyncHTTPTransport`` that the
#: retry transport builds when it is given none.
TRANSPORT_KEYWORDS: Final = frozenset({
    "verify", "cert", "http1", "http2", "limits", "trust_env", "proxy", "uds",
    "local_address", "retries", "socket_options",
})


class TransportOptions(TypedDict, total=False):
    """The keywords the transports take besides their own: :class:`RetryPolicy` fields, and
    (without an inner transport) the keywords of ``httpx.HTTPTransport`` (or
    ``httpx2.HTTPTransport``). Spelt out so that a type checker catches a misspelt or
    mistyped keyword; tested against ``RetryPolicy``'s fields and ``TRANSPORT_KEYWORDS``."""

    max_attempts: int
    retry_statuses: Iterable[int]
    retry_methods: Iterable[str]
    idempotency_header: str | None
    base_delay: float
    max_delay: float
    jitter: Jitter
    respect_retry_after: bool
    max_retry_after: float
    deadline: float | None
    retry_body_errors: bool
    max_body_buffer: int
    should_retry_header: str | None
    trust_should_retry: bool
    respect_rate_limits: bool
    unapplied_statuses: Iterable[int]
    retry_if: RetryPredicate | None
    idle_timeout: float | None
    retry_event: EventPredicate | None
    verify: Any
    cert: Any
    http1: bool
    http2: bool
    limits: Any  # an httpx.Limits or an httpx2.Limits
    trust_env: bool
    proxy: Any
    uds: str | None
    local_address: str | None
    retries: int
    socket_options: Any


# -- the checks ------------------------------------------------------------------------------


def _policy(value: object) -> RetryPolicy | None:
    hint = ("; give a policy's fields as keywords (RetryTransport(**fields)), or "
            "RetryPolicy(**fields)" if isinstance(value, Mapping) else "")
    return check_instance("policy", value, RetryPolicy, "a RetryPolicy", hint=hint)


def _budget(value: object) -> RetryBudget | None:
    if value is DEFAULT_BUDGET:
        return RetryBudget()
    return check_instance("budget", value, RetryBudget, "a RetryBudget")


def _instance(name: str, kind: type[Any], spelt: str) -> Callable[[object], Any]:
    return lambda value: check_instance(name, value, kind, spelt)


def _header(name: str) -> Callable[[object], str | None]:
    """The check of a header name of the transport's own (never one of
    ``ATTEMPT_HEADER_REFUSED``), or ``None``, for the keyword ``name``."""

    def check(value: object) -> str | None:
        return check_header_name(name, value, ATTEMPT_HEADER_REFUSED, or_none=True,
                                 why="the transport's value would replace its own",
                                 example=_EXAMPLES[name])

    return check


_EXAMPLES: Final = {"attempt_header": "X-Attempt", "deadline_header": "X-Request-Deadline-Ms"}


def _sleep(value: object, *, sync: bool) -> None:
    """Refuse (``TypeError``) a ``sleep`` of the wrong kind for the driver, when its kind
    can be told without calling it; one whose kind cannot is checked at its first wait."""
    kind = function_kind(value)
    if sync and kind == "async":
        raise TypeError(
            f"sleep must be a plain function of seconds for RetryTransport, got the "
            f"coroutine function {value!r}: it would never be awaited, so no wait would "
            "happen (use AsyncRetryTransport with async code)"
        )
    if not sync and kind == "plain":
        raise TypeError(
            f"sleep must be an async function of seconds for AsyncRetryTransport (such as "
            f"anyio.sleep or an async def), got the plain function {value!r}: it would block "
            "the event loop, and what it returns cannot be awaited (use RetryTransport with "
            "sync code)"
        )


def _rng(value: object) -> random.Random:
    return check_instance("rng", value, random.Random, "a random.Random") or random.Random()


def _function(name: str) -> Callable[[Any], Any]:
    return lambda value: check_callable(name, value)


def option(default: object, check: Callable[[Any], Any], doc: str) -> Any:
    """Declare one keyword: its default, the check that turns a given value into the kept
    one (raising ``TypeError`` for a wrong kind, ``ValueError`` for a wrong value, naming
    it), and its one-line doc."""
    return field(default=default, metadata={"check": check, "doc": doc})


@dataclass(frozen=True, slots=True)
class Settings:
    """The transports' own keywords, checked: one field each, in the signatures' order."""

    policy: RetryPolicy | None = option(
        None, _policy, "the policy; keywords naming its fields override it")
    budget: RetryBudget | None = option(
        DEFAULT_BUDGET, _budget, "the retry budget to spend; `None` for none")
    cooldown: bool = option(
        True, lambda value: check_flag("cooldown", value),
        "hold new requests to an origin that answered 429/503 with `Retry-After`")
    breaker: CircuitBreaker | None = option(
        None, _instance("breaker", CircuitBreaker, "a CircuitBreaker"),
        "a `CircuitBreaker`, shareable between transports")
    throttle: AdaptiveThrottle | None = option(
        None, _instance("throttle", AdaptiveThrottle, "an AdaptiveThrottle"),
        "an `AdaptiveThrottle`, shareable between transports: refuses attempts locally while "
        "an origin turns most away")
    hedging: Hedging | None = option(
        None, _instance("hedging", Hedging, "a Hedging"),
        "a `Hedging`: another copy of a slow request, whichever answers first wins")
    resume: Resume | None = option(
        None, _instance("resume", Resume, "a Resume"),
        "a `Resume`: a `GET`'s body that breaks while read goes on where it stopped")
    store: MemoryStore | None = option(
        None, _instance("store", MemoryStore, "a MemoryStore, a RedisStore"),
        "a `MemoryStore` or `RedisStore` sharing cooldowns with other transports")
    hooks: tuple[RetryHook, ...] = option(
        None, check_hooks, "callables receiving a `RetryEvent` per retry and per give-up")
    contact: str | None = option(None, check_contact, "an e-mail address sent as `From`")
    auto_idempotency_key: bool = option(
        False, lambda value: check_flag("auto_idempotency_key", value),
        "give unsafe requests a fresh `Idempotency-Key`")
    attempt_header: str | None = option(
        None, _header("attempt_header"), "a header carrying each attempt's 1-based number, "
        "the first included (never one HTTP defines, nor the idempotency header)")
    deadline_header: str | None = option(
        None, _header("deadline_header"), "a header carrying the whole milliseconds left of "
        "the request's deadline on each attempt, for the service called to inherit it")
    rng: random.Random = option(
        None, _rng, "the jitter's random source (seed it to reproduce waits)")
    sleep: Callable[[float], object] | None = option(
        None, _function("sleep"),
        "the wait function, given seconds (a plain one for `RetryTransport`, an async one "
        "for `AsyncRetryTransport`)")
    clock: Callable[[], float] | None = option(
        None, _function("clock"), "monotonic seconds, for deadlines and cooldowns")
    wallclock: Callable[[], float] = option(
        None, lambda value: check_callable("wallclock", value) or time.time,
        "POSIX seconds, for `Retry-After` dates")

    @classmethod
    def checked(cls, values: Mapping[str, Any]) -> Settings:
        """Check each keyword of ``values`` (a driver's ``locals()``), in declaration order."""
        return cls(**{
            spec.name: spec.metadata["check"](values[spec.name]) for spec in OPTIONS
        })


#: The declarations, in the signatures' order.
OPTIONS: Final = dataclasses.fields(Settings)


def _split_keywords(kwargs: Mapping[str, Any], transport: object
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    policy_fields: dict[str, Any] = {}
    transport_kwargs: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in FIELDS:
            policy_fields[name] = value
        elif name in TRANSPORT_KEYWORDS:
            transport_kwargs[name] = value
        else:
            unknown[name] = value
    if unknown:
        known = FIELDS | TRANSPORT_KEYWORDS | {spec.name for spec in OPTIONS} | {"transport"}
        raise TypeError(unknown_keywords(unknown, known, listing=(
            f": expected a RetryPolicy field ({', '.join(sorted(FIELDS))}) or, without an "
            f"inner transport, an HTTPTransport argument ({', '.join(sorted(TRANSPORT_KEYWORDS))})"
        )))
    if transport is not None and transport_kwargs:
        raise TypeError(
            f"{', '.join(sorted(transport_kwargs))}: transport keywords configure the inner "
            "transport the retry transport builds; configure the transport you pass instead"
        )
    return policy_fields, transport_kwargs


def _checked(transport_kwargs: dict[str, Any], flavour: Flavour) -> dict[str, Any]:
    """The inner transport's keywords, with the Client's own check for HTTP/2 support."""
    if transport_kwargs.get("http2") and importlib.util.find_spec("h2") is None:
        raise ImportError(
            "Using http2=True, but the 'h2' package is not installed. "
            f"Make sure to install {flavour.name} using `pip install {flavour.name}[http2]`."
        )
    return transport_kwargs


def configure(flavour: Flavour, values: Mapping[str, Any], *, sync: bool,
              retry_types: tuple[type[Any], ...]) -> tuple[RetryPolicy, Settings, Any]:
    """What both drivers' constructors do, given their ``locals()``: check every option (and
    ``sleep`` against the kind, and ``attempt_header`` against the policy), make the policy,
    and check (or build) the inner transport of the flavour and the kind (sync or async)."""
    transport = values["transport"]
    if isinstance(transport, retry_types):
        raise ValueError(
            "transport: a retry transport cannot wrap another one; retry at one layer only "
            "(retries at several layers multiply the load on a failing service)"
        )
    policy_fields, transport_kwargs = _split_keywords(values["kwargs"], transport)
    settings = Settings.checked(values)
    _sleep(settings.sleep, sync=sync)
    policy = settings.policy if settings.policy is not None else RetryPolicy()
    if policy_fields:
        policy = policy.replace(**policy_fields)
    check_attempt_header(settings.attempt_header, policy.idempotency_header)
    check_attempt_header(settings.deadline_header, policy.idempotency_header,
                         name="deadline_header")
    if (settings.deadline_header is not None and settings.attempt_header is not None
            and settings.deadline_header.lower() == settings.attempt_header.lower()):
        raise ValueError(f"deadline_header must not be attempt_header "
                         f"({settings.attempt_header!r}): each needs a header of its own")
    base, build = (
        (flavour.sync_base, flavour.sync_transport) if sync
        else (flavour.async_base, flavour.async_transport)
    )
    if transport is None:
        return policy, settings, build(**_checked(transport_kwargs, flavour))
    if not isinstance(transport, base):
        raise TypeError(
            f"transport must be {'a sync' if sync else 'an'} {flavour.name}."
            f"{base.__name__} (the transport to wrap), got {_not_a_transport(transport, sync)}"
        )
    return policy, settings, transport


def _not_a_transport(value: object, sync: bool) -> str:
    """A value given as the inner transport, and what it was meant as: a transport of the
    other kind, a setting of the retry transport's own given first (named by its class
    alone: its repr would bury the keyword), another library's ``Retry``."""
    if hasattr(value, "handle_async_request" if sync else "handle_request"):
        return f"{value!r}: use {'AsyncRetryTransport' if sync else 'RetryTransport'}"
    for kind, keyword in _SETTINGS_BY_KIND:
        if isinstance(value, kind):
            return f"a {type(value).__name__}: give it as {keyword}="
    hint = retry_object(value)
    return f"{value!r}" + (f": {hint}" if hint is not None else "")


#: The settings given by keyword, by their classes, for a value given as the transport.
_SETTINGS_BY_KIND: Final = (
    (RetryPolicy, "policy"), (RetryBudget, "budget"), (CircuitBreaker, "breaker"),
    (AdaptiveThrottle, "throttle"), (Hedging, "hedging"), (Resume, "resume"),
    (MemoryStore, "store"),
)
