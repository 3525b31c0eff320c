"""The decisions of a resumable body, driven directly as the driver's body would, with no
I/O: a final answer handed over, its body read (bytes counted, events fed), broken, and
resumed with answers and errors built here. One case per way a resumption ends (the break
raised, the very object, noted, with its record) and per resumption taken; the waits, the
records, the guards' tickets, the stats and the events each leaves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from retry_transport import Resume, RetryBudget, RetryEvent, StopReason, retry_info
from retry_transport._call.controller import Controller
from retry_transport._call.core import RetryCall
from retry_transport._call.resumption import Resumption, resumption
from retry_transport._guards.seam import RETRY
from retry_transport._policy.policy import RetryPolicy
from tests.call.fakes import URL, Clock, Spy, controller, hooked

ETAG = '"v1"'
#: Deterministic backoff: 0.5 s before the first resumption, doubled for each one after.
STEADY: dict[str, Any] = {"jitter": "none", "base_delay": 0.5}


def named(headers: dict[str, str]) -> dict[str, str]:
    """Headers given as keywords: ``content_length`` is ``content-length``."""
    return {name.replace("_", "-"): value for name, value in headers.items()}


def get(**headers: str) -> httpx.Request:
    return httpx.Request("GET", URL, headers=named(headers))


def on_the_wire(status: int, **headers: str) -> httpx.Response:
    """A response whose body is still to be read from the wire (not held in memory)."""
    return httpx.Response(status, headers=named(headers), stream=httpx.SyncByteStream())


def whole() -> httpx.Response:
    """A 200 of a 10-byte representation with a strong validator: resumable by ranges."""
    return on_the_wire(200, etag=ETAG, content_length="10")


def part(first: int, last: int = 9, etag: str = ETAG) -> httpx.Response:
    """The 206 of bytes ``first`` to ``last`` of that representation."""
    return on_the_wire(206, etag=etag, content_range=f"bytes {first}-{last}/10",
                       content_length=str(last + 1 - first))


def stream() -> httpx.Response:
    """A 200 event stream: resumable by event ID."""
    return on_the_wire(200, content_type="text/event-stream")


def resumable(policy: RetryPolicy | None = None, resume: Resume | None = None,
              **options: Any) -> tuple[Controller, list[RetryEvent]]:
    """A resuming transport's controller and the events its hooks receive."""
    return hooked(policy or RetryPolicy(**STEADY), resume=resume or Resume(),
                  clock=options.pop("clock", None) or Clock(), **options)


class Body:
    """A response's body as the driver's resumable stream reads it: the request's final
    answer handed over, then read, broken and resumed through its :class:`Resumption`."""

    def __init__(self, control: Controller, response: httpx.Response,
                 request: httpx.Request | None = None) -> None:
        self.control = control
        self.request = request or get()
        call = RetryCall(control, self.request)
        if call.ready is None:
            call.attempt_request()
        assert call.on_response(response) is None
        state = resumption(call, response)
        assert state is not None
        self.state: Resumption = state
        self.response = response
        #: Each break, in order: the last is what an ending raises.
        self.breaks: list[Exception] = []

    @property
    def clock(self) -> Clock:
        clock = self.control.clock
        assert isinstance(clock, Clock)
        return clock

    def read(self, data: bytes) -> None:
        """The caller read ``data`` of the body: counted (ranges) or scanned (events)."""
        state = self.state
        if state.ranges is not None:
            state.ranges.read += len(data)
        else:
            assert state.scanner is not None
            state.scanner.feed(data)

    def broke(self) -> float:
        """The body broke (a lost connection): the wait before its resumption."""
        error = httpx.ReadError("the connection was lost")
        self.breaks.append(error)
        assert self.state.breaks(error)
        return self.state.on_break(error)

    def resume(self, answer: httpx.Response) -> float | None:
        """Send the resumption and judge its ``answer``: ``None`` when it is taken."""
        self.state.attempt_request()
        return self.state.on_response(answer)


# -- what is resumed -----------------------------------------------------------------------


@pytest.mark.parametrize("options,request_,response,resumed", [
    ({}, get, whole, True),
    ({}, get, stream, True),
    ({"resume": None}, get, whole, False),
    ({}, lambda: httpx.Request("DELETE", URL), whole, False),
    ({}, get, lambda: httpx.Response(200, headers={"etag": ETAG}, content=b"0123456789"),
     False),
    ({}, get, lambda: on_the_wire(200, etag='W/"v1"'), False),
    ({"resume": Resume(ranges=False)}, get, whole, False),
], ids=["ranges", "events", "no-resume", "not-a-get", "in-memory", "weak-etag",
        "ranges-off"])
