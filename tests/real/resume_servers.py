"""Servers for the resumable-body tests, on 127.0.0.1: nginx serving files (Debian's
``nginx-light``, started with a configuration of the test's own), a TCP proxy that cuts
connections at chosen body offsets, a file server of the test's for a gzip representation,
a server whose answers to range requests are wrong, and an event-stream server that cuts its
streams where told. Every loop is bounded."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.real.servers import BOUND, LocalHTTPServer

__all__ = ["CuttingProxy", "EventStreamServer", "FileServer", "LyingRangeServer", "Nginx",
           "nginx_binary"]


def nginx_binary() -> str | None:
    """Debian's nginx (``/usr/sbin`` is not on every user's PATH)."""
    return shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx",) if os.access(path, os.X_OK)), None)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Nginx:
    """nginx serving the files of ``root / "www"`` on a free port, one process (no master,
    no daemon), its logs and temporary files under ``root``; stopped by :meth:`stop`."""

    def __init__(self, root: Path) -> None:
        binary = nginx_binary()
        assert binary is not None
        self.www = root / "www"
        self.www.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        temp = "\n".join(f"  {kind}_temp_path {root / kind};"
                         for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        config = root / "nginx.conf"
        config.write_text(f"""daemon off;
master_process off;
worker_processes 1;
pid {root / 'nginx.pid'};
error_log {root / 'error.log'};
events {{ worker_connections 64; }}
http {{
  access_log off;
{temp}
  default_type application/octet-stream;
  sendfile on;
  tcp_nodelay on;
  server {{ listen 127.0.0.1:{self.port}; root {self.www}; }}
}}
""")
        self.process = subprocess.Popen(
            [binary, "-c", str(config), "-p", str(root), "-e", str(root / "error.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + BOUND
        while True:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), timeout=0.5):
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not start: {(root / 'error.log').read_text()}")
            time.sleep(0.02)

    def publish(self, name: str, data: bytes, mtime: float) -> str:
        """Write the file ``name`` (its ``mtime`` makes nginx's strong ETag); its ETag."""
        path = self.www / name
        path.write_bytes(data)
        os.utime(path, (mtime, mtime))
        return f'"{int(mtime):x}-{len(data):x}"'

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(BOUND)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(BOUND)


_CONTENT_RANGE = re.compile(rb"\r\ncontent-range:\s*bytes\s+(\d+)-", re.I)


class CuttingProxy:
    """A TCP proxy to ``127.0.0.1:upstream`` that cuts a connection once its response's
    body reaches the next of ``cuts`` (absolute offsets in the representation; a ``206``'s
    body starts at its ``Content-Range``): the bytes before the offset are passed on,
    then the connection is reset (every other cut: closed). ``on_cut`` runs before the
    cut reaches the client. Only a connection's first response is watched."""

    def __init__(self, upstream: int, cuts: list[int],
                 on_cut: Callable[[], None] | None = None) -> None:
        self.upstream, self.cuts, self.on_cut = upstream, sorted(cuts), on_cut
        self.made = 0  # cuts made
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            thread = threading.Thread(target=self._relay, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _relay(self, client: socket.socket) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=BOUND)
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.settimeout(BOUND)
        ahead = threading.Thread(target=self._pipe, args=(client, upstream), daemon=True)
        ahead.start()
        reset = False
        try:
            reset = self._answer(upstream, client)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RD)  # wakes the other direction's recv
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_RDWR)
            ahead.join(BOUND)
            if reset:  # closed with nothing pending: a reset
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_WR)
            client.close()
            upstream.close()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)

    def _answer(self, upstream: socket.socket, client: socket.socket) -> bool:
        """Pass the response on, cut where due: whether to reset the connection."""
        head = b""
        while b"\r\n\r\n" not in head:
            data = upstream.recv(65536)
            if not data:
                client.sendall(head)
                return False
            head += data
        end = head.index(b"\r\n\r\n") + 4
        match = _CONTENT_RANGE.search(head[:end])
        at = int(match[1]) if match else 0  # the representation's offset of the next byte
        with self._lock:
            cut = next((c for c in self.cuts if c > at), None)
            if cut is not None:
                self.cuts.remove(cut)
        client.sendall(head[:end])
        data = head[end:]
        while True:
            if cut is not None and at + len(data) >= cut:
                client.sendall(data[:cut - at])
                if self.on_cut is not None:
                    self.on_cut()
                self.made += 1
                return self.made % 2 == 1  # a reset (the client may lose what it had not read)
            client.sendall(data)
            at += len(data)
            data = upstream.recv(65536)
            if not data:
                return False

    def stop(self) -> None:
        self._stopping.set()
        self._listener.close()
        self._accept.join(BOUND)
        for thread in self._threads:
            thread.join(BOUND)


class FileServer(LocalHTTPServer):
    """Serves one representation: ``body`` with ``headers`` (a strong ``ETag``, say a
    ``Content-Encoding``), honouring ``Range`` and ``If-Range`` on its bytes."""

    def __init__(self, body: bytes, headers: dict[str, str]) -> None:
        self.body, self.headers = body, headers
        super().__init__(_FileHandler)


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, ``TCP_NODELAY``, bounded waits, no log lines."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = BOUND

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _FileHandler(_Handler):
    server: FileServer

    def do_GET(self) -> None:
        body, etag = self.server.body, self.server.headers.get("ETag")
        first, last, status = 0, len(body) - 1, 200
        asked = self.headers.get("Range")
        if asked and (self.headers.get("If-Range") in (None, etag)):
            start, _, end = asked.removeprefix("bytes=").partition("-")
            first, last, status = int(start), int(end) if end else last, 206
        self.send_response(status)
        for name, value in self.server.headers.items():
            self.send_header(name, value)
        if status == 206:
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(body)}")
        self.send_header("Content-Length", str(last + 1 - first))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body[first:last + 1])


