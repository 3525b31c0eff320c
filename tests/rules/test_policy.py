"""RetryPolicy: defaults, validation, overrides, and the backoff arithmetic."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
import random
import typing
from collections.abc import Callable, Iterable
from typing import Any

import pytest

import retry_transport as rt
from retry_transport._policy.policy import FIELDS, compute_backoff


def test_defaults() -> None:
    """The defaults are the documented ones."""
    policy = rt.RetryPolicy()
    assert policy.max_attempts == 3
    assert policy.retry_statuses == {408, 429, 502, 503, 504}
    assert policy.retry_methods == {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}
    assert policy.idempotency_header == "Idempotency-Key"
    assert (policy.base_delay, policy.max_delay) == (0.1, 20.0)
    assert policy.jitter == "full"
    assert policy.respect_retry_after is True
    assert policy.max_retry_after == 60.0
    assert policy.deadline is None


def test_frozen() -> None:
    """A policy cannot be changed in place; replace() makes a new one."""
    policy = rt.RetryPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_attempts = 5  # type: ignore[misc]
    changed = policy.replace(max_attempts=5)
    assert (policy.max_attempts, changed.max_attempts) == (3, 5)


def test_collections_are_normalised() -> None:
    """Lists become frozensets and methods are upper-cased."""
    policy = rt.RetryPolicy(retry_statuses=[503, 503, 429], retry_methods=["get", "Put"])
    assert policy.retry_statuses == frozenset({429, 503})
    assert policy.retry_methods == frozenset({"GET", "PUT"})
    assert hash(policy) == hash(rt.RetryPolicy(retry_statuses={429, 503},
                                               retry_methods={"GET", "PUT"}))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", 0),
        ("max_attempts", -1),
        ("retry_statuses", [99]),
        ("retry_statuses", [600]),
        ("retry_statuses", [200]),  # retrying a success would send the request again
        ("retry_statuses", [100]),
        ("retry_statuses", [304]),
        ("retry_statuses", [399]),
        ("retry_statuses", [503, 201]),
        ("retry_methods", ["GET POST"]),
        ("retry_methods", [""]),
        ("idempotency_header", "Bad Header"),
        ("idempotency_header", ""),
        ("base_delay", -0.1),
        ("base_delay", float("nan")),
        ("base_delay", float("inf")),
        ("max_delay", -1),
        ("max_retry_after", float("inf")),
        ("jitter", "random"),
        ("deadline", 0),
        ("deadline", -1),
        ("deadline", float("nan")),
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(field: str, value: Any) -> None:
    """Bad configuration fails at once, and says which field is wrong."""
    with pytest.raises(ValueError, match=field):
        rt.RetryPolicy(**{field: value})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", 2.5),
        ("max_attempts", 3.0),
        ("max_attempts", True),
        ("max_attempts", "3"),
        ("retry_statuses", ["503"]),
        ("retry_statuses", 503),
        ("retry_statuses", "503"),
        ("retry_methods", "GET"),
        ("retry_methods", [1]),
        ("base_delay", "1"),
        ("max_retry_after", None),
        ("jitter", None),
        ("respect_retry_after", "yes"),
        ("respect_retry_after", 1),
    ],
)
def test_values_of_the_wrong_kind_raise_type_error_naming_the_field(field: str,
                                                                    value: Any) -> None:
    """A string where a number goes, a float or a bool where a count goes, a lone status or
    method: the wrong kind, a TypeError naming the field."""
    with pytest.raises(TypeError, match=field):
        rt.RetryPolicy(**{field: value})
    with pytest.raises(TypeError, match=field):
        rt.RetryPolicy().replace(**{field: value})


@pytest.mark.parametrize("name", [
    "Content-Type", "content-encoding", "Content-Language", "Content-Length",
    "Transfer-Encoding", "Host", "Authorization", "Proxy-Authorization", "Cookie", "Accept",
    "Accept-Encoding", "User-Agent", "Date", "Cache-Control", "Connection", "Expect",
])
def test_the_idempotency_header_is_no_header_http_defines(name: str) -> None:
    """Ordinary requests carry these for reasons of their own: as the idempotency header,
    every POST with a body (Content-Type) or with credentials (Authorization) would count as
    keyed and be retried. Refused however the policy is made."""
    message = f"idempotency_header must not be '{name}'"
    with pytest.raises(ValueError, match=message):
        rt.RetryPolicy(idempotency_header=name)
    with pytest.raises(ValueError, match=message):
        rt.RetryPolicy().replace(idempotency_header=name)
    with pytest.raises(ValueError, match=message):
        rt.RetryPolicy().with_override({"idempotency_header": name})


def test_an_idempotency_header_of_its_own_is_kept() -> None:
    for name in ("Idempotency-Key", "X-Request-Id", "X-Idempotency-Token", None):
        assert rt.RetryPolicy(idempotency_header=name).idempotency_header == name


@pytest.mark.parametrize("value", [0, 0.0, -1, -0.5, float("-inf")])
def test_a_deadline_that_is_not_positive_gets_one_message(value: float) -> None:
    """0 and -1 used to be refused with two messages (">= 0" for -1, "> 0" for 0)."""
    with pytest.raises(ValueError) as caught:
        rt.RetryPolicy(deadline=value)
    assert str(caught.value) == (
        f"deadline must be a number of seconds > 0 and <= 1e+09, or None, got {value!r}"
    )


def test_replace_rejects_unknown_fields() -> None:
    """A typo in a field name is an error, not a silent no-op: a TypeError, as Python's own
    for an unexpected keyword."""
    with pytest.raises(TypeError, match="max_attempt"):
        rt.RetryPolicy().replace(max_attempt=5)


def test_retry_statuses_hold_only_error_statuses() -> None:
    """retry_statuses takes 400..599 only, and the error says so, however the policy is made."""
    assert rt.RetryPolicy(retry_statuses=[400, 599]).retry_statuses == {400, 599}
    with pytest.raises(ValueError,
                       match=r"retry_statuses must hold status codes \(integers in 400\.\.599"):
        rt.RetryPolicy(retry_statuses={200})
    policy = rt.RetryPolicy()
    with pytest.raises(ValueError, match="retry_statuses"):
        policy.replace(retry_statuses={200, 503})
    with pytest.raises(ValueError, match="retry_statuses"):
        policy.with_override({"retry_statuses": [302]})
    with pytest.raises(ValueError, match="retry_statuses"):
        dataclasses.replace(policy, retry_statuses=frozenset({399}))


def test_constructor_annotations_take_iterables() -> None:
    """The constructor is typed to take any iterable; the attributes are typed frozensets."""
    init = typing.get_type_hints(rt.RetryPolicy.__init__)
    attributes = typing.get_type_hints(rt.RetryPolicy)
    assert init["retry_statuses"] == Iterable[int]
    assert init["retry_methods"] == Iterable[str]
    assert attributes["retry_statuses"] == frozenset[int]
    assert attributes["retry_methods"] == frozenset[str]


def test_constructor_matches_the_fields() -> None:
    """The written-out __init__ takes the fields in order, with the fields' defaults."""
    fields = dataclasses.fields(rt.RetryPolicy)
    *parameters, unknown = list(inspect.signature(rt.RetryPolicy).parameters.values())
    assert unknown.kind is unknown.VAR_KEYWORD  # refused with a hint, typed NoReturn
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert [p.default for p in parameters] == [f.default for f in fields]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters)
    assert FIELDS == {f.name for f in fields}
    assert rt.RetryPolicy(5, [503]) == rt.RetryPolicy(max_attempts=5, retry_statuses={503})