def test_only_a_body_the_headers_allow_is_resumed(options: dict[str, Any],
                                                  request_: Callable[[], httpx.Request],
                                                  response: Callable[[], httpx.Response],
                                                  resumed: bool) -> None:
    """A final answer to a ``GET``, read from the wire, whose headers allow it (a strong
    ``ETag``, or an event stream), with ``Resume`` on: else there is nothing to resume."""
    control = controller(RetryPolicy(), **{"resume": Resume(), **options})
    call, answer = RetryCall(control, request_()), response()
    if call.ready is None:
        call.attempt_request()
    assert call.on_response(answer) is None
    assert (resumption(call, answer) is not None) is resumed


@pytest.mark.parametrize("error,breaks", [
    (httpx.ReadError("lost"), True),
    (httpx.RemoteProtocolError("cut short"), True),
    (httpx.ReadTimeout("slow"), True),
    (ValueError("a bug"), False),
], ids=["read-error", "protocol-error", "timeout", "value-error"])
def test_a_break_is_an_error_a_retry_may_fix(error: Exception, breaks: bool) -> None:
    """Only an error a retry may fix is a break to resume; another is the caller's."""
    control, _ = resumable()
    assert Body(control, whole()).state.breaks(error) is breaks


# -- resumptions taken ----------------------------------------------------------------------


@pytest.mark.parametrize("caller,first,read,asked", [
    ({}, whole, b"0123", "bytes=4-"),
    ({"Range": "bytes=2-7"}, lambda: part(2, 7), b"234", "bytes=5-7"),
], ids=["whole", "callers-range"])
def test_a_resumption_by_ranges_asks_for_the_bytes_not_yet_read(
        caller: dict[str, str], first: Callable[[], httpx.Response], read: bytes,
        asked: str) -> None:
    """A broken body is asked again for the bytes not read, of the same representation
    (``Range``, ``If-Range``, replacing the caller's own), numbered as the next attempt."""
    control, _ = resumable()
    body = Body(control, first(), get(accept="application/octet-stream", **caller))
    body.read(read)
    body.broke()
    request = body.state.attempt_request()
    assert request.headers.get_list("range") == [asked]
    assert request.headers["if-range"] == ETAG
    assert request.headers["accept"] == "application/octet-stream"
    assert request.extensions["retry_attempt"] == 2
    assert body.request.headers.get("range") == caller.get("Range")  # the caller's untouched


def test_a_taken_resumption_by_ranges_is_recorded_where_it_went_on() -> None:
    """A 206 of the bytes asked for is taken: the record shows the break (its error, the
    wait) and the resumption (its status, ``resumed_at``), counted as a resumption, not a
    retry, and told as a ``resume`` event; the response's record is kept current."""
    control, events = resumable()
    body = Body(control, whole())
    body.read(b"0123")
    assert body.broke() == 0.5
    assert body.resume(part(4)) is None
    info = retry_info(body.response)
    assert info is not None
    assert [(a.status, a.error, a.wait, a.resumed_at) for a in info.history] == [
        (200, "ReadError", 0.5, None), (206, None, 0.0, 4)]
    assert (info.attempts, info.retries, info.resumes, info.total_wait) == (2, 0, 1, 0.5)
    assert info.stop_reason is StopReason.SUCCESS
    assert [(e.kind, e.attempt, e.wait, e.status, e.error, e.resumed_at) for e in events] == [
        ("resume", 2, 0.5, 200, "ReadError", 4)]
    stats = control.stats()
    assert (stats.resumes, stats.retries, stats.gave_up) == (1, 0, {})


def test_a_taken_event_stream_resumption_goes_on_from_the_last_whole_event() -> None:
    """An event stream is asked again with the ID of the last event that ended (not one
    torn by the break), and a 200 event stream is taken."""
    control, events = resumable()
    body = Body(control, stream(), get(last_event_id="3"))
    body.read(b"id: 7\ndata: a\n\nid: 8\ndata: torn")
    body.broke()
    request = body.state.attempt_request()
    assert request.headers.get_list("last-event-id") == ["7"]
    assert body.state.on_response(stream()) is None
    info = retry_info(body.response)
    assert info is not None and info.history[-1].resumed_at == "7"
    assert [(e.kind, e.resumed_at) for e in events] == [("resume", "7")]
    body.read(b"data: b\n\n")  # the torn event's ID went with it: still 7
    body.broke()
    assert body.state.attempt_request().headers["last-event-id"] == "7"


