"""The decisions of a hedged try, driven directly as a driver would, with no I/O: attempts
begun and hedged, marked sent, and their outcomes (responses and exceptions built here)
judged. One case per verdict (``win``, ``more``, ``retry``, ``stop``) and per way an attempt
leaves the try (never sent, still waiting for a connection, a loser that runs on,
abandoned); the records, the guards' tickets, the stats and the events each leaves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from retry_transport import Hedging, RetryBudget, StopReason, retry_info
from retry_transport._call.controller import Controller
from retry_transport._call.hedged_call import HedgedCall, Slot
from retry_transport._call.timeleft import MIN_ATTEMPT
from retry_transport._guards.seam import HEDGE
from retry_transport._policy.policy import RetryPolicy
from tests.call.fakes import URL, Clock, Spy, controller, hooked

#: A fixed hedging delay (seconds): the hedge event's ``wait``.
DELAY = 0.1
#: Deterministic backoff: 0.5 s before the first retry, doubled for each one after.
STEADY: dict[str, Any] = {"jitter": "none", "base_delay": 0.5}


def get(**headers: str) -> httpx.Request:
    return httpx.Request("GET", URL, headers=headers)


def hedged(policy: RetryPolicy | None = None, hedging: Hedging | None = None,
           **options: Any) -> Controller:
    """A hedging transport's controller (see ``fakes.controller``)."""
    return controller(policy or RetryPolicy(**STEADY),
                      hedging=hedging or Hedging(DELAY), **options)


def start(control: Controller, request: httpx.Request | None = None
          ) -> tuple[HedgedCall, Slot]:
    """A hedged call and its first attempt, begun and on the wire at the clock's time."""
    call = HedgedCall(control, request or get(), control.hedging)  # type: ignore[arg-type]
    assert call.hedged
    first = call.begin()
    call.sent(first, control.clock())
    return call, first


def hedge(call: HedgedCall, when: float = DELAY) -> Slot:
    """A hedge, admitted and on the wire at ``when``."""
    slot = call.hedge()
    assert slot is not None
    call.sent(slot, when)
    return slot


# -- who is hedged -------------------------------------------------------------------------


@pytest.mark.parametrize("method,headers,options,policy,expected", [
    ("GET", {}, {}, {}, True),
    ("POST", {}, {}, {}, False),
    ("POST", {"Idempotency-Key": "k1"}, {}, {}, True),
    ("GET", {}, {"retry": False}, {}, False),
    ("GET", {}, {}, {"retry_body_errors": True}, False),
], ids=["get", "post", "post-with-key", "retries-off", "retry-body-errors"])
def test_only_a_request_that_may_be_sent_again_is_hedged(
        method: str, headers: dict[str, str], options: dict[str, Any],
        policy: dict[str, Any], expected: bool) -> None:
    """A method that may be sent again (or an idempotency key), retries on, and no
    ``retry_body_errors``: else the first try goes as without hedging."""
    control = hedged(RetryPolicy(**policy))
    request = httpx.Request(method, URL, headers=headers, extensions=options)
    call = HedgedCall(control, request, control.hedging)  # type: ignore[arg-type]
    assert call.hedged is expected


def test_a_body_read_from_a_stream_is_not_hedged() -> None:
    """Two attempts cannot read one stream at once: a streamed body goes unhedged."""
    control = hedged()
    request = httpx.Request("PUT", URL, content=iter([b"x"]))
    call = HedgedCall(control, request, control.hedging)  # type: ignore[arg-type]
    assert not call.hedged


# -- win ------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [200, 404], ids=["success", "not-retryable"])
def test_a_first_answer_final_at_once_wins_with_the_shared_metadata(status: int) -> None:
    """Answered before any hedge, a final answer wins as an unhedged request's would: the
    transport's shared metadata for its status, its ticket settled with its outcome."""
    spy = Spy()
    control = hedged(guards=(spy,))
    call, first = start(control)
    response = httpx.Response(status)
    assert call.done(first, response) == ("win", None)
    assert retry_info(response) is control.final(status)[0]
    assert spy.log == [("admit", "first", None), ("settle", "t1", status)]
    stats = control.stats()
    assert (stats.hedges, stats.hedge_wins, stats.retries) == (0, 0, 0)


