"""Against a raw-socket server that misbehaves: resets, closes mid-body, never answers,
answers garbage, stalls, or is not there at all. The server's count of the requests it read
in full proves what was sent. Each test runs sync, and async on asyncio and trio."""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.real.clients import (
    STREAMED,
    Outcome,
    Waits,
    asend,
    client_timeout,
    send,
    short_read,
)
from tests.real.servers import FULL_BODY, TRICKLE_BYTES, RawServer

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

#: failure -> the name of the exception the client sees (the flavour's class of that name)
FAILURES = {
    "reset": "ReadError",
    "garbage": "RemoteProtocolError",
    "hang": "ReadTimeout",
    "midbody": "RemoteProtocolError",
    "stall": "ReadTimeout",
}
KINDS = list(FAILURES)
#: A timeout costs the test its length: one kind of each is enough where kinds only repeat.
FEWER_KINDS = ["reset", "garbage", "hang", "midbody"]


def options(kind: str) -> dict[str, Any]:
    """Client options for a failure: a short read timeout where the timeout is the failure;
    body errors retried (``retry_body_errors``) where the failure is in the body."""
    opts: dict[str, Any] = {
        "timeout": short_read() if kind in ("hang", "stall") else client_timeout()
    }
    if kind in ("midbody", "stall"):
        opts["retry_body_errors"] = True
    return opts


# -- GET: retried, and the next attempt's answer is the one handed over ----------------


def check_recovered(outcome: Outcome, server: RawServer, kind: str) -> None:
    assert outcome.error is None, outcome.error
    assert outcome.status == 200
    assert outcome.response is not None and outcome.response.content == FULL_BODY
    assert server.count == 2
    info = outcome.info
    assert [(a.status, a.error) for a in info.history] == [(None, FAILURES[kind]), (200, None)]
    assert info.stop_reason is rt.StopReason.SUCCESS


@pytest.mark.parametrize("kind", KINDS)
def test_get_is_retried_after_each_failure(raw_server: RawServer, kind: str) -> None:
    url = raw_server.script(kind)
    check_recovered(send("GET", url, **options(kind)), raw_server, kind)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_get_is_retried_after_each_failure_async(raw_server: RawServer, kind: str) -> None:
    url = raw_server.script(kind)
    outcome = await asend("GET", url, **options(kind))
    check_recovered(outcome, raw_server, kind)


def check_gave_up(outcome: Outcome, server: RawServer, kind: str) -> None:
    assert outcome.response is None
    error = outcome.error
    assert type(error).__name__ == FAILURES[kind]
    assert isinstance(error, getattr(httpx, FAILURES[kind]))
    assert server.received(2) == 2
    info = outcome.info
    assert info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    assert [a.error for a in info.history] == [FAILURES[kind]] * 2
    if sys.version_info >= (3, 11):
        assert "gave up after 2 attempt(s) (max_attempts)" in error.__notes__[-1]  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", FEWER_KINDS)
def test_get_gives_up_with_the_last_error(raw_server: RawServer, kind: str) -> None:
    url = raw_server.script(then=kind)
    outcome = send("GET", url, max_attempts=2, **options(kind))
    check_gave_up(outcome, raw_server, kind)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", FEWER_KINDS)
async def test_get_gives_up_with_the_last_error_async(raw_server: RawServer, kind: str) -> None:
    url = raw_server.script(then=kind)
    outcome = await asend("GET", url, max_attempts=2, **options(kind))
    check_gave_up(outcome, raw_server, kind)


# -- what may not be sent twice reaches the server at most once -------------------------

ONE_SHOT = [
    pytest.param("POST", {}, False, "unsafe_method", id="post-no-key"),
    pytest.param("PUT", {}, True, "body_not_replayable", id="put-generator"),
    pytest.param("POST", {"Idempotency-Key": '"k-1"'}, True, "body_not_replayable",
                 id="post-key-generator"),
]


