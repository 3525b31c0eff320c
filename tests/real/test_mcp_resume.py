"""MCP's resumption by GET, for real: a server built with the mcp package (its streamable
HTTP transport with an event store, under uvicorn on a free port of 127.0.0.1) behind a TCP
proxy of this module's that cuts a tool call's event stream after its first event, and the
mcp SDK's client on an httpx2 client whose transport is
``AsyncRetryTransport(resume=Resume(post_events_by_get=True))``.

The transport numbers every attempt in ``X-Attempt``: the GET that resumes the stream is
the transport's (attempt 2), not the SDK's own reconnection (which would send attempt 1).
"""

from __future__ import annotations

import contextlib
import gc
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

pytest.importorskip("httpx2")
mcp = pytest.importorskip("mcp")
uvicorn = pytest.importorskip("uvicorn")

import httpx2  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.streamable_http import EventMessage, EventStore  # noqa: E402

import retry_transport.httpx2 as rt  # noqa: E402
from tests.real.servers import BOUND  # noqa: E402

pytestmark = pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])


class MemoryEventStore(EventStore):
    """Every event of every stream, in order, replayed after an ID."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []  # (event id, stream id, message)

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        index = next((i for i, (e, _, _) in enumerate(self.events) if e == last_event_id), None)
        if index is None:
            return None
        stream = self.events[index][1]
        for event_id, stream_id, message in self.events[index + 1:]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


class Recorder:
    """An ASGI app around the server's: records each request's method, ``Last-Event-ID``
    and ``X-Attempt``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, str | None, str | None]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope["headers"]}
            self.seen.append((scope["method"], headers.get("last-event-id"),
                              headers.get("x-attempt")))
        await self.app(scope, receive, send)


class EventCutter:
    """A TCP proxy to ``127.0.0.1:upstream`` that cuts the first tool call's response once
    its event stream has passed on one whole event: the connection is then closed."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.calls = 0  # tool calls that went through (POSTs of tools/call)
        self.cut = False
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._spawn(self._serve)

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=BOUND)
            client.settimeout(BOUND)
            armed = threading.Event()  # this connection carries the tool call to cut
            self._spawn(self._ahead, client, upstream, armed)
            self._spawn(self._back, upstream, client, armed)

    def _ahead(self, client: socket.socket, upstream: socket.socket,
               armed: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if b'"tools/call"' in data:
                    with self._lock:
                        self.calls += 1
                        if not self.cut:
                            self.cut = True
                            armed.set()
                upstream.sendall(data)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _back(self, upstream: socket.socket, client: socket.socket,
              armed: threading.Event) -> None:
        held = b""
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                if not armed.is_set():
                    client.sendall(data)
                    continue
                held += data
                head = held.find(b"\r\n\r\n")
                end = -1 if head < 0 else held.find(b"\r\n\r\n", head + 4)
                if end < 0:
                    continue
                client.sendall(held[:end + 4])  # the headers and the first event, no more
                break
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def stop(self) -> None:
        self._stopping.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(BOUND)


@contextlib.contextmanager
def mcp_server() -> Iterator[tuple[Recorder, int]]:
    """The mcp server with a ``slow_echo`` tool, under uvicorn on a free port."""
    server = MCPServer("resume-test")

    @server.tool()
    async def slow_echo(text: str) -> str:
        await anyio.sleep(0.2)  # the stream is cut before the result is sent
        return f"echo: {text}"

    app = Recorder(server.streamable_http_app(event_store=MemoryEventStore(),
                                              retry_interval=100))
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="on")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + BOUND
    while not runner.started and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.01)
    assert runner.started, "the mcp server did not start"
    try:
        yield app, port
    finally:
        runner.should_exit = True
        thread.join(BOUND)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Recorder, int]]:
    """One server for the module, started outside any test's event loop (uvicorn runs its
    own asyncio loop in a thread)."""
    with mcp_server() as server:
        yield server


# The SDK ends its session by cancelling its task group, its standalone GET stream's async
# generators (httpx2's, httpcore2's, its EventSource's) unexhausted: collected here, and not
# held against this test (none of them is the transport's).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.anyio
async def test_a_tool_calls_stream_cut_after_its_first_event_is_resumed_by_get(
        anyio_backend: str, served: tuple[Recorder, int]) -> None:
    recorder, port = served
    recorder.seen.clear()
    proxy = EventCutter(port)
    try:
        transport = rt.AsyncRetryTransport(
            resume=rt.Resume(post_events_by_get=True), attempt_header="X-Attempt",
            policy=rt.RetryPolicy(base_delay=0.05))
        url = f"http://127.0.0.1:{proxy.port}/mcp"
        with anyio.fail_after(BOUND):
            async with httpx2.AsyncClient(transport=transport, timeout=BOUND) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        result = await session.call_tool("slow_echo", {"text": "hi"})
    finally:
        proxy.stop()
        gc.collect()
    assert proxy.cut and proxy.calls == 1  # the tool call's POST was sent once
    assert [block.text for block in result.content] == ["echo: hi"]  # type: ignore[union-attr]
    assert not result.is_error
    resumed = [(last, attempt) for method, last, attempt in recorder.seen
               if method == "GET" and last is not None]
    assert len(resumed) == 1
    assert resumed[0][1] == "2"  # the transport's resumption, not the SDK's reconnection
