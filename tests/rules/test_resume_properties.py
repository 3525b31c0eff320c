"""Resumable bodies against hostile servers, no network: property tests with hypothesis.

The first answer to a ``GET`` with ``resume=Resume()`` is a ``200`` (with or without its
``Content-Length``) or a ``206`` of a range the caller asked for, of a representation with a
strong ``ETag``, plain or gzip; its body breaks at a drawn offset, or ends before or goes on
past the length its headers declared. Each resumption is answered by a drawn answer: the
right ``206``, or one wrong in its status, its ``Content-Range`` (another first byte, last
byte or total, numbers of 5,000 digits), its ``ETag``, its ``Content-Encoding``, its
``Content-Length``, or its body's length (bytes more or fewer than its range, with no
``Content-Length``, as a chunked body); and its body may break again.

The oracle: the caller reads the representation (its raw bytes) byte for byte and a clean
end, or an error after an exact prefix of it: the break the server raised last, the very
object, or when it raised none the flavour's ``RemoteProtocolError`` for a body of the wrong
length; noted, with its ``retry_info``. Nothing else is raised, and every body the server
sent is closed.
"""

from __future__ import annotations

import functools
import gzip
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.flavour import MODULES, current, httpx, rt

pytestmark = pytest.mark.usefixtures("flavour")

ETAG = '"v1"'

#: What a resumption may be answered: ``right`` is the 206 asked for, every other kind is
#: wrong in one way (see :meth:`Server.resumption`).
WRONG = ("status", "first", "last", "total", "huge", "etag", "coding", "length", "more",
         "fewer")


@dataclass(frozen=True)
class First:
    """The first answer: ``ranged``, a 206 of the range between these fractions of the
    representation, which the caller asked for (else a 200, with a ``Content-Length`` when
    ``declared``); ``lie`` bytes more (zeros) or fewer in its body than its headers declare;
    a break after this percentage of its body (``None``: none)."""

    size: int
    gzip: bool
    ranged: tuple[float, float] | None
    declared: bool
    lie: int
    cut: int | None


@dataclass(frozen=True)
class Answer:
    """The answer to one resumption: its ``kind``, a count (``delta``) for the kinds that
    need one, whether it sends a ``Content-Length``, and a break after this percentage of
    its body (``None``: none)."""

    kind: str
    delta: int
    declared: bool
    cut: int | None


firsts = st.builds(
    First,
    size=st.integers(1, 3000),
    gzip=st.booleans(),
    ranged=st.none() | st.tuples(st.floats(0, 1), st.floats(0, 1)),
    declared=st.booleans(),
    lie=st.sampled_from([0, 0, 0, -1, 1, -7, 5, -300]),
    cut=st.none() | st.integers(0, 99),
)
answers = st.builds(
    Answer,
    kind=st.one_of(st.just("right"), st.sampled_from(WRONG)),
    delta=st.integers(1, 400),
    declared=st.booleans(),
    cut=st.none() | st.integers(0, 99),
)


class Stream:
    """A body of ``chunks`` that raises ``error`` after them (``None``: ends cleanly), noted
    in ``raised`` when it does; it records whether it was closed. Mixed into the flavour's
    stream classes by :func:`_stream_class`."""

    def __init__(self, chunks: list[bytes], error: Exception | None,
                 raised: list[Exception]) -> None:
        self.chunks, self.error, self.raised, self.closed = chunks, error, raised, False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks
        if self.error is not None:
            self.raised.append(self.error)
            raise self.error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.error is not None:
            self.raised.append(self.error)
            raise self.error

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


@functools.cache
def _stream_class(name: str) -> type[Any]:
    module = MODULES[name][0]
    return type("Stream", (Stream, module.SyncByteStream, module.AsyncByteStream), {})


