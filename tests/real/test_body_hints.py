"""A body cut after the response was handed over, against a raw server on 127.0.0.1: the
error says what would have retried the request (``retry_body_errors=True``) or resumed its
body (``resume=Resume()``), and carries the request's ``retry_info``, when one would have;
nothing is said, and the body is not wrapped, when neither would, or when one of them
handles the body already. Sync, and async on asyncio and trio, both flavours."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.real.clients import client_timeout, paired_anyio_backend  # noqa: F401
from tests.real.servers import FULL_BODY, RawServer

pytestmark = pytest.mark.real

#: Bytes of the body sent before the connection is closed.
CUT = 11
#: A declared length over the default max_body_buffer (10 MiB).
HUGE = 100_000_000
EVENTS = b"id: 1\ndata: one\n\n"
RETRY = "retry_body_errors=True would have retried"
RESUME = "resume=Resume() would have resumed"


class CuttingServer(RawServer):
    """:class:`RawServer` with answers cut after ``CUT`` bytes of their body, then closed:

    - ``plain``: a 200 with ``Content-Length: 1000``;
    - ``etag``: the same with a strong ``ETag``;
    - ``huge``: a 200 declaring ``HUGE`` bytes, no ``ETag``;
    - ``huge-etag``: the same with a strong ``ETag``;
    - ``events``: a chunked ``text/event-stream``: one whole event, then a chunk cut short;
    - ``busy``: a whole 503;
    - and the raw server's own (``ok``: a whole 200).
    """

    BEHAVIOURS = (*RawServer.BEHAVIOURS, "plain", "etag", "huge", "huge-etag", "events",
                  "busy")

    def _behave(self, conn: socket.socket, behaviour: str) -> bool:
        heads = {
            "plain": (len(FULL_BODY), ""), "etag": (len(FULL_BODY), 'ETag: "v1"\r\n'),
            "huge": (HUGE, ""), "huge-etag": (HUGE, 'ETag: "v1"\r\n'),
        }
        if behaviour in heads:
            declared, extra = heads[behaviour]
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {declared}\r\n{extra}"
                         f"Connection: close\r\n\r\n".encode() + FULL_BODY[:CUT])
            return False
        if behaviour == "events":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                         + b"%x\r\n%s\r\n" % (len(EVENTS), EVENTS) + b"40\r\nid: 2\n")
            return False
        if behaviour == "busy":
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n"
                         b"Connection: close\r\n\r\nbusy")
            return False
        return super()._behave(conn, behaviour)


@pytest.fixture
def server() -> Iterator[CuttingServer]:
    cutting = CuttingServer().start()
    try:
        yield cutting
    finally:
        cutting.stop()


def notes(exc: BaseException) -> list[str]:
    return [note for note in getattr(exc, "__notes__", []) if "retry-transport" in note]


#: answer -> what the note names: retry_body_errors (RETRY), resume (RESUME), or both.
NAMED = {
    "plain": {RETRY},
    "etag": {RETRY, RESUME},
    "huge-etag": {RESUME},  # too large to buffer, but resumable by range
    "events": {RETRY, RESUME},  # no declared length: small enough, for all it says
}


def check_noted(exc: BaseException, answer: str, server: RawServer) -> None:
    assert isinstance(exc, httpx.RemoteProtocolError)
    said = notes(exc)
    assert len(said) == 1, said
    named = {option for option in (RETRY, RESUME) if option in said[0]}
    assert named == NAMED[answer], said
    if answer == "events":
        assert "by event ID" in said[0]
    elif RESUME in named:
        assert "by byte range" in said[0]
    info = rt.retry_info(exc)
    assert info is not None
    assert info.attempts == 1 and info.stop_reason is rt.StopReason.SUCCESS
    assert [attempt.status for attempt in info.history] == [200]
    assert server.count == 1  # nothing was retried


@pytest.mark.usefixtures("flavour")
@pytest.mark.parametrize("answer", list(NAMED))
def test_a_cut_body_names_what_would_have_saved_it(server: CuttingServer, answer: str) -> None:
    url = server.script(answer)
    with httpx.Client(transport=rt.RetryTransport(), timeout=client_timeout()) as client, \
            pytest.raises(httpx.TransportError) as caught:
        client.get(url)
    check_noted(caught.value, answer, server)


@pytest.mark.anyio
@pytest.mark.parametrize("answer", list(NAMED))
async def test_a_cut_body_names_what_would_have_saved_it_async(server: CuttingServer,
                                                               answer: str) -> None:
    url = server.script(answer)
    async with httpx.AsyncClient(transport=rt.AsyncRetryTransport(),
                                 timeout=client_timeout()) as client:
        with pytest.raises(httpx.TransportError) as caught:
            await client.get(url)
    check_noted(caught.value, answer, server)


def test_the_note_comes_after_retries_too(server: CuttingServer, flavour: str) -> None:
    """A body handed over after a retry (a 503 first): the note, and the metadata of the
    request's two attempts."""
    url = server.script("busy", "plain")
    transport = rt.RetryTransport(sleep=lambda seconds: None, retry_statuses={503})
    with httpx.Client(transport=transport, timeout=client_timeout()) as client, \
            pytest.raises(httpx.RemoteProtocolError) as caught:
        client.get(url)
    assert len(notes(caught.value)) == 1 and RETRY in notes(caught.value)[0]
    info = rt.retry_info(caught.value)
    assert info is not None and [a.status for a in info.history] == [503, 200]


