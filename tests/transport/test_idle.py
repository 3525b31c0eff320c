"""``idle_timeout`` through the async transport, both flavours, over mock transports whose
bodies fall silent where each test says, in virtual time (trio's ``MockClock``: the silence
is anyio sleeps, and the transport's bound a cancel scope). The sync transport's watchdog
blocks in a real socket: it is tested against real servers, with asyncio, in
``tests/real/test_idle_server.py``; the counting of dispatched events in
``tests/rules/test_resumable.py``."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

from tests.flavour import httpx, rt

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://api.example.com/v1/events"
EVENT_STREAM = {"content-type": "text/event-stream"}

#: A script item: bytes sent, or seconds of silence.
Item = bytes | float


def scripted(items: list[Item]) -> Any:
    """An async body that sends ``items`` (a float is that many seconds of silence);
    ``closed`` says whether it was closed, ``reads`` counts the chunks it gave."""

    class Scripted(httpx.AsyncByteStream):  # type: ignore[misc, name-defined]
        closed = False

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for item in items:
                if isinstance(item, float):
                    await anyio.sleep(item)
                else:
                    yield item

        async def aclose(self) -> None:
            self.closed = True

    return Scripted()


def event(number: int) -> bytes:
    return b"id: %d\ndata: {\"n\": %d}\n\n" % (number, number)


def pings(count: int, every: float) -> list[Item]:
    """``count`` keep-alive comments, ``every`` seconds apart."""
    return [item for _ in range(count) for item in (every, b": ping\n\n")]


class Server:
    """Answers each request with the next body of ``bodies`` (the last one repeats)."""

    def __init__(self, *bodies: list[Item], headers: dict[str, str] | None = None) -> None:
        self.bodies = list(bodies)
        self.headers = EVENT_STREAM if headers is None else headers
        self.requests: list[Any] = []
        self.streams: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        items = self.bodies.pop(0) if len(self.bodies) > 1 else self.bodies[0]
        stream = scripted(items)
        self.streams.append(stream)
        return httpx.Response(200, headers=self.headers, stream=stream)


def run(main: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``main`` on trio in virtual time."""
    return anyio.run(main, backend="trio",
                     backend_options={"clock": MockClock(autojump_threshold=0)})


def transport(server: Server, **kwargs: Any) -> Any:
    kwargs.setdefault("rng", random.Random(7))
    return rt.AsyncRetryTransport(httpx.MockTransport(server), **kwargs)


async def read(server: Server, between: float = 0.0,
               **kwargs: Any) -> tuple[Any, list[bytes], float, BaseException | None]:
    """Stream one GET: the response, the chunks read, the virtual seconds it took and the
    error that ended it (``None``: it ended cleanly). ``between``: seconds the caller
    spends on each chunk before reading the next."""
    extensions = kwargs.pop("extensions", None)
    chunks: list[bytes] = []
    start = anyio.current_time()
    error: BaseException | None = None
    async with httpx.AsyncClient(transport=transport(server, **kwargs)) as client:
        async with client.stream("GET", URL, extensions=extensions) as response:
            try:
                async for chunk in response.aiter_raw():
                    chunks.append(chunk)
                    await anyio.sleep(between)
            except Exception as exc:
                error = exc
    return response, chunks, anyio.current_time() - start, error


# -- a stall ---------------------------------------------------------------------------


def test_an_event_stream_of_only_keep_alives_stalls_after_idle_timeout() -> None:
    """Two events, then ``: ping`` every 0.2 s: the read raises ``StreamIdleTimeout`` (a
    ``ReadTimeout``) 1 s after the last event, the body closed, stop reason
    ``idle_timeout`` on the response and the error, a note saying what arrived."""
    server = Server([event(1), 0.5, event(2), *pings(100, 0.2)])

    async def main() -> None:
        response, chunks, took, error = await read(server, idle_timeout=1.0)
        assert isinstance(error, rt.StreamIdleTimeout)
        assert isinstance(error, httpx.ReadTimeout)
        assert str(error) == "no event for 1 s after 2 events (idle_timeout)"
        assert error.timeout == 1.0
        assert took == pytest.approx(1.5)  # 0.5 s to the second event, then 1 s of pings
        assert chunks[:2] == [event(1), event(2)]
        assert server.streams[0].closed
        info = rt.retry_info(error)
        assert info is not None and info.stop_reason is rt.StopReason.IDLE_TIMEOUT
        assert info.history[-1].error == "StreamIdleTimeout"
        assert rt.retry_info(response) == info
        assert "idle_timeout (1 s)" in " ".join(getattr(error, "__notes__", []))

    run(main)


