"""What an error says, against real servers on 127.0.0.1.

A raw TLS error: a server that completes the handshake, reads the request, then sends a TLS
record that fails to decrypt. Sync and on trio, httpx and httpx2 raise their ``ReadError``
for it; on asyncio the ``ssl.SSLError`` escapes them raw. Either way it came after the
request was sent: a GET is sent again, a POST without a key is not, and the caller gets the
very error the inner transport raised.

The client's own pool, full: a real connection pool of two, both connections held by
streamed responses the test keeps open, and a burst of requests that each wait in vain for
one (real ``PoolTimeout``s, every attempt's). Nothing of the burst reaches the server, which
never failed: with a circuit breaker and an adaptive throttle on, the requests after the
burst are answered, as they are with bare httpx. The connections are held until the test
lets them go, not for a time, so the outcome does not depend on the machine's load; the
waits between attempts are recorded, never slept.
"""

from __future__ import annotations

import selectors
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
import trustme

from tests.flavour import httpx, rt
from tests.real.clients import Waits, check_flavour
from tests.real.servers import BOUND, ScriptedHTTPServer

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

#: The pool's connections, both held through the burst.
POOL = 2
#: Requests in the burst: with 3 attempts each, 24 PoolTimeouts, more than the default
#: breaker's ``min_requests`` (20), all of them failures were they counted.
BURST = 8
#: Plain GETs after the burst, each of which must be answered.
AFTER = 10


def pool_timeout() -> httpx.Timeout:
    """A short wait for a connection from the pool (the burst's), the rest as usual."""
    return httpx.Timeout(2.0, pool=0.2)


def guards() -> dict[str, Any]:
    """A breaker and a throttle with their defaults: both judge the origin's health."""
    return {"breaker": rt.CircuitBreaker(), "throttle": rt.AdaptiveThrottle()}


def check_after_the_burst(server: ScriptedHTTPServer, url: str, judges: dict[str, Any],
                          burst: list[BaseException | None], after: list[int]) -> None:
    """The burst waited in vain for the pool, sent nothing and opened nothing; every GET
    after it was answered."""
    assert len(burst) == BURST
    for error in burst:
        assert isinstance(error, httpx.PoolTimeout), error
        info = rt.retry_info(error)
        assert info is not None
        assert (info.attempts, info.stop_reason) == (3, rt.StopReason.MAX_ATTEMPTS)
    assert after == [200] * AFTER
    assert server.count("/pool") == POOL + AFTER  # the burst never reached it
    assert judges["breaker"].state(url) == "closed"
    assert judges["throttle"].counts(url) == (POOL + AFTER, POOL + AFTER)


def test_a_full_pool_opens_nothing_sync(http_server: ScriptedHTTPServer) -> None:
    url = http_server.script("/pool")
    recorder = Waits()
    inner = httpx.HTTPTransport(limits=httpx.Limits(max_connections=POOL))
    judges = guards()
    transport = rt.RetryTransport(inner, sleep=recorder.sleep, **judges)
    burst: list[BaseException | None] = []
    lock = threading.Lock()
    with httpx.Client(transport=transport, timeout=pool_timeout()) as client:
        check_flavour(Client=client, BaseTransport=transport, HTTPTransport=inner)
        held = [client.send(client.build_request("GET", url), stream=True)
                for _ in range(POOL)]

        def one() -> None:
            try:
                client.get(url)
            except Exception as exc:
                with lock:
                    burst.append(exc)
            else:
                with lock:
                    burst.append(None)

        threads = [threading.Thread(target=one) for _ in range(BURST)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(BOUND)
        for response in held:
            response.close()
        after = [client.get(url).status_code for _ in range(AFTER)]
    check_after_the_burst(http_server, url, judges, burst, after)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_full_pool_opens_nothing_async(http_server: ScriptedHTTPServer,
                                         backend: str) -> None:
    url = http_server.script("/pool")
    recorder = Waits()
    judges = guards()

    async def main() -> tuple[list[BaseException | None], list[int]]:
        inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=POOL))
        transport = rt.AsyncRetryTransport(inner, sleep=recorder.asleep, **judges)
        burst: list[BaseException | None] = []
        async with httpx.AsyncClient(transport=transport, timeout=pool_timeout()) as client:
            check_flavour(AsyncClient=client, AsyncBaseTransport=transport,
                          AsyncHTTPTransport=inner)
            held = [await client.send(client.build_request("GET", url), stream=True)
                    for _ in range(POOL)]

            async def one() -> None:
                try:
                    await client.get(url)
                except Exception as exc:
                    burst.append(exc)
                else:
                    burst.append(None)

            with anyio.fail_after(BOUND):
                async with anyio.create_task_group() as group:
                    for _ in range(BURST):
                        group.start_soon(one)
            for response in held:
                await response.aclose()
            after = [(await client.get(url)).status_code for _ in range(AFTER)]
        return burst, after

    burst, after = anyio.run(main, backend=backend)
    check_after_the_burst(http_server, url, judges, burst, after)


# -- a raw TLS error after the request was sent ------------------------------------------


