"""``idle_timeout`` against a real server on 127.0.0.1 whose event stream stalls: sync (the
watchdog thread shuts the socket down under a read blocked in it), asyncio and trio, both
flavours. The server sends two events, then a ``: ping`` every 0.2 s or nothing; with
``idle_timeout=1.0`` the read raises ``StreamIdleTimeout`` 1.0-2.0 s after the last event
(asserted generously: the machine may be loaded), the server sees the client hang up, and
the connection left the pool. Behind ``Resume()`` the stall is a break: the stream is
resumed with ``Last-Event-ID`` and every event arrives once."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.real.idle_servers import HOLD, StallingServer
from tests.real.resume_servers import event

pytestmark = pytest.mark.usefixtures("flavour")

MODES = ["sync", "asyncio", "trio"]
#: The stall must be told within this window after the last event (idle_timeout is 1.0).
LOW, HIGH = 1.0, 2.0


def read(mode: str, server: StallingServer, **kwargs: Any) -> tuple[bytes, float, Any, Any]:
    """Stream one GET from ``server`` with a transport of ``kwargs``: the body read, the
    seconds from its second event to the end of reading, the error that ended it (or
    ``None``) and the response's RetryInfo."""
    url = server.url + "/events"
    if mode == "sync":
        with httpx.Client(transport=rt.RetryTransport(**kwargs)) as client:
            return _sync_read(client, url)

    async def main() -> tuple[bytes, float, Any, Any]:
        async with httpx.AsyncClient(transport=rt.AsyncRetryTransport(**kwargs)) as client:
            body, since, error = b"", None, None
            async with client.stream("GET", url) as response:
                try:
                    async for chunk in response.aiter_raw():
                        body += chunk
                        if since is None and body.count(b"\n\n") >= 2:
                            since = time.monotonic()
                except Exception as exc:
                    error = exc
            assert since is not None
            return body, time.monotonic() - since, error, rt.retry_info(response)

    return anyio.run(main, backend=mode)  # type: ignore[no-any-return]


def _sync_read(client: Any, url: str) -> tuple[bytes, float, Any, Any]:
    body, since, error = b"", None, None
    with client.stream("GET", url) as response:
        try:
            for chunk in response.iter_raw():
                body += chunk
                if since is None and body.count(b"\n\n") >= 2:
                    since = time.monotonic()
        except Exception as exc:
            error = exc
    assert since is not None
    return body, time.monotonic() - since, error, rt.retry_info(response)


def hung_up(server: StallingServer) -> float | None:
    """The seconds from the stall to the client's hang-up, as the server saw it (waited
    for, boundedly: the server's handler notices within its poll)."""
    end = time.monotonic() + HOLD + 2.0
    while not server.hung_up and time.monotonic() < end:
        time.sleep(0.01)
    return server.hung_up[0] if server.hung_up else None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ping", [0.2, None], ids=["pings", "silence"])
def test_a_stalled_stream_raises_within_the_window_and_drops_its_connection(
        mode: str, ping: float | None) -> None:
    """``: ping`` every 0.2 s, or nothing, after two events: ``StreamIdleTimeout`` within
    1.0-2.0 s, stop reason ``idle_timeout``; the server sees the connection closed, and no
    socket is left open (the pool holds none: unclosed sockets would warn, and warnings
    are errors here)."""
    server = StallingServer(events=2, ping=ping).start()
    try:
        body, took, error, info = read(mode, server, idle_timeout=1.0)
        assert isinstance(error, rt.StreamIdleTimeout), error
        assert isinstance(error, httpx.ReadTimeout)
        assert str(error) == "no event for 1 s after 2 events (idle_timeout)"
        assert LOW - 0.05 <= took <= HIGH, took
        assert body.startswith(event(1) + event(2))
        assert info is not None and info.stop_reason is rt.StopReason.IDLE_TIMEOUT
        assert rt.retry_info(error) == info
        gone = hung_up(server)
        assert gone is not None and gone <= HIGH + 0.5, gone
        assert server.requests == [None]
    finally:
        server.stop()


@pytest.mark.parametrize("mode", MODES)
def test_behind_resume_a_stalled_stream_is_resumed_and_every_event_arrives_once(
        mode: str) -> None:
    """A GET with event IDs that stalls after event 2: resumed with ``Last-Event-ID: 2``,
    the caller reads events 1 to 5 once each and no error; the stalled connection was
    closed."""
    server = StallingServer(events=2, total=5, ping=0.2).start()
    try:
        body, _, error, info = read(mode, server, idle_timeout=1.0, resume=rt.Resume())
        assert error is None
        events = body.replace(b": ping\n\n", b"")
        assert events == b"".join(event(n) for n in range(1, 6))
        assert server.requests == [None, "2"]
        assert info is not None and info.resumes == 1
        assert info.stop_reason is rt.StopReason.SUCCESS
        assert info.history[0].error == "StreamIdleTimeout"
        assert hung_up(server) is not None
    finally:
        server.stop()
