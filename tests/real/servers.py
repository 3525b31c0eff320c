"""Servers on 127.0.0.1 for the real-server tests: a polite HTTP/1.1 server and a hostile one.

``ScriptedHTTPServer`` is a threaded stdlib ``http.server`` with keep-alive. Each path can be
scripted to answer some statuses (429/503 with ``Retry-After`` in any format, measured from
the server's own ``Date`` header) before a 200; it counts requests per path and records what
it saw (method, headers, ``Idempotency-Key``, body) and how many connections it accepted.

``RawServer`` is threads and ``socket``, for what a polite server never does: reset the
connection before answering, close mid-body, never answer, answer garbage, stall mid-body.

``ChildServer`` answers 503 and 200 in turn from another process, for the leak test.

``LocalHTTPServer`` is what every threaded HTTP/1.1 test server here and in the other test
modules shares: a free port on 127.0.0.1, no DNS, a daemon serving thread, ``start``/``stop``.

Every blocking call is bounded (socket timeouts, ``Event.wait(timeout)``, a lifetime), so
the servers' threads and processes stop by themselves even if a test forgets to stop them.
"""

from __future__ import annotations

import calendar
import io
import multiprocessing
import select
import selectors
import socket
import socketserver
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any, TypeVar

#: Longest any server thread blocks on a socket or an event, in seconds.
BOUND = 10.0
#: Longest a raw server accepts connections, in seconds, if nobody stops it.
LIFETIME = 300.0

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

#: The three HTTP-date formats of RFC 9110 section 5.6.7.
DATE_FORMATS = ("imf", "rfc850", "asctime")


def http_date(timestamp: float, fmt: str = "imf") -> str:
    """``timestamp`` as an HTTP-date: IMF-fixdate, RFC 850 or asctime (locale-free)."""
    t = time.gmtime(timestamp)
    clock = f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
    month = _MONTHS[t.tm_mon - 1]
    if fmt == "imf":
        return f"{_DAYS[t.tm_wday]}, {t.tm_mday:02d} {month} {t.tm_year:04d} {clock} GMT"
    if fmt == "rfc850":
        return f"{_LONG_DAYS[t.tm_wday]}, {t.tm_mday:02d}-{month}-{t.tm_year % 100:02d} {clock} GMT"
    if fmt == "asctime":
        return f"{_DAYS[t.tm_wday]} {month} {t.tm_mday:>2} {clock} {t.tm_year:04d}"
    raise ValueError(fmt)


def timestamp(year: int, month: int = 1, day: int = 1) -> int:
    return calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0))


# -- reading requests ------------------------------------------------------------------


def read_body(rfile: IO[bytes] | io.BufferedIOBase, headers: dict[str, str]) -> bytes:
    """The request body as the client framed it: Content-Length or chunked."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts: list[bytes] = []
        while True:
            size_line = rfile.readline(1024)
            if not size_line:
                raise ConnectionError("EOF inside a chunked body")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            parts.append(rfile.read(size))
            rfile.readline(1024)  # the CRLF after each chunk
    length = int(headers.get("content-length", "0") or "0")
    return rfile.read(length) if length else b""


def hung_up_within(connection: socket.socket, seconds: float, stopping: threading.Event,
                   poll: float = 0.05) -> bool:
    """Wait ``seconds`` (less once ``stopping`` is set), watching a handler's
    ``connection``: whether the client closed it meanwhile."""
    end = time.monotonic() + seconds
    while not stopping.is_set():
        left = end - time.monotonic()
        if left <= 0:
            return False
        readable, _, _ = select.select([connection], [], [], min(left, poll))
        if readable:
            try:
                if connection.recv(1, socket.MSG_PEEK) == b"":
                    return True
            except OSError:  # reset
                return True
            time.sleep(min(left, 0.005))  # bytes of a next request: not a hang-up
    return False


@dataclass(frozen=True)
class Seen:
    """One request as a server received it."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    connection: int

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    @property
    def idempotency_key(self) -> str | None:
        return self.header("idempotency-key")


# -- the scaffolding of the threaded HTTP servers ----------------------------------------

_S = TypeVar("_S", bound="LocalHTTPServer")