@pytest.mark.parametrize("answer,reason", [
    (lambda: httpx.Response(503, headers={"x-should-retry": "false"}),
     StopReason.SERVER_DECLINED),
    (lambda: ValueError("a bug in the inner transport"), StopReason.NOT_RETRYABLE),
], ids=["server-declined", "error"])
def test_a_final_outcome_wins_as_it_is(answer: Any, reason: StopReason) -> None:
    """An outcome that ends the request wins though it is no success (the response, or the
    exception, handed over with its record)."""
    control = hedged()
    call, first = start(control)
    result = answer()
    assert call.done(first, result) == ("win", None)
    info = retry_info(result)
    assert info is not None and info.stop_reason is reason
    assert [(a.status, a.error) for a in info.history] == [
        (None, "ValueError") if isinstance(result, Exception) else (503, None)]


def test_a_hedge_is_admitted_as_a_hedge_and_counted_once_sent() -> None:
    """A hedge is admitted as such, sends a copy of the request numbered 2, and counts (in
    the record, the stats and a ``hedge`` event) only once it is on the wire."""
    spy = Spy()
    control, events = hooked(RetryPolicy(**STEADY), hedging=Hedging(DELAY), guards=(spy,))
    request = get()
    call, first = start(control, request)
    slot = call.hedge()
    assert slot is not None and slot.hedge and slot.number == 2
    assert slot.request is not request and slot.request.extensions["retry_attempt"] == 2
    assert spy.log[-1] == ("admit", "hedge", None)
    assert (control.stats().hedges, events) == (0, [])
    call.sent(slot, DELAY)
    assert control.stats().hedges == 1
    assert [(e.kind, e.attempt, e.wait) for e in events] == [("hedge", 2, DELAY)]
    assert request.extensions == {}  # the caller's request carries nothing of it


def test_a_hedge_that_answers_first_wins_and_the_first_is_cancelled() -> None:
    """The hedge's final answer wins: the first attempt, still in flight, is cancelled (its
    ticket settled without a verdict) and recorded as such, in the order they started."""
    spy = Spy()
    control = hedged(guards=(spy,))
    call, first = start(control)
    second = hedge(call)
    response = httpx.Response(200)
    assert call.done(second, response) == ("win", None)
    info = retry_info(response)
    assert info is not None
    assert [(a.status, a.hedge, a.cancelled) for a in info.history] == [
        (None, False, True), (200, True, False)]
    assert (info.attempts, info.retries, info.hedges, info.stop_reason) == (
        2, 1, 1, StopReason.SUCCESS)
    assert spy.log[2:] == [("settle", "t2", 200), ("settle", "t1", None)]
    stats = control.stats()
    assert (stats.hedges, stats.hedge_wins) == (1, 1)


# -- hedges admitted, refused, limited -------------------------------------------------------


def test_a_hedge_refused_by_a_guard_ends_the_hedging_of_the_try() -> None:
    """A guard refuses a hedge: none starts, the guards that admitted it settle their
    tickets without a verdict, and no other hedge is asked for in this try."""
    admits, refuses = Spy("a"), Spy("r", refuse=(HEDGE,))
    control = hedged(guards=(admits, refuses))
    call, first = start(control)
    assert call.can_hedge()
    assert call.hedge() is None
    assert not call.can_hedge()
    assert admits.log[-2:] == [("admit", "hedge", None), ("settle", "a2", None)]
    asked = len(refuses.log)
    assert call.hedge() is None and len(refuses.log) == asked  # not asked again
    response = httpx.Response(200)
    assert call.done(first, response) == ("win", None)
    assert retry_info(response) is control.final(200)[0]  # no hedge in its record


def test_a_hedge_the_budget_cannot_pay_for_is_refused() -> None:
    """The budget pays for a hedge as for a retry: with too few tokens, none starts."""
    budget = RetryBudget(capacity=10, retry_cost=6)
    control = hedged(budget=budget)
    call, first = start(control)
    hedge(call)
    assert budget.tokens == 4
    assert call.hedge() is None and not call.can_hedge()