def check_once(outcome: Outcome, server: RawServer, kind: str, streaming: bool,
               reason: str) -> None:
    assert outcome.response is None
    assert type(outcome.error).__name__ == FAILURES[kind]
    assert isinstance(outcome.error, getattr(httpx, FAILURES[kind]))
    assert server.received(1) == 1  # one attempt (below): nothing more is on its way
    assert server.seen[0].body == (STREAMED if streaming else b"pay")
    assert outcome.info.stop_reason.value == reason
    assert outcome.info.attempts == 1
    assert outcome.waits == []


@pytest.mark.parametrize("kind", FEWER_KINDS)
@pytest.mark.parametrize(("method", "headers", "streaming", "reason"), ONE_SHOT)
def test_one_shot_request_reaches_the_server_at_most_once(
    raw_server: RawServer, kind: str, method: str, headers: dict[str, str], streaming: bool,
    reason: str,
) -> None:
    url = raw_server.script(then=kind)
    outcome = send(method, url, content=None if streaming else b"pay", streaming=streaming,
                   headers=headers, **options(kind))
    check_once(outcome, raw_server, kind, streaming, reason)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", FEWER_KINDS)
@pytest.mark.parametrize(("method", "headers", "streaming", "reason"), ONE_SHOT)
async def test_one_shot_request_reaches_the_server_at_most_once_async(
    raw_server: RawServer, kind: str, method: str, headers: dict[str, str], streaming: bool,
    reason: str,
) -> None:
    url = raw_server.script(then=kind)
    outcome = await asend(method, url, content=None if streaming else b"pay",
                          streaming=streaming, headers=headers,
                          **options(kind))
    check_once(outcome, raw_server, kind, streaming, reason)


def check_keyed(outcome: Outcome, server: RawServer) -> None:
    assert outcome.error is None, outcome.error
    assert outcome.response is not None and outcome.response.content == FULL_BODY
    assert server.count == 6
    assert [seen.header("idempotency-key") for seen in server.seen] == ['"k-2"'] * 6
    assert [seen.body for seen in server.seen] == [b'{"amount": 10}'] * 6
    assert [a.error for a in outcome.info.history] == [*FAILURES.values(), None]


def test_post_with_a_key_is_retried_through_every_failure(raw_server: RawServer) -> None:
    url = raw_server.script(*KINDS)
    outcome = send("POST", url, content=b'{"amount": 10}', headers={"Idempotency-Key": '"k-2"'},
                   max_attempts=6, retry_body_errors=True, timeout=short_read(), budget=None)
    check_keyed(outcome, raw_server)


@pytest.mark.anyio
async def test_post_with_a_key_is_retried_through_every_failure_async(
    raw_server: RawServer,
) -> None:
    url = raw_server.script(*KINDS)
    outcome = await asend("POST", url, content=b'{"amount": 10}',
                          headers={"Idempotency-Key": '"k-2"'}, max_attempts=6,
                          retry_body_errors=True, timeout=short_read(), budget=None)
    check_keyed(outcome, raw_server)


# -- connection refused: nothing was sent, so any request may be retried ---------------

REFUSED = [
    pytest.param("GET", False, id="get"),
    pytest.param("POST", False, id="post-no-key"),
    pytest.param("PATCH", True, id="patch-generator"),
]


def check_refused(outcome: Outcome) -> None:
    assert isinstance(outcome.error, httpx.ConnectError)
    info = outcome.info
    assert [a.error for a in info.history] == ["ConnectError"] * 3  # three connect attempts
    assert info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    assert len(outcome.waits) == 2
    assert outcome.transport.stats.retries == 2


@pytest.mark.parametrize(("method", "streaming"), REFUSED)
def test_connection_refused_is_retried_for_any_method(
    refused_url: str, method: str, streaming: bool
) -> None:
    check_refused(send(method, refused_url, content=None if streaming else b"x",
                       streaming=streaming))


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "streaming"), REFUSED)
async def test_connection_refused_is_retried_for_any_method_async(
    refused_url: str, method: str, streaming: bool
) -> None:
    check_refused(await asend(method, refused_url, content=None if streaming else b"x",
                              streaming=streaming))


