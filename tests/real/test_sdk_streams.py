"""Refusals sent inside a ``200``, through the real SDKs: ``anthropic`` and ``openai`` on an
httpx2 client whose transport is a retry transport with the SDK's preset, against a fake API
on 127.0.0.1 that answers ``text/event-stream`` bodies it is scripted with, each event
written as its own chunk. What the server counted proves what was sent; the SDKs parse the
streams into their own types. Sync, and async on asyncio and on trio; our waits recorded,
never slept."""

from __future__ import annotations

import gc
import json
import threading
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import pytest

httpx2 = pytest.importorskip("httpx2")  # Python 3.11+
openai = pytest.importorskip("openai", minversion="3")  # the SDKs built on httpx2
anthropic = pytest.importorskip("anthropic", minversion="2")

import retry_transport.httpx2 as rt  # noqa: E402
from tests.real.servers import BOUND, LocalHTTPServer, read_body  # noqa: E402

pytestmark = pytest.mark.real

MODES = ["sync", "asyncio", "trio"]
TIMEOUT = 5.0


def sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


# -- the Anthropic API's message stream ------------------------------------------------------

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
           "model": "claude-test", "stop_reason": None, "stop_sequence": None,
           "usage": {"input_tokens": 5, "output_tokens": 1}}
A_START = sse("message_start", {"type": "message_start", "message": MESSAGE})
A_PING = sse("ping", {"type": "ping"})
A_BLOCK = sse("content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}})


def a_delta(text: str) -> bytes:
    return sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                       "delta": {"type": "text_delta", "text": text}})


A_END = [sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
         sse("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 3}}),
         sse("message_stop", {"type": "message_stop"})]


def a_error(kind: str) -> bytes:
    return sse("error", {"type": "error", "error": {"type": kind, "message": kind}})


A_WHOLE = [A_START, A_PING, A_BLOCK, a_delta("Hello "), a_delta("again."), *A_END]
A_OVERLOADED = [A_START, A_PING, a_error("overloaded_error")]

# -- the Responses API's stream ----------------------------------------------------------------

RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "status": "in_progress",
            "model": "gpt-test", "output": [], "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": []}


def o_event(kind: str, number: int, **fields: Any) -> bytes:
    return sse(kind, {"type": kind, "sequence_number": number, **fields})


