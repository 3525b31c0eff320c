"""A fake OpenAI or Anthropic API on 127.0.0.1, for the tests that drive the real SDKs.

``FakeAPI("openai")`` answers ``GET /v1/models`` (a list of models) and
``POST /v1/chat/completions`` (a ``chat.completion``); ``FakeAPI("anthropic")`` answers
``GET /v1/models`` (a page of ``ModelInfo``) and ``POST /v1/messages`` (a ``message``). The
bodies carry every field the SDKs' types require, so the SDKs parse them as they would the
real APIs' answers. Any other path is a 404 in the API's error shape.

Each path can be scripted to fail first (``Fault``: a status, headers, the API's error body;
or a connection closed with no answer once the request is read; or an answer held back, a
200 the client may have stopped waiting for),
its successful answers can carry extra headers (``annotate``: rate-limit headers, say), and
every request is recorded as ``servers.Seen`` (method, path, headers with any
``Idempotency-Key``, body). A threaded stdlib ``http.server`` with HTTP/1.1 keep-alive, as in
``servers.py``; every blocking call is bounded, so its threads stop by themselves.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.real.servers import BOUND, LocalHTTPServer, Seen, http_date, read_body

#: The model the fake APIs list and answer as.
OPENAI_MODEL = "gpt-test"
ANTHROPIC_MODEL = "claude-test"
#: The text every completion and message answers with.
ANSWER = "Hello from 127.0.0.1."

#: The APIs a ``FakeAPI`` can be.
APIS = ("openai", "anthropic")

#: Extra headers for a successful answer, given the answer's time (POSIX seconds; its
#: ``Date`` header is that time truncated to the second).
Annotation = Callable[[float], tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Fault:
    """One scripted failure: ``status`` with the API's error body and ``headers``.

    ``drop``: read the request, then close the connection without answering (the client
    sees the server disconnect). ``delay``: seconds to hold the answer back first; with
    ``status=200`` the answer is the path's usual one (the request was carried out, late).
    """

    status: int = 503
    headers: tuple[tuple[str, str], ...] = ()
    drop: bool = False
    delay: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.delay <= BOUND:  # every wait of the server's is bounded
            raise ValueError(self.delay)


def _openai_answer(method: str, path: str, request: dict[str, Any], number: int) -> Any:
    if (method, path) == ("GET", "/v1/models"):
        return {
            "object": "list",
            "data": [
                {"id": OPENAI_MODEL, "object": "model", "created": 1_700_000_000,
                 "owned_by": "retry-transport"},
                {"id": "gpt-test-mini", "object": "model", "created": 1_700_000_001,
                 "owned_by": "retry-transport"},
            ],
        }
    if (method, path) == ("POST", "/v1/chat/completions"):
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": request.get("model", OPENAI_MODEL),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9},
        }
    return None


def _anthropic_answer(method: str, path: str, request: dict[str, Any], number: int) -> Any:
    if (method, path) == ("GET", "/v1/models"):
        models = [
            {"type": "model", "id": ANTHROPIC_MODEL, "display_name": "Claude Test",
             "created_at": "2025-01-01T00:00:00Z", "lifecycle": "active"},
            {"type": "model", "id": "claude-test-mini", "display_name": "Claude Test Mini",
             "created_at": "2025-01-02T00:00:00Z", "lifecycle": "active"},
        ]
        return {"data": models, "has_more": False, "first_id": models[0]["id"],
                "last_id": models[-1]["id"]}
    if (method, path) == ("POST", "/v1/messages"):
        return {
            "id": f"msg_{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", ANTHROPIC_MODEL),
            "content": [{"type": "text", "text": ANSWER}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 4},
        }
    return None


def _error_body(api: str, status: int) -> dict[str, Any]:
    message = f"scripted {status}"
    if api == "openai":
        kind = "requests" if status == 429 else "server_error"
        code = "rate_limit_exceeded" if status == 429 else None
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}
    kind = {404: "not_found_error", 429: "rate_limit_error"}.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    timeout = BOUND  # an idle keep-alive connection ends by itself
    server: FakeAPI

    def setup(self) -> None:
        super().setup()
        self.connection_id = self.server._note_connection()

    def _serve(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        body = read_body(self.rfile, headers)
        path, _, query = self.path.partition("?")
        seen = Seen(self.command, path, query, tuple(self.headers.items()), body,
                    self.connection_id)
        fault, number, annotation = self.server._record(seen)
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.drop:
            self.close_connection = True  # no answer at all: the client sees a disconnect
            return
        if fault is not None and fault.status == 200:
            fault = None  # held back (above), then answered as usual
        now = time.time()
        status, payload, extra = self._reply(fault, path, body, number)
        if status == 200 and annotation is not None:
            extra = extra + annotation(now)
        data = json.dumps(payload).encode()
        self.send_response_only(status)
        self.send_header("Date", http_date(now))
        self.send_header("Content-Type", "application/json")
        # the header each API names its request ids in (the SDKs expose it as _request_id)
        self.send_header("x-request-id" if self.server.api == "openai" else "request-id",
                         f"req_{number:04d}")
        for name, value in extra:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _reply(
        self, fault: Fault | None, path: str, body: bytes, number: int
    ) -> tuple[int, Any, tuple[tuple[str, str], ...]]:
        """The status, JSON payload and extra headers of the answer."""
        api = self.server.api
        if fault is not None:
            return fault.status, _error_body(api, fault.status), fault.headers
        try:
            request = json.loads(body) if body else {}
        except ValueError:
            request = {}
        if not isinstance(request, dict):
            request = {}
        answer = self.server._answer(self.command, path, request, number)
        if answer is None:
            return 404, _error_body(api, 404), ()
        return 200, answer, ()

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


class FakeAPI(LocalHTTPServer):
    """The OpenAI (``api="openai"``) or Anthropic (``api="anthropic"``) API, faked. Its
    ``url`` is the server's root: the Anthropic SDK's ``base_url`` (OpenAI's adds ``/v1``)."""

    def __init__(self, api: str) -> None:
        if api not in APIS:
            raise ValueError(api)
        super().__init__(_Handler)
        self.api = api
        self._answer = _openai_answer if api == "openai" else _anthropic_answer
        self._lock = threading.Lock()
        self.reset()

    # -- scripting and records -------------------------------------------------------

    def reset(self) -> None:
        with self._lock:
            self._faults: dict[str, tuple[Fault, ...]] = {}
            self._repeat: dict[str, Fault] = {}
            self._annotations: dict[str, Annotation] = {}
            self._counts: dict[str, int] = {}
            self.seen: list[Seen] = []
            self.connections = 0

    def fail(self, path: str, *faults: Fault, forever: Fault | None = None) -> None:
        """Meet the next requests to ``path`` with ``faults`` in order, then answer (or,
        given ``forever``, fail with it from then on)."""
        with self._lock:
            self._faults[path] = faults
            if forever is not None:
                self._repeat[path] = forever
            else:
                self._repeat.pop(path, None)

    def annotate(self, path: str, headers: Annotation) -> None:
        """Add ``headers(now)`` to every successful answer to ``path`` (not to faults)."""
        with self._lock:
            self._annotations[path] = headers

    def requests(self, path: str) -> list[Seen]:
        with self._lock:
            return [seen for seen in self.seen if seen.path == path]

    def _note_connection(self) -> int:
        with self._lock:
            self.connections += 1
            return self.connections

    def _record(self, seen: Seen) -> tuple[Fault | None, int, Annotation | None]:
        with self._lock:
            index = self._counts.get(seen.path, 0)
            self._counts[seen.path] = index + 1
            self.seen.append(seen)
            faults = self._faults.get(seen.path, ())
            fault = faults[index] if index < len(faults) else self._repeat.get(seen.path)
            return fault, len(self.seen), self._annotations.get(seen.path)