@pytest.mark.parametrize("policy_max,in_flight_max,started,next_after_failure", [
    (2, 3, 2, None),  # the policy's max_attempts counts every attempt of the try
    (5, 2, 2, 3),  # Hedging.max_attempts counts those in flight: a failure frees a place
    (5, 3, 3, 4),
], ids=["policy-max-attempts", "two-in-flight", "three-in-flight"])
def test_hedges_start_up_to_the_attempt_limits(policy_max: int, in_flight_max: int,
                                               started: int,
                                               next_after_failure: int | None) -> None:
    """Hedges start while fewer than ``Hedging.max_attempts`` are in flight and fewer than
    the policy's ``max_attempts`` were started; a retryable outcome while others run
    frees a place in flight, not in the policy's count."""
    control = hedged(RetryPolicy(max_attempts=policy_max, **STEADY),
                     Hedging(DELAY, max_attempts=in_flight_max))
    call, first = start(control)
    slots = [first]
    while call.can_hedge():
        slots.append(hedge(call))
    assert len(slots) == started
    assert call.hedge() is None
    assert call.done(first, httpx.Response(503)) == ("more", None)
    after = call.hedge()
    assert (after and after.number) == next_after_failure


def test_no_hedge_starts_once_the_transport_is_closed() -> None:
    """After the transport is closed, no hedge starts (no guard is asked); the attempt in
    flight still ends the try."""
    spy = Spy()
    control = hedged(guards=(spy,))
    call, first = start(control)
    control.closes += 1
    assert call.hedge() is None
    assert spy.log == [("admit", "first", None)]
    assert call.done(first, httpx.Response(200)) == ("win", None)


@pytest.mark.parametrize("left,hedges", [
    (2 * MIN_ATTEMPT, True), (MIN_ATTEMPT / 2, False),
], ids=["time-left", "less-than-min-attempt"])
def test_no_hedge_starts_with_less_than_min_attempt_left(left: float, hedges: bool) -> None:
    """A hedge needs ``MIN_ATTEMPT`` of the deadline left, and its timeouts end within it."""
    clock = Clock()
    control = hedged(RetryPolicy(deadline=1.0, **STEADY), clock=clock)
    call, first = start(control)
    clock.now = 1.0 - left
    slot = call.hedge()
    assert (slot is not None) is hedges
    if slot is not None:
        assert slot.request.extensions["timeout"] == pytest.approx(
            dict.fromkeys(("connect", "read", "write", "pool"), left))


def test_no_first_attempt_begins_once_the_deadline_has_passed() -> None:
    """The try's first attempt is not begun with no time left: ``DeadlineExceeded``."""
    clock = Clock()
    control = hedged(RetryPolicy(deadline=1.0), clock=clock)
    call = HedgedCall(control, get(), control.hedging)  # type: ignore[arg-type]
    clock.now = 1.0
    with pytest.raises(httpx.TimeoutException) as raised:
        call.begin()
    info = retry_info(raised.value)
    assert info is not None and info.stop_reason is StopReason.DEADLINE


# -- more, retry, stop ----------------------------------------------------------------------


def test_a_retryable_outcome_while_others_run_waits_for_them() -> None:
    """A retryable outcome while another attempt runs is ``more``: nothing handed over,
    nothing waited, its record kept for the try's end; the other's answer then decides."""
    spy = Spy()
    control = hedged(guards=(spy,))
    call, first = start(control)
    second = hedge(call)
    failed = httpx.Response(503, headers={"Retry-After": "2"})
    assert call.done(first, failed) == ("more", None)
    assert retry_info(failed) is None
    assert ("settle", "t1", 503) in spy.log
    assert call.running == 1
    response = httpx.Response(200)
    assert call.done(second, response) == ("win", None)
    info = retry_info(response)
    assert info is not None
    assert [(a.status, a.retry_after, a.wait, a.hedge) for a in info.history] == [
        (503, 2.0, 0.0, False), (200, None, 0.0, True)]
    assert (info.total_wait, control.stats().retries) == (0.0, 0)


