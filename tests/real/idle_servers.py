"""A server whose event streams stall, on 127.0.0.1, for the ``idle_timeout`` tests: it sends
``events`` events (with ids), then either a ``: ping`` comment every ``ping`` seconds or
nothing, until the client hangs up (watched, and recorded) or :data:`HOLD` seconds pass. A
request with ``Last-Event-ID`` (a resumption) gets the events after it, then the stream
ends. Every loop is bounded."""

from __future__ import annotations

import contextlib
import threading
import time

from tests.real.resume_servers import _Handler, event
from tests.real.servers import LocalHTTPServer, hung_up_within

__all__ = ["HOLD", "StallingServer"]

#: The longest a stalled stream is held open (the client's idle_timeout is far shorter).
HOLD = 10.0


class StallingServer(LocalHTTPServer):
    """Event streams of ids 1..``total``: the first ``events`` of them, then a stall with a
    comment every ``ping`` seconds (``None``: silence); a resumption gets the rest."""

    def __init__(self, events: int = 2, *, total: int = 5, ping: float | None = 0.2) -> None:
        self.events, self.total, self.ping = events, total, ping
        self.requests: list[str | None] = []  # each request's Last-Event-ID
        #: For each stalled stream: seconds from its stall to the client's hang-up, or
        #: ``None`` when the client did not hang up within HOLD.
        self.hung_up: list[float | None] = []
        self.stalled = threading.Event()  # set once a stream has stalled
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        super().__init__(_StallingHandler)

    def stop(self) -> None:
        self.stopping.set()
        super().stop()


class _StallingHandler(_Handler):
    server: StallingServer

    def do_GET(self) -> None:
        server = self.server
        last = self.headers.get("Last-Event-ID")
        with server.lock:
            server.requests.append(last)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        first = int(last) + 1 if last else 1
        last_sent = server.total if last else min(server.events, server.total)
        with contextlib.suppress(OSError):
            for number in range(first, last_sent + 1):
                self._chunk(event(number))
            if last:  # a resumption: the rest, then the end
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                return
            server.stalled.set()
            self._stall()
        self.close_connection = True

    def _stall(self) -> None:
        """Hold the stream open with nothing in it but comments (or nothing), watching for
        the client's hang-up."""
        server, start = self.server, time.monotonic()
        hung: float | None = None
        while not server.stopping.is_set() and time.monotonic() - start < HOLD:
            if hung_up_within(self.connection, server.ping or HOLD, server.stopping):
                hung = time.monotonic() - start
                break
            if server.ping is not None:
                try:
                    self._chunk(b": ping\n\n")
                except OSError:  # the client is gone
                    hung = time.monotonic() - start
                    break
        with server.lock:
            server.hung_up.append(hung)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()
