"""``retry_event``: a refusal sent inside a ``200``. A ``2xx`` event stream's first events
are judged before the response is handed over: held back while the judge answers ``None``,
handed over byte for byte on ``False``, retried as an unapplied status on ``True``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness

pytestmark = pytest.mark.usefixtures("flavour")

SSE = {"content-type": "text/event-stream; charset=utf-8"}
START = b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n"
PING = b"event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n"
OVERLOADED = (b"event: error\ndata: {\"type\":\"error\",\"error\":"
              b"{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
DELTA = b"event: content_block_delta\ndata: {\"delta\":{\"text\":\"Hi\"}}\n\n"
STOP = b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"


def stream(chunks: list[bytes], log: list[str], error: Exception | None = None) -> Any:
    """A body of the flavour under test that yields ``chunks`` (then raises ``error``) and
    records what happened to it: each chunk read, and its closing."""

    class Body(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for chunk in chunks:
                log.append("read")
                yield chunk
            if error is not None:
                raise error

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in chunks:
                log.append("read")
                yield chunk
            if error is not None:
                raise error

        def close(self) -> None:
            log.append("close")

        async def aclose(self) -> None:
            log.append("close")

    return Body()


class Server:
    """Answers each request with the next of ``answers``: (chunks, error, headers)."""

    def __init__(self, *answers: tuple[list[bytes], Exception | None, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.logs: list[list[str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        chunks, error, headers = self.answers[min(len(self.requests), len(self.answers) - 1)]
        self.requests.append(request)
        log: list[str] = []
        self.logs.append(log)
        return httpx.Response(200, headers=headers, stream=stream(chunks, log, error))


def answer(*chunks: bytes, error: Exception | None = None,
           headers: dict[str, str] | None = None) -> tuple[list[bytes], Exception | None,
                                                           dict[str, str]]:
    return list(chunks), error, {**SSE, **(headers or {})}


class Judge:
    """A ``retry_event`` that records each event shown and answers by its name."""

    def __init__(self, answers: dict[str, bool | None] | None = None,
                 default: bool | None = False) -> None:
        self.answers = {"message_start": None, "ping": None, "error": True, **(answers or {})}
        self.default = default
        self.seen: list[rt.ServerSentEvent] = []

    def __call__(self, event: rt.ServerSentEvent) -> bool | None:
        self.seen.append(event)
        return self.answers.get(event.event, self.default)


def post(harness: Harness, transport: Any, **kwargs: Any) -> httpx.Response:
    return harness.send(transport, "POST", "https://api.example.com/v1/messages",
                        json={"stream": True}, **kwargs)


def test_held_events_are_handed_over_byte_for_byte(harness: Harness) -> None:
    """Events are shown as they end, however the chunks cut them; on ``False`` the caller
    reads every held byte as it came (a comment, CRLFs, a torn last line) and the rest."""
    body = START + b": keep-alive\n\n" + PING + DELTA + STOP
    cuts = [body[:7], body[7:60], body[60:61], body[61:150], body[150:]]
    server = Server(answer(*cuts))
    judge = Judge()
    response = post(harness, harness.transport(server, retry_event=judge))
    assert response.content == body
    assert [event.event for event in judge.seen] == ["message_start", "ping",
                                                     "content_block_delta"]
    assert judge.seen[1] == rt.ServerSentEvent("ping", '{"type": "ping"}')
    assert len(server.requests) == 1 and rt.retry_info(response).attempts == 1
    assert server.logs[0].count("close") == 1


def test_an_in_band_refusal_is_retried_for_a_post_without_a_key(harness: Harness) -> None:
    """``True``: the attempt ends as an unapplied status would (a POST without a key sent
    again), after the 200's ``retry-after-ms``; the refused response is closed unhanded."""
    server = Server(answer(START, PING, OVERLOADED, DELTA, headers={"retry-after-ms": "1500"}),
                    answer(START + PING + DELTA + STOP))
    hooks: list[rt.RetryEvent] = []
    transport = harness.transport(server, retry_event=Judge(), hooks=[hooks.append])
    response = post(harness, transport)
    assert response.content == START + PING + DELTA + STOP
    assert len(server.requests) == 2
    assert "idempotency-key" not in server.requests[1].headers
    assert server.logs[0] == ["read", "read", "read", "close"]  # DELTA never read
    info = rt.retry_info(response)
    assert (info.attempts, info.stop_reason) == (2, rt.StopReason.SUCCESS)
    first = info.history[0]
    assert (first.status, first.event, first.retry_after, first.signal) == (
        200, "error/overloaded_error", 1.5, "retry-after-ms")
    assert info.history[1].event is None
    assert harness.waits and harness.waits[0] >= 1.5
    assert [(hook.kind, hook.status) for hook in hooks] == [("retry", 200)]
    assert transport.stats.retries == 1