@pytest.mark.parametrize("last", ["first", "hedge"])
def test_every_attempt_failed_retryably_retries_after_the_wait(last: str) -> None:
    """When no attempt of the try is left in flight and each failed retryably, the try
    ends with ``retry`` and the backoff's wait (the hedge counted among the attempts),
    recorded on the attempt judged last; the retry is then a single attempt, number 3."""
    spy = Spy(reason=StopReason.BUDGET_EXHAUSTED, veto="paid")
    control, events = hooked(RetryPolicy(**STEADY), hedging=Hedging(DELAY), guards=(spy,))
    request = get()
    call, first = start(control, request)
    second = hedge(call)
    slots = {"first": first, "hedge": second}
    early, late = (second, first) if last == "first" else (first, second)
    assert call.done(early, httpx.Response(502)) == ("more", None)
    assert call.done(late, httpx.Response(503)) == ("retry", 1.0)  # 0.5 * 2 ** 1
    assert spy.log[-1] == ("veto", 503)
    assert [(e.kind, e.attempt, e.wait, e.status) for e in events][-1] == (
        "retry", 2, 1.0, 503)
    assert control.stats().retries == 1
    assert call.attempt_request() is request
    assert request.extensions["retry_attempt"] == 3
    assert spy.log[-1:] == [("admit", "retry", "paid")]
    response = httpx.Response(200)
    assert call.on_response(response) is None
    info = retry_info(response)
    assert info is not None
    assert [(a.status, a.hedge, a.wait) for a in info.history] == [
        (503 if slots[last] is first else 502, False, 1.0 if last == "first" else 0.0),
        (503 if slots[last] is second else 502, True, 1.0 if last == "hedge" else 0.0),
        (200, False, 0.0)]
    assert (info.attempts, info.retries, info.hedges, info.total_wait) == (3, 2, 1, 1.0)


def _budget_veto() -> dict[str, Any]:
    return {"guards": (Spy(reason=StopReason.BUDGET_EXHAUSTED,
                           veto=StopReason.BUDGET_EXHAUSTED),)}


#: A rule that stops the retry once every attempt failed: (policy fields, options, the
#: last answer's headers, the stop reason).
STOPS: dict[str, tuple[dict[str, Any], Callable[[], dict[str, Any]], dict[str, str],
                       StopReason]] = {
    "max-attempts": ({"max_attempts": 2}, dict, {}, StopReason.MAX_ATTEMPTS),
    "retry-after-too-long": ({}, dict, {"Retry-After": "3600"},
                             StopReason.RETRY_AFTER_TOO_LONG),
    "deadline": ({"deadline": 1.0}, dict, {"Retry-After": "1"}, StopReason.DEADLINE),
    "budget": ({}, _budget_veto, {}, StopReason.BUDGET_EXHAUSTED),
}


@pytest.mark.parametrize("case", STOPS)
def test_a_rule_stops_the_retry_after_every_attempt_failed(case: str) -> None:
    """Every attempt failed retryably and a rule stops the retry: ``stop``, and the last
    outcome, the hedge's, is handed over with the try's records, counted and told as given
    up, and counted as a hedge's win."""
    fields, options, headers, reason = STOPS[case]
    control, events = hooked(RetryPolicy(**{**STEADY, **fields}), hedging=Hedging(DELAY),
                             **options())
    call, first = start(control)
    second = hedge(call)
    assert call.done(first, httpx.Response(503)) == ("more", None)
    last = httpx.Response(503, headers=headers)
    assert call.done(second, last) == ("stop", None)
    info = retry_info(last)
    assert info is not None and info.stop_reason is reason
    assert [(a.status, a.hedge) for a in info.history] == [(503, False), (503, True)]
    assert (info.hedges, info.total_wait) == (1, 0.0)
    assert (info.history[-1].refused_wait is not None) is (reason is StopReason.DEADLINE)
    stats = control.stats()
    assert stats.gave_up == {reason: 1}
    assert stats.hedge_wins == 1  # the hedge's answer is the one handed over
    assert [(e.kind, e.stop_reason) for e in events][-1] == ("give_up", reason)


# -- attempts that leave the try unjudged ----------------------------------------------------


def _spent(budget: RetryBudget) -> RetryBudget:
    """``budget`` below its capacity, so that what goes back shows."""
    assert budget.acquire() is not None
    return budget


