"""Resumable bodies through the transports (``resume=Resume()``), sync and async, both
flavours, over mock transports whose bodies break where each test says. Real servers (nginx,
an event-stream server, httpx-sse) are in ``tests/real/test_resume_server.py``; the pure
reading of headers and events in ``tests/rules/test_resumable.py``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from retry_transport.testing import retry_testing
from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

DATA = bytes(range(256)) * 64  # 16 KiB
ETAG = '"v1"'
URL = "https://files.example.com/data.bin"


def broken_stream(chunks: list[bytes], error: Exception | None) -> Any:
    """A body of ``chunks`` that raises ``error`` after them (``None``: ends cleanly), for
    sync and async clients alike; ``closed`` says whether it was closed."""

    class Broken(httpx.SyncByteStream, httpx.AsyncByteStream):  # type: ignore[misc, name-defined]
        closed = False

        def __iter__(self) -> Iterator[bytes]:
            yield from chunks
            if error is not None:
                raise error

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk
            if error is not None:
                raise error

        def close(self) -> None:
            self.closed = True

        async def aclose(self) -> None:
            self.closed = True

    return Broken()


def pieces(data: bytes, size: int = 1000) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


class RangeServer:
    """Serves ``data`` with a strong ETag, honouring ``Range`` with ``If-Range``; each
    response's body breaks at the next absolute offset of ``cuts``."""

    def __init__(self, data: bytes = DATA, cuts: tuple[int, ...] = (), *,
                 etag: str = ETAG, headers: dict[str, str] | None = None) -> None:
        self.data, self.cuts, self.etag = data, list(cuts), etag
        self.extra = headers or {}
        self.requests: list[httpx.Request] = []
        self.streams: list[Any] = []
        #: Answers to give to range requests instead of the data: status, headers.
        self.answers: list[tuple[int, dict[str, str]]] = []
        #: For the next range requests, bytes more (zeros) or fewer than the Content-Range
        #: names that the 206 then brings, sent with no Content-Length (as chunked).
        self.lies: list[int] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        asked = request.headers.get("range")
        if asked is not None and self.answers:
            status, headers = self.answers.pop(0)  # a body of no declared length
            return httpx.Response(status, headers=headers,
                                  stream=broken_stream([b"refused"], None))
        first, last = 0, len(self.data) - 1
        if asked is not None:
            start, _, end = asked.removeprefix("bytes=").partition("-")
            first, last = int(start), int(end) if end else last
        if asked is not None and request.headers.get("if-range") not in (None, self.etag):
            first, last, asked = 0, len(self.data) - 1, None  # changed: the whole new body
        body = self.data[first:last + 1]
        cut = next((c for c in self.cuts if first < c <= last), None)
        if cut is not None:
            self.cuts.remove(cut)
        error = None if cut is None else httpx.ReadError("connection lost")
        stream = broken_stream(pieces(body[:None if cut is None else cut - first]), error)
        self.streams.append(stream)
        headers = {"etag": self.etag, "content-length": str(len(body)), **self.extra}
        if asked is None:
            return httpx.Response(200, headers=headers, stream=stream)
        headers["content-range"] = f"bytes {first}-{last}/{len(self.data)}"
        if self.lies:
            lie = self.lies.pop(0)
            del headers["content-length"]
            body = body + bytes(lie) if lie >= 0 else body[:lie]
            stream = self.streams[-1] = broken_stream(pieces(body), None)
        return httpx.Response(206, headers=headers, stream=stream)


def read(harness: Harness, transport: Any, url: str = URL, method: str = "GET",
         headers: dict[str, str] | None = None) -> tuple[bytes, Any]:
    """Stream one response and read its whole body: (body, response); an error while
    reading propagates, with the bytes read so far in ``read.partial``."""
    got: list[bytes] = []
    read.partial = got  # type: ignore[attr-defined]
    if harness.mode == "sync":
        with httpx.Client(transport=transport) as client:
            with client.stream(method, url, headers=headers) as response:
                for chunk in response.iter_raw():
                    got.append(chunk)
        return b"".join(got), response

    async def main() -> Any:
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream(method, url, headers=headers) as response:
                async for chunk in response.aiter_raw():
                    got.append(chunk)
        return response

    response = harness.run(main)
    return b"".join(got), response


