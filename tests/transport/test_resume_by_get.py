"""Resumable bodies, continued: a ``POST``'s event stream resumed by a ``GET`` (MCP's
streamable HTTP, ``Resume(post_events_by_get=True)``), the wait before an event stream's
resumption (the server's ``retry`` time plus the jittered backoff), and progress, which
makes a resumption a success and counts ``max_resumes`` from zero again. Sync and async,
both flavours, over mock transports; a real mcp server and client are in
``tests/real/test_mcp_resume.py``."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table
from tests.transport.test_resume import (
    RangeServer,
    broken_stream,
    event_ids,
    pieces,
    read,
    sse,
)

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://mcp.example.com/mcp"
EVENTS = {"content-type": "text/event-stream"}


class McpServer:
    """A tool call's event stream: a ``POST`` answered with events 1..``count`` (each body
    cut at the next offset of ``cuts``, within that body), and a ``GET`` with
    ``Last-Event-ID`` answered with the events after it (``get`` overrides the answer)."""

    def __init__(self, count: int = 6, cuts: tuple[int | None, ...] = (), *,
                 retry: int | None = None) -> None:
        self.count, self.cuts, self.retry = count, list(cuts), retry
        self.requests: list[httpx.Request] = []
        self.get: tuple[int, dict[str, str]] | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        request.read()
        if request.method == "GET" and self.get is not None:
            status, headers = self.get
            return httpx.Response(status, headers=headers, stream=broken_stream([b"{}"], None))
        after = int(request.headers.get("last-event-id", "0"))
        body = sse(range(after + 1, self.count + 1), retry=self.retry)
        cut = self.cuts.pop(0) if self.cuts else None
        error = None if cut is None else httpx.RemoteProtocolError("peer closed connection")
        return httpx.Response(200, headers=EVENTS,
                              stream=broken_stream(pieces(body[:cut], 37), error))


HEADERS = {
    "Mcp-Session-Id": "s-1", "MCP-Protocol-Version": "2025-11-25",
    "Authorization": "Bearer t0ken", "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json", "Content-Encoding": "identity",
    "Transfer-Encoding": "chunked", "Idempotency-Key": "k-1",
}
CALL = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}'


def post(harness: Harness, transport: Any, headers: dict[str, str] | None = None
         ) -> tuple[bytes, Any]:
    """Stream one ``POST`` of :data:`CALL` and read its whole body: (body, response)."""
    got: list[bytes] = []
    read.partial = got  # type: ignore[attr-defined]
    headers = HEADERS if headers is None else headers
    if harness.mode == "sync":
        with httpx.Client(transport=transport) as client:
            with client.stream("POST", URL, content=CALL, headers=headers) as response:
                for chunk in response.iter_raw():
                    got.append(chunk)
        return b"".join(got), response

    async def main() -> Any:
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("POST", URL, content=CALL, headers=headers) as response:
                async for chunk in response.aiter_raw():
                    got.append(chunk)
        return response

    response = harness.run(main)
    return b"".join(got), response


def by_get(*args: Any, **kwargs: Any) -> Any:
    return rt.Resume(*args, post_events_by_get=True, **kwargs)


# -- a POST's event stream, resumed by GET ----------------------------------------------------


def test_a_post_event_stream_is_resumed_by_get_with_the_posts_headers(harness: Harness) -> None:
    whole = sse(range(1, 7))
    server = McpServer(cuts=(whole.index(b"data: line two", whole.index(b"id: 3\n")),))
    transport = harness.transport(server, resume=by_get())
    body, response = post(harness, transport)
    assert event_ids(body) == [1, 2, 3, 4, 5, 6]
    assert body.count(b"data: line two\n\n") == 6  # none torn
    assert [r.method for r in server.requests] == ["POST", "GET"]  # the POST sent once
    first, get = server.requests
    assert first.content == CALL
    assert get.url == URL and get.content == b""
    sent = {name.lower(): value for name, value in get.headers.raw}
    assert sent[b"last-event-id"] == b"2"
    for name in (b"mcp-session-id", b"mcp-protocol-version", b"authorization", b"accept"):
        assert sent[name] == first.headers.raw[[k.lower() for k, _ in
                                                 first.headers.raw].index(name)][1]
    posted = {k.lower() for k, _ in first.headers.raw}
    # (httpx2 sends no Content-Length beside a Transfer-Encoding; httpx sends both)
    assert {b"content-type", b"content-encoding", b"idempotency-key"} <= posted
    assert b"transfer-encoding" in posted or b"content-length" in posted
    for name in (b"content-type", b"content-length", b"content-encoding",
                 b"transfer-encoding", b"idempotency-key"):
        assert name not in sent, name
    info = rt.retry_info(response)
    assert (info.resumes, [a.resumed_at for a in info.history]) == (1, [None, "2"])
    assert get.extensions.get("retry_attempt") == 2


def test_the_idempotency_key_left_off_is_the_policys_header(harness: Harness) -> None:
    server = McpServer(cuts=(90,))
    policy = rt.RetryPolicy(idempotency_header="X-Request-Key")
    post(harness, harness.transport(server, resume=by_get(), policy=policy),
         headers={"X-Request-Key": "k-2", "Idempotency-Key": "kept"})
    get = server.requests[1]
    assert "x-request-key" not in get.headers
    assert get.headers["idempotency-key"] == "kept"  # not the policy's key: any header


@table("resume, method, cuts", [
    (lambda: rt.Resume(), "POST", (90,)),  # without post_events_by_get
    (lambda: by_get(events=False), "POST", (90,)),
    (lambda: by_get(), "PUT", (90,)),  # only a POST's
    (lambda: by_get(), "POST", (20,)),  # no event ID yet
], ids=["default", "no-events", "put", "no-id"])
def test_what_is_not_resumed_by_get(harness: Harness, resume: Any, method: str,
                                    cuts: tuple[int, ...]) -> None:
    server = McpServer(cuts=cuts)
    transport = harness.transport(server, resume=resume())
    if method == "POST":
        with pytest.raises(httpx.RemoteProtocolError):
            post(harness, transport)
    else:
        with pytest.raises(httpx.RemoteProtocolError):
            read(harness, transport, url=URL, method=method)
    assert [r.method for r in server.requests] == [method]


@table("get, note", [
    ((405, {}), "the server answered 405, not an event stream"),
    ((200, {"content-type": "application/json"}), "the server answered 200, not an event stream"),
], ids=["405", "json"])
def test_a_get_not_answered_by_an_event_stream_ends_resumption(
        harness: Harness, get: tuple[int, dict[str, str]], note: str) -> None:
    server = McpServer(cuts=(90,))
    server.get = get
    with pytest.raises(httpx.RemoteProtocolError) as caught:
        post(harness, harness.transport(server, resume=by_get()))
    assert caught.value.__notes__[-1].endswith(f"(not_retryable): {note}")
    assert event_ids(b"".join(read.partial)) == [1, 2]  # type: ignore[attr-defined]
    assert [r.method for r in server.requests] == ["POST", "GET"]


# -- the wait: the server's time plus the jittered backoff -----------------------------------


def test_an_event_streams_wait_is_its_retry_time_plus_the_jittered_backoff(
        harness: Harness) -> None:
    # the first body ends after event 1; the next two resumptions break before any event
    server = McpServer(count=3, cuts=(60, 0, 0), retry=250)
    policy = rt.RetryPolicy(base_delay=1.0, max_delay=100.0, jitter="full")
    body, _ = post(harness, harness.transport(server, resume=by_get(), policy=policy,
                                             rng=random.Random(7)))
    assert event_ids(body) == [1, 2, 3]
    draws = random.Random(7)
    assert harness.waits == [0.25 + draws.uniform(0.0, 1.0), 0.25 + draws.uniform(0.0, 2.0),
                             0.25 + draws.uniform(0.0, 4.0)]


def test_a_retry_after_above_the_sum_is_the_wait(harness: Harness) -> None:
    server = McpServer(count=3, cuts=(60,), retry=250)
    server.get = (503, {"retry-after": "7"})
    policy = rt.RetryPolicy(base_delay=1.0, jitter="none")
    transport = harness.transport(server, resume=by_get(), policy=policy)
    with pytest.raises(httpx.RemoteProtocolError):
        post(harness, transport)
    assert harness.waits[:2] == [1.25, 7.0]  # the 503's Retry-After, over 0.25 + 2.0


@table("retry", [100, 5000], ids=["100ms", "5s"])
def test_a_fleet_that_lost_its_server_comes_back_spread_over_the_backoff(
        harness: Harness, retry: int) -> None:
    """50 clients whose streams all break at once (the server restarted): each waits the
    server's time plus its own jitter, so no 100 ms holds half of them. (The larger of
    the two brought back every client at once whenever the server's time was larger.)"""
    policy = rt.RetryPolicy(base_delay=1.0)
    back: list[float] = []
    for client in range(50):
        server = McpServer(count=3, cuts=(60,), retry=retry)
        harness.clock.waits.clear()
        post(harness, harness.transport(server, resume=by_get(), policy=policy,
                                        rng=random.Random(client)))
        back.append(harness.waits[0])  # they broke at t = 0: this is when each came back
    assert min(back) >= retry / 1000
    back.sort()
    crowd = max(sum(1 for t in back if start <= t < start + 0.1) for start in back)
    assert crowd < 25, back