def test_an_event_stream_with_no_event_read_goes_on_from_the_callers_id() -> None:
    """The ID the request itself sent is where the server went on from: a stream that
    breaks before any event ended is asked again from it."""
    control, _ = resumable()
    body = Body(control, stream(), get(last_event_id="3"))
    body.read(b"data: half an ev")
    body.broke()
    assert body.state.attempt_request().headers["last-event-id"] == "3"


# -- the waits -------------------------------------------------------------------------------


#: (policy fields, the first answer, what was read, the resumption's answer's headers or
#: None (the wait is the break's), the wait).
WAITS = {
    "backoff": ({}, whole, b"0123", None, 0.5),
    "stream-retry-plus-backoff": ({}, stream, b"retry: 3000\nid: 1\n\n", None, 3.5),
    "short-stream-retry-plus-backoff": ({}, stream, b"retry: 100\nid: 1\n\n", None, 0.6),
    "stream-retry-capped": ({"max_retry_after": 30.0}, stream,
                            b"retry: 99999999999\nid: 1\n\n", None, 30.5),
    "retry-after": ({}, whole, b"0123", {"retry-after": "2"}, 2.0),
    "backoff-over-retry-after": ({}, whole, b"0123", {"retry-after-ms": "200"}, 1.0),
}


@pytest.mark.parametrize("case", WAITS)
def test_the_wait_before_a_resumption(case: str) -> None:
    """The policy's backoff for the resumptions so far, plus an event stream's ``retry``
    time (capped by ``max_retry_after``), raised to the server's ``Retry-After``."""
    fields, first, read, headers, expected = WAITS[case]
    control, _ = resumable(RetryPolicy(**{**STEADY, **fields}))
    body = Body(control, first())
    body.read(read)
    wait: float | None = body.broke()
    if headers is not None:
        wait = body.resume(on_the_wire(503, **headers))
    assert wait == expected
    info = retry_info(body.response)
    assert info is not None
    assert info.total_wait == (0.5 if headers is not None else 0.0) + expected
    assert info.history[-1].wait == expected


# -- the ways resumption ends --------------------------------------------------------------


def _veto(reason: StopReason) -> dict[str, Any]:
    return {"guards": (Spy(reason=reason, veto=reason),)}


def _max_resumes(body: Body) -> None:
    body.read(b"0123")
    body.broke()
    assert body.resume(part(4)) is None
    body.read(b"45")
    body.broke()


def _answered(answer: Callable[[], httpx.Response], read: bytes = b"0123") -> Any:
    def steps(body: Body) -> None:
        body.read(read)
        body.broke()
        body.resume(answer())
    return steps


def _late(body: Body) -> None:
    body.clock.now = 9.6  # a wait of 0.5 would end past the deadline
    body.read(b"0123")
    body.broke()


def _passed_in_the_wait(body: Body) -> None:
    body.read(b"0123")
    body.broke()
    body.clock.now = 10.0
    body.state.attempt_request()


def _refused(body: Body) -> None:
    body.read(b"0123")
    body.broke()
    body.state.attempt_request()


def _closed_transport(body: Body) -> None:
    body.read(b"0123")
    body.broke()
    body.control.closes += 1
    body.state.attempt_request()


def _closed_response(body: Body) -> None:
    body.read(b"0123")
    body.broke()
    body.state.closed()


def _no_event_id(body: Body) -> None:
    body.read(b"data: no id\n\n")
    body.broke()


def _failed(body: Body) -> None:
    body.read(b"0123")
    body.broke()
    body.state.attempt_request()
    body.state.on_error(ValueError("a bug in the inner transport"))


def _broke(body: Body) -> None:
    body.read(b"0123")
    body.broke()