def test_a_hedge_never_sent_gives_its_cost_back() -> None:
    """A hedge made ready but never sent (the transport closed before a worker took it)
    leaves the try: what its admission took goes back, its ticket is settled without a
    verdict, and the try goes on as if it had never been."""
    spy, budget = Spy(), _spent(RetryBudget(capacity=100))
    control = hedged(budget=budget, guards=(spy,))
    call, first = start(control)
    tokens = budget.tokens
    slot = call.hedge()
    assert slot is not None and budget.tokens == tokens - 5
    call.done_unsent(slot)
    assert budget.tokens == tokens
    assert spy.log[-2:] == [("refund", "t2"), ("settle", "t2", None)]
    assert call.running == 1
    response = httpx.Response(200)
    assert call.done(first, response) == ("win", None)
    assert retry_info(response) is control.final(200)[0]
    assert control.stats().hedges == 0


def test_a_hedge_still_waiting_for_a_connection_when_the_try_ends_is_no_hedge() -> None:
    """A hedge admitted but not yet on the wire when another attempt wins is no hedge: not
    in the record, the stats or the events, its cost back; its leaving the pool after
    that counts nothing."""
    spy, budget = Spy(), _spent(RetryBudget(capacity=100))
    control, events = hooked(RetryPolicy(**STEADY), hedging=Hedging(DELAY),
                             budget=budget, guards=(spy,))
    call, first = start(control)
    tokens = budget.tokens
    slot = call.hedge()
    assert slot is not None
    response = httpx.Response(200)
    assert call.done(first, response) == ("win", None)
    info = retry_info(response)
    assert info is not None
    assert [(a.status, a.hedge) for a in info.history] == [(200, False)]
    assert (info.attempts, info.hedges) == (1, 0)
    assert ("refund", "t2") in spy.log and ("settle", "t2", None) in spy.log
    assert budget.tokens == tokens + 1  # the cost back, and the success's refund
    call.sent(slot, DELAY)
    assert (control.stats().hedges, events) == (0, [])


@pytest.mark.parametrize("late,settled", [
    (lambda: httpx.Response(503), 503),
    (lambda: httpx.ReadTimeout("slow"), "ReadTimeout"),
    (lambda: KeyboardInterrupt(), None),
], ids=["response", "error", "interrupt"])
def test_a_loser_that_runs_on_is_settled_with_its_own_outcome(late: Any,
                                                               settled: object) -> None:
    """A loser that runs on (``losers_run``, sync) is recorded as cancelled when the try
    ends: the guards that only account for the request settle at once without a verdict,
    those that judge the origin's health when it ends (``late``), with its own outcome."""
    health, account = Spy("h", health=True), Spy("a")
    control = hedged(guards=(health, account))
    call, first = start(control)
    call.losers_run = True
    second = hedge(call)
    response = httpx.Response(200)
    assert call.done(second, response) == ("win", None)
    info = retry_info(response)
    assert info is not None and info.history[0].cancelled
    assert ("settle", "a1", None) in account.log
    assert not any(entry[:2] == ("settle", "h1") for entry in health.log)
    call.late(first, late())
    assert health.log[-1] == ("settle", "h1", settled)
    call.late(first, late())  # once only
    assert [entry for entry in health.log if entry[:2] == ("settle", "h1")] == [
        ("settle", "h1", settled)]


def test_a_cancelled_loser_is_settled_when_the_try_ends() -> None:
    """Without ``losers_run`` (async: a loser is cancelled), every ticket of a loser is
    settled without a verdict when the try ends, and ``late`` has nothing left to settle."""
    health = Spy("h", health=True)
    control = hedged(guards=(health,))
    call, first = start(control)
    second = hedge(call)
    assert call.done(second, httpx.Response(200)) == ("win", None)
    assert health.log[-1] == ("settle", "h1", None)
    settled = len(health.log)
    call.late(first, httpx.Response(503))
    assert len(health.log) == settled