def test_a_download_cut_three_times_reads_whole(harness: Harness) -> None:
    server = RangeServer(cuts=(3000, 7500, 12001))
    events: list[rt.RetryEvent] = []
    transport = harness.transport(server, resume=rt.Resume(), hooks=events.append)
    body, response = read(harness, transport)
    assert body == DATA
    assert [(r.headers.get("range"), r.headers.get("if-range")) for r in server.requests] == [
        (None, None), ("bytes=3000-", ETAG), ("bytes=7500-", ETAG), ("bytes=12001-", ETAG)]
    # each resumption is an attempt, labelled as one (OpenTelemetry's resend count)
    assert [r.extensions.get("retry_attempt") for r in server.requests] == [None, 2, 3, 4]
    info = rt.retry_info(response)
    assert info is not None
    assert (info.attempts, info.retries, info.resumes) == (4, 0, 3)
    assert [a.resumed_at for a in info.history] == [None, 3000, 7500, 12001]
    assert [a.status for a in info.history] == [200, 206, 206, 206]
    assert [a.error for a in info.history] == ["ReadError"] * 3 + [None]
    assert [a.wait for a in info.history[:3]] == harness.waits
    assert info.total_wait == pytest.approx(sum(harness.waits))
    assert [(e.kind, e.resumed_at, e.attempt, e.error) for e in events] == [
        ("resume", 3000, 2, "ReadError"), ("resume", 7500, 3, "ReadError"),
        ("resume", 12001, 4, "ReadError")]
    stats = transport.stats
    assert (stats.resumes, stats.retries, stats.requests) == (3, 0, 1)
    # the budget paid for three resumptions and got the last one back: net, two
    assert stats.budget_tokens == 500 - 2 * 5
    assert all(stream.closed for stream in server.streams)


def test_the_waits_grow_as_the_backoff_for_the_resumptions_so_far(harness: Harness) -> None:
    policy = rt.RetryPolicy(base_delay=1.0, max_delay=100.0, jitter="none")
    server = RangeServer(cuts=(1000, 2000, 3000))
    body, _ = read(harness, harness.transport(server, resume=rt.Resume(), policy=policy))
    assert body == DATA
    assert harness.waits == [1.0, 2.0, 4.0]


def test_a_callers_own_range_is_resumed_within_it(harness: Harness) -> None:
    server = RangeServer(cuts=(2500,))
    body, response = read(harness, harness.transport(server, resume=rt.Resume()),
                          headers={"Range": "bytes=1000-4999"})
    assert body == DATA[1000:5000]
    assert server.requests[1].headers["range"] == "bytes=2500-4999"
    assert response.status_code == 206
    assert rt.retry_info(response).resumes == 1


def test_a_changed_resource_ends_with_the_original_error(harness: Harness) -> None:
    server = RangeServer(cuts=(5000,))
    server.answers.append((200, {"etag": '"v2"'}))  # what If-Range answers for a new version
    events: list[rt.RetryEvent] = []
    transport = harness.transport(server, resume=rt.Resume(), hooks=events.append)
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, transport)
    assert b"".join(read.partial) == DATA[:5000]  # type: ignore[attr-defined]  # nothing new
    error = caught.value
    assert str(error) == "connection lost"  # the break itself
    assert error.__notes__ == [
        "retry-transport: not resumed after 1 resumption(s) (not_retryable): the server "
        "answered 200 to a range request: the resource changed"]
    info = rt.retry_info(error)
    assert (info.stop_reason, info.resumes, info.attempts) == (rt.StopReason.NOT_RETRYABLE,
                                                               1, 2)
    assert [e.kind for e in events] == ["resume", "give_up"]
    assert transport.stats.gave_up == {rt.StopReason.NOT_RETRYABLE: 1}
    # the resumption was paid for and refused its answer: its cost is not given back
    assert transport.stats.budget_tokens == 500 - 5