class LocalHTTPServer(ThreadingHTTPServer):
    """A threaded stdlib HTTP server on a free port of 127.0.0.1, its requests answered by
    ``handler``, served from a daemon thread once started (``start`` returns the server).

    A subclass with more to do when it stops (releasing the requests it holds, say) does it
    in its own ``stop``, then calls this one.
    """

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        # stop() (shutdown) waits for the serving loop's next poll: 5 ms on average, not the
        # 25 ms of a 0.05 s poll, for each of the hundreds of servers the tests start
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # no getfqdn(): no DNS in tests
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up, reset or time out are part of the tests

    @property
    def origin(self) -> str:
        """``scheme://host:port``, no path."""
        return f"http://127.0.0.1:{self.server_port}"

    @property
    def url(self) -> str:
        """What clients are pointed at: the origin, unless a subclass adds a path."""
        return self.origin

    def start(self: _S) -> _S:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(BOUND)


# -- the polite server -----------------------------------------------------------------


class WatchedHTTPServer(LocalHTTPServer):
    """A :class:`LocalHTTPServer` that counts its connections (``open`` now,
    ``connections`` ever) and tells its handlers when it stops (``stopping``), so that a
    delayed answer ends at once; its handler is a :class:`KeepAliveHandler`."""

    request_queue_size = 256

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(handler)
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self.open = 0
        self.connections = 0

    def stop(self) -> None:
        self.stopping.set()  # a delayed answer in progress ends at once
        super().stop()

    def _opened(self) -> None:
        with self._lock:
            self.open += 1
            self.connections += 1

    def _closed(self) -> None:
        with self._lock:
            self.open -= 1