class ListenOnRetry:
    """A hook that starts a server on the refused port when the first retry is scheduled."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.server: RawServer | None = None

    def __call__(self, event: rt.RetryEvent) -> None:
        if event.kind == "retry" and self.server is None:
            self.server = RawServer(self.port).start()
            self.server.script()

    def check(self, outcome: Outcome) -> None:
        assert outcome.status == 200, outcome.error
        assert [a.error for a in outcome.info.history] == ["ConnectError", None]
        assert self.server is not None
        assert self.server.count == 1
        assert self.server.seen[0].body == STREAMED  # the generator, sent once and whole


@pytest.mark.parametrize("deadline", [None, 30.0])
def test_a_generator_post_refused_once_is_sent_once_and_whole(
    refused_url: str, deadline: float | None
) -> None:
    hook = ListenOnRetry(httpx.URL(refused_url).port or 0)
    try:
        outcome = send("POST", refused_url, streaming=True, hooks=[hook], deadline=deadline)
        hook.check(outcome)
    finally:
        if hook.server is not None:
            hook.server.stop()


@pytest.mark.anyio
@pytest.mark.parametrize("deadline", [None, 30.0])
async def test_a_generator_post_refused_once_is_sent_once_and_whole_async(
    refused_url: str, deadline: float | None
) -> None:
    hook = ListenOnRetry(httpx.URL(refused_url).port or 0)
    try:
        outcome = await asend("POST", refused_url, streaming=True, hooks=[hook],
                              deadline=deadline)
        hook.check(outcome)
    finally:
        if hook.server is not None:
            hook.server.stop()


# -- a body cut mid-way ---------------------------------------------------------------


def test_body_cut_midway_is_the_callers_error_by_default(raw_server: RawServer) -> None:
    """Without retry_body_errors the response is handed over at its headers: the cut body
    raises in the caller's read, and nothing is sent again."""
    url = raw_server.script("midbody")
    transport = rt.RetryTransport(sleep=Waits().sleep)
    with httpx.Client(transport=transport, timeout=client_timeout()) as c:
        with c.stream("GET", url) as response:
            assert response.status_code == 200
            info = rt.retry_info(response)
            assert info is not None and info.stop_reason is rt.StopReason.SUCCESS
            assert info.body_buffered is None
            with pytest.raises(httpx.RemoteProtocolError):
                response.read()
        outcome = send("GET", raw_server.script("midbody"))
    assert isinstance(outcome.error, httpx.RemoteProtocolError)
    assert raw_server.count == 1


@pytest.mark.anyio
async def test_body_cut_midway_is_the_callers_error_by_default_async(
    raw_server: RawServer,
) -> None:
    url = raw_server.script("midbody")
    transport = rt.AsyncRetryTransport(sleep=Waits().asleep)
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as c:
        async with c.stream("GET", url) as response:
            assert response.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):
                await response.aread()
    outcome = await asend("GET", raw_server.script("midbody"))
    assert isinstance(outcome.error, httpx.RemoteProtocolError)
    assert raw_server.count == 1


def check_body_retried(outcome: Outcome, server: RawServer) -> None:
    assert outcome.response is not None and outcome.response.content == FULL_BODY
    assert server.count == 2
    assert outcome.info.body_buffered is True
    assert [a.error for a in outcome.info.history] == ["RemoteProtocolError", None]


def test_body_cut_midway_is_retried_with_retry_body_errors(raw_server: RawServer) -> None:
    url = raw_server.script("midbody")
    check_body_retried(send("GET", url, retry_body_errors=True), raw_server)


@pytest.mark.anyio
async def test_body_cut_midway_is_retried_with_retry_body_errors_async(
    raw_server: RawServer,
) -> None:
    url = raw_server.script("midbody")
    check_body_retried(await asend("GET", url, retry_body_errors=True), raw_server)