class LyingRangeServer(LocalHTTPServer):
    """Serves ``body`` (ETag ``"lie-1"``) at ``/file``, and answers wrongly where told.

    ``/file`` without ``Range``: a ``200`` with the body's ``Content-Length``, the
    connection closed after its first ``cut`` bytes. With ``Range: bytes=N-``: a ``206``
    with ``Content-Range: bytes N-<last>/<length>``, exactly what was asked, whose body is
    the representation's bytes from ``N`` with ``extra`` bytes more (zeros) or fewer, for
    the first ``lies`` such answers (then the right bytes), with a ``Content-Length`` of
    what is sent or ``chunked``. ``/huge-range``: a ``206`` whose ``Content-Range`` has
    numbers of 5,000 digits. ``/ok``: a ``200``.
    """

    def __init__(self, body: bytes, *, cut: int, extra: int = 0, lies: int = 1,
                 chunked: bool = False) -> None:
        self.body, self.cut, self.extra, self.lies, self.chunked = body, cut, extra, lies, chunked
        self.ranges: list[str | None] = []  # the Range of each request to /file
        self.lock = threading.Lock()
        super().__init__(_LyingHandler)


class _LyingHandler(_Handler):
    server: LyingRangeServer

    def do_GET(self) -> None:
        server = self.server
        if self.path == "/ok":
            self._answer(200, {}, b"ok")
        elif self.path == "/huge-range":
            digits = "9" * 5000
            self._answer(206, {"ETag": '"huge-1"',
                               "Content-Range": f"bytes 0-{digits}/1{digits}"}, b"x" * 10)
        else:
            self._file(server)

    def _file(self, server: LyingRangeServer) -> None:
        body, asked = server.body, self.headers.get("Range")
        with server.lock:
            server.ranges.append(asked)
            lie = asked is not None and server.lies > 0
            if lie:
                server.lies -= 1
        if asked is None:
            self.send_response(200)
            self.send_header("ETag", '"lie-1"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body[:server.cut])
                self.wfile.flush()
            self.close_connection = True
            return
        first = int(asked.removeprefix("bytes=").partition("-")[0])
        sent = body[first:]
        if lie:
            sent = sent + bytes(server.extra) if server.extra >= 0 else sent[:server.extra]
        headers = {"ETag": '"lie-1"',
                   "Content-Range": f"bytes {first}-{len(body) - 1}/{len(body)}"}
        self._answer(206, headers, sent, chunked=server.chunked)

    def _answer(self, status: int, headers: dict[str, str], body: bytes, *,
                chunked: bool = False) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            if not chunked:
                self.wfile.write(body)
                return
            for start in range(0, len(body), 997):
                piece = body[start:start + 997]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1, mtime=0)


def sha256(chunks: Iterator[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


# -- the event stream ------------------------------------------------------------------------


def event(number: int) -> bytes:
    """Event ``number`` of the stream: an id, then a multi-line ``data``."""
    return (b"id: %d\ndata: event %d begins\ndata: and goes on\ndata: to its end\n\n"
            % (number, number))


class EventStreamServer(LocalHTTPServer):
    """An event stream of ids 1..``count`` after ``retry: <retry>`` (200 ms), replaying after
    ``Last-Event-ID``, sent chunked; each stream is cut (the connection closed mid-chunk)
    at the next of ``cuts``: ``(event id, where)``, where ``"data"`` is inside its second
    ``data`` line and ``"id"`` right after its ``id`` line. ``ids``: whether events carry
    ids; ``bom``: whether a resumed stream opens with a BOM."""

    def __init__(self, count: int = 1000, cuts: list[tuple[int, str]] | None = None, *,
                 ids: bool = True, bom: bool = False, retry: int = 200) -> None:
        self.count, self.cuts, self.ids, self.bom = count, list(cuts or []), ids, bom
        self.retry = retry
        self.requests: list[tuple[str, str | None]] = []  # (method, Last-Event-ID)
        self.lock = threading.Lock()
        super().__init__(_EventHandler)


class _EventHandler(_Handler):
    server: EventStreamServer

    def do_GET(self) -> None:
        self._stream()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self._stream()

    def _stream(self) -> None:
        server = self.server
        last = self.headers.get("Last-Event-ID")
        with server.lock:
            server.requests.append((self.command, last))
            cut = server.cuts.pop(0) if server.cuts else None
        after = int(last) if last else 0
        body = b"retry: %d\n\n" % server.retry
        if last and server.bom:
            body = b"\xef\xbb\xbf" + body
        end = len(body)
        for number in range(after + 1, server.count + 1):
            piece = event(number) if server.ids else event(number).split(b"\n", 1)[1]
            if cut is not None and cut[0] == number:
                marker = b"and goes on" if cut[1] == "data" else b"data: event"
                end = len(body) + piece.index(marker) + (4 if cut[1] == "data" else 0)
            body += piece
        if cut is None:
            end = len(body)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with contextlib.suppress(OSError):
            for start in range(0, end, 997):
                piece = body[start:min(start + 997, end)]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            if cut is None:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        if cut is not None:
            self.close_connection = True