class KeepAliveHandler(BaseHTTPRequestHandler):
    """A keep-alive handler of a :class:`WatchedHTTPServer`, which it tells of its
    connection's opening and end; ``hung_up_within`` waits while watching for a hang-up."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = BOUND  # an idle keep-alive connection ends by itself
    server: WatchedHTTPServer
    #: Seconds between looks at the connection while a delayed answer waits.
    poll = 0.05

    def setup(self) -> None:
        super().setup()
        self.server._opened()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server._closed()

    def hung_up_within(self, seconds: float) -> bool:
        """Wait ``seconds``, watching the connection: whether the client closed it."""
        return hung_up_within(self.connection, seconds, self.server.stopping, self.poll)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``retry_after``: ``(format, seconds)`` with format ``"seconds"``, ``"imf"``, ``"rfc850"``
    or ``"asctime"`` (a date ``seconds`` after the response's own ``Date``), or
    ``("raw", text)`` for any text.
    """

    status: int = 200
    body: bytes = b"ok"
    retry_after: tuple[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class _Plan:
    replies: tuple[Reply, ...]
    then: Reply

    def pick(self, index: int) -> Reply:
        return self.replies[index] if index < len(self.replies) else self.then


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    timeout = BOUND  # an idle keep-alive connection ends by itself
    server: ScriptedHTTPServer

    def setup(self) -> None:
        super().setup()
        self.connection_id = self.server._note_connection()

    def _serve(self) -> None:
        """Read the request, record it, and give the path's next scripted answer."""
        headers = {k.lower(): v for k, v in self.headers.items()}
        body = read_body(self.rfile, headers)
        path, _, query = self.path.partition("?")
        seen = Seen(self.command, path, query, tuple(self.headers.items()), body,
                    self.connection_id)
        reply = self.server._record(seen)
        now = int(time.time())
        self.send_response_only(reply.status)
        self.send_header("Date", http_date(now))
        if reply.retry_after is not None:
            fmt, value = reply.retry_after
            text = str(value) if fmt in ("raw", "seconds") else http_date(now + value, fmt)
            self.send_header("Retry-After", text)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


class ScriptedHTTPServer(LocalHTTPServer):
    """A threaded HTTP/1.1 server whose answers are scripted per path."""

    request_queue_size = 512  # 200 concurrent clients must not see SYNs dropped

    def __init__(self) -> None:
        super().__init__(_Handler)
        self._lock = threading.Lock()
        self.reset()

    # -- scripting and records -------------------------------------------------------

    def reset(self) -> None:
        with self._lock:
            self._plans: dict[str, _Plan] = {}
            self.seen: list[Seen] = []
            self._counts: dict[str, int] = {}
            self.connections = 0

    def script(self, path: str, *replies: Reply, then: Reply = Reply()) -> str:
        """Answer ``replies`` in order, then ``then`` forever. Returns the full URL."""
        with self._lock:
            self._plans[path] = _Plan(replies, then)
        return self.url + path

    def count(self, path: str) -> int:
        with self._lock:
            return self._counts.get(path, 0)

    def requests(self, path: str) -> list[Seen]:
        with self._lock:
            return [seen for seen in self.seen if seen.path == path]

    def _note_connection(self) -> int:
        with self._lock:
            self.connections += 1
            return self.connections

    def _record(self, seen: Seen) -> Reply:
        with self._lock:
            index = self._counts.get(seen.path, 0)
            self._counts[seen.path] = index + 1
            self.seen.append(seen)
            plan = self._plans.get(seen.path)
        return plan.pick(index) if plan is not None else Reply()


class TLSScriptedHTTPServer(ScriptedHTTPServer):
    """The scripted server over TLS, with the certificate ``context`` holds. The handshake
    happens in the connection's own thread, so a client that refuses the certificate only
    ends its own connection (still counted in ``connections``)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self._context = context

    @property
    def origin(self) -> str:
        return f"https://127.0.0.1:{self.server_port}"

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        sock.settimeout(BOUND)
        return self._context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        ), address


# -- the hostile server ----------------------------------------------------------------

#: The body the raw server's "ok" answer carries in full, and "midbody" only begins.
FULL_BODY = bytes(range(48, 58)) * 100  # b"0123456789" * 100: 1000 bytes


#: The "trickle" answer's body: this many bytes, one every TRICKLE_INTERVAL seconds (10 s
#: in all, were the client to read it to the end).
TRICKLE_BYTES = 500
TRICKLE_INTERVAL = 0.02


class RawServer:
    """Raw sockets on 127.0.0.1, one connection per request, behaviours scripted in order.

    Behaviours, after reading the whole request:

    - ``ok``: a complete 200 with ``FULL_BODY``, then close.
    - ``reset``: SO_LINGER 0 and close: the client sees a reset, never a response.
    - ``midbody``: headers with ``Content-Length: 1000``, 10 bytes, close.
    - ``stall``: headers with ``Content-Length: 1000``, 10 bytes, then nothing until the
      server stops (a read timeout mid-body).
    - ``hang``: nothing at all until the server stops (a read timeout).
    - ``garbage``: bytes that are not HTTP, close.
    - ``slow``: headers and the first 500 bytes; the rest once ``release`` is set.
    - ``trickle``: a 503 whose ``TRICKLE_BYTES`` body comes one byte every
      ``TRICKLE_INTERVAL`` seconds, each well inside any read timeout; ``trickled`` counts
      the bytes sent before the client hung up.
    """

    BEHAVIOURS = ("ok", "reset", "midbody", "stall", "hang", "garbage", "slow", "trickle")

    def __init__(self, port: int = 0) -> None:
        self._listener = socket.create_server(("127.0.0.1", port), backlog=128)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._wake_r, self._wake_w = socket.socketpair()
        self.stopping = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._script: tuple[str, ...] = ()
        self._then = "ok"
        self.seen: list[Seen] = []
        self.connections = 0
        self.trickled = 0
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)

    def start(self) -> RawServer:
        self._acceptor.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.release.set()
        self._wake_w.send(b"x")
        self._acceptor.join(BOUND)
        for thread in list(self._threads):
            thread.join(BOUND)
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def script(self, *behaviours: str, then: str = "ok") -> str:
        """Meet the next requests with ``behaviours`` in order, then ``then``; clears the
        records. Returns the URL to request."""
        for name in (*behaviours, then):
            if name not in self.BEHAVIOURS:
                raise ValueError(name)
        with self._lock:
            self._script, self._then = behaviours, then
            self.seen = []
        return self.url + "/raw"

    @property
    def count(self) -> int:
        """Requests received in full (the server read every byte of them)."""
        with self._lock:
            return len(self.seen)

    def received(self, at_least: int) -> int:
        """:attr:`count` once it is ``at_least`` (or after ``BOUND`` seconds). A client whose
        own timer ended its request (a read timeout, a deadline) may be done before this
        server's thread has read what it sent: on a loaded machine, well after."""
        end = time.monotonic() + BOUND
        while self.count < at_least and time.monotonic() < end:
            time.sleep(0.005)
        return self.count

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            end = time.monotonic() + LIFETIME
            while not self.stopping.is_set() and time.monotonic() < end:
                for key, _ in selector.select(BOUND):
                    if key.fileobj is self._wake_r:
                        return
                    conn, _ = self._listener.accept()
                    with self._lock:
                        self.connections += 1
                        number = self.connections
                    thread = threading.Thread(target=self._serve, args=(conn, number),
                                              daemon=True)
                    self._threads.append(thread)
                    thread.start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        conn.settimeout(BOUND)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = conn.makefile("rb")
        linger = False
        try:
            seen = self._read_request(rfile, number)
            if seen is None:
                return
            with self._lock:
                index = len(self.seen)
                self.seen.append(seen)
                behaviour = self._script[index] if index < len(self._script) else self._then
            linger = self._behave(conn, behaviour)
        except OSError:
            pass
        finally:
            rfile.close()
            if linger:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    @staticmethod
    def _read_request(rfile: IO[bytes], number: int) -> Seen | None:
        line = rfile.readline(65536)
        if not line.strip():
            return None
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: list[tuple[str, str]] = []
        while True:
            raw = rfile.readline(65536)
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
        lower = {k.lower(): v for k, v in headers}
        body = read_body(rfile, lower)
        path, _, query = target.partition("?")
        return Seen(method, path, query, tuple(headers), body, number)

    def _behave(self, conn: socket.socket, behaviour: str) -> bool:
        """Act out ``behaviour``; True: close with a reset."""
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
        if behaviour == "ok":
            conn.sendall(head % len(FULL_BODY) + FULL_BODY)
        elif behaviour == "reset":
            return True
        elif behaviour == "midbody":
            conn.sendall(head % len(FULL_BODY) + FULL_BODY[:10])
        elif behaviour == "stall":
            conn.sendall(head % len(FULL_BODY) + FULL_BODY[:10])
            self.stopping.wait(BOUND)
        elif behaviour == "hang":
            self.stopping.wait(BOUND)
        elif behaviour == "garbage":
            conn.sendall(b"\x16\x03\x01\x00\xa5 this is not HTTP \xff\xfe\r\n\r\n")
        elif behaviour == "slow":
            conn.sendall(head % len(FULL_BODY) + FULL_BODY[:500])
            if self.release.wait(BOUND) and not self.stopping.is_set():
                conn.sendall(FULL_BODY[500:])
        elif behaviour == "trickle":
            conn.sendall(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: %d\r\n\r\n" % TRICKLE_BYTES
            )
            for _ in range(TRICKLE_BYTES):
                if self.stopping.wait(TRICKLE_INTERVAL):
                    break
                conn.sendall(b"x")  # raises once the client has hung up
                with self._lock:
                    self.trickled += 1
        return False


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens: connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- a server in another process -------------------------------------------------------


def _child_main(conn: Any) -> None:
    """Serve 503, 200, 503, 200... with keep-alive until told to stop (or idle for a minute).

    An asyncio server, one thread: a thread per connection would cost the GIL hand-offs that
    make a thousand new connections take seconds.
    """
    import asyncio

    state = {"requests": 0, "connections": 0}
    replies = (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] += 1
        try:
            while True:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), BOUND)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(replies[state["requests"] % 2])
                state["requests"] += 1
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=128)
        port = server.sockets[0].getsockname()[1]
        conn.send(f"http://127.0.0.1:{port}/cycle")
        loop = asyncio.get_running_loop()
        async with server:
            while await loop.run_in_executor(None, conn.poll, 60.0):
                if conn.recv() == "stop":
                    break
                conn.send((state["requests"], state["connections"]))

    try:
        asyncio.run(main())
    finally:
        conn.close()


class ChildServer:
    """An HTTP/1.1 server in a child process, answering 503 and 200 in turn, with keep-alive.

    Out of process so that neither its threads (the GIL) nor its sockets (the descriptor
    count) mix with the client's: the leak test measures the client alone.
    """

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_child_main, args=(child,), daemon=True)
        self._process.start()
        child.close()
        if not self._conn.poll(BOUND * 3):
            raise RuntimeError("the child server did not start")
        self.url: str = self._conn.recv()

    def counts(self) -> tuple[int, int]:
        """(requests to /cycle, connections accepted) so far."""
        self._conn.send("counts")
        if not self._conn.poll(BOUND):
            raise RuntimeError("the child server did not answer")
        requests, connections = self._conn.recv()
        return requests, connections

    def stop(self) -> None:
        try:
            self._conn.send("stop")
        except OSError:
            pass
        self._process.join(BOUND)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(BOUND)
        self._conn.close()
        self._process.close()
