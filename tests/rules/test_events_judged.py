"""The pure rules of an event stream's events: how they are read (``_wire/sse.py``), what
``Attempt.event`` says of one (``_call/inband.py``), and the presets' judges."""

from __future__ import annotations

import pytest

import retry_transport as rt
from retry_transport._call.inband import MAX_HELD_BYTES, MAX_HELD_EVENTS, EventJudge, label
from retry_transport._wire.sse import EventReader

Event = rt.ServerSentEvent


def _read(chunks: list[bytes], last_id: str | None = None) -> list[tuple[Event, int]]:
    reader = EventReader(last_id)
    return [found for chunk in chunks for found in reader.feed(chunk)]


def test_fields_as_the_html_standard_reads_them() -> None:
    body = (b"\xef\xbb\xbfevent: error\r\ndata: {\"a\":\r\ndata:1}\r\nid: 7\r\nretry: 2500\r\n\r\n"
            b": a comment\n\n"  # a comment alone: no event
            b"id: 8\n\n"  # an ID alone: no event, but the last event ID moves
            b"data\n\n"  # a field without a colon: data is ""
            b"data: x\nretry: soon\nid: bad\x00\nunknown: y\n\n")
    events = [event for event, _ in _read([body])]
    assert events == [
        Event("error", '{"a":\n1}', "7", 2500),
        Event("message", "", "8", None),
        Event("message", "x", "8", None),  # a retry that is not digits, an ID with NULL: ignored
    ]
    assert events[0].json() == {"a": 1}


@pytest.mark.parametrize("cut", range(1, 40))
def test_chunks_cut_anywhere_give_the_same_events_and_ends(cut: int) -> None:
    """A CRLF, a BOM or a multi-byte character split between chunks changes nothing."""
    body = "\ufeffevent: é\r\ndata: ü\r\n\r\ndata: two\r\n\r\n".encode()
    whole = _read([body])
    assert [event for event, _ in whole] == [event for event, _ in
                                             _read([body[:cut], body[cut:]])]
    assert [end for _, end in whole] == [body.index(b"\r\n\r\n") + 4, len(body)]
    assert whole[0][0] == Event("é", "ü")


def test_the_last_event_id_starts_as_the_request_sent_it() -> None:
    assert _read([b"data: a\n\nid:\ndata: b\n\n"], "41") == [
        (Event("message", "a", "41"), 9), (Event("message", "b", None), 22)]


def test_data_that_is_not_json_raises_value_error() -> None:
    with pytest.raises(ValueError):
        Event("message", "[DONE]").json()


@pytest.mark.parametrize(("event", "said"), [
    (Event("error", '{"type":"error","error":{"type":"overloaded_error"}}'),
     "error/overloaded_error"),
    (Event("error", '{"type":"error","code":"server_is_overloaded"}'),
     "error/server_is_overloaded"),
    (Event("response.failed", '{"response":{"error":{"code":"rate_limit_exceeded"}}}'),
     "response.failed/rate_limit_exceeded"),
    (Event("message", '{"error":{"type":"tokens","code":"rate_limit_exceeded"}}'),
     "message/rate_limit_exceeded"),
    (Event("error", "overloaded"), "error"),
    (Event("error", '["a"]'), "error"),
    (Event("error", '{"error":{"type":7}}'), "error"),
    (Event("x" * 500, '{"code":"' + "c" * 500 + '"}'), "x" * 100 + "/" + "c" * 100),
])
def test_what_attempt_event_says(event: Event, said: str) -> None:
    assert label(event) == said


def _message(name: str, data: str = "{}") -> Event:
    return Event(name, data)


ANTHROPIC_OVERLOADED = '{"type":"error","error":{"type":"overloaded_error","message":"x"}}'
ANTHROPIC_LIMITED = '{"type":"error","error":{"type":"rate_limit_error"}}'


@pytest.mark.parametrize(("event", "answer"), [
    (_message("message_start", '{"type":"message_start"}'), None),
    (_message("ping"), None),
    (_message("ping", ANTHROPIC_OVERLOADED), None),  # a name held: whatever its data
    (_message("message_start", "not json"), None),
    (_message("error", ANTHROPIC_OVERLOADED), True),
    (_message("error", ANTHROPIC_LIMITED), True),
    (_message("error", '{"type":"error","error":{"type":"api_error"}}'), False),
    (_message("error", '{"type":"error","error":{"type":"invalid_request_error"}}'), False),
    (_message("error", "overloaded_error"), False),  # not JSON
    (_message("error", '{"error":"overloaded_error"}'), False),
    (_message("content_block_start"), False),
    (_message("content_block_delta", ANTHROPIC_OVERLOADED), False),
    (_message("message", ANTHROPIC_OVERLOADED), False),
])
def test_the_anthropic_judge(event: Event, answer: bool | None) -> None:
    assert rt.presets.anthropic_events(event) is answer


@pytest.mark.parametrize(("event", "answer"), [
    (_message("response.created", '{"response":{"error":{"code":"rate_limit_exceeded"}}}'), None),
    (_message("response.queued"), None),
    (_message("response.in_progress", "not json"), None),
    (_message("error", '{"type":"error","code":"server_is_overloaded"}'), True),
    (_message("error", '{"type":"error","code":"rate_limit_exceeded"}'), True),
    (_message("error", '{"error":{"code":"server_is_overloaded"}}'), True),
    (_message("error", '{"type":"error","code":"invalid_prompt"}'), False),
    (_message("error", "server_is_overloaded"), False),  # not JSON
    (_message("response.failed",
              '{"response":{"status":"failed","error":{"code":"server_is_overloaded"}}}'), True),
    (_message("response.failed", '{"response":{"error":{"code":"server_error"}}}'), False),
    (_message("response.failed", '{"code":"server_is_overloaded"}'), False),
    (_message("message", '{"error":{"message":"x","type":"rate_limit_exceeded"}}'), True),
    (_message("message", '{"error":{"type":"tokens","code":"rate_limit_exceeded"}}'), True),
    (_message("message", '{"error":{"code":"context_length_exceeded"}}'), False),
    (_message("message", '{"id":"c1","choices":[{"delta":{"role":"assistant"}}]}'), False),
    (_message("message", "[DONE]"), False),
    (_message("response.output_text.delta", '{"code":"server_is_overloaded"}'), False),
])
def test_the_openai_judge(event: Event, answer: bool | None) -> None:
    assert rt.presets.openai_events(event) is answer


# -- the judge's limits, as a rule -----------------------------------------------------------


class _Request:
    headers: dict[str, str] = {}


def test_the_judge_holds_at_most_64_events() -> None:
    seen: list[Event] = []
    judge = EventJudge(lambda event: seen.append(event), _Request())  # type: ignore[arg-type]
    answers = [judge.feed(b"data: %d\n\n" % n) for n in range(MAX_HELD_EVENTS)]
    assert answers == [None] * (MAX_HELD_EVENTS - 1) + [False]  # the 64th: handed over
    assert len(seen) == MAX_HELD_EVENTS


def test_an_event_ending_past_256_kib_is_not_judged() -> None:
    seen: list[Event] = []
    judge = EventJudge(lambda event: seen.append(event), _Request())  # type: ignore[arg-type]
    filler = b"data: " + b"x" * (MAX_HELD_BYTES - 8) + b"\n\n"  # ends at the limit exactly
    assert judge.feed(filler) is None and len(seen) == 1
    assert judge.feed(b"data: y\n\n") is False and len(seen) == 1