@table("answer, note", [
    ((412, {}), "the server answered 412 to a range request"),
    ((416, {"content-range": "bytes */16384"}), "the server answered 416 to a range request"),
    ((206, {"content-range": "bytes 0-99/16384", "etag": ETAG}),
     "the server answered 206 with bytes 0-99/16384, not the bytes 5000- asked for"),
    ((206, {"content-range": "bytes 5000-16383/16384", "etag": '"v2"'}),
     "the server answered 206 with another ETag: the resource changed"),
    ((206, {"content-range": "bytes 5000-9999/16384", "etag": ETAG}),
     "the server answered 206 with bytes 5000-9999/16384, not the bytes 5000- asked for"),
    # a header that cannot be read refuses the answer: the break, never a ValueError
    pytest.param((206, {"content-range": "bytes 5000-" + "9" * 5000 + "/1" + "0" * 5000,
                        "etag": ETAG}),
                 "the server answered 206 without a single Content-Range", id="5000-digits"),
    ((206, {"content-range": "bytes 5000-16383/16384", "content-length": "11385",
            "etag": ETAG}),
     "the server answered 206 with bytes 5000-16383/16384 in a body of 11385 bytes"),
])
def test_an_answer_not_of_the_bytes_asked_for_ends_resumption(
        harness: Harness, answer: tuple[int, dict[str, str]], note: str) -> None:
    server = RangeServer(cuts=(5000,))
    server.answers.append(answer)
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, harness.transport(server, resume=rt.Resume()))
    assert caught.value.__notes__[-1].endswith(note)
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.NOT_RETRYABLE


@table("headers", [
    {"content-range": "bytes 0-" + "9" * 5000 + "/1" + "0" * 5000},
    {"content-length": "9" * 5000},
], ids=["range-5000-digits", "length-5000-digits"])
def test_a_header_that_cannot_be_read_hands_the_response_over_unresumed(
        harness: Harness, headers: dict[str, str]) -> None:
    requests: list[httpx.Request] = []
    stream = broken_stream([DATA[:3000]], httpx.ReadError("connection lost"))

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        status = 206 if "content-range" in headers else 200
        return httpx.Response(status, headers={"etag": ETAG, **headers}, stream=stream)

    with pytest.raises(httpx.ReadError) as caught:  # the break, as without resume
        read(harness, harness.transport(handler, resume=rt.Resume()))
    assert b"".join(read.partial) == DATA[:3000]  # type: ignore[attr-defined]
    assert len(requests) == 1
    # as without resume: no resumption's note; only the hint of what would have retried it
    notes = getattr(caught.value, "__notes__", [])
    assert [note.split("; ")[1] for note in notes] == [
        "retry_body_errors=True would have retried the request (the body is then read before "
        "it is handed over, up to max_body_buffer=10485760 bytes)"]
    assert stream.closed


def test_a_response_whose_hand_over_fails_is_closed(
        harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    from retry_transport._call import resumption

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("no plan")

    monkeypatch.setattr(resumption, "plan", fail)
    server = RangeServer()
    with pytest.raises(RuntimeError, match="no plan"):
        read(harness, harness.transport(server, resume=rt.Resume()))
    assert [stream.closed for stream in server.streams] == [True]


def test_a_206_longer_than_its_range_ends_with_the_break_before_a_byte_past_it(
        harness: Harness) -> None:
    server = RangeServer(cuts=(5000,))
    server.lies.append(50)  # bytes 5000-16383 asked, and given, with 50 more after them
    events: list[rt.RetryEvent] = []
    transport = harness.transport(server, resume=rt.Resume(), hooks=events.append)
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, transport)
    # the 206's last chunk (bytes 16000-16383 and the 50 more) is not handed on
    assert b"".join(read.partial) == DATA[:16000]  # type: ignore[attr-defined]
    assert str(caught.value) == "connection lost"  # the break itself
    assert caught.value.__notes__ == [
        "retry-transport: not resumed after 1 resumption(s) (not_retryable): the body went "
        "on past byte 16383, the last its headers declared"]
    info = rt.retry_info(caught.value)
    assert info.stop_reason is rt.StopReason.NOT_RETRYABLE
    assert [(a.status, a.error) for a in info.history] == [(200, "ReadError"),
                                                           (206, "RemoteProtocolError")]
    assert [e.kind for e in events] == ["resume", "give_up"]
    assert transport.stats.budget_tokens == 500 - 5  # the resumption's cost is not given back
    assert all(stream.closed for stream in server.streams)


