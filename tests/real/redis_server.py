"""Redis for the real-Redis tests: a throwaway ``redis-server``, and a "hung" one.

``RedisServer`` runs the machine's ``redis-server`` on a free port of 127.0.0.1, in a temp
directory, with persistence off (``--save '' --appendonly no``: a restart starts empty) and
any further options given (``"--maxmemory", "1mb"``, say; a ``--requirepass`` is used by its
``client()``). It can be killed (SIGKILL: the connections drop at once) and started again on
the same port, or frozen (SIGSTOP: the kernel still accepts connections, nobody answers) and
thawed.

``HungRedis`` is a TCP server that accepts connections, reads what it is sent, and never
answers a byte: a Redis that hangs.

``DelayingProxy`` stands between a client and a real ``redis-server`` and holds each of
Redis's replies a set time: a slow Redis (or a slow network) whose replies still come.

When ``redis-server`` or the ``redis`` package is missing the tests skip, saying why, unless
``RETRY_TRANSPORT_REQUIRE_REDIS=1`` (CI sets it): then they fail.

Every blocking call is bounded, and every process and thread stops by itself.
"""

from __future__ import annotations

import os
import queue
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from types import ModuleType
from typing import Any

import pytest

#: Longest a helper waits for a server to start or stop, in seconds.
BOUND = 10.0
#: Longest the hung server accepts connections if nobody stops it, in seconds.
LIFETIME = 300.0

REQUIRE = "RETRY_TRANSPORT_REQUIRE_REDIS"


def _missing(reason: str) -> None:
    """Skip the test, or fail it when the environment says Redis must be there."""
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{reason}, and {REQUIRE}=1 says the Redis tests must run", pytrace=False)
    pytest.skip(f"{reason} (set {REQUIRE}=1 to make this a failure)")


def redis_binary() -> str:
    """The path of ``redis-server``; skips (or fails, see ``REQUIRE``) when it is missing."""
    path = shutil.which("redis-server")
    if path is None and os.access("/usr/bin/redis-server", os.X_OK):
        path = "/usr/bin/redis-server"
    if path is None:
        _missing("redis-server is not installed (Debian: apt-get install redis-server)")
    assert path is not None
    return path


def redis_module() -> ModuleType:
    """The ``redis`` package; skips (or fails, see ``REQUIRE``) when it is missing."""
    try:
        import redis
    except ImportError:
        _missing("the redis package is not installed (pip install 'retry-transport[redis]')")
        raise
    return redis


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pong(port: int) -> bool:
    """Whether a Redis on ``port`` answers PING now (a Redis that wants a password answers
    that it does: it is up)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
    except OSError:
        return False


class RedisServer:
    """A ``redis-server`` of its own on 127.0.0.1, without persistence, in a temp dir."""

    def __init__(self, port: int | None = None, *options: str) -> None:
        self.binary = redis_binary()
        self.options = options  # more command-line options, kept across restarts
        self.password = options[options.index("--requirepass") + 1] if (
            "--requirepass" in options) else None
        self.port = port if port is not None else free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.dir = tempfile.mkdtemp(prefix="retry-transport-redis-")
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self) -> RedisServer:
        """Start it (again, on the same port) and wait until it answers PING."""
        assert self.process is None or self.process.poll() is not None, "already running"
        if self._log is None:
            self._log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", self.dir,
                "--daemonize", "no",
                "--loglevel", "warning",
                *self.options,
            ],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            cwd=self.dir,
        )
        end = time.monotonic() + BOUND
        while not _pong(self.port):
            if self.process.poll() is not None or time.monotonic() > end:
                self._reap()
                raise RuntimeError(f"redis-server did not start on {self.port}: {self.log()}")
            time.sleep(0.01)
        return self

    def log(self) -> str:
        try:
            with open(os.path.join(self.dir, "redis.log"), "rb") as file:
                return file.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: the server is gone at once, its connections dropped, its data lost."""
        self._reap()

    def freeze(self) -> None:
        """SIGSTOP: connections stay open and new ones are accepted; nothing is answered."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """Stop it for good and remove its directory. Idempotent."""
        self._reap()
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def _reap(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.kill()  # SIGKILL also ends a frozen process
        try:
            process.wait(BOUND)
        except subprocess.TimeoutExpired:  # pragma: no cover - the kernel is in trouble
            pass

    def client(self) -> Any:
        """A plain client of this server, for a test to look at the keys."""
        return redis_module().Redis(
            host="127.0.0.1", port=self.port, password=self.password, decode_responses=True,
            socket_timeout=BOUND, socket_connect_timeout=BOUND,
        )


class HungRedis:
    """Accepts TCP connections on 127.0.0.1, reads what they send, never answers."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.connections = 0
        self.received = 0  # bytes read (and never answered)
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> HungRedis:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wake_w.send(b"x")
        self._thread.join(BOUND)
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def _loop(self) -> None:
        conns: list[socket.socket] = []
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            end = time.monotonic() + LIFETIME
            try:
                while not self._stopping.is_set() and time.monotonic() < end:
                    for key, _ in selector.select(1.0):
                        sock = key.fileobj
                        if sock is self._wake_r:
                            return
                        if sock is self._listener:
                            try:
                                conn, _ = self._listener.accept()
                            except BlockingIOError:
                                continue
                            conn.setblocking(False)
                            conns.append(conn)
                            selector.register(conn, selectors.EVENT_READ)
                            with self._lock:
                                self.connections += 1
                            continue
                        assert isinstance(sock, socket.socket)
                        try:
                            data = sock.recv(65536)
                        except (BlockingIOError, InterruptedError):
                            continue
                        except OSError:
                            data = b""
                        if not data:  # the client hung up
                            selector.unregister(sock)
                            conns.remove(sock)
                            sock.close()
                            continue
                        with self._lock:
                            self.received += len(data)
            finally:
                for conn in conns:
                    conn.close()