@pytest.mark.parametrize(
    "make",
    [
        lambda p: p.replace(retry_statuses=[500, 500], retry_methods=("get", "post")),
        lambda p: dataclasses.replace(p, retry_statuses=[500], retry_methods=["get", "POST"]),
        lambda p: p.with_override({"retry_statuses": (s for s in [500]),
                                   "retry_methods": iter(["Get", "post"])}),
        lambda p: rt.RetryPolicy(retry_statuses=range(500, 501), retry_methods={"get": 1,
                                                                              "post": 2}),
    ],
)
def test_every_way_of_making_a_policy_keeps_frozensets(
    make: Callable[[rt.RetryPolicy], rt.RetryPolicy],
) -> None:
    """replace(), dataclasses.replace(), overrides and the constructor all store frozensets."""
    policy = make(rt.RetryPolicy(max_attempts=4))
    assert type(policy.retry_statuses) is frozenset and policy.retry_statuses == {500}
    assert type(policy.retry_methods) is frozenset and policy.retry_methods == {"GET", "POST"}
    assert policy == rt.RetryPolicy(max_attempts=policy.max_attempts, retry_statuses={500},
                                    retry_methods={"GET", "POST"})
    assert hash(policy) == hash(rt.RetryPolicy(max_attempts=policy.max_attempts,
                                               retry_statuses={500},
                                               retry_methods={"GET", "POST"}))