def test_a_206_shorter_than_its_range_is_a_break_and_resumed(harness: Harness) -> None:
    server = RangeServer(cuts=(5000,))
    server.lies.append(-50)  # bytes 5000-16383 asked and named, 50 fewer given
    body, response = read(harness, harness.transport(server, resume=rt.Resume()))
    assert body == DATA
    assert [r.headers.get("range") for r in server.requests] == [
        None, "bytes=5000-", "bytes=16334-"]
    info = rt.retry_info(response)
    assert info.resumes == 2
    assert [(a.status, a.error, a.resumed_at) for a in info.history] == [
        (200, "ReadError", None), (206, "RemoteProtocolError", 5000), (206, None, 16334)]


def test_a_206_shorter_than_its_range_ends_with_the_original_error(harness: Harness) -> None:
    server = RangeServer(cuts=(5000,))
    server.lies.append(-50)
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, harness.transport(server, resume=rt.Resume(1)))
    assert b"".join(read.partial) == DATA[:16334]  # type: ignore[attr-defined]
    assert str(caught.value) == "connection lost"  # the break being resumed, not a new one
    assert caught.value.__notes__[-1].endswith("(max_attempts): max_resumes (1) reached")
    assert len(server.requests) == 2


@table("lie, partial, error", [
    (-50, DATA, None),  # ended short: resumed from there
    (50, DATA[:16000], "the body went on past byte 16383, the last its headers declared"),
], ids=["short", "long"])
def test_the_first_body_is_held_to_its_content_length(
        harness: Harness, lie: int, partial: bytes, error: str | None) -> None:
    # a 200 whose body, as the inner transport lets it through, is not its Content-Length
    server = RangeServer()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers.get("range") is not None:
            return server(request)
        server.requests.append(request)
        body = DATA + bytes(lie) if lie >= 0 else DATA[:lie]
        return httpx.Response(200, headers={"etag": ETAG, "content-length": str(len(DATA))},
                              stream=broken_stream(pieces(body), None))

    transport = harness.transport(handler, resume=rt.Resume())
    if error is None:
        body, response = read(harness, transport)
        assert body == partial
        assert server.requests[1].headers["range"] == f"bytes={len(DATA) + lie}-"
        assert [a.error for a in rt.retry_info(response).history] == [
            "RemoteProtocolError", None]
        return
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        read(harness, transport)
    assert b"".join(read.partial) == partial  # type: ignore[attr-defined]
    assert str(caught.value) == error
    assert caught.value.__notes__ == [
        f"retry-transport: not resumed after 0 resumption(s) (not_retryable): {error}"]
    assert len(server.requests) == 1


def test_a_retryable_answer_to_a_resumption_is_retried_within_max_resumes(
        harness: Harness) -> None:
    server = RangeServer(cuts=(4000,))
    server.answers.append((503, {"retry-after": "7"}))
    body, response = read(harness, harness.transport(server, resume=rt.Resume(3)))
    assert body == DATA
    assert harness.waits[1] >= 7.0  # the server's Retry-After
    info = rt.retry_info(response)
    assert [(a.status, a.resumed_at) for a in info.history] == [
        (200, None), (503, 4000), (206, 4000)]
    assert info.resumes == 2


@table("setting, reason, note", [
    (lambda: {"resume": rt.Resume(2)}, "max_attempts", "max_resumes (2) reached"),
    (lambda: {"budget": rt.RetryBudget(capacity=10.0)}, "budget_exhausted",
     "the retry budget is spent"),
    (lambda: {"policy": rt.RetryPolicy(max_retry_after=5.0)}, "retry_after_too_long",
     "the server asked for 60 s, over max_retry_after (5 s)"),
], ids=["max_resumes", "budget", "retry_after"])
def test_limits_end_resumption_with_their_note(harness: Harness, setting: Any,
                                               reason: str, note: str) -> None:
    setting = setting()
    server = RangeServer(cuts=(1000, 2000, 3000, 4000))
    if "policy" in setting:
        server = RangeServer(cuts=(1000,))
        server.answers.append((503, {"retry-after": "60"}))
    kwargs = {"resume": rt.Resume(), **setting}
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, harness.transport(server, **kwargs))
    info = rt.retry_info(caught.value)
    assert info.stop_reason.value == reason
    assert caught.value.__notes__[-1].endswith(f"({reason}): {note}")