O_WHOLE = [
    o_event("response.created", 0, response=RESPONSE),
    o_event("response.in_progress", 1, response=RESPONSE),
    o_event("response.output_text.delta", 2, item_id="m1", output_index=0, content_index=0,
            delta="Hello again.", logprobs=[]),
    o_event("response.completed", 3, response={**RESPONSE, "status": "completed"}),
]
O_OVERLOADED = [o_event("error", 0, code="server_is_overloaded", message="Overloaded",
                        param=None)]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = BOUND
    server: StreamAPI

    def do_POST(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        read_body(self.rfile, headers)
        events = self.server.next_body(self.path)
        self.send_response_only(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in events:  # one chunk each, as the APIs flush them
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class StreamAPI(LocalHTTPServer):
    """Answers each POST with the next of ``bodies`` (the last one from then on)."""

    def __init__(self, *bodies: list[bytes]) -> None:
        super().__init__(_Handler)
        self.bodies = list(bodies)
        self.posts: list[str] = []
        self._lock = threading.Lock()

    def next_body(self, path: str) -> list[bytes]:
        with self._lock:
            self.posts.append(path)
            return self.bodies[min(len(self.posts), len(self.bodies)) - 1]


@pytest.fixture
def api(request: pytest.FixtureRequest) -> Iterator[Callable[..., StreamAPI]]:
    started: list[StreamAPI] = []

    def start(*bodies: list[bytes]) -> StreamAPI:
        server = StreamAPI(*bodies).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def run(mode: str, sdk: str, url: str, call: Callable[[Any], Any],
        **policy: Any) -> tuple[Any, list[float]]:
    """:func:`_run`, with no resource left behind: trio's notices of httpx's async
    generators left unexhausted by a body not read to its end (a refused one, closed) are
    hints, not leaks (as when a caller stops reading); any other ``ResourceWarning`` (an
    unclosed socket) fails the test."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        try:
            return _run(mode, sdk, url, call, **policy)
        finally:
            gc.collect()
            assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)
                    and not str(w.message).startswith("Async generator ")] == []


def _run(mode: str, sdk: str, url: str, call: Callable[[Any], Any],
         **policy: Any) -> tuple[Any, list[float]]:
    """Make the SDK's client (``sdk``: "anthropic" or "openai", sync or async as ``mode``
    says) on a retry transport with its preset, and return what ``call(client)`` gives
    (awaited when async), with our transport's waits."""
    waits: list[float] = []
    preset = getattr(rt.presets, sdk)(**policy)
    base = url if sdk == "anthropic" else url + "/v1"
    module = anthropic if sdk == "anthropic" else openai
    if mode == "sync":
        transport = rt.RetryTransport(policy=preset, sleep=waits.append)
        client = getattr(module, "Anthropic" if sdk == "anthropic" else "OpenAI")(
            base_url=base, api_key="test", max_retries=0, timeout=TIMEOUT,
            http_client=httpx2.Client(transport=transport))
        with client:
            return call(client), waits

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    async def main() -> Any:
        transport = rt.AsyncRetryTransport(policy=preset, sleep=asleep)
        client = getattr(module, "AsyncAnthropic" if sdk == "anthropic" else "AsyncOpenAI")(
            base_url=base, api_key="test", max_retries=0, timeout=TIMEOUT,
            http_client=httpx2.AsyncClient(transport=transport))
        async with client:
            return await call(client)

    return anyio.run(main, backend=mode), waits


def _events(mode: str, stream: Any) -> Any:
    """The events of an SDK stream, as a list (awaited when async)."""
    if mode == "sync":
        return list(stream)

    async def gather() -> list[Any]:
        return [event async for event in stream]

    return gather()


def messages_create(mode: str) -> Callable[[Any], Any]:
    def call(client: Any) -> Any:
        created = client.messages.create(model="claude-test", max_tokens=64, stream=True,
                                         messages=[{"role": "user", "content": "Hello?"}])
        if mode == "sync":
            return _events(mode, created)

        async def read() -> list[Any]:
            return await _events(mode, await created)

        return read()

    return call


def _text(events: list[Any]) -> str:
    return "".join(event.delta.text for event in events
                   if event.type == "content_block_delta")


@pytest.mark.parametrize("mode", MODES)
def test_an_overloaded_message_stream_is_sent_again(api: Any, mode: str) -> None:
    """``200`` + ``message_start`` + ``ping`` + ``overloaded_error``, then a whole message:
    the caller reads the whole message; the server saw two POSTs."""
    server = api(A_OVERLOADED, A_WHOLE)
    events, waits = run(mode, "anthropic", server.url, messages_create(mode))
    assert _text(events) == "Hello again."
    assert [event.type for event in events][:2] == ["message_start", "content_block_start"]
    assert server.posts == ["/v1/messages", "/v1/messages"] and len(waits) == 1


@pytest.mark.parametrize("mode", MODES)
def test_messages_stream_reads_the_whole_message(api: Any, mode: str) -> None:
    """The SDK's ``messages.stream(...)`` helper alike."""
    server = api(A_OVERLOADED, A_WHOLE)

    def call(client: Any) -> Any:
        kwargs = {"model": "claude-test", "max_tokens": 64,
                  "messages": [{"role": "user", "content": "Hello?"}]}
        if mode == "sync":
            with client.messages.stream(**kwargs) as stream:
                return stream.get_final_text()

        async def read() -> str:
            async with client.messages.stream(**kwargs) as stream:
                return str(await stream.get_final_text())

        return read()

    text, _ = run(mode, "anthropic", server.url, call)
    assert text == "Hello again." and len(server.posts) == 2


@pytest.mark.parametrize("mode", MODES)
def test_a_rate_limit_after_content_is_not_retried(api: Any, mode: str) -> None:
    """Content began (a delta): the refusal after it reaches the SDK, which raises; the
    delta was delivered, and the POST was sent once."""
    server = api([A_START, A_PING, A_BLOCK, a_delta("Hel"), a_error("rate_limit_error")])
    seen: list[Any] = []

    def call(client: Any) -> Any:
        created = client.messages.create(model="claude-test", max_tokens=64, stream=True,
                                         messages=[{"role": "user", "content": "Hello?"}])
        if mode == "sync":
            for event in created:
                seen.append(event)
            return None

        async def read() -> None:
            async for event in await created:
                seen.append(event)

        return read()

    with pytest.raises(anthropic.APIStatusError, match="rate_limit_error"):
        run(mode, "anthropic", server.url, call)
    assert _text(seen) == "Hel" and len(server.posts) == 1


@pytest.mark.parametrize("mode", MODES)
def test_max_attempts_spent_the_sdk_raises_its_own_error(api: Any, mode: str) -> None:
    server = api(A_OVERLOADED)
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        run(mode, "anthropic", server.url, messages_create(mode), max_attempts=2)
    assert len(server.posts) == 2


@pytest.mark.parametrize("mode", MODES)
def test_an_overloaded_response_stream_is_sent_again(api: Any, mode: str) -> None:
    """The Responses API's ``error`` event with ``server_is_overloaded`` first, then a whole
    response: the caller reads it whole; the server saw two POSTs."""
    server = api(O_OVERLOADED, O_WHOLE)

    def call(client: Any) -> Any:
        created = client.responses.create(model="gpt-test", input="Hello?", stream=True)
        if mode == "sync":
            return _events(mode, created)

        async def read() -> list[Any]:
            return await _events(mode, await created)

        return read()

    events, waits = run(mode, "openai", server.url, call)
    assert [event.type for event in events] == [
        "response.created", "response.in_progress", "response.output_text.delta",
        "response.completed"]
    assert events[2].delta == "Hello again."
    assert server.posts == ["/v1/responses", "/v1/responses"] and len(waits) == 1


def chunk(number: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


C_WHOLE = [chunk(0, {"role": "assistant", "content": ""}), chunk(1, {"content": "Hello again."}),
           chunk(2, {}, "stop"), b"data: [DONE]\n\n"]
C_ERROR = {"error": {"message": "Rate limit reached", "type": "tokens",
                     "code": "rate_limit_exceeded"}}
C_LIMITED = [b"data: " + json.dumps(C_ERROR).encode() + b"\n\n"]


@pytest.mark.parametrize("mode", MODES)
def test_an_in_band_rate_limit_of_a_chat_stream_is_sent_again(api: Any, mode: str) -> None:
    """Chat Completions' in-band error (an unnamed event with an ``error`` object) first,
    then a whole answer: read whole; two POSTs."""
    server = api(C_LIMITED, C_WHOLE)

    def call(client: Any) -> Any:
        created = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "Hello?"}], stream=True)
        if mode == "sync":
            return _events(mode, created)

        async def read() -> list[Any]:
            return await _events(mode, await created)

        return read()

    chunks, _ = run(mode, "openai", server.url, call)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello again."
    assert server.posts == ["/v1/chat/completions"] * 2