def test_a_silent_body_stalls_after_idle_timeout_whatever_its_type() -> None:
    """A body that is no event stream: every chunk is progress, and silence is counted
    from the last one."""
    server = Server([b"a", 0.9, b"b", 0.9, b"c", 5.0, b"late"],
                    headers={"content-type": "application/octet-stream"})

    async def main() -> None:
        _, chunks, took, error = await read(server, idle_timeout=1.0)
        assert chunks == [b"a", b"b", b"c"]
        assert isinstance(error, rt.StreamIdleTimeout)
        assert str(error) == "no data for 1 s after 3 chunks (idle_timeout)"
        assert took == pytest.approx(2.8)
        assert server.streams[0].closed

    run(main)


@pytest.mark.parametrize("keep_alive", [
    b": ping\n\n", b"\n", b"id: 9\n\n", b"retry: 100\n\n", b"event: ping\n\n"],
    ids=["comment", "blank", "id-only", "retry-only", "no-data"])
def test_nothing_but_a_dispatched_event_resets_the_silence(keep_alive: bytes) -> None:
    """Comments, blank lines, blocks of only ``id`` or ``retry``, an event with no data: no
    progress, however often they come."""
    server = Server([event(1), *[item for _ in range(50) for item in (0.3, keep_alive)]])

    async def main() -> None:
        _, _, took, error = await read(server, idle_timeout=1.0)
        assert isinstance(error, rt.StreamIdleTimeout)
        assert str(error) == "no event for 1 s after 1 event (idle_timeout)"
        assert took == pytest.approx(1.0)

    run(main)


def test_events_that_come_within_idle_timeout_are_read_to_the_end() -> None:
    """Each event within the limit (an event cut across chunks counts once it ends):
    the whole stream, no error."""
    body = [event(1), 0.9, event(2)[:5], 0.05, event(2)[5:], 0.9, event(3), *pings(4, 0.2),
            event(4)]
    server = Server(body)

    async def main() -> None:
        response, chunks, _, error = await read(server, idle_timeout=1.0)
        assert error is None
        assert b"".join(chunks) == b"".join(item for item in body if isinstance(item, bytes))
        info = rt.retry_info(response)
        assert info is not None and info.stop_reason is rt.StopReason.SUCCESS

    run(main)


def test_time_the_caller_spends_between_reads_does_not_count() -> None:
    """A caller that takes 5 s over each event, of a server that sends them 0.5 s apart:
    only the time waiting on the network counts, so nothing stalls."""
    server = Server([event(1), 0.5, event(2), 0.5, event(3)])

    async def main() -> None:
        _, chunks, took, error = await read(server, between=5.0, idle_timeout=1.0)
        assert error is None
        assert len(chunks) == 3
        assert took == pytest.approx(16.0)

    run(main)


def test_without_idle_timeout_a_silent_stream_is_waited_for() -> None:
    """The default (``None``): ten minutes of keep-alives, then the rest, read whole."""
    server = Server([event(1), *pings(600, 1.0), event(2)])

    async def main() -> None:
        _, chunks, _, error = await read(server)
        assert error is None
        assert chunks[-1] == event(2)

    run(main)


def test_a_request_sets_idle_timeout_for_itself() -> None:
    """A per-request override sets it (and one of ``None`` lifts the transport's)."""
    server = Server([event(1), *pings(20, 0.2), event(2)])

    async def main() -> None:
        _, _, _, error = await read(server, extensions={"retry": {"idle_timeout": 0.5}})
        assert isinstance(error, rt.StreamIdleTimeout)
        assert error.timeout == 0.5
        _, chunks, _, error = await read(server, idle_timeout=0.5,
                                         extensions={"retry": {"idle_timeout": None}})
        assert error is None and chunks[-1] == event(2)

    run(main)


# -- with Resume -------------------------------------------------------------------------


def test_with_resume_a_stall_is_a_break_the_stream_resumes_after() -> None:
    """A GET's event stream with ids stalls after event 2: resumed with
    ``Last-Event-ID: 2``, the caller reads every event once and sees no error; the
    resumption's own stall would be a break too."""
    first = [event(1), event(2), *pings(50, 0.2)]
    second = [event(3), *pings(50, 0.2)]
    third = [event(4), event(5)]
    server = Server(first, second, third)

    async def main() -> None:
        response, chunks, _, error = await read(server, idle_timeout=1.0,
                                                resume=rt.Resume())
        assert error is None
        events = b"".join(chunks).replace(b": ping\n\n", b"")  # the keep-alives handed on
        assert events == b"".join(event(n) for n in range(1, 6))
        assert [r.headers.get("last-event-id") for r in server.requests] == [None, "2", "3"]
        assert all(stream.closed for stream in server.streams[:2])
        info = rt.retry_info(response)
        assert info is not None and info.resumes == 2
        assert [a.error for a in info.history] == ["StreamIdleTimeout"] * 2 + [None]

    run(main)


