"""retry_body_errors: the body is read inside the retry loop, so a dropped body is retried."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness

pytestmark = pytest.mark.usefixtures("flavour")


def body(chunks: list[bytes], error: Exception | None, log: list[str]) -> Any:
    """A response body that sends some chunks, then fails (or not); records closing.

    The class is made at each call, on the stream base classes of the flavour under test."""

    class Body(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __init__(self, chunks: list[bytes], error: Exception | None, log: list[str]) -> None:
            self.chunks, self.error, self.log = chunks, error, log

        def __iter__(self) -> Iterator[bytes]:
            yield from self.chunks
            if self.error is not None:
                raise self.error

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for chunk in self.chunks:
                yield chunk
            if self.error is not None:
                raise self.error

        def close(self) -> None:
            self.log.append("close")

        async def aclose(self) -> None:
            self.log.append("close")

    return Body(chunks, error, log)


def bodies(*specs: tuple[list[bytes], Exception | None]) -> tuple[object, list[str], list[int]]:
    log: list[str] = []
    count = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        chunks, error = specs[min(count[0], len(specs) - 1)]
        count[0] += 1
        return httpx.Response(200, stream=body(chunks, error, log))

    return handler, log, count


def test_off_by_default_the_body_error_reaches_the_caller(harness: Harness) -> None:
    """Without the option, a body error surfaces in the caller's read, unretried."""
    handler, log, count = bodies(([b"par"], httpx.ReadError("reset")), ([b"full"], None))
    with pytest.raises(httpx.ReadError):
        harness.send(harness.transport(handler))  # the client reads the body
    assert count == [1]


def _notes(exc: BaseException) -> list[str]:
    return [note for note in getattr(exc, "__notes__", []) if "retry-transport" in note]


@pytest.mark.parametrize("how", ["quick", "after a retry", "hedged"])
def test_off_a_body_error_says_what_would_have_retried_it(harness: Harness, how: str) -> None:
    """Off, a body error a retry could fix carries the request's metadata and a note naming
    retry_body_errors=True, however the answer came: at once, after a retry, from a
    hedged try. Nothing more is sent."""
    answers = [(200, [b"par"], httpx.ReadError("reset"))]
    if how == "after a retry":
        answers.insert(0, (503, [b"busy"], None))
    log: list[str] = []
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        status, chunks, error = answers[len(seen)]
        seen.append(request)
        return httpx.Response(status, stream=body(chunks, error, log))

    kwargs = {"hedging": rt.Hedging(5.0)} if how == "hedged" else {}
    with pytest.raises(httpx.ReadError) as caught:
        harness.send(harness.transport(handler, **kwargs))
    said = _notes(caught.value)
    assert len(said) == 1 and "retry_body_errors=True would have retried" in said[0]
    assert "resume=" not in said[0]  # no ETag
    info = rt.retry_info(caught.value)
    assert info is not None and [a.status for a in info.history] == [s for s, _, _ in answers]
    assert len(seen) == len(answers)


@pytest.mark.parametrize("extensions", [{"retry": False}, {"retry": {"max_attempts": 1}}])
def test_no_note_where_no_retry_was_possible(harness: Harness,
                                             extensions: dict[str, object]) -> None:
    """Retries off for the request, or no attempt left: the error as it came."""
    handler, log, count = bodies(([b"par"], httpx.ReadError("reset")), ([b"full"], None))
    with pytest.raises(httpx.ReadError) as caught:
        harness.send(harness.transport(handler), extensions=extensions)
    assert _notes(caught.value) == [] and rt.retry_info(caught.value) is None


def test_a_body_in_memory_is_handed_over_untouched(harness: Harness) -> None:
    """A body already in memory cannot break: the very stream the inner transport gave."""
    streams: list[object] = []

    def handler(request: httpx.Request) -> httpx.Response:
        response = httpx.Response(200, content=b"whole")
        streams.append(response.stream)
        return response

    transport = harness.transport(handler)
    request = httpx.Request("GET", "https://api.example.com/items")
    if isinstance(transport, rt.RetryTransport):
        response = transport.handle_request(request)
    else:
        response = harness.run(transport.handle_async_request, request)
    assert response.stream is streams[0]


def test_body_error_is_retried(harness: Harness) -> None:
    """With the option, a connection dropped mid-body is retried like any transient error."""
    handler, log, count = bodies(([b"par"], httpx.ReadError("reset")), ([b"full ", b"body"], None))
    response = harness.send(harness.transport(handler, retry_body_errors=True))
    assert response.content == b"full body"
    assert count == [2]
    assert log == ["close", "close"]  # the broken body and the buffered one are both closed
    info = rt.retry_info(response)
    assert info is not None
    assert [a.error for a in info.history] == ["ReadError", None]
    assert info.body_buffered is True