class BadRecordServer:
    """TLS on 127.0.0.1, one connection at a time: the handshake, the request read in full
    (counted), then a TLS application-data record of garbage, which the client's TLS layer
    fails to decrypt, and the connection closed. With ``handshake=True`` the garbage
    answers the client's hello instead: the handshake fails (``connections`` counts it)."""

    #: An application-data record header (TLS 1.2 on the wire) and 16 bytes that no key
    #: decrypts.
    RECORD = b"\x17\x03\x03\x00\x10" + b"x" * 16

    def __init__(self, context: ssl.SSLContext, handshake: bool = False) -> None:
        self._context = context
        self.handshake = handshake
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self._listener.getsockname()[1]}/tls"
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self.methods: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> BadRecordServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(BOUND)
        self._listener.close()

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            while not self._stopping.is_set():
                if not selector.select(0.05):
                    continue
                conn, _ = self._listener.accept()
                conn.settimeout(BOUND)
                with self._lock:
                    self.connections += 1
                if self.handshake:
                    with conn:
                        conn.recv(65536)  # the client's hello
                        conn.sendall(self.RECORD)
                    continue
                try:
                    with self._context.wrap_socket(conn, server_side=True) as tls:
                        method = self._read_request(tls)
                        if method is None:
                            continue
                        with self._lock:
                            self.methods.append(method)
                        # Beneath the TLS layer: bytes its peer cannot decrypt.
                        socket.socket.sendall(tls, self.RECORD)
                except OSError:
                    conn.close()

    @staticmethod
    def _read_request(tls: ssl.SSLSocket) -> str | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = tls.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(body) < length:
            chunk = tls.recv(65536)
            if not chunk:
                return None
            body += chunk
        return lines[0].split(" ", 1)[0]


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(params=[False, True], ids=["after-sending", "handshake"])
def bad_record_server(authority: trustme.CA,
                      request: pytest.FixtureRequest) -> Iterator[BadRecordServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(context)
    server = BadRecordServer(context, handshake=request.param).start()
    try:
        yield server
    finally:
        server.stop()


def trusting(authority: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    authority.configure_trust(context)
    return context


def through_recorder(mode: str, url: str, verify: ssl.SSLContext, method: str
                     ) -> tuple[BaseException | None, list[BaseException]]:
    """One request through a retry transport over a real one, sync or on loop ``mode``:
    the error the caller got, and every error the real transport raised."""
    raised: list[BaseException] = []
    recorder = Waits()
    content = b"{}" if method == "POST" else None
    if mode == "sync":
        class Recording(httpx.BaseTransport):
            def __init__(self) -> None:
                self.inner = httpx.HTTPTransport(verify=verify)

            def handle_request(self, request: Any) -> Any:
                try:
                    return self.inner.handle_request(request)
                except Exception as exc:
                    raised.append(exc)
                    raise

            def close(self) -> None:
                self.inner.close()

        transport = rt.RetryTransport(Recording(), sleep=recorder.sleep)
        with httpx.Client(transport=transport, timeout=2.0) as client:
            try:
                client.request(method, url, content=content)
            except Exception as exc:
                return exc, raised
        return None, raised

    class AsyncRecording(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport(verify=verify)

        async def handle_async_request(self, request: Any) -> Any:
            try:
                return await self.inner.handle_async_request(request)
            except Exception as exc:
                raised.append(exc)
                raise

        async def aclose(self) -> None:
            await self.inner.aclose()

    async def main() -> BaseException | None:
        transport = rt.AsyncRetryTransport(AsyncRecording(), sleep=recorder.asleep)
        async with httpx.AsyncClient(transport=transport, timeout=2.0) as client:
            try:
                await client.request(method, url, content=content)
            except Exception as exc:
                return exc
        return None

    return anyio.run(main, backend=mode), raised


@pytest.mark.parametrize("mode", ["sync", "asyncio", "trio"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_tls_error_says_whether_the_request_was_sent(
    bad_record_server: BadRecordServer, authority: trustme.CA, mode: str, method: str
) -> None:
    """A failed handshake is the flavour's ConnectError in every mode (nothing was sent: a
    POST is retried too). A TLS record that fails after the request was sent is a read
    error, raw on asyncio or mapped elsewhere: a GET is sent three times, a POST without a
    key once. The caller gets the last error the real transport raised, the very object."""
    server = bad_record_server
    error, raised = through_recorder(mode, server.url, trusting(authority), method)
    if server.handshake:
        expected, attempts, requests = httpx.ConnectError, 3, []
    else:
        # raw on asyncio, where httpx and httpx2 let the ssl.SSLError through
        expected = ssl.SSLError if mode == "asyncio" else httpx.ReadError
        attempts = 3 if method == "GET" else 1
        requests = [method] * attempts
    assert type(error) is expected, repr(error)
    assert (server.connections, server.methods) == (attempts, requests)
    assert len(raised) == attempts and error is raised[-1]
    info = rt.retry_info(error)
    assert info is not None
    reason = rt.StopReason.UNSAFE_METHOD if attempts == 1 else rt.StopReason.MAX_ATTEMPTS
    assert (info.attempts, info.stop_reason) == (attempts, reason)
