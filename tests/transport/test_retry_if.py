"""A predicate of the user's own: ``retry_if`` decides whether an outcome is retryable, and
nothing else."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.transport.test_transport import script, stop_reason

pytestmark = pytest.mark.usefixtures("flavour")


class Asked:
    """A predicate that answers ``answer`` and records what it was shown."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.shown: list[Any] = []

    def __call__(self, outcome: Any) -> Any:
        self.shown.append(outcome.status_code if hasattr(outcome, "status_code")
                          else type(outcome).__name__)
        return self.answer


def test_true_retries_a_status_outside_retry_statuses(harness: Harness) -> None:
    """A 400 the predicate calls retryable is retried; the 200 after it is never shown."""
    asked = Asked(True)
    handler, seen = script(400, 200)
    response = harness.send(harness.transport(handler, retry_if=asked))
    assert response.status_code == 200 and len(seen) == 2
    assert asked.shown == [400]


def test_false_hands_over_a_retryable_status_at_once(
        harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """A 503 the predicate calls final is handed over (``not_retryable``), no give-up line."""
    handler, seen = script(503, 200)
    with caplog.at_level(logging.WARNING, logger="retry_transport"):
        response = harness.send(harness.transport(handler, retry_if=Asked(False)))
    assert response.status_code == 503 and len(seen) == 1
    assert stop_reason(response) == "not_retryable"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_none_leaves_the_built_in_rules(harness: Harness) -> None:
    """``None``: a 503 is retried and a 404 is not, as without a predicate."""
    asked = Asked(None)
    handler, seen = script(503, 404)
    response = harness.send(harness.transport(handler, retry_if=asked))
    assert response.status_code == 404 and len(seen) == 2
    assert asked.shown == [503, 404]


def test_true_retries_an_error_the_library_holds_permanent(harness: Harness) -> None:
    """An error no retry fixes by the built-in rules is retried when the predicate says so."""
    asked = Asked(True)
    handler, seen = script(httpx.UnsupportedProtocol("nope"), 200)
    response = harness.send(harness.transport(handler, retry_if=asked))
    assert response.status_code == 200 and len(seen) == 2
    assert asked.shown == ["UnsupportedProtocol"]


def test_false_raises_a_transient_error_at_once(harness: Harness) -> None:
    """A read error the predicate calls final is raised after one attempt."""
    handler, seen = script(httpx.ReadError("gone"), 200)
    with pytest.raises(httpx.ReadError) as caught:
        harness.send(harness.transport(handler, retry_if=Asked(False)))
    assert len(seen) == 1
    info = rt.retry_info(caught.value)
    assert info is not None and info.stop_reason is rt.StopReason.NOT_RETRYABLE


def test_the_method_rule_still_applies(harness: Harness) -> None:
    """True does not make an unkeyed POST safe to resend; an unapplied status does."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler, retry_if=Asked(True)), "POST",
                            content=b"{}")
    assert response.status_code == 503 and len(seen) == 1
    assert stop_reason(response) == "unsafe_method"
    handler, seen = script(503, 200)
    transport = harness.transport(handler, retry_if=Asked(True), unapplied_statuses={503})
    assert harness.send(transport, "POST", content=b"{}").status_code == 200
    assert len(seen) == 2


def test_max_attempts_and_the_budget_still_apply(harness: Harness) -> None:
    """True on every answer: the request stops at max_attempts, or when the budget is dry."""
    handler, seen = script(*[500] * 5)
    response = harness.send(harness.transport(handler, retry_if=Asked(True), max_attempts=3))
    assert len(seen) == 3 and stop_reason(response) == "max_attempts"
    handler, seen = script(*[500] * 5)
    budget = rt.RetryBudget(capacity=10, retry_cost=10, timeout_retry_cost=10)
    transport = harness.transport(handler, retry_if=Asked(True), budget=budget)
    response = harness.send(transport)
    assert len(seen) == 2 and stop_reason(response) == "budget_exhausted"


def test_the_server_declining_beats_true(harness: Harness) -> None:
    """A server's ``x-should-retry: false`` stops a retry the predicate allows."""
    handler, seen = script(httpx.Response(400, headers={"x-should-retry": "false"}), 200)
    response = harness.send(harness.transport(handler, retry_if=Asked(True)))
    assert response.status_code == 400 and len(seen) == 1
    assert stop_reason(response) == "server_declined"


def test_true_waits_what_the_server_asks(harness: Harness) -> None:
    """A 409 made retryable is retried after its ``Retry-After``."""
    handler, seen = script(httpx.Response(409, headers={"Retry-After": "2"}), 200)
    response = harness.send(harness.transport(handler, retry_if=Asked(True), jitter="none",
                                              base_delay=0.0))
    assert response.status_code == 200
    assert harness.waits == [2.0]


def test_a_raising_predicate_reaches_the_caller_and_nothing_more_is_sent(
        harness: Harness) -> None:
    """Its exception, with a note naming retry_if; no metadata on it; one request sent."""
    def broken(outcome: object) -> bool:
        raise LookupError("my bug")

    handler, seen = script(503, 200)
    with pytest.raises(LookupError) as caught:
        harness.send(harness.transport(handler, retry_if=broken))
    assert len(seen) == 1
    assert any("retry_if" in note for note in getattr(caught.value, "__notes__", []))
    assert rt.retry_info(caught.value) is None


def test_an_answer_of_another_kind_is_a_type_error(harness: Harness) -> None:
    """``"yes"`` is no answer: a TypeError naming what came back; one request sent."""
    handler, seen = script(503, 200)
    with pytest.raises(TypeError, match="retry_if must return True, False or None"):
        harness.send(harness.transport(handler, retry_if=Asked("yes")))
    assert len(seen) == 1


def test_a_coroutine_returned_is_closed(harness: Harness) -> None:
    """A plain lambda calling an async function returns a coroutine: the TypeError names
    it, and the coroutine is closed, so no "never awaited" warning follows."""
    made: list[Any] = []

    async def judge(outcome: object) -> bool:
        return True

    def predicate(outcome: object) -> Any:
        made.append(judge(outcome))
        return made[-1]

    handler, seen = script(503, 200)
    with pytest.raises(TypeError, match="retry_if must return True, False or None"):
        harness.send(harness.transport(handler, retry_if=predicate))
    assert len(seen) == 1 and len(made) == 1
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED


def test_the_guards_keep_the_built_in_verdict(harness: Harness) -> None:
    """A 503 the predicate calls final still counts as a failure for the breaker."""
    breaker = rt.CircuitBreaker(failure_ratio=0.5, min_requests=2)
    handler, seen = script(503, 503, 200)
    transport = harness.transport(handler, retry_if=Asked(False), breaker=breaker)
    harness.send(transport)
    harness.send(transport)
    assert breaker.state("https://api.example.com") == "open"


@pytest.mark.parametrize("value", [1, "f"])
def test_a_predicate_of_the_wrong_kind_is_refused(value: object) -> None:
    """Not callable: a TypeError naming retry_if, at construction."""
    with pytest.raises(TypeError, match="retry_if"):
        rt.RetryPolicy(retry_if=value)  # type: ignore[arg-type]


def test_a_coroutine_function_is_refused() -> None:
    """A coroutine function is no plain predicate, for either transport."""
    async def predicate(outcome: object) -> bool:
        return True

    with pytest.raises(TypeError, match="retry_if"):
        rt.AsyncRetryTransport(retry_if=predicate)


def test_the_policy_shows_it_by_its_qualified_name() -> None:
    """The repr names the predicate, unquoted."""
    assert "retry_if=Asked.__call__," in repr(rt.RetryPolicy(retry_if=Asked.__call__))


def closing_body(mode: str) -> Any:
    """A response body of the flavour under test that records whether it was closed."""
    if mode == "sync":
        class SyncBody(httpx.SyncByteStream):
            closed = False

            def __iter__(self) -> Any:
                yield b"{}"

            def close(self) -> None:
                self.closed = True

        return SyncBody()

    class AsyncBody(httpx.AsyncByteStream):
        closed = False

        async def __aiter__(self) -> Any:
            yield b"{}"

        async def aclose(self) -> None:
            self.closed = True

    return AsyncBody()


@pytest.mark.parametrize("hedged", [False, True])
def test_the_answer_in_hand_is_closed_when_the_predicate_raises(
        harness: Harness, hedged: bool) -> None:
    """The 503 the predicate was shown is closed before its exception leaves, hedged or not."""
    def broken(outcome: object) -> bool:
        raise LookupError("my bug")

    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(closing_body(harness.mode))
        return httpx.Response(503, stream=bodies[-1])

    extra: dict[str, Any] = {"hedging": rt.Hedging(60.0)} if hedged else {}
    with pytest.raises(LookupError):
        harness.send(harness.transport(handler, retry_if=broken, **extra))
    assert len(bodies) == 1 and bodies[0].closed