def test_a_quick_first_attempt_is_adopted_with_its_plain_tickets() -> None:
    """A first attempt sent on the quick path joins a hedged try as attempt 1, with the
    delay it was given and the guards' plain tickets (the budget's refund on a success)."""
    budget = _spent(RetryBudget(capacity=100))
    control, events = hooked(RetryPolicy(**STEADY), hedging=Hedging(DELAY), budget=budget)
    request = get()
    assert control.quick.first(request) is not None  # sent on the quick path
    call = HedgedCall(control, request, control.hedging,  # type: ignore[arg-type]
                      quick=True, stream=request.stream)
    first = call.adopt(request, 0.25, 0.0)
    assert (first.number, first.request is request, first.hedge) == (1, True, False)
    tokens = budget.tokens
    response = httpx.Response(200)
    assert call.done(first, response) == ("win", None)
    assert retry_info(response) is control.final(200)[0]
    assert budget.tokens == tokens + budget.success_refund
    assert control.stats().requests == 1


def test_an_adopted_attempts_hedge_waits_the_delay_it_was_given() -> None:
    """The hedge of an adopted first attempt is numbered 2 and told with that delay."""
    control, events = hooked(RetryPolicy(**STEADY), hedging=Hedging(DELAY))
    request = get()
    assert control.quick.first(request) is not None  # sent on the quick path
    call = HedgedCall(control, request, control.hedging,  # type: ignore[arg-type]
                      quick=True, stream=request.stream)
    call.adopt(request, 0.25, 0.0)
    slot = hedge(call, 0.25)
    assert slot.number == 2
    assert [(e.kind, e.attempt, e.wait) for e in events] == [("hedge", 2, 0.25)]


@pytest.mark.parametrize("losers_run", [False, True], ids=["cancelled", "run-on"])
def test_abandon_settles_every_attempt_in_flight(losers_run: bool) -> None:
    """The request ends outside the decisions (a cancellation, an interrupt): every
    attempt in flight is settled without a verdict, except those that run on, which
    ``late`` settles when they end."""
    spy = Spy()
    control = hedged(guards=(spy,))
    request = get()
    call, first = start(control, request)
    call.losers_run = losers_run
    second = hedge(call)
    call.abandon()
    settled = [entry for entry in spy.log if entry[0] == "settle"]
    assert settled == ([] if losers_run else [("settle", "t1", None), ("settle", "t2", None)])
    if losers_run:
        call.late(first, httpx.Response(200))
        call.late(second, httpx.ConnectError("refused"))
        assert [entry for entry in spy.log if entry[0] == "settle"] == [
            ("settle", "t1", 200), ("settle", "t2", "ConnectError")]
    assert request.extensions == {}


class Numbers(Spy):
    """A spy that notes, with each ticket it settles, the attempt number the call shows."""

    def settle(self, call: Any, ticket: object, outcome: Any) -> None:
        super().settle(call, ticket, outcome)
        self.log[-1] = (*self.log[-1], call.attempt)


@pytest.mark.parametrize("way", ["judged", "cancelled", "run-on", "never-sent", "abandoned"])
def test_each_attempts_tickets_are_settled_under_its_own_number(way: str) -> None:
    """The guards are told the number of the attempt whose tickets they settle (a breaker's
    event names it): the hedge's own, 2, however it leaves the try (judged, cancelled when
    the first wins, run on and settled as it ends, never sent, abandoned), and the first's,
    1, even when the hedge's outcome was judged before it."""
    spy = Numbers()
    control = hedged(guards=(spy,))
    call, first = start(control)
    call.losers_run = way == "run-on"
    second = call.hedge()
    assert second is not None
    if way != "never-sent":
        call.sent(second, DELAY)
    if way == "judged":
        assert call.done(second, httpx.Response(503)) == ("more", None)
        assert call.done(first, httpx.Response(503))[0] == "retry"
    elif way in ("cancelled", "run-on"):
        assert call.done(first, httpx.Response(200)) == ("win", None)
        call.late(second, httpx.Response(503))
    elif way == "never-sent":
        call.done_unsent(second)
        assert call.done(first, httpx.Response(200)) == ("win", None)
    else:
        call.abandon()
    settled = {entry[1]: entry[3] for entry in spy.log if entry[0] == "settle"}
    assert settled == {"t1": 1, "t2": 2}