def test_an_open_breaker_refuses_the_resumption(harness: Harness) -> None:
    breaker = rt.CircuitBreaker(min_requests=2, clock=harness.clock)
    server = RangeServer(cuts=(1000,))

    def fail_meanwhile(seconds: float) -> None:  # other requests fail during the wait
        harness.clock.sleep(seconds)
        for _ in range(2):
            breaker.record("https://files.example.com:443", True)

    async def afail_meanwhile(seconds: float) -> None:
        fail_meanwhile(seconds)

    sleep = fail_meanwhile if harness.mode == "sync" else afail_meanwhile
    transport = harness.transport(server, resume=rt.Resume(), breaker=breaker, sleep=sleep)
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, transport)
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.CIRCUIT_OPEN
    assert caught.value.__notes__[-1].endswith("the origin's circuit breaker is open")
    assert len(server.requests) == 1
    # the resumption was paid for, then refused: its cost went back
    assert transport.stats.budget_tokens == 500


def test_a_resumptions_outcome_is_settled_as_its_own_attempt(harness: Harness) -> None:
    """A resumption's 503 opens the breaker (one failure in two): the breaker is told of
    attempt 2, the resumption, as its event says."""
    breaker = rt.CircuitBreaker(min_requests=2, clock=harness.clock)
    server = RangeServer(cuts=(4000,))
    server.answers.append((503, {}))
    events: list[rt.RetryEvent] = []
    transport = harness.transport(server, resume=rt.Resume(), breaker=breaker,
                                  hooks=events.append)
    with pytest.raises(httpx.ReadError):
        read(harness, transport)
    assert [(e.kind, e.attempt) for e in events] == [
        ("resume", 2), ("breaker_open", 2), ("give_up", 2)]


def test_closing_the_response_during_the_wait_ends_resumption(harness: Harness) -> None:
    server = RangeServer(cuts=(3000,))
    opened: list[Any] = []

    def close(seconds: float) -> None:
        opened[0].close()

    async def aclose(seconds: float) -> None:
        await opened[0].aclose()

    transport = harness.transport(server, resume=rt.Resume(),
                                  sleep=close if harness.mode == "sync" else aclose)
    got: list[bytes] = []
    with pytest.raises(httpx.ReadError) as caught:
        if harness.mode == "sync":
            with httpx.Client(transport=transport) as client:
                with client.stream("GET", URL) as response:
                    opened.append(response)
                    got.extend(response.iter_raw())
        else:
            async def main() -> None:
                async with httpx.AsyncClient(transport=transport) as client:
                    async with client.stream("GET", URL) as response:
                        opened.append(response)
                        got.extend([chunk async for chunk in response.aiter_raw()])

            harness.run(main)
    assert caught.value.__notes__[-1].endswith(
        "(closed): the response was closed while its body was resumed")
    assert len(server.requests) == 1  # nothing sent after the close
    assert all(stream.closed for stream in server.streams)
    assert transport.stats.budget_tokens == 500  # the resumption's cost went back


def test_the_deadline_bounds_resumption(harness: Harness) -> None:
    policy = rt.RetryPolicy(deadline=0.05, base_delay=0.1, jitter="none")
    server = RangeServer(cuts=(1000,))
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, harness.transport(server, resume=rt.Resume(), policy=policy))
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.DEADLINE
    assert len(server.requests) == 1


def test_without_resume_a_break_ends_the_body_as_before(harness: Harness) -> None:
    """Nothing more is sent, and the error is the break's; its note says that Resume()
    would have resumed the body."""
    server = RangeServer(cuts=(5000,))
    with pytest.raises(httpx.ReadError) as caught:
        read(harness, harness.transport(server))
    assert len(server.requests) == 1
    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1 and "resume=Resume() would have resumed the body" in notes[0]