def test_a_policy_survives_copy_and_pickle() -> None:
    """copy and pickle do not go through __init__, and still give an equal policy."""
    policy = rt.RetryPolicy(retry_statuses=[503], retry_methods=["post"], deadline=2)
    for clone in (copy.copy(policy), copy.deepcopy(policy), pickle.loads(pickle.dumps(policy))):
        assert clone == policy and type(clone.retry_statuses) is frozenset
        assert clone.deadline == 2.0 and type(clone.deadline) is float


def test_empty_collections_mean_empty() -> None:
    """An empty status set retries no status (it does not restore the defaults)."""
    assert rt.RetryPolicy(retry_statuses=[]).retry_statuses == frozenset()


class Extremes(random.Random):
    """A random source that always returns the top (or bottom) of the range."""

    def __init__(self, top: bool) -> None:
        super().__init__(0)
        self.top = top
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return b if self.top else a


@pytest.mark.parametrize("retries", [0, 1, 2, 3, 10])
def test_full_jitter(retries: int) -> None:
    """Full jitter: uniform(0, min(max_delay, base_delay * 2**n))."""
    policy = rt.RetryPolicy(base_delay=0.1, max_delay=0.8, jitter="full")
    rng = Extremes(top=True)
    assert compute_backoff(policy, retries, 0.1, rng) == pytest.approx(min(0.8, 0.1 * 2**retries))
    assert rng.calls[-1][0] == 0.0


@pytest.mark.parametrize("retries", [0, 1, 2, 3, 10])
def test_equal_jitter(retries: int) -> None:
    """Equal jitter: half the exponential step fixed, half random."""
    policy = rt.RetryPolicy(base_delay=0.1, max_delay=0.8, jitter="equal")
    ceiling = min(0.8, 0.1 * 2**retries)
    assert compute_backoff(policy, retries, 0.1, Extremes(top=False)) == pytest.approx(ceiling / 2)
    assert compute_backoff(policy, retries, 0.1, Extremes(top=True)) == pytest.approx(ceiling)


def test_decorrelated_jitter() -> None:
    """Decorrelated: min(max_delay, uniform(base_delay, 3 * previous))."""
    policy = rt.RetryPolicy(base_delay=0.1, max_delay=1.0, jitter="decorrelated")
    rng = Extremes(top=True)
    previous = policy.base_delay
    seen = []
    for n in range(5):
        previous = compute_backoff(policy, n, previous, rng)
        seen.append(previous)
    assert seen == pytest.approx([0.3, 0.9, 1.0, 1.0, 1.0])
    assert rng.calls[0] == pytest.approx((0.1, 0.3))
    assert compute_backoff(policy, 0, 0.1, Extremes(top=False)) == pytest.approx(0.1)


def test_no_jitter() -> None:
    """No jitter: the plain capped exponential, and no random number is drawn."""
    policy = rt.RetryPolicy(base_delay=0.1, max_delay=0.8, jitter="none")
    rng = Extremes(top=True)
    assert [compute_backoff(policy, n, 0.1, rng) for n in range(6)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 0.8, 0.8]
    )
    assert rng.calls == []


@pytest.mark.parametrize("jitter", ["full", "equal", "decorrelated", "none"])
@pytest.mark.parametrize("retries", [1023, 1024, 1100, 10**6, 10**18])
def test_backoff_never_overflows(jitter: Any, retries: int) -> None:
    """Any retry count gives a finite wait within the cap."""
    policy = rt.RetryPolicy(base_delay=0.5, max_delay=20.0, jitter=jitter)
    wait = compute_backoff(policy, retries, 20.0, random.Random(3))
    assert math.isfinite(wait)
    assert 0.0 <= wait <= 20.0