@dataclass
class Server:
    """Serves one representation as the drawn answers say."""

    first: First
    answers: list[Answer]
    chunk: int
    data: bytes = b""
    #: The target: the bytes of the representation the caller asked for.
    want: bytes = b""
    asked: str | None = None  # the caller's own Range
    raised: list[Exception] = field(default_factory=list)  # the breaks its bodies raised
    streams: list[Stream] = field(default_factory=list)

    def __post_init__(self) -> None:
        resource = random.Random(self.first.size).randbytes(self.first.size)
        self.data = gzip.compress(resource, mtime=0) if self.first.gzip else resource
        self.coding = "gzip" if self.first.gzip else ""
        if self.first.ranged is not None:
            low, high = sorted(int(f * (len(self.data) - 1)) for f in self.first.ranged)
            self.asked = f"bytes={low}-{high}"
            self.want = self.data[low:high + 1]
        else:
            self.want = self.data

    def body(self, content: bytes, cut: int | None) -> Stream:
        """A body of ``content`` in chunks, broken after ``cut`` percent of it."""
        error = None
        at = len(content) if cut is None else len(content) * cut // 100
        if at < len(content):
            error = httpx.ReadError(f"cut at {at}")
            content = content[:at]
        chunks = [content[i:i + self.chunk] for i in range(0, len(content), self.chunk)]
        made: Stream = _stream_class(current())(chunks, error, self.raised)
        self.streams.append(made)
        return made

    def __call__(self, request: httpx.Request) -> httpx.Response:
        headers = {"etag": ETAG}
        if self.coding:
            headers["content-encoding"] = self.coding
        asked = request.headers.get("range")
        if asked is not None and asked != self.asked:
            return self.resumption(request, asked, headers)
        first, total = self.first, len(self.data)
        content = self.want
        if asked is None:
            if first.declared:
                headers["content-length"] = str(total)
            status = 200
        else:
            low = int(asked[6:].partition("-")[0])  # the caller's own range
            headers["content-range"] = f"bytes {low}-{low + len(content) - 1}/{total}"
            headers["content-length"] = str(len(content))
            status = 206
        if first.lie and (status == 206 or first.declared):  # a length there is to lie about
            content = content + bytes(first.lie) if first.lie > 0 else content[:first.lie]
        return httpx.Response(status, headers=headers, stream=self.body(content, first.cut))

    def resumption(self, request: httpx.Request, asked: str,
                   headers: dict[str, str]) -> httpx.Response:
        answer = self.answers.pop(0) if self.answers else Answer("right", 0, True, None)
        assert request.headers["if-range"] == ETAG
        total = len(self.data)
        start, _, end = asked[6:].partition("-")
        low, high = int(start), int(end) if end else total - 1
        content = self.data[low:high + 1]
        kind, delta = answer.kind, answer.delta
        status, first, last, of = 206, low, high, str(total)
        if kind == "status":
            status = (200, 412, 416, 500, 503)[delta % 5]
            if status == 200:
                content = self.data
        elif kind == "first":
            first, content = low + 1, content[1:]
        elif kind == "last":
            last, content = high - 1, content[:-1]
        elif kind == "total":
            of = str(total + delta)
        elif kind == "etag":
            headers["etag"] = '"v2"'
        elif kind == "coding":
            headers["content-encoding"] = "br"
        elif kind == "more":
            content = content + bytes(delta)
        elif kind == "fewer":
            content = content[:-delta]
        if status == 206:
            if kind == "huge":
                headers["content-range"] = f"bytes {low}-{'9' * 5000}/1{'0' * 5000}"
            else:
                headers["content-range"] = f"bytes {first}-{last}/{of}"
        if kind == "length":
            headers["content-length"] = str(len(content) + (delta if delta % 2 else -delta))
        elif answer.declared and kind not in ("more", "fewer"):
            headers["content-length"] = str(len(content))
        return httpx.Response(status, headers=headers, stream=self.body(content, answer.cut))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.now += seconds


def drive(server: Server, mode: str, max_resumes: int) -> tuple[bytes, Any]:
    """Read the body through a retry transport: (the bytes read, the response or the error
    that ended the read)."""
    clock = Clock()
    kwargs: dict[str, Any] = dict(resume=rt.Resume(max_resumes), clock=clock,
                                  rng=random.Random(0), wallclock=lambda: 1_700_000_000.0)
    headers = {} if server.asked is None else {"Range": server.asked}
    url = "https://files.example.com/data"
    got: list[bytes] = []
    if mode == "sync":
        transport: Any = rt.RetryTransport(httpx.MockTransport(server), sleep=clock.sleep,
                                           **kwargs)
        try:
            with httpx.Client(transport=transport) as client:
                with client.stream("GET", url, headers=headers) as response:
                    got.extend(response.iter_raw())
        except Exception as exc:
            return b"".join(got), exc
        return b"".join(got), response

    async def main() -> Any:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(server), sleep=clock.asleep,
                                           **kwargs)
        try:
            async with httpx.AsyncClient(transport=transport) as client:
                async with client.stream("GET", url, headers=headers) as response:
                    async for chunk in response.aiter_raw():
                        got.append(chunk)
        except Exception as exc:
            return exc
        return response

    result = anyio.run(main, backend=mode)
    return b"".join(got), result


# Deterministic (derandomized, no example database) and bounded: a few seconds in all. The
# sync and async bodies are one source (scripts/unasync.py): the mode is drawn too.
@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(mode=st.sampled_from(["sync", "asyncio", "trio"]), first=firsts,
       replies=st.lists(answers, max_size=6), chunk=st.integers(1, 700),
       max_resumes=st.integers(1, 6))
def test_the_body_is_the_representation_or_an_exact_prefix_and_the_break(
        mode: str, first: First, replies: list[Answer], chunk: int, max_resumes: int) -> None:
    server = Server(first, list(replies), chunk)
    got, result = drive(server, mode, max_resumes)
    if isinstance(result, Exception):
        assert got == server.want[:len(got)], "not a prefix of the representation"
        if server.raised:
            assert result is server.raised[-1], result  # the last break, the very object
        else:
            assert isinstance(result, httpx.RemoteProtocolError), result
        assert result.__notes__[-1].startswith("retry-transport: not resumed after ")
        info = rt.retry_info(result)
        assert info is not None and info.resumes <= max_resumes
    else:
        assert got == server.want, "a clean end of another body"
        info = rt.retry_info(result)
        assert info is not None and info.resumes <= max_resumes
    assert all(stream.closed for stream in server.streams)