@table("method, headers, extensions", [
    ("POST", {}, {}),
    ("GET", {"etag": 'W/"weak"'}, {}),
    ("GET", {"accept-ranges": "none"}, {}),
    ("GET", {}, {"retry": False}),
], ids=["post", "weak-etag", "accept-ranges-none", "retry-false"])
def test_what_is_never_resumed(harness: Harness, method: str, headers: dict[str, str],
                               extensions: dict[str, Any]) -> None:
    server = RangeServer(cuts=(5000,), headers=headers)
    if "etag" in headers:
        server.etag = headers["etag"]
    transport = harness.transport(server, resume=rt.Resume())
    request_extensions = extensions

    def send() -> None:
        if harness.mode == "sync":
            with httpx.Client(transport=transport) as client:
                request = client.build_request(method, URL, extensions=request_extensions)
                client.send(request).read()
            return

        async def main() -> None:
            async with httpx.AsyncClient(transport=transport) as client:
                request = client.build_request(method, URL, extensions=request_extensions)
                await (await client.send(request)).aread()

        harness.run(main)

    with pytest.raises(httpx.ReadError):
        send()
    assert len(server.requests) == 1


def test_testing_mode_makes_the_waits_instant(harness: Harness) -> None:
    server = RangeServer(cuts=(1000, 2000))
    with retry_testing() as log:
        body, _ = read(harness, harness.transport(server, resume=rt.Resume()))
    assert body == DATA
    assert harness.waits == [0.0, 0.0]  # asked to sleep nothing
    assert len(log.waits) == 2 and all(wait > 0 for wait in log.waits)


# -- event streams -----------------------------------------------------------------------


def sse(events: range, *, retry: int | None = None, newline: bytes = b"\n") -> bytes:
    head = b"" if retry is None else b"retry: " + str(retry).encode() + newline
    return head + b"".join(
        b"id: %d%sdata: line one of %d%sdata: line two%s%s" % (n, newline, n, newline,
                                                              newline, newline)
        for n in events)


class EventServer:
    """An event stream of ids 1..``count``; a request with ``Last-Event-ID`` gets the
    events after it; each body breaks at the next byte offset (within that body) of
    ``cuts``."""

    def __init__(self, count: int = 40, cuts: tuple[int, ...] = (), *, ids: bool = True,
                 bom: bool = False, retry: int | None = 200) -> None:
        self.count, self.cuts, self.ids, self.bom, self.retry = count, list(cuts), ids, bom, retry
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        after = int(request.headers.get("last-event-id", "0"))
        body = sse(range(after + 1, self.count + 1), retry=self.retry)
        if not self.ids:
            body = b"".join(line + b"\n" for line in body.split(b"\n")[:-1]
                            if not line.startswith(b"id:"))
        if self.bom:
            body = b"\xef\xbb\xbf" + body
        cut = self.cuts.pop(0) if self.cuts else None
        error = None if cut is None else httpx.RemoteProtocolError("peer closed connection")
        stream = broken_stream(pieces(body[:cut], 37), error)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=stream)


def event_ids(body: bytes) -> list[int]:
    return [int(line[4:]) for line in body.split(b"\n") if line.startswith(b"id: ")]


def test_an_event_stream_cut_mid_event_delivers_each_event_once(harness: Harness) -> None:
    whole = sse(range(1, 41), retry=200)
    mid_data = whole.index(b"data: line two", whole.index(b"id: 7\n"))  # inside event 7
    second = sse(range(7, 41), retry=200)  # what the first resumption answers
    after_id = second.index(b"id: 12\n") + len(b"id: 12\n")  # right after an id line
    server = EventServer(cuts=(mid_data, after_id))
    body, response = read(harness, harness.transport(server, resume=rt.Resume()))
    assert event_ids(body) == list(range(1, 41))
    assert body.count(b"data: line two\n\n") == 40  # none torn
    assert [r.headers.get("last-event-id") for r in server.requests] == [None, "6", "11"]
    assert all(wait >= 0.2 for wait in harness.waits)  # the stream's retry: 200 ms
    assert rt.retry_info(response).resumes == 2
    assert [a.resumed_at for a in rt.retry_info(response).history] == [None, "6", "11"]


def test_a_resumed_event_stream_drops_its_bom(harness: Harness) -> None:
    server = EventServer(count=5, cuts=(60,), bom=True)
    body, _ = read(harness, harness.transport(server, resume=rt.Resume()))
    assert body.startswith(b"\xef\xbb\xbf")  # the first body's, as it came
    assert body.count(b"\xef\xbb\xbf") == 1
    assert event_ids(body) == [1, 2, 3, 4, 5]