def test_zero_base_delay_means_immediate() -> None:
    """base_delay=0 retries at once, whatever the jitter."""
    for jitter in ("full", "equal", "decorrelated", "none"):
        policy = rt.RetryPolicy(base_delay=0.0, jitter=jitter)  # type: ignore[arg-type]
        assert compute_backoff(policy, 5, 0.0, random.Random(1)) == 0.0


def test_full_jitter_spreads_waits() -> None:
    """Full jitter with a real random source covers the whole range, not one point."""
    policy = rt.RetryPolicy(base_delay=1.0, max_delay=8.0)
    rng = random.Random(42)
    waits = [compute_backoff(policy, 3, 1.0, rng) for _ in range(2000)]
    assert min(waits) < 0.5 and max(waits) > 7.5
    assert 3.6 < sum(waits) / len(waits) < 4.4


@pytest.mark.parametrize("field", ["base_delay", "max_delay", "max_retry_after", "deadline"])
def test_times_are_bounded(field: str) -> None:
    """No field may name more than 1e9 seconds (what sleep functions accept, and then some)."""
    cap = {"max_delay": 1e9} if field == "base_delay" else {}  # base_delay <= max_delay
    rt.RetryPolicy(**{field: 1e9, **cap})
    with pytest.raises(ValueError, match=field):
        rt.RetryPolicy(**{field: 1e10, **cap})


@pytest.mark.parametrize(("base", "cap"), [(30.0, 20.0), (0.5, 0.1)])
def test_a_base_delay_over_max_delay_is_refused_naming_both(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match=rf"base_delay \({base}\) .* max_delay \({cap}\)"):
        rt.RetryPolicy(base_delay=base, max_delay=cap)
    with pytest.raises(ValueError, match="base_delay .* max_delay"):
        rt.RetryPolicy(max_delay=cap).replace(base_delay=base)
    assert rt.RetryPolicy(base_delay=cap, max_delay=cap).base_delay == cap  # equal is fine


def test_an_unknown_field_suggests_the_nearest() -> None:
    with pytest.raises(TypeError, match=r"max_atempts' \(did you mean 'max_attempts'\?\)"):
        rt.RetryPolicy().replace(max_atempts=2)


#: Every option that takes seconds, given a number no float can hold.
_HUGE = 10**400


@pytest.mark.parametrize(("name", "make"), [
    ("deadline", lambda: rt.RetryTransport(deadline=_HUGE)),
    ("deadline", lambda: rt.AsyncRetryTransport(deadline=_HUGE)),
    ("deadline", lambda: rt.RetryPolicy(deadline=_HUGE)),
    ("max_delay", lambda: rt.RetryPolicy(max_delay=_HUGE)),
    ("base_delay", lambda: rt.RetryPolicy(base_delay=-_HUGE)),
    ("max_retry_after", lambda: rt.RetryPolicy(max_retry_after=_HUGE)),
    ("seconds", lambda: rt.deadline(_HUGE)),
    ("delay", lambda: rt.Hedging(_HUGE)),
    ("break_duration", lambda: rt.CircuitBreaker(break_duration=_HUGE)),
    ("max_break_duration", lambda: rt.CircuitBreaker(max_break_duration=_HUGE)),
    ("window", lambda: rt.CircuitBreaker(window=_HUGE)),
    ("capacity", lambda: rt.RetryBudget(capacity=_HUGE)),
    ("k", lambda: rt.AdaptiveThrottle(k=_HUGE)),
], ids=lambda value: value if isinstance(value, str) else "")
def test_an_int_too_large_for_a_float_is_a_value_error(name: str, make: Any) -> None:
    """10**400 is refused like any value out of range, with the ValueError naming the
    field, not an OverflowError from converting it."""
    with pytest.raises(ValueError, match=name):
        make()


def test_an_int_too_large_for_a_float_is_a_value_error_per_request() -> None:
    """The same for a per-request override: the ValueError naming the field, nothing sent."""
    import httpx

    seen: list[httpx.Request] = []
    transport = rt.RetryTransport(httpx.MockTransport(
        lambda request: seen.append(request) or httpx.Response(200)))
    with httpx.Client(transport=transport) as client:
        for field in ("deadline", "max_delay"):
            with pytest.raises(ValueError, match=field):
                client.get("https://api.example.com/", extensions={"retry": {field: _HUGE}})
    assert seen == []