def test_by_default_a_slow_body_streams_to_the_caller(raw_server: RawServer) -> None:
    """The transport hands the response over at its headers: the caller reads the first half
    of the body while the server still holds back the second (released by an event)."""
    url = raw_server.script("slow")
    transport = rt.RetryTransport(sleep=Waits().sleep)
    with httpx.Client(transport=transport, timeout=client_timeout()) as c:
        with c.stream("GET", url) as response:
            chunks, received = response.iter_raw(), b""
            while len(received) < 500:
                received += next(chunks)
            assert received == FULL_BODY[:500]
            assert not raw_server.release.is_set()
            raw_server.release.set()
            received += b"".join(chunks)
    assert received == FULL_BODY


@pytest.mark.anyio
async def test_by_default_a_slow_body_streams_to_the_caller_async(raw_server: RawServer) -> None:
    url = raw_server.script("slow")
    transport = rt.AsyncRetryTransport(sleep=Waits().asleep)
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as c:
        async with c.stream("GET", url) as response:
            chunks, received = response.aiter_raw(), b""
            while len(received) < 500:
                received += await anext(chunks)
            assert received == FULL_BODY[:500]
            assert not raw_server.release.is_set()
            raw_server.release.set()
            async for chunk in chunks:
                received += chunk
    assert received == FULL_BODY


# -- a deadline holds while an attempt hangs -------------------------------------------


def check_deadline(error: BaseException, elapsed: float, server: RawServer) -> None:
    assert isinstance(error, httpx.TimeoutException)
    info = rt.retry_info(error)
    assert info is not None and info.stop_reason is rt.StopReason.DEADLINE
    assert server.received(1) >= 1
    # The only timing assertion: far above the deadline (0.3 s), far below the timeout (10 s).
    assert elapsed < 5.0


def test_deadline_ends_a_hanging_attempt(raw_server: RawServer) -> None:
    url = raw_server.script(then="hang")
    transport = rt.RetryTransport(deadline=0.3, sleep=Waits().sleep)
    with httpx.Client(transport=transport, timeout=10.0) as client:
        start = time.monotonic()
        with pytest.raises(httpx.TimeoutException) as caught:
            client.get(url)
        elapsed = time.monotonic() - start
    check_deadline(caught.value, elapsed, raw_server)


@pytest.mark.anyio
async def test_deadline_ends_a_hanging_attempt_async(raw_server: RawServer) -> None:
    url = raw_server.script(then="hang")
    transport = rt.AsyncRetryTransport(deadline=0.3, sleep=Waits().asleep)
    async with httpx.AsyncClient(transport=transport, timeout=10.0) as client:
        start = anyio.current_time()
        with pytest.raises(httpx.TimeoutException) as caught:
            await client.get(url)
        elapsed = anyio.current_time() - start
    check_deadline(caught.value, elapsed, raw_server)



# -- a discarded body that trickles in is dropped, not waited for -----------------------


def check_trickle_dropped(outcome: Outcome, server: RawServer) -> None:
    assert outcome.error is None, outcome.error
    assert outcome.status == 200
    assert [a.status for a in outcome.info.history] == [503, 200]
    # Draining stopped after a fraction of a second: the 10-second body was cut off and its
    # connection dropped, not read to the end for the sake of reuse.
    assert server.trickled < TRICKLE_BYTES // 2, server.trickled
    assert server.connections == 2


def test_a_trickling_discarded_body_is_dropped(raw_server: RawServer) -> None:
    """A 503 whose small body comes a byte at a time does not hold up the retry."""
    url = raw_server.script("trickle")
    check_trickle_dropped(send("GET", url), raw_server)


@pytest.mark.anyio
async def test_a_trickling_discarded_body_is_dropped_async(raw_server: RawServer) -> None:
    url = raw_server.script("trickle")
    check_trickle_dropped(await asend("GET", url), raw_server)