#: One case per way resumption ends: (the transport's options, the first answer, what the
#: body goes through, the stop reason, the resumptions made, why).
ENDINGS: dict[str, tuple[Any, Any, Any, StopReason, int, str]] = {
    "max-resumes": (lambda: {"resume": Resume(1)}, whole, _max_resumes,
                    StopReason.MAX_ATTEMPTS, 1, "max_resumes (1) reached"),
    "retry-after-too-long": (dict, whole, _answered(lambda: on_the_wire(503, retry_after="3600")),
                             StopReason.RETRY_AFTER_TOO_LONG, 1,
                             "the server asked for 3600 s, over max_retry_after (60 s)"),
    "deadline-at-the-break": (lambda: {"policy": RetryPolicy(deadline=10.0, **STEADY)},
                              whole, _late, StopReason.DEADLINE, 0,
                              "the next wait of 0.500 s would end past the deadline "
                              "(0.400 s left)"),
    "deadline-in-the-wait": (lambda: {"policy": RetryPolicy(deadline=10.0, **STEADY)},
                             whole, _passed_in_the_wait, StopReason.DEADLINE, 1,
                             "the deadline has passed"),
    "circuit-open": (lambda: _veto(StopReason.CIRCUIT_OPEN), whole, _broke,
                     StopReason.CIRCUIT_OPEN, 0, "the origin's circuit breaker is open"),
    "circuit-opened-in-the-wait": (lambda: {"guards": (Spy(refuse=(RETRY,)),)}, whole,
                                   _refused, StopReason.CIRCUIT_OPEN, 1,
                                   "the origin's circuit breaker is open"),
    "throttled": (lambda: _veto(StopReason.THROTTLED), whole, _broke, StopReason.THROTTLED,
                  0, "the origin's adaptive throttle refused it"),
    "budget-exhausted": (lambda: _veto(StopReason.BUDGET_EXHAUSTED), whole, _broke,
                         StopReason.BUDGET_EXHAUSTED, 0, "the retry budget is spent"),
    "transport-closed": (dict, whole, _closed_transport, StopReason.CLOSED, 1,
                         "the transport was closed"),
    "response-closed": (dict, whole, _closed_response, StopReason.CLOSED, 1,
                        "the response was closed while its body was resumed"),
    "answer-refused": (dict, whole, _answered(lambda: on_the_wire(200, etag='"v2"')),
                       StopReason.NOT_RETRYABLE, 1,
                       "the server answered 200 to a range request: the resource changed"),
    "not-an-event-stream": (dict, stream, _answered(lambda: on_the_wire(200), b"id: 1\n\n"),
                            StopReason.NOT_RETRYABLE, 1,
                            "the server answered 200, not an event stream"),
    "no-event-id": (dict, stream, _no_event_id, StopReason.NOT_RETRYABLE, 0,
                    "no event ID to resume from"),
    "resumption-failed": (dict, whole, _failed, StopReason.NOT_RETRYABLE, 1,
                          "the resumption failed with ValueError"),
}


@pytest.mark.parametrize("case", ENDINGS)
def test_each_way_resumption_ends(case: str) -> None:
    """Resumption ends: the last break is raised, the very object, with a note saying why
    and the request's record (its stop reason and the resumptions made, a resumption
    answered or decided counted), which the response carries too; counted as given up and
    told as a ``give_up`` event."""
    options, first, steps, reason, resumes, why = ENDINGS[case]
    control, events = resumable(**options())
    body = Body(control, first())
    with pytest.raises(Exception) as raised:
        steps(body)
    error = raised.value
    assert error is body.breaks[-1]
    assert getattr(error, "__notes__", None) == [f"retry-transport: not resumed after {resumes} "
                               f"resumption(s) ({reason.value}): {why}"]
    info = retry_info(error)
    assert info is not None
    assert (info.stop_reason, info.resumes, info.retries) == (reason, resumes, 0)
    assert info.attempts == len(info.history)
    # The response's record says as much, its stop reason the request's own (a success).
    assert retry_info(body.response) == replace(info, stop_reason=StopReason.SUCCESS)
    stats = control.stats()
    assert (stats.gave_up, stats.resumes) == ({reason: 1}, resumes)
    assert [(e.kind, e.stop_reason, e.attempt) for e in events][-1] == (
        "give_up", reason, info.attempts)


def test_a_body_past_its_declared_end_ends_with_a_protocol_error() -> None:
    """A body (by ranges) that goes on past the last byte its headers declared is not
    resumed: with no break before, the flavour's protocol error is raised, noted."""
    control, _ = resumable()
    body = Body(control, whole())
    body.read(b"0123456789")
    with pytest.raises(httpx.RemoteProtocolError) as raised:
        body.state.overran()
    assert "the body went on past byte 9" in str(raised.value)
    info = retry_info(raised.value)
    assert info is not None and info.stop_reason is StopReason.NOT_RETRYABLE
    assert info.history[-1].error == "RemoteProtocolError"


def test_a_body_that_ends_short_of_its_range_is_a_break() -> None:
    """A body that ends cleanly before the last byte its range declared broke: it is
    resumed, its record naming the flavour's protocol error."""
    control, _ = resumable()
    body = Body(control, whole())
    body.read(b"0123")
    assert body.state.on_break(None) == 0.5
    assert body.state.attempt_request().headers["range"] == "bytes=4-"
    info = retry_info(body.response)
    assert info is not None and info.history[0].error == "RemoteProtocolError"


