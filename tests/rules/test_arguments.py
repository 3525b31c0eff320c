"""Every argument of every constructor, checked the same way: a value of the wrong kind is a
``TypeError``, a value of the right kind that is wrong a ``ValueError``, each naming the
argument.

One table of (constructor, keywords, error) rows, and a test that the table reaches every
parameter: each ``RetryPolicy`` field, each keyword of the transports, and every argument of
``Hedging``, ``Resume``, ``RetryBudget``, ``CircuitBreaker``, ``AdaptiveThrottle``,
``MemoryStore``, ``RedisStore`` and ``deadline()``.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import retry_transport as rt


def _sync_transport(**kwargs: Any) -> object:
    return rt.RetryTransport(httpx.MockTransport(lambda request: httpx.Response(200)), **kwargs)


def _async_transport(**kwargs: Any) -> object:
    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    return rt.AsyncRetryTransport(httpx.MockTransport(answer), **kwargs)


def _bare_transport(**kwargs: Any) -> object:
    """The transport with no inner one: ``transport`` given as a keyword."""
    return rt.RetryTransport(**kwargs)


def _redis_store(**kwargs: Any) -> object:
    pytest.importorskip("redis")
    return rt.RedisStore(**{"connect_timeout": 0.01, **kwargs})


def _deadline(**kwargs: Any) -> object:
    return rt.deadline(**{"seconds": 1.0, **kwargs})


def _no_op(*args: object) -> None:
    pass


async def _async_no_op(*args: object) -> None:
    pass


#: The constructors, by the name the rows give them.
MAKERS: dict[str, Callable[..., object]] = {
    "RetryPolicy": rt.RetryPolicy,
    "RetryTransport": _sync_transport,
    "AsyncRetryTransport": _async_transport,
    "RetryTransport()": _bare_transport,
    "Hedging": rt.Hedging,
    "Resume": rt.Resume,
    "RetryBudget": rt.RetryBudget,
    "CircuitBreaker": rt.CircuitBreaker,
    "AdaptiveThrottle": rt.AdaptiveThrottle,
    "MemoryStore": rt.MemoryStore,
    "RedisStore": _redis_store,
    "deadline": _deadline,
}

T, V = TypeError, ValueError

#: (constructor, the one argument, its value, the error).
ROWS: list[tuple[str, str, object, type[Exception]]] = [
    # -- RetryPolicy: every field -------------------------------------------------------------
    ("RetryPolicy", "max_attempts", "3", T),
    ("RetryPolicy", "max_attempts", True, T),  # a bool is an int, but no count
    ("RetryPolicy", "max_attempts", 3.0, T),
    ("RetryPolicy", "max_attempts", 0, V),
    ("RetryPolicy", "retry_statuses", 503, T),
    ("RetryPolicy", "retry_statuses", "503", T),
    ("RetryPolicy", "retry_statuses", [503.0], T),
    ("RetryPolicy", "retry_statuses", [True], T),
    ("RetryPolicy", "retry_statuses", [200], V),
    ("RetryPolicy", "retry_methods", "GET", T),
    ("RetryPolicy", "retry_methods", [b"GET"], T),
    ("RetryPolicy", "retry_methods", ["GET POST"], V),
    ("RetryPolicy", "idempotency_header", 5, T),
    ("RetryPolicy", "idempotency_header", b"Idempotency-Key", T),
    ("RetryPolicy", "idempotency_header", "Authorization", V),
    ("RetryPolicy", "base_delay", "0.1", T),
    ("RetryPolicy", "base_delay", None, T),
    ("RetryPolicy", "base_delay", -1, V),
    ("RetryPolicy", "max_delay", True, T),
    ("RetryPolicy", "max_delay", math.inf, V),
    ("RetryPolicy", "jitter", None, T),
    ("RetryPolicy", "jitter", random.uniform, T),  # backoff's jitter= is a function
    ("RetryPolicy", "jitter", "random", V),
    ("RetryPolicy", "respect_retry_after", 1, T),
    ("RetryPolicy", "max_retry_after", "60", T),
    ("RetryPolicy", "max_retry_after", math.nan, V),
    ("RetryPolicy", "deadline", "5", T),
    ("RetryPolicy", "deadline", 0, V),
    ("RetryPolicy", "idle_timeout", "120", T),
    ("RetryPolicy", "idle_timeout", True, T),
    ("RetryPolicy", "idle_timeout", 0, V),
    ("RetryPolicy", "idle_timeout", -1.0, V),
    ("RetryPolicy", "idle_timeout", math.inf, V),
    ("RetryPolicy", "retry_body_errors", "yes", T),
    ("RetryPolicy", "max_body_buffer", 1.5, T),
    ("RetryPolicy", "max_body_buffer", False, T),
    ("RetryPolicy", "max_body_buffer", -1, V),
    ("RetryPolicy", "should_retry_header", 5, T),
    ("RetryPolicy", "should_retry_header", "two words", V),
    ("RetryPolicy", "trust_should_retry", None, T),
    ("RetryPolicy", "respect_rate_limits", 0, T),
    ("RetryPolicy", "unapplied_statuses", 429, T),
    ("RetryPolicy", "unapplied_statuses", [99], V),
    ("RetryPolicy", "retry_if", True, T),
    ("RetryPolicy", "retry_if", _async_no_op, T),
    ("RetryPolicy", "retry_event", "error", T),
    ("RetryPolicy", "retry_event", _async_no_op, T),
    # a policy field as a keyword of the transports: the same checks
    ("RetryTransport", "max_attempts", "3", T),
    ("RetryTransport", "max_attempts", 0, V),
    ("AsyncRetryTransport", "base_delay", "0.1", T),
    # -- the transports' own keywords ------------------------------------------------------
    ("RetryTransport()", "transport", rt.RetryPolicy(), T),
    ("RetryTransport()", "transport", "http://localhost", T),
    ("RetryTransport()", "transport", httpx.AsyncHTTPTransport(), T),
    ("RetryTransport()", "transport", rt.RetryTransport(), V),  # retries at one layer only
    ("RetryTransport", "policy", {"max_attempts": 2}, T),
    ("RetryTransport", "budget", 500, T),
    ("RetryTransport", "cooldown", 1, T),
    ("RetryTransport", "breaker", True, T),
    ("RetryTransport", "throttle", 2.0, T),
    ("RetryTransport", "hedging", "p95", T),
    ("RetryTransport", "resume", True, T),
    ("RetryTransport", "store", "redis://localhost:6379/0", T),
    ("RetryTransport", "hooks", 5, T),
    ("RetryTransport", "hooks", [_async_no_op], T),
    ("RetryTransport", "contact", 5, T),
    ("RetryTransport", "contact", "not an address", V),
    ("RetryTransport", "auto_idempotency_key", "yes", T),
    ("RetryTransport", "attempt_header", 5, T),
    ("RetryTransport", "attempt_header", "Content-Length", V),
    ("RetryTransport", "deadline_header", b"X-Deadline", T),
    ("RetryTransport", "deadline_header", "two words", V),
    ("RetryTransport", "rng", 42, T),
    ("RetryTransport", "sleep", 5, T),
    ("RetryTransport", "sleep", _async_no_op, T),  # the wrong kind of function
    ("AsyncRetryTransport", "sleep", _no_op, T),
    ("RetryTransport", "clock", "monotonic", T),
    ("RetryTransport", "wallclock", 1.0, T),
    # -- Hedging -----------------------------------------------------------------------
    ("Hedging", "delay", True, T),
    ("Hedging", "delay", None, T),
    ("Hedging", "delay", 0, V),
    ("Hedging", "delay", "p100", V),
    ("Hedging", "max_attempts", 2.0, T),
    ("Hedging", "max_attempts", True, T),
    ("Hedging", "max_attempts", 6, V),
    ("Hedging", "fallback_delay", "0.05", T),
    ("Hedging", "fallback_delay", -1, V),
    ("Hedging", "min_samples", 1.5, T),
    ("Hedging", "min_samples", 0, V),
    # -- Resume ------------------------------------------------------------------------
    ("Resume", "max_resumes", "5", T),
    ("Resume", "max_resumes", True, T),
    ("Resume", "max_resumes", 0, V),
    ("Resume", "ranges", 1, T),
    ("Resume", "events", None, T),
    ("Resume", "post_events_by_get", "yes", T),
    # -- RetryBudget -------------------------------------------------------------------
    ("RetryBudget", "capacity", "500", T),
    ("RetryBudget", "capacity", True, T),
    ("RetryBudget", "capacity", 0, V),
    ("RetryBudget", "retry_cost", None, T),
    ("RetryBudget", "retry_cost", 501, V),  # more than the bucket holds
    ("RetryBudget", "timeout_retry_cost", "10", T),
    ("RetryBudget", "timeout_retry_cost", -1, V),
    ("RetryBudget", "success_refund", False, T),
    ("RetryBudget", "success_refund", math.nan, V),
    # -- CircuitBreaker ----------------------------------------------------------------
    ("CircuitBreaker", "failure_ratio", "0.5", T),
    ("CircuitBreaker", "failure_ratio", 1.5, V),
    ("CircuitBreaker", "min_requests", 20.0, T),
    ("CircuitBreaker", "min_requests", 0, V),
    ("CircuitBreaker", "window", None, T),
    ("CircuitBreaker", "window", 0, V),
    ("CircuitBreaker", "break_duration", "5", T),
    ("CircuitBreaker", "break_duration", -5, V),
    ("CircuitBreaker", "max_break_duration", True, T),
    ("CircuitBreaker", "max_break_duration", 1.0, V),  # below break_duration
    ("CircuitBreaker", "half_open_probes", False, T),
    ("CircuitBreaker", "half_open_probes", 0, V),
    ("CircuitBreaker", "clock", 5, T),
    ("CircuitBreaker", "hooks", "print", T),
    ("CircuitBreaker", "store", {}, T),
    # -- AdaptiveThrottle --------------------------------------------------------------
    ("AdaptiveThrottle", "k", "2", T),
    ("AdaptiveThrottle", "k", 0.5, V),
    ("AdaptiveThrottle", "window", False, T),
    ("AdaptiveThrottle", "window", -1, V),
    ("AdaptiveThrottle", "reject_statuses", 429, T),
    ("AdaptiveThrottle", "reject_statuses", [700], V),
    ("AdaptiveThrottle", "rng", random, T),
    ("AdaptiveThrottle", "clock", "monotonic", T),
    ("AdaptiveThrottle", "hooks", [print, 5], T),
    # -- MemoryStore and RedisStore ----------------------------------------------------
    ("MemoryStore", "probe_lease", "30", T),
    ("MemoryStore", "probe_lease", 0, V),
    ("MemoryStore", "wallclock", 1.0, T),
    ("RedisStore", "url", None, T),
    ("RedisStore", "url", "http://localhost:6379/0", V),
    ("RedisStore", "prefix", 5, T),
    ("RedisStore", "prefix", "", V),
    ("RedisStore", "socket_timeout", "0.25", T),
    ("RedisStore", "socket_timeout", 0, V),
    ("RedisStore", "connect_timeout", True, T),
    ("RedisStore", "connect_timeout", 1e5, V),
    ("RedisStore", "probe_lease", None, T),
    ("RedisStore", "probe_lease", -1, V),
    ("RedisStore", "wallclock", 5, T),
    # -- deadline() --------------------------------------------------------------------
    ("deadline", "seconds", "2.5", T),
    ("deadline", "seconds", None, T),
    ("deadline", "seconds", True, T),
    ("deadline", "seconds", 0, V),
    ("deadline", "clock", 5, T),
]


def _id(row: tuple[str, str, object, type[Exception]]) -> str:
    """A row's test id, the same in every process (no object's address in it)."""
    maker, name, value, error = row
    def show(value: object) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(map(show, value)) + "]"
        if isinstance(value, (type(None), bool, int, float, str, bytes, dict)):
            return repr(value)
        return getattr(value, "__name__", None) or type(value).__name__

    shown = show(value)
    return f"{maker}-{name}={shown}-{error.__name__}"[:80]


@pytest.mark.parametrize("row", ROWS, ids=[_id(row) for row in ROWS])
def test_a_wrong_kind_is_a_type_error_and_a_wrong_value_a_value_error(
        row: tuple[str, str, object, type[Exception]]) -> None:
    """The error is exactly the row's (a ``TypeError`` is no ``ValueError``), and its
    message names the argument."""
    maker, name, value, error = row
    with pytest.raises((TypeError, ValueError)) as caught:
        MAKERS[maker](**{name: value})
    assert type(caught.value) is error, caught.value
    assert name in str(caught.value)


#: The parameters that admit no value of the right kind that is wrong (a flag, a callable,
#: an instance of a class): a TypeError is their only error.
NO_WRONG_VALUE = {
    ("RetryPolicy", "respect_retry_after"), ("RetryPolicy", "retry_body_errors"),
    ("RetryPolicy", "trust_should_retry"), ("RetryPolicy", "respect_rate_limits"),
    ("RetryPolicy", "retry_if"), ("RetryPolicy", "retry_event"), ("Resume", "ranges"),
    ("Resume", "events"), ("Resume", "post_events_by_get"),
    ("CircuitBreaker", "clock"), ("CircuitBreaker", "hooks"), ("CircuitBreaker", "store"),
    ("AdaptiveThrottle", "rng"), ("AdaptiveThrottle", "clock"), ("AdaptiveThrottle", "hooks"),
    ("MemoryStore", "wallclock"), ("RedisStore", "wallclock"), ("deadline", "clock"),
    *(("RetryTransport", name) for name in (
        "policy", "budget", "cooldown", "breaker", "throttle", "hedging", "resume", "store",
        "hooks", "auto_idempotency_key", "rng", "sleep", "clock", "wallclock")),
}


def _parameters(maker: Callable[..., object]) -> list[str]:
    return [p.name for p in inspect.signature(maker).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]


@pytest.mark.parametrize("maker", ["RetryPolicy", "RetryTransport", "Hedging", "Resume",
                                   "RetryBudget", "CircuitBreaker", "AdaptiveThrottle",
                                   "MemoryStore", "RedisStore", "deadline"])
def test_the_table_reaches_every_parameter(maker: str) -> None:
    """Each parameter has a row of the wrong kind, and one of a wrong value unless it
    admits none: a parameter added later must join the table."""
    real = {"RetryTransport": rt.RetryTransport, "RedisStore": rt.RedisStore,
            "deadline": rt.deadline}
    parameters = _parameters(real.get(maker) or MAKERS[maker])
    assert parameters
    rows = {(name, error) for row_maker, name, _, error in ROWS
            if row_maker.rstrip("()") == maker}
    for name in parameters:
        assert (name, T) in rows, f"{maker}({name}=...) has no TypeError row"
        if (maker, name) not in NO_WRONG_VALUE:
            assert (name, V) in rows, f"{maker}({name}=...) has no ValueError row"