# -- progress resets the count ---------------------------------------------------------------


def test_a_stream_broken_more_than_max_resumes_times_with_progress_between_completes(
        harness: Harness) -> None:
    # each body brings one whole event, then breaks in the next: nine breaks for Resume(2)
    one = len(sse(range(1, 2)))
    server = McpServer(count=10, cuts=(one + 10,) * 9)
    policy = rt.RetryPolicy(base_delay=1.0, jitter="none")
    transport = harness.transport(server, resume=by_get(2), policy=policy)
    body, response = post(harness, transport)
    assert event_ids(body) == list(range(1, 11))
    assert rt.retry_info(response).resumes == 9
    assert harness.waits == [1.0] * 9  # the backoff counts from zero again too
    # each resumption's cost went back as soon as its event reached the caller
    assert transport.stats.budget_tokens == 500


def test_resumptions_without_progress_stop_at_max_resumes(harness: Harness) -> None:
    # a comment and an ID-only block reach the caller, but no event: no progress
    blocks = b": ping\n\nid: 9\n\n"
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        chunk = sse(range(1, 2)) if len(calls) == 1 else blocks
        return httpx.Response(200, headers=EVENTS,
                              stream=broken_stream([chunk], httpx.ReadError("cut")))

    transport = harness.transport(handler, resume=by_get(3))
    with pytest.raises(httpx.ReadError) as caught:
        post(harness, transport)
    info = rt.retry_info(caught.value)
    assert (info.resumes, info.stop_reason.value) == (3, "max_attempts")
    assert caught.value.__notes__[-1].endswith("max_resumes (3) reached")
    assert len(calls) == 4
    assert transport.stats.budget_tokens == 500 - 3 * 5  # none had progress: all paid


@table("every, completes", [(80_000, True), (30_000, False)], ids=["64k-between", "less"])
def test_a_download_makes_progress_by_64_kib(harness: Harness, every: int,
                                            completes: bool) -> None:
    data = bytes(range(256)) * 1600  # 400 KiB
    server = RangeServer(data, cuts=tuple(range(every, len(data), every)))
    transport = harness.transport(server, resume=rt.Resume(2))
    if completes:
        body, response = read(harness, transport)
        assert body == data
        assert rt.retry_info(response).resumes == len(data) // every
    else:
        with pytest.raises(httpx.ReadError) as caught:
            read(harness, transport)
        assert rt.retry_info(caught.value).resumes == 2
        assert b"".join(read.partial) == data[:3 * every]  # type: ignore[attr-defined]