def test_max_attempts_spent_hands_over_the_last_refusal_with_its_events(
        harness: Harness) -> None:
    """No further attempt: the caller reads the last response as it came (its held events,
    then the rest), so the SDK raises its own error."""
    body = START + OVERLOADED + b"data: after\n\n"
    server = Server(answer(body[:30], body[30:]))
    response = post(harness, harness.transport(server, retry_event=Judge(), max_attempts=2))
    assert response.content == body
    assert len(server.requests) == 2
    assert server.logs[0][-1] == "close" and server.logs[1].count("close") == 1
    info = rt.retry_info(response)
    assert info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    assert [attempt.event for attempt in info.history] == ["error/overloaded_error"] * 2


def test_a_server_time_over_max_retry_after_hands_the_refusal_over(harness: Harness) -> None:
    server = Server(answer(OVERLOADED, headers={"retry-after": "600"}))
    response = post(harness, harness.transport(server, retry_event=Judge()))
    assert response.content == OVERLOADED and len(server.requests) == 1
    assert rt.retry_info(response).stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG


def test_past_64_events_the_response_is_handed_over_unjudged(harness: Harness) -> None:
    pings = [PING] * 70
    server = Server(answer(*pings, OVERLOADED))
    judge = Judge()
    response = post(harness, harness.transport(server, retry_event=judge))
    assert response.content == b"".join(pings) + OVERLOADED
    assert len(judge.seen) == 64 and len(server.requests) == 1


def test_past_256_kib_the_response_is_handed_over_unjudged(harness: Harness) -> None:
    """An event still arriving past 256 KiB is not waited for: nothing is judged."""
    big = [b"event: ping\ndata: "] + [b"x" * 16384] * 17 + [b"\n\n", OVERLOADED]
    server = Server(answer(*big))
    judge = Judge()
    response = post(harness, harness.transport(server, retry_event=judge))
    assert response.content == b"".join(big)
    assert judge.seen == [] and len(server.requests) == 1
    assert server.logs[0].count("read") == len(big)


def test_a_stream_that_ends_before_a_verdict_is_handed_over_whole(harness: Harness) -> None:
    server = Server(answer(START, PING))
    response = post(harness, harness.transport(server, retry_event=Judge()))
    assert response.content == START + PING and len(server.requests) == 1


def test_a_judge_that_raises_closes_the_response(harness: Harness) -> None:
    """As for ``retry_if``: the exception reaches the caller, noted; nothing more is sent."""

    def judge(event: rt.ServerSentEvent) -> bool | None:
        raise KeyError("mine")

    server = Server(answer(START, DELTA))
    with pytest.raises(KeyError) as caught:
        post(harness, harness.transport(server, retry_event=judge))
    assert any("retry_event" in note for note in getattr(caught.value, "__notes__", []))
    assert len(server.requests) == 1 and server.logs[0] == ["read", "close"]


