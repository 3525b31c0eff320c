"""The per-request state machine itself, driven directly with tiny fake requests and
responses (no HTTP library object crosses it): one case per stop reason, the rule order
where two rules apply, and the guard seam with a guard of the test's own."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Final

import httpx
import pytest

from retry_transport import CircuitBreaker, RetryBudget, StopReason, retry_info as rt_retry_info
from retry_transport._base.errors import LayeredRetriesWarning
from retry_transport._call.controller import Controller
from retry_transport._call.core import RetryCall
from retry_transport._call.options import Settings
from retry_transport._call.quick import QuickPath
from retry_transport._guards.seam import FIRST, AttemptKind, Guard, Refusal
from retry_transport._guards.throttle import AdaptiveThrottle
from retry_transport._io.transports import HTTPX
from retry_transport._policy.observe import SDK_RETRY_COUNT, SDK_RETRY_WINDOW
from retry_transport._policy.policy import RetryPolicy
from retry_transport._policy.rules import ORDER, Outcome


class Headers(dict[str, str]):
    """Just what the core reads of headers: ``get``, ``in``, and the raw list."""

    @property
    def raw(self) -> list[tuple[bytes, bytes]]:
        return [(k.encode(), v.encode()) for k, v in self.items()]


class URL:
    scheme, host, raw_host, port = "https", "api.example.com", b"api.example.com", None
    netloc, raw_path = b"api.example.com", b"/items"


class Request:
    def __init__(self, method: str = "GET", stream: object = None, **extensions: Any) -> None:
        self.method, self.url, self.headers = method, URL(), Headers()
        self.extensions: dict[str, Any] = dict(extensions)
        self.stream = stream if stream is not None else HTTPX.byte_stream(b"")


class Response:
    def __init__(self, status: int, **headers: str) -> None:
        self.status_code = status
        self.headers = Headers({k.replace("_", "-"): v for k, v in headers.items()})
        self.extensions: dict[str, Any] = {}
        self.stream = HTTPX.byte_stream(b"")


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def controller(policy: RetryPolicy | None = None, **options: Any) -> Controller:
    values = {spec.name: spec.default for spec in Settings.__dataclass_fields__.values()}
    values.update({"budget": None, "cooldown": False, "rng": random.Random(0), **options})
    clock = values.pop("clock", None) or Clock()
    control = Controller(policy or RetryPolicy(), flavour=HTTPX,
                         settings=Settings.checked({**values, "clock": None}), clock=clock)
    control.quick.opened()  # as a driver opens it once its first request is checked
    return control


#: In a list of answers: the transport is closed before the next attempt.
CLOSE: Final = object()


def run(control: Controller, request: Request, answers: list[Any]) -> Any:
    """Drive one request as a driver would, the waits not slept; return what the caller
    gets (the response, or the exception raised)."""
    call: RetryCall | None = None
    stream = request.stream
    try:
        if control.quick.first(request) is None:
            call = RetryCall(control, request)
        while True:
            if answers and answers[0] is CLOSE:
                answers.pop(0)
                control.closes += 1
            if call is not None and call.ready is None:
                call.attempt_request()
            answer = answers.pop(0)
            if call is None:
                if not isinstance(answer, Exception) and control.quick.ends(request, answer):
                    return answer
                call = RetryCall(control, request, quick=True, stream=stream)
            if isinstance(answer, Exception):
                if call.on_error(answer) is None:
                    return answer
            elif call.on_response(answer) is None:
                return answer
    except Exception as exc:  # a guard's refusal
        if call is not None:
            call.abandon()
        return exc


def reason_of(result: Any) -> StopReason:
    from retry_transport import retry_info

    info = retry_info(result)
    assert info is not None
    return info.stop_reason


def _spent() -> RetryBudget:
    budget = RetryBudget(capacity=5, retry_cost=5, timeout_retry_cost=5)
    assert budget.acquire() == 5
    return budget


def _tripped() -> CircuitBreaker:
    return CircuitBreaker(min_requests=1, failure_ratio=1.0, clock=Clock())


class _Below(random.Random):
    def random(self) -> float:
        return 0.0  # below any probability above 0


def _overloaded() -> AdaptiveThrottle:
    """A throttle at its boundary (20 requests, 10 accepts: probability 0): the first
    attempt goes; its 503 tips it over (1/22), and the retry is refused (the draw below)."""
    throttle = AdaptiveThrottle(rng=_Below(), clock=Clock())
    for n in range(20):
        throttle.record("https://api.example.com:443", n % 2 == 0)
    return throttle


#: One case per stop reason: (policy fields, options, request, answers).
CASES: dict[StopReason, tuple[dict[str, Any], Callable[[], dict[str, Any]], Request,
                              list[Any]]] = {
    StopReason.SUCCESS: ({}, dict, Request(), [Response(200)]),
    StopReason.NOT_RETRYABLE: ({}, dict, Request(), [Response(404)]),
    StopReason.SERVER_DECLINED: ({}, dict, Request(), [Response(503, x_should_retry="false")]),
    StopReason.DISABLED: ({}, dict, Request(retry=False), [Response(503)]),
    StopReason.UNSAFE_METHOD: ({}, dict, Request("POST"), [Response(503)]),
    StopReason.BODY_NOT_REPLAYABLE: ({}, dict, Request(stream=iter([b"x"])), [Response(503)]),
    StopReason.MAX_ATTEMPTS: ({"max_attempts": 2}, dict, Request(),
                              [Response(503), Response(503)]),
    StopReason.RETRY_AFTER_TOO_LONG: ({}, dict, Request(), [Response(503, retry_after="3600")]),
    StopReason.DEADLINE: ({"deadline": 0.5}, dict, Request(), [Response(503, retry_after="1")]),
    StopReason.CIRCUIT_OPEN: ({}, lambda: {"breaker": _tripped()}, Request(), [Response(503)]),
    StopReason.THROTTLED: ({}, lambda: {"throttle": _overloaded(), "budget": _spent()},
                           Request(), [Response(503)]),
    StopReason.BUDGET_EXHAUSTED: ({}, lambda: {"budget": _spent()}, Request(), [Response(503)]),
    StopReason.CLOSED: ({}, dict, Request(), [Response(503), CLOSE, Response(200)]),
}


#: Decided when a body handed over stalls, after the core's verdict: its own case below.
AFTER_HAND_OVER: Final = frozenset({StopReason.IDLE_TIMEOUT})


def test_every_stop_reason_has_a_case() -> None:
    assert set(CASES) | AFTER_HAND_OVER == set(ORDER)


@pytest.mark.parametrize("reason", [r for r in ORDER if r not in AFTER_HAND_OVER],
                         ids=[r.value for r in ORDER if r not in AFTER_HAND_OVER])
def test_each_stop_reason(reason: StopReason) -> None:
    fields, options, request, answers = CASES[reason]
    result = run(controller(RetryPolicy(**fields), **options()), request, list(answers))
    assert reason_of(result) is reason


def test_a_stall_of_the_body_handed_over_stops_with_idle_timeout() -> None:
    """The core hands a 200 over (``success``); its body's stall, as the drivers' watch
    tells it, makes the stop reason ``idle_timeout``, on the response and the error."""
    from retry_transport._call.idle import IdleWatch

    request = Request()
    response = run(controller(), request, [Response(200, content_type="text/event-stream")])
    assert reason_of(response) is StopReason.SUCCESS
    watch = IdleWatch(2.0, HTTPX, request, response, record=True)
    assert not watch.progress(b": ping\n\n") and watch.progress(b"data: 1\n\n")
    error = watch.stalled()
    assert str(error) == "no event for 2 s after 1 event (idle_timeout)"
    assert reason_of(response) is reason_of(error) is StopReason.IDLE_TIMEOUT


#: Two rules apply; the earlier in ORDER wins: (policy fields, options, request, answers).
PRECEDENCE = [
    ({"max_attempts": 1}, dict, Request("POST"), [Response(503)], StopReason.UNSAFE_METHOD),
    ({"max_attempts": 1}, dict, Request(retry=False), [Response(503)], StopReason.DISABLED),
    ({"max_attempts": 1}, dict, Request(), [Response(503, retry_after="3600")],
     StopReason.MAX_ATTEMPTS),
    ({"deadline": 0.5}, dict, Request(), [Response(503, retry_after="3600")],
     StopReason.RETRY_AFTER_TOO_LONG),
    ({"deadline": 0.5}, lambda: {"breaker": _tripped()}, Request(),
     [Response(503, retry_after="1")], StopReason.DEADLINE),
    ({}, lambda: {"breaker": _tripped(), "budget": _spent()}, Request(), [Response(503)],
     StopReason.CIRCUIT_OPEN),
    ({}, lambda: {"budget": _spent()}, Request(), [Response(503, x_should_retry="false")],
     StopReason.SERVER_DECLINED),
    ({}, lambda: {"breaker": _tripped(), "throttle": _overloaded()}, Request(),
     [Response(503)], StopReason.CIRCUIT_OPEN),
]


@pytest.mark.parametrize("fields,options,request_,answers,expected", PRECEDENCE)
def test_the_earlier_rule_wins(fields: dict[str, Any], options: Callable[[], dict[str, Any]],
                               request_: Request, answers: list[Any],
                               expected: StopReason) -> None:
    result = run(controller(RetryPolicy(**fields), **options()), request_, list(answers))
    assert reason_of(result) is expected


def test_a_spent_budget_is_untouched_when_an_earlier_rule_stops() -> None:
    budget = RetryBudget(capacity=10, retry_cost=5)
    control = controller(RetryPolicy(max_attempts=1), budget=budget)
    run(control, Request(), [Response(503)])
    assert budget.tokens == 10


# -- the seam, with a guard of the test's own ----------------------------------------------------


class Spy:
    """A guard that records what the core asks and tells it."""

    learns = False
    idle_ticket = None
    count_success = None

    def __init__(self, reason: StopReason | None = None, refuse_on: int = 0,
                 veto: object = None) -> None:
        self.reason = reason
        self.idle = False
        self.refuse_on, self.answer = refuse_on, veto
        self.log: list[tuple[Any, ...]] = []

    def admit(self, call: Any, kind: AttemptKind, paid: object) -> object:
        self.log.append(("admit", call.attempt, "FIRST" if kind is FIRST else paid))
        if call.attempt == self.refuse_on:
            return Refusal(StopReason.CIRCUIT_OPEN, "circuit_open", "no", origin=call.origin,
                           remaining=1.0)
        return f"ticket {call.attempt}"

    def settle(self, call: Any, ticket: object, outcome: Outcome | None) -> None:
        self.log.append(("settle", ticket, None if outcome is None else outcome.status))

    def idle_for(self, request: Any) -> bool:
        return False

    def settle_idle(self, request: Any, outcome: Outcome) -> None:
        self.log.append(("settle_idle", self.idle_ticket, outcome.status))

    def learn(self, call: Any, outcome: Outcome) -> None:
        pass

    def veto(self, call: Any, outcome: Outcome) -> object:
        self.log.append(("veto", outcome.status))
        return self.answer

    def refund(self, call: Any, paid: object) -> None:
        self.log.append(("refund", paid))


def with_guards(*guards: Guard) -> Controller:
    control = controller()
    control.guards = tuple(guards)
    control.vetoes = tuple(i for i, g in enumerate(guards) if g.reason is not None)
    quick = control.quick
    control.quick = QuickPath(control.guards, control.policy, sends_as_is=quick._as_is,
                              reads_quotas=quick.reads_quotas, requests=control.request_counter,
                              sample=quick._sample, final_pairs=control.final_pairs,
                              final=control.final, observer=control.observer,
                              clock=control.clock)
    control.quick.opened()
    return control


def test_tickets_are_settled_with_their_attempts_outcome_and_vetoes_carry_over() -> None:
    spy = Spy(StopReason.BUDGET_EXHAUSTED, veto="paid")
    result = run(with_guards(spy), Request(), [Response(503), Response(200)])
    assert result.status_code == 200
    assert spy.log == [
        ("admit", 1, "FIRST"), ("settle", "ticket 1", 503), ("veto", 503),
        ("admit", 2, "paid"), ("settle", "ticket 2", 200),
    ]


def test_a_veto_stops_the_retry_with_its_reason() -> None:
    spy = Spy(StopReason.BUDGET_EXHAUSTED, veto=StopReason.BUDGET_EXHAUSTED)
    result = run(with_guards(spy), Request(), [Response(503)])
    assert reason_of(result) is StopReason.BUDGET_EXHAUSTED
    assert spy.log[-1] == ("veto", 503)


def test_a_refusal_settles_the_earlier_tickets_without_a_verdict() -> None:
    first, second = Spy(), Spy(refuse_on=1)
    result = run(with_guards(first, second), Request(), [])
    assert isinstance(result, HTTPX.errors["circuit_open"])
    assert reason_of(result) is StopReason.CIRCUIT_OPEN
    assert first.log == [("admit", 1, "FIRST"), ("settle", "ticket 1", None)]
    assert second.log == [("admit", 1, "FIRST")]


def test_an_abandoned_attempt_is_settled_without_a_verdict() -> None:
    spy = Spy()
    call = RetryCall(with_guards(spy), Request())  # its first attempt admitted, then sent
    call.abandon()  # the driver was cancelled mid-attempt
    assert spy.log == [("admit", 1, "FIRST"), ("settle", "ticket 1", None)]


def test_quiet_guards_are_not_asked_and_give_their_plain_ticket() -> None:
    spy = Spy()
    spy.idle, spy.idle_ticket = True, "plain"
    control = with_guards(spy)
    run(control, Request(), [Response(200)])
    assert spy.log == [("settle_idle", "plain", 200)]


def test_a_plain_first_attempt_that_is_not_final_is_settled_as_any_other() -> None:
    spy = Spy()
    spy.idle, spy.idle_ticket = True, "plain"
    control = with_guards(spy)
    run(control, Request(), [Response(503), Response(200)])
    assert spy.log == [("settle", "plain", 503), ("admit", 2, None), ("settle", "ticket 2", 200)]


def test_a_plain_first_attempt_that_fails_is_settled_as_any_other() -> None:
    spy = Spy()
    spy.idle, spy.idle_ticket = True, "plain"
    control = with_guards(spy)
    result = run(control, Request(), [httpx.ConnectError("refused"), Response(404)])
    assert result.status_code == 404
    assert spy.log == [("settle", "plain", None), ("admit", 2, None), ("settle", "ticket 2", 404)]


def test_the_request_is_left_as_it_came_after_a_plain_success() -> None:
    request = Request()
    before = (dict(request.headers), dict(request.extensions))
    run(controller(), request, [Response(200)])
    assert (dict(request.headers), dict(request.extensions)) == before


def test_a_retry_refused_after_its_wait_gives_the_later_vetoes_back() -> None:
    """The first guard refuses the retry after the second one's veto paid for it: the
    second is told to give back what it took, and the retry counts in the metadata."""
    first = Spy(refuse_on=2)
    second = Spy(reason=StopReason.BUDGET_EXHAUSTED, veto=7)
    control = with_guards(first, second)
    control.vetoes = (1,)
    result = run(control, Request(), [Response(503)])
    assert isinstance(result, HTTPX.errors["circuit_open"])
    assert ("refund", 7) in second.log
    info = rt_retry_info(result)
    assert (info.attempts, info.retries) == (1, 1)


# -- an SDK retrying above the transport: the quick path's watch -------------------------


def sdk_request(count: str | None) -> Request:
    """A POST as the OpenAI and Anthropic SDKs send it: their retry count in a header."""
    request = Request("POST")
    if count is not None:
        request.headers[SDK_RETRY_COUNT] = count
    return request


@pytest.mark.parametrize("answers", [
    [Response(409)],  # final at once on the quick path
    [Response(503)],  # a retryable status given up on (unsafe_method)
    [ValueError("broken")],  # an error handed back
], ids=["final", "given-up", "error"])
def test_a_failure_an_sdk_may_retry_turns_the_watch_on(answers: list[Any]) -> None:
    """The quick path reads no header until a failure is handed back for a request that
    carries an SDK's count; then each request's count is read as it starts, and the SDK's
    retry (count 1) is warned of, even one answered at once; the watch then ends."""
    control = controller()
    quick = control.quick
    run(control, sdk_request(None), list(answers))  # no SDK above: nothing to look for
    assert quick.open
    run(control, sdk_request("0"), list(answers))
    assert not quick.open
    with pytest.warns(LayeredRetriesWarning, match="x-stainless-retry-count: 1"):
        assert run(control, sdk_request("1"), [Response(200)]).status_code == 200
    assert control.observer.layered
    run(control, sdk_request("2"), [Response(200)])  # warned once: no more reading
    assert quick.open
    run(control, sdk_request("0"), list(answers))
    assert quick.open


def test_the_watch_ends_with_its_window() -> None:
    """SDK_RETRY_WINDOW seconds of the transport's clock after the failure, the quick path
    reads no more counts (an SDK waits less than that before its retry)."""
    clock = Clock()
    control = controller(clock=clock)
    run(control, sdk_request("0"), [Response(409)])
    clock.now += SDK_RETRY_WINDOW - 0.001
    run(control, sdk_request("0"), [Response(200)])
    assert not control.quick.open
    clock.now += 0.001
    run(control, sdk_request("1"), [Response(200)])  # no warning: the suite would raise it
    assert control.quick.open and not control.observer.layered


def test_without_a_quick_path_every_request_is_read_as_it_starts() -> None:
    """A transport whose settings send no first attempt as it is (here a deadline) reads
    each request's count as its call starts, with no failure before, and watches nothing."""
    control = controller(RetryPolicy(deadline=30.0))
    with pytest.warns(LayeredRetriesWarning):
        run(control, sdk_request("1"), [Response(200)])
    run(control, sdk_request("0"), [Response(409)])
    assert not control.quick.open and control.observer.layered