class DelayingProxy:
    """A TCP proxy on 127.0.0.1 in front of a real Redis that holds every reply ``delay``
    seconds: what the client sends goes on at once; each chunk Redis sends back is passed
    on ``delay`` seconds after it arrived (the delay when it arrived), so replies keep their
    order and one reply's delay does not add to the next one's. ``delay`` may change at any
    time. A stopped proxy closes every connection; it stops by itself after ``LIFETIME``.
    """

    def __init__(self, port: int) -> None:
        self.delay = 0.0
        self._target = ("127.0.0.1", port)
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._end = time.monotonic() + LIFETIME
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> DelayingProxy:
        self._acceptor.start()
        return self

    def stop(self) -> None:
        """Close the listener and every connection; join every thread. Idempotent."""
        self._stopping.set()
        self._acceptor.join(BOUND)
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            self._close(sock)
        end = time.monotonic() + BOUND
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
        self._listener.close()

    def _running(self) -> bool:
        return not self._stopping.is_set() and time.monotonic() < self._end

    @staticmethod
    def _close(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked on it
        except OSError:
            pass
        sock.close()

    def _accept(self) -> None:
        while self._running():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target, timeout=BOUND)
            except OSError:
                self._close(client)
                continue
            replies: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
            threads = [
                threading.Thread(target=self._forward, args=(client, upstream), daemon=True),
                threading.Thread(target=self._read_replies, args=(upstream, client, replies),
                                 daemon=True),
                threading.Thread(target=self._deliver, args=(client, upstream, replies),
                                 daemon=True),
            ]
            with self._lock:
                self._sockets += [client, upstream]
                self._threads += threads
            for sock in (client, upstream):
                sock.settimeout(0.2)  # every blocking call notices a stop within that
            for thread in threads:
                thread.start()

    def _recv(self, sock: socket.socket) -> bytes:
        """The next chunk from ``sock``; ``b""`` once it or the proxy is done."""
        while self._running():
            try:
                return sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return b""
        return b""

    def _forward(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client to Redis, at once."""
        try:
            while data := self._recv(client):
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            self._close(client)
            self._close(upstream)

    def _read_replies(self, upstream: socket.socket, client: socket.socket,
                      replies: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        """Redis's replies, each stamped with when it is due."""
        while data := self._recv(upstream):
            replies.put((time.monotonic() + self.delay, data))
        replies.put((0.0, b""))  # Redis hung up (or the proxy stops): the client is next

    def _deliver(self, client: socket.socket, upstream: socket.socket,
                 replies: queue.SimpleQueue[tuple[float, bytes]]) -> None:
        """Redis to the client, each reply when it is due."""
        try:
            while self._running():
                try:
                    due, data = replies.get(timeout=0.2)
                except queue.Empty:
                    continue
                if not data:
                    return
                if self._stopping.wait(max(0.0, due - time.monotonic())):
                    return
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._close(client)
            self._close(upstream)