def test_an_event_stream_without_ids_ends_with_the_error_after_whole_events(
        harness: Harness) -> None:
    server = EventServer(count=5, cuts=(70,), ids=False)
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        read(harness, harness.transport(server, resume=rt.Resume()))
    partial = b"".join(read.partial)  # type: ignore[attr-defined]
    assert partial == b"retry: 200\ndata: line one of 1\ndata: line two\n\n"  # whole only
    assert caught.value.__notes__[-1].endswith("(not_retryable): no event ID to resume from")
    assert len(server.requests) == 1


@table("sent, body, resumed_from", [
    ({}, b"id: caf\xc3\xa9\ndata: a\n\ndata: b", "café".encode()),  # sent as UTF-8 bytes
    ({"Last-Event-ID": "5"}, b"data: b", b"5"),  # cut before this body's first id
], ids=["utf8-id", "callers-id"])
def test_the_id_a_resumption_sends(harness: Harness, sent: dict[str, str], body: bytes,
                                   resumed_from: bytes) -> None:
    asked: list[bytes | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        header = request.headers.raw
        asked.append(next((v for k, v in header if k.lower() == b"last-event-id"), None))
        error = httpx.ReadError("cut") if len(asked) == 1 else None
        stream = broken_stream([body if len(asked) == 1 else b"data: c\n\n"], error)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=stream)

    got, _ = read(harness, harness.transport(handler, resume=rt.Resume()), headers=sent)
    assert asked == [sent.get("Last-Event-ID", "").encode() or None, resumed_from]
    assert got.endswith(b"data: c\n\n")


def test_a_retry_field_of_any_length_never_breaks_the_read(harness: Harness) -> None:
    # every event reaches the caller, the one before the field in the same chunk too
    body = b"id: 1\ndata: a\n\nretry: " + b"9" * 5000 + b"\n\nid: 2\ndata: b\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=broken_stream([body], None))

    got, response = read(harness, harness.transport(handler, resume=rt.Resume()))
    assert got == body
    assert rt.retry_info(response).resumes == 0


def test_a_reconnection_time_too_long_to_use_waits_max_retry_after(harness: Harness) -> None:
    # 401 digits: more than a float holds once divided into seconds
    first = b"retry: 1" + b"0" * 400 + b"\n\nid: 1\ndata: a\n\nid: 2\nda"
    bodies = [(first, httpx.ReadError("cut")), (b"id: 2\ndata: b\n\n", None)]

    def handler(request: httpx.Request) -> httpx.Response:
        chunk, error = bodies.pop(0)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=broken_stream([chunk], error))

    policy = rt.RetryPolicy(max_retry_after=5.0, base_delay=0.1, jitter="none")
    got, response = read(harness, harness.transport(handler, resume=rt.Resume(),
                                                    policy=policy))
    assert event_ids(got) == [1, 2]
    assert harness.waits == [5.1]  # the stream's time, capped, plus the backoff
    assert rt.retry_info(response).resumes == 1


def test_a_post_event_stream_is_never_resent(harness: Harness) -> None:
    server = EventServer(count=5, cuts=(70,))
    with pytest.raises(httpx.RemoteProtocolError):
        read(harness, harness.transport(server, resume=rt.Resume()), method="POST")
    assert len(server.requests) == 1


def test_a_resumption_is_logged(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "retry_transport")
    server = RangeServer(cuts=(3000,))
    read(harness, harness.transport(server, resume=rt.Resume()))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert lines[0].startswith(f"Resuming GET {URL} from byte 3000 after ReadError (attempt 2)")


def test_resume_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="max_resumes"):
        rt.Resume("5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_resumes"):
        rt.Resume(True)
    with pytest.raises(ValueError, match="max_resumes must be an int >= 1, got 0"):
        rt.Resume(0)
    with pytest.raises(TypeError, match="ranges"):
        rt.Resume(ranges=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="resume must be a Resume"):
        rt.RetryTransport(resume=5)  # type: ignore[arg-type]
    assert rt.Resume() == rt.Resume(5, ranges=True, events=True)