# -- the guards' tickets ---------------------------------------------------------------------


def test_a_taken_resumption_settles_health_at_once_and_the_account_when_the_body_ends(
) -> None:
    """The resumption is admitted as a retry, with what the veto answered: the guards that
    judge health settle with its answer at once, those that account for the request (the
    budget) when its body ends cleanly."""
    health = Spy("h", health=True)
    account = Spy("a", reason=StopReason.BUDGET_EXHAUSTED, veto="paid")
    control, _ = resumable(guards=(health, account))
    body = Body(control, whole())
    body.read(b"0123")
    body.broke()
    assert account.log[-1] == ("veto", "ReadError")
    assert body.resume(part(4)) is None
    assert account.log[-1:] == [("admit", "retry", "paid")]
    assert health.log[-1:] == [("settle", "h2", 206)]
    body.state.ended()
    assert account.log[-1:] == [("settle", "a2", 206)]


@pytest.mark.parametrize("then,back", [("ends", True), ("breaks-again", False)])
def test_the_budget_is_given_back_when_the_resumed_body_ends_cleanly(then: str,
                                                                    back: bool) -> None:
    """The budget pays for a resumption as for a retry, and gets it back when the resumed
    body then ends cleanly (a success); not when it breaks again."""
    budget = RetryBudget(capacity=100)
    assert budget.acquire() is not None  # below capacity: what goes back shows
    control, _ = resumable(budget=budget)
    body = Body(control, whole())
    tokens = budget.tokens
    body.read(b"0123")
    body.broke()
    assert budget.tokens == tokens - 5
    assert body.resume(part(4)) is None
    if then == "ends":
        body.state.ended()
        assert budget.tokens == tokens
    else:
        body.read(b"45")
        body.broke()  # the next resumption paid for, the last one's cost not back
        assert budget.tokens == tokens - 10


def test_a_refused_answer_settles_the_account_without_a_verdict() -> None:
    """A resumption answered with what is not taken (a 503): the guards that account for
    the request settle at once, without a verdict (its cost is spent), and the next
    resumption is decided as a retry is."""
    account = Spy("a", reason=StopReason.BUDGET_EXHAUSTED, veto="paid")
    control, _ = resumable(guards=(account,))
    body = Body(control, whole())
    body.read(b"0123")
    body.broke()
    assert body.resume(on_the_wire(503)) == 1.0
    assert account.log[-3:] == [("admit", "retry", "paid"), ("settle", "a2", None),
                                ("veto", 503)]


@pytest.mark.parametrize("case", ["circuit-opened-in-the-wait", "deadline-in-the-wait",
                                  "transport-closed", "response-closed"])
def test_a_resumption_decided_and_not_sent_gives_the_vetoes_back(case: str) -> None:
    """A resumption whose wait ends without it being sent (a guard refused it, the
    deadline passed, the transport or the response was closed): what the vetoes took for
    it goes back, once."""
    options, first, steps, *_ = ENDINGS[case]
    given = options()
    account = Spy("a", reason=StopReason.BUDGET_EXHAUSTED, veto="paid")
    given["guards"] = (*given.get("guards", ()), account)
    control, _ = resumable(**given)
    body = Body(control, first())
    with pytest.raises(httpx.ReadError):
        steps(body)
    assert [entry for entry in account.log if entry[0] == "refund"] == [("refund", "paid")]


@pytest.mark.parametrize("when,logged", [
    ("in-the-wait", [("veto", "ReadError"), ("refund", "paid")]),
    ("in-flight", [("veto", "ReadError"), ("admit", "retry", "paid"), ("settle", "a2", None)]),
    ("taken", [("veto", "ReadError"), ("admit", "retry", "paid"), ("settle", "a2", None)]),
], ids=["in-the-wait", "in-flight", "taken"])
def test_abandon_settles_without_a_verdict(when: str, logged: list[tuple[object, ...]]
                                           ) -> None:
    """The read is cancelled or interrupted: a resumption decided and not sent gives its
    cost back; one sent, or taken and its body being read, is settled without a verdict."""
    account = Spy("a", reason=StopReason.BUDGET_EXHAUSTED, veto="paid")
    control, _ = resumable(guards=(account,))
    body = Body(control, whole())
    body.read(b"0123")
    body.broke()
    if when != "in-the-wait":
        body.state.attempt_request()
    if when == "taken":
        assert body.state.on_response(part(4)) is None
    body.state.abandon()
    assert account.log[2:] == logged