def test_body_error_gives_up_with_the_error(harness: Harness) -> None:
    """When retries run out, the body error is raised, unchanged."""
    error = httpx.RemoteProtocolError("peer closed connection without sending complete body")
    handler, log, count = bodies(([b"x"], error))
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        harness.send(harness.transport(handler, retry_body_errors=True))
    assert caught.value is error
    assert count == [3]
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.MAX_ATTEMPTS  # type: ignore[union-attr]


def test_body_error_on_post_is_not_retried(harness: Harness) -> None:
    """The server saw the POST: a body error is not a licence to send it again."""
    handler, log, count = bodies(([b"x"], httpx.ReadError("reset")), ([b"ok"], None))
    with pytest.raises(httpx.ReadError) as caught:
        harness.send(harness.transport(handler, retry_body_errors=True), "POST")
    assert count == [1]
    assert rt.retry_info(caught.value).stop_reason is rt.StopReason.UNSAFE_METHOD  # type: ignore[union-attr]


def test_large_body_is_handed_over_as_a_stream(harness: Harness) -> None:
    """Past max_body_buffer the body streams to the caller whole, and the metadata says so."""
    handler, log, count = bodies(([b"a" * 10, b"b" * 10, b"c" * 10], None))
    response = harness.send(harness.transport(handler, retry_body_errors=True,
                                              max_body_buffer=15))
    assert response.content == b"a" * 10 + b"b" * 10 + b"c" * 10
    info = rt.retry_info(response)
    assert info is not None and info.body_buffered is False
    assert log == ["close"]


def test_large_body_error_is_not_retried(harness: Harness) -> None:
    """An error after the buffer limit reaches the caller: that body was handed over."""
    handler, log, count = bodies(([b"a" * 10, b"b" * 10], httpx.ReadError("reset")),
                                 ([b"ok"], None))
    with pytest.raises(httpx.ReadError):
        harness.send(harness.transport(handler, retry_body_errors=True, max_body_buffer=15))
    assert count == [1]


def test_declared_length_over_the_limit_is_not_read(harness: Harness) -> None:
    """A Content-Length over the limit is handed over without reading a byte."""
    reads: list[str] = []

    class Lazy(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            reads.append("read")
            yield b"x" * 100

        async def __aiter__(self) -> AsyncIterator[bytes]:
            reads.append("read")
            yield b"x" * 100

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Length": "100"}, stream=Lazy())

    transport = harness.transport(handler, retry_body_errors=True, max_body_buffer=50)
    if harness.mode == "sync":
        with httpx.Client(transport=transport) as client:  # type: ignore[arg-type]
            with client.stream("GET", "https://api.example.com/") as response:
                assert reads == []
                info = rt.retry_info(response)
                assert info is not None and info.body_buffered is False
                assert response.read() == b"x" * 100
    else:
        async def main() -> None:
            async with httpx.AsyncClient(transport=transport) as client:  # type: ignore[arg-type]
                async with client.stream("GET", "https://api.example.com/") as response:
                    assert reads == []
                    assert await response.aread() == b"x" * 100

        harness.run(main)


def test_retryable_status_body_is_not_read(harness: Harness) -> None:
    """A 503 is closed unread and retried; only the final response's body is read."""
    log: list[str] = []
    count = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        count[0] += 1
        status = 503 if count[0] == 1 else 200
        return httpx.Response(status, stream=body([b"s%d" % status], None, log))

    response = harness.send(harness.transport(handler, retry_body_errors=True))
    assert response.content == b"s200"


def test_per_request_opt_in(harness: Harness) -> None:
    """retry_body_errors can be switched on for one request."""
    handler, log, count = bodies(([b"x"], httpx.ReadError("reset")), ([b"ok"], None))
    transport = harness.transport(handler)
    response = harness.send(transport, extensions={"retry": {"retry_body_errors": True}})
    assert response.content == b"ok"


def test_max_body_buffer_is_validated() -> None:
    """A negative buffer size is a wrong value, a non-integer one the wrong kind."""
    with pytest.raises(ValueError, match="max_body_buffer"):
        rt.RetryPolicy(max_body_buffer=-1)
    for value in (1.5, "10", True):
        with pytest.raises(TypeError, match="max_body_buffer"):
            rt.RetryPolicy(max_body_buffer=value)  # type: ignore[arg-type]