#: (method, answer): neither option would have saved the body.
UNSAVED = [("POST", "plain"), ("GET", "huge")]


def send_raw(server: CuttingServer, method: str, answer: str, **kwargs: Any) -> Any:
    """The transport's response itself (its own stream, as handed over)."""
    transport = rt.RetryTransport(**kwargs)
    return transport, transport.handle_request(
        httpx.Request(method, server.script(answer), content=b"{}" if method == "POST" else None))


@pytest.mark.usefixtures("flavour")
@pytest.mark.parametrize(("method", "answer"), UNSAVED)
def test_no_note_when_neither_would_have_saved_it(server: CuttingServer, method: str,
                                                  answer: str) -> None:
    """A POST (the server saw it: not sent again) and a body too large to buffer with no
    ETag: no note, no metadata, and the body is handed over as the inner transport gave it."""
    transport, response = send_raw(server, method, answer)
    assert type(response.stream).__module__.startswith(("httpx", "httpx2"))
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        response.read()
    assert notes(caught.value) == [] and rt.retry_info(caught.value) is None
    transport.close()


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "answer"), UNSAVED)
async def test_no_note_when_neither_would_have_saved_it_async(server: CuttingServer,
                                                              method: str, answer: str) -> None:
    transport = rt.AsyncRetryTransport()
    content = b"{}" if method == "POST" else None
    response = await transport.handle_async_request(
        httpx.Request(method, server.script(answer), content=content))
    assert type(response.stream).__module__.startswith(("httpx", "httpx2"))
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        await response.aread()
    assert notes(caught.value) == [] and rt.retry_info(caught.value) is None
    await transport.aclose()


@pytest.mark.usefixtures("flavour")
def test_no_wrapper_when_an_option_handles_the_body(server: CuttingServer) -> None:
    """``retry_body_errors`` buffers a small body (retried: the whole body, in memory);
    over the limit it hands the body over as it read it, and ``resume`` resumes its own:
    neither is wrapped for a hint."""
    transport, response = send_raw(server, "GET", "plain", retry_body_errors=True,
                                   sleep=lambda seconds: None)
    assert response.read() == FULL_BODY and type(response.stream) is httpx.ByteStream
    transport.close()
    transport, response = send_raw(server, "GET", "huge", retry_body_errors=True)
    assert type(response.stream).__module__.startswith(("httpx", "httpx2"))  # as it came
    response.close()
    transport.close()
    transport, response = send_raw(server, "GET", "etag", resume=rt.Resume(max_resumes=1),
                                   sleep=lambda seconds: None)
    assert type(response.stream).__name__ == "SyncResuming"
    response.close()
    transport.close()