def test_with_resume_a_stall_with_no_event_id_ends_with_idle_timeout() -> None:
    """An event stream without ids cannot be resumed: the stall reaches the caller, stop
    reason ``idle_timeout``."""
    server = Server([b"data: 1\n\n", *pings(50, 0.2)])

    async def main() -> None:
        _, _, _, error = await read(server, idle_timeout=1.0, resume=rt.Resume())
        assert isinstance(error, rt.StreamIdleTimeout)
        info = rt.retry_info(error)
        assert info is not None and info.stop_reason is rt.StopReason.IDLE_TIMEOUT
        assert len(server.requests) == 1

    run(main)


# -- the settings ------------------------------------------------------------------------


@pytest.mark.parametrize("value, error", [
    (0, ValueError), (-1.0, ValueError), (float("inf"), ValueError), (float("nan"), ValueError),
    ("120", TypeError), (True, TypeError)])
def test_a_bad_idle_timeout_is_refused_at_construction(value: object,
                                                       error: type[Exception]) -> None:
    """As a transport keyword and a preset field, naming the argument."""
    with pytest.raises(error, match="idle_timeout"):
        rt.AsyncRetryTransport(httpx.MockTransport(Server([])), idle_timeout=value)
    with pytest.raises(error, match="idle_timeout"):
        rt.RetryTransport(httpx.MockTransport(Server([])), idle_timeout=value)
    with pytest.raises(error, match="idle_timeout"):
        rt.presets.anthropic(idle_timeout=value)


def test_the_presets_leave_idle_timeout_unset() -> None:
    """Reasoning models may be silent for minutes: the SDK guide shows how to set it."""
    assert rt.presets.openai().idle_timeout is None
    assert rt.presets.anthropic().idle_timeout is None
    assert rt.presets.openai(idle_timeout=120).idle_timeout == 120.0


# -- while retry_event holds a response's first events -------------------------------------


START = b"event: message_start\ndata: {}\n\n"


def held_until_content(sse: Any) -> bool | None:
    """A judge that holds ``message_start`` and takes anything else as content."""
    return None if sse.event == "message_start" else False


def test_a_stall_while_retry_event_holds_events_is_the_attempts_error() -> None:
    """The first answer sends ``message_start`` (held back, not content yet) and falls
    silent: ``idle_timeout`` bounds that silence too, and the stall is the attempt's
    transport error: the GET is retried, the caller reads the second answer whole and the
    first is closed."""
    server = Server([START, *pings(50, 0.2), event(1)], [START, event(1), event(2)])

    async def main() -> None:
        response, chunks, took, error = await read(server, idle_timeout=1.0,
                                                   retry_event=held_until_content)
        assert error is None
        assert b"".join(chunks) == START + event(1) + event(2)
        assert len(server.requests) == 2 and server.streams[0].closed
        info = rt.retry_info(response)
        assert info is not None and info.attempts == 2
        assert info.history[0].error == "StreamIdleTimeout"
        assert took < 3.0  # 1 s of silence, then the backoff: not the first body's 10 s

    run(main)


def test_a_stall_after_retry_event_hands_a_stream_over_is_watched_once() -> None:
    """Content began (the judge said ``False``), the response was handed over, and then the
    server fell silent: the read raises ``StreamIdleTimeout`` 1 s later, stop reason
    ``idle_timeout``, the note counting the events the caller got."""
    server = Server([START, event(1), *pings(50, 0.2)])

    async def main() -> None:
        _, chunks, took, error = await read(server, idle_timeout=1.0,
                                            retry_event=held_until_content)
        body = b"".join(chunks)
        assert body.startswith(START + event(1))
        assert set(body[len(START + event(1)):].split(b"\n\n")) <= {b": ping", b""}
        assert isinstance(error, rt.StreamIdleTimeout)
        assert str(error) == "no event for 1 s after 2 events (idle_timeout)"
        assert took == pytest.approx(1.0)
        info = rt.retry_info(error)
        assert info is not None and info.stop_reason is rt.StopReason.IDLE_TIMEOUT

    run(main)