def test_an_answer_of_another_kind_is_a_type_error(harness: Harness) -> None:
    server = Server(answer(START))
    with pytest.raises(TypeError, match="retry_event must return True, False or None"):
        post(harness, harness.transport(server, retry_event=lambda event: "yes"))
    assert server.logs[0][-1] == "close"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_break_before_the_verdict_is_the_attempts_error(harness: Harness, method: str
                                                          ) -> None:
    """Retried where the method allows (a GET); a POST without a key is never sent twice:
    the break reaches the caller with its note."""
    server = Server(answer(START, error=httpx.ReadError("reset")), answer(START + DELTA))
    transport = harness.transport(server, retry_event=Judge())
    if method == "GET":
        response = harness.send(transport, "GET", "https://api.example.com/events")
        assert response.content == START + DELTA and len(server.requests) == 2
        assert rt.retry_info(response).history[0].error == "ReadError"
        return
    with pytest.raises(httpx.ReadError) as caught:
        post(harness, transport)
    assert len(server.requests) == 1 and server.logs[0][-1] == "close"
    assert any("unsafe_method" in note for note in getattr(caught.value, "__notes__", []))


def test_only_a_2xx_event_stream_is_judged(harness: Harness) -> None:
    """A JSON 200 and an event stream under a content coding go by as before."""
    judge = Judge()
    server = Server(answer(OVERLOADED, headers={"content-type": "application/json"}),
                    answer(OVERLOADED, headers={"content-encoding": "identity-ish"}))
    transport = harness.transport(server, retry_event=judge)
    assert post(harness, transport).content == OVERLOADED
    assert judge.seen == []


def test_a_per_request_judge_goes_by_the_call(harness: Harness) -> None:
    server = Server(answer(OVERLOADED), answer(DELTA))
    transport = harness.transport(server)
    response = post(harness, transport, extensions={"retry": {"retry_event": Judge()}})
    assert response.content == DELTA and len(server.requests) == 2
    assert post(harness, transport).content == DELTA  # the transport's own: no judge


@pytest.mark.parametrize("value", ["error", 3])
def test_a_judge_must_be_callable(value: object) -> None:
    with pytest.raises(TypeError, match="retry_event"):
        rt.RetryPolicy(retry_event=value)  # type: ignore[arg-type]


def test_a_coroutine_function_is_refused() -> None:
    async def judge(event: rt.ServerSentEvent) -> bool | None:
        return None

    with pytest.raises(TypeError, match="retry_event must be a plain function"):
        rt.AsyncRetryTransport(retry_event=judge)  # type: ignore[arg-type]


def test_without_a_judge_nothing_is_read_ahead(harness: Harness) -> None:
    server = Server(answer(OVERLOADED))
    response = post(harness, harness.transport(server))
    assert response.content == OVERLOADED and len(server.requests) == 1
    assert rt.retry_info(response).history[0].event is None



def test_with_hedging_a_judged_request_is_judged_not_hedged(harness: Harness) -> None:
    """An answer is read before it is handed over, so a request is not hedged while a
    judge is set (as with ``retry_body_errors``): its refusal is judged as without one."""
    server = Server(answer(START, OVERLOADED), answer(START, DELTA))
    transport = harness.transport(server, retry_event=Judge(), hedging=rt.Hedging(5.0))
    response = harness.send(transport, "GET", "https://api.example.com/events")
    assert response.content == START + DELTA and len(server.requests) == 2
    info = rt.retry_info(response)
    assert info.hedges == 0 and info.history[0].event == "error/overloaded_error"


def test_the_quick_path_does_not_take_an_event_stream_as_final(harness: Harness) -> None:
    """After the transport's first request, first attempts go on the quick path: a ``2xx``
    event stream is still judged there."""
    server = Server(answer(b"{}", headers={"content-type": "application/json"}),
                    answer(START, OVERLOADED), answer(START, DELTA))
    transport = harness.transport(server, retry_event=Judge())
    assert post(harness, transport).content == b"{}"
    response = post(harness, transport)
    assert response.content == START + DELTA and len(server.requests) == 3
    assert rt.retry_info(response).history[0].event == "error/overloaded_error"
