"""Resumable bodies against real servers on 127.0.0.1: nginx serving a 64 MB file behind a
proxy that cuts the connection at seeded offsets, a gzip representation, a file replaced
between a cut and the resumption, and an event-stream server read through ``iter_lines``
and through httpx-sse. Sync, asyncio and trio, both flavours; real time (the waits are the
policy's backoff, a few milliseconds, and the stream's ``retry: 200``)."""

from __future__ import annotations

import gc
import hashlib
import os
import random
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import aclosing
from typing import Any

import anyio
import httpx_sse
import pytest

from tests.flavour import httpx, rt
from tests.real.resume_servers import (
    CuttingProxy,
    EventStreamServer,
    FileServer,
    LyingRangeServer,
    Nginx,
    event,
    gzipped,
    nginx_binary,
)
from tests.tables import table

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

MODES = ["sync", "asyncio", "trio"]
SIZE = 64 * 1024 * 1024
#: A fast backoff: the waits of these tests are real.
FAST = {"base_delay": 0.002, "max_delay": 0.01}


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    if nginx_binary() is None:
        if os.environ.get("RETRY_TRANSPORT_REQUIRE_NGINX"):
            pytest.fail("nginx is required here (Debian: apt install nginx-light)")
        pytest.skip("nginx is not installed (Debian: apt install nginx-light)")
    server = Nginx(tmp_path_factory.mktemp("nginx"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def big(nginx: Nginx) -> tuple[bytes, str]:
    """The 64 MB file nginx serves, seeded: its bytes and its ETag."""
    data = random.Random(64).randbytes(SIZE)
    return data, nginx.publish("big.bin", data, 1_700_000_000)


def transport(mode: str, **kwargs: Any) -> Any:
    kwargs.setdefault("resume", rt.Resume())
    for name, value in FAST.items():
        kwargs.setdefault(name, value)
    return (rt.RetryTransport if mode == "sync" else rt.AsyncRetryTransport)(**kwargs)


def stream(mode: str, url: str, each: Callable[[bytes], None], *, decoded: bool = False,
           method: str = "GET", headers: dict[str, str] | None = None,
           **kwargs: Any) -> Any:
    """Read ``url``'s body through a retry transport, each chunk handed to ``each`` (raw
    bytes, or ``decoded``); the response, or the error it raised after ``each`` had what
    came before it."""
    built = transport(mode, **kwargs)
    timeout = httpx.Timeout(10.0)
    if mode == "sync":
        with httpx.Client(transport=built, timeout=timeout) as client:
            with client.stream(method, url, headers=headers) as response:
                for chunk in (response.iter_bytes() if decoded else response.iter_raw()):
                    each(chunk)
        return response

    async def main() -> Any:
        async with httpx.AsyncClient(transport=built, timeout=timeout) as client:
            async with client.stream(method, url, headers=headers) as response:
                async for chunk in (response.aiter_bytes() if decoded
                                    else response.aiter_raw()):
                    each(chunk)
        return response

    return anyio.run(main, backend=mode)


class Digest:
    """What the caller read: its SHA-256 and length."""

    def __init__(self) -> None:
        self.hash, self.size = hashlib.sha256(), 0

    def __call__(self, chunk: bytes) -> None:
        self.hash.update(chunk)
        self.size += len(chunk)

    def equals(self, data: bytes) -> bool:
        return self.size == len(data) and self.hash.digest() == hashlib.sha256(data).digest()


def seeded_cuts(seed: int, low: int, high: int, count: int = 3) -> list[int]:
    return sorted(random.Random(seed).sample(range(low, high), count))


@pytest.mark.parametrize("mode", MODES)
def test_a_64_mb_download_cut_three_times_reads_whole(nginx: Nginx, big: tuple[bytes, str],
                                                      mode: str) -> None:
    data, etag = big
    cuts = seeded_cuts(MODES.index(mode), 1, SIZE - 1)
    proxy = CuttingProxy(nginx.port, cuts)
    try:
        digest = Digest()
        response = stream(mode, f"{proxy.origin}/big.bin", digest)
    finally:
        proxy.stop()
    assert proxy.made == 3
    assert digest.equals(data)
    info = rt.retry_info(response)
    assert (info.resumes, info.attempts, info.retries) == (3, 4, 0)
    # each resumption asked for the bytes after what the caller had (a reset may lose
    # what was in flight: never more than the cut)
    offsets = [a.resumed_at for a in info.history[1:]]
    assert offsets == sorted(offsets) and all(o <= c for o, c in zip(offsets, cuts, strict=True))
    assert [a.status for a in info.history] == [200, 206, 206, 206]
    assert response.headers["etag"] == etag


@pytest.mark.parametrize("mode", MODES)
def test_a_callers_own_range_is_resumed_within_it(nginx: Nginx, big: tuple[bytes, str],
                                                  mode: str) -> None:
    data, _ = big
    first, last = 10_000_000, 18_388_607  # 8 MiB of the file
    cuts = seeded_cuts(7, first + 1, last)
    proxy = CuttingProxy(nginx.port, cuts)
    try:
        digest = Digest()
        response = stream(mode, f"{proxy.origin}/big.bin", digest,
                          headers={"Range": f"bytes={first}-{last}"})
    finally:
        proxy.stop()
    assert response.status_code == 206
    assert digest.equals(data[first:last + 1])
    assert rt.retry_info(response).resumes == 3


@pytest.mark.parametrize("mode", MODES)
def test_a_gzip_representation_is_resumed_on_its_encoded_bytes(mode: str) -> None:
    text = b"".join(b"line %d of a log that compresses\n" % n for n in range(200_000))
    body = gzipped(text)
    server = FileServer(body, {"ETag": '"gz-1"', "Content-Encoding": "gzip",
                               "Content-Type": "text/plain"}).start()
    proxy = CuttingProxy(server.server_port, seeded_cuts(3, 1, len(body) - 1))
    try:
        digest = Digest()
        response = stream(mode, f"{proxy.origin}/log.txt", digest, decoded=True)
    finally:
        proxy.stop()
        server.stop()
    assert digest.equals(text)  # decoded across the splices
    assert rt.retry_info(response).resumes == 3


@pytest.mark.parametrize("mode", MODES)
def test_a_file_replaced_before_the_resumption_ends_with_the_error(
        nginx: Nginx, mode: str) -> None:
    old = random.Random(1).randbytes(4 * 1024 * 1024)
    new = random.Random(2).randbytes(len(old))
    nginx.publish("changing.bin", old, 1_600_000_000)

    def replace() -> None:
        nginx.publish("changing.bin", new, 1_600_000_100)

    cut = 1_234_567
    proxy = CuttingProxy(nginx.port, [cut], on_cut=replace)
    got: list[bytes] = []
    try:
        with pytest.raises(httpx.TransportError) as caught:
            stream(mode, f"{proxy.origin}/changing.bin", got.append)
    finally:
        proxy.stop()
    body = b"".join(got)  # what came before the cut (a reset may lose what was in flight)
    assert 0 < len(body) <= cut and body == old[:len(body)]  # not one byte of the new one
    notes = caught.value.__notes__
    assert notes[-1] == ("retry-transport: not resumed after 1 resumption(s) (not_retryable): "
                         "the server answered 200 to a range request: the resource changed")
    info = rt.retry_info(caught.value)
    assert info.stop_reason is rt.StopReason.NOT_RETRYABLE
    assert [a.status for a in info.history] == [200, 200]


@table("lie, chunked, resumes", [
    (5, True, None),  # a chunked 206 with 5 bytes past its range: the break, before them
    (-7, True, 2),  # 7 bytes missing: a break, resumed from there
    (50, False, None),  # a Content-Length of 50 more than its range: refused unread
    (-50, False, None),
], ids=["chunked-5-more", "chunked-7-fewer", "length-50-more", "length-50-fewer"],
    over="mode", modes=MODES)
def test_a_206_of_another_length_than_its_range_is_never_spliced_whole(
        mode: str, lie: int, chunked: bool, resumes: int | None) -> None:
    # A 200 of 100,000 bytes cut at 30,000; the resumption is answered
    # 206 bytes 30000-99999/100000, exactly what was asked, with a body of another length.
    data = random.Random(5).randbytes(100_000)
    server = LyingRangeServer(data, cut=30_000, extra=lie, chunked=chunked).start()
    got: list[bytes] = []
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always", ResourceWarning)
            if resumes is not None:
                response = stream(mode, f"{server.url}/file", got.append)
            else:
                with pytest.raises(httpx.RemoteProtocolError) as caught:
                    stream(mode, f"{server.url}/file", got.append)
            gc.collect()
    finally:
        server.stop()
    # trio's notices of httpx's async generators left unexhausted by a body not read to its
    # end (as when a caller stops reading) are hints, not leaks
    assert [str(w.message) for w in warned if issubclass(w.category, ResourceWarning)
            and not str(w.message).startswith("Async generator ")] == []
    body = b"".join(got)
    if resumes is not None:
        assert body == data
        assert server.ranges == [None, "bytes=30000-", "bytes=99993-"]
        assert rt.retry_info(response).resumes == resumes
        return
    # the break of the first answer (its connection closed before its Content-Length), with
    # the note, after an exact prefix: never a byte past the range
    assert len(body) <= len(data) and body == data[:len(body)]
    assert "peer closed connection" in str(caught.value)
    note = caught.value.__notes__[-1]
    assert note.startswith("retry-transport: not resumed after 1 resumption(s) (not_retryable)")
    assert note.endswith("the body went on past byte 99999, the last its headers declared"
                         if chunked else f"in a body of {70_000 + lie} bytes")
    assert server.ranges == [None, "bytes=30000-"]


@pytest.mark.parametrize("mode", MODES)
def test_a_content_range_that_cannot_be_read_holds_no_connection(mode: str) -> None:
    # Five final answers whose Content-Range has 5,000-digit numbers, through a pool of
    # two: each is handed over as it is (not resumable), and its connection goes back.
    assert five_then_ok(mode, "/huge-range") == [206] * 5 + [200]


@pytest.mark.parametrize("mode", MODES)
def test_a_response_whose_hand_over_fails_holds_no_connection(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from retry_transport._call import resumption

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("no plan")

    monkeypatch.setattr(resumption, "plan", fail)
    # each of the six got its answer, then the error: none waited for a connection
    assert five_then_ok(mode, "/ok") == ["RuntimeError"] * 6


def five_then_ok(mode: str, path: str) -> list[int | str]:
    """Five GETs of ``path`` then one of ``/ok``, through a pool of two connections with a
    pool timeout of 1 s: each one's status, or its error's class name."""
    server = LyingRangeServer(b"", cut=0).start()
    built = transport(mode, limits=httpx.Limits(max_connections=2))
    timeout = httpx.Timeout(10.0, pool=1.0)
    paths = [path] * 5 + ["/ok"]
    got: list[int | str] = []
    try:
        if mode == "sync":
            with httpx.Client(transport=built, timeout=timeout) as client:
                for each in paths:
                    try:
                        got.append(client.get(f"{server.url}{each}").status_code)
                    except Exception as exc:
                        got.append(type(exc).__name__)
        else:
            async def main() -> None:
                async with httpx.AsyncClient(transport=built, timeout=timeout) as client:
                    for each in paths:
                        try:
                            got.append((await client.get(f"{server.url}{each}")).status_code)
                        except Exception as exc:
                            got.append(type(exc).__name__)

            anyio.run(main, backend=mode)
    finally:
        server.stop()
    return got


# -- event streams -----------------------------------------------------------------------


def lines(mode: str, url: str, **kwargs: Any) -> tuple[list[str], Any]:
    """The stream's lines through ``iter_lines``, and the response (or the error)."""
    got: list[str] = []
    built = transport(mode, **kwargs)
    if mode == "sync":
        with httpx.Client(transport=built, timeout=httpx.Timeout(10.0)) as client:
            with client.stream("GET", url) as response:
                got.extend(response.iter_lines())
        return got, response

    async def main() -> Any:
        async with httpx.AsyncClient(transport=built, timeout=httpx.Timeout(10.0)) as client:
            async with client.stream("GET", url) as response:
                async for line in response.aiter_lines():
                    got.append(line)
        return response

    return got, anyio.run(main, backend=mode)


def ids_in(got: list[str]) -> list[int]:
    return [int(line[4:]) for line in got if line.startswith("id: ")]


CUTS = [(100, "data"), (101, "id"), (555, "data")]


@pytest.mark.parametrize("mode", MODES)
def test_an_event_stream_read_by_lines_gets_each_event_once(mode: str) -> None:
    server = EventStreamServer(cuts=CUTS).start()
    try:
        got, response = lines(mode, f"{server.url}/events")
    finally:
        server.stop()
    assert ids_in(got) == list(range(1, 1001))
    assert got.count("data: to its end") == 1000  # none torn
    assert [last for _, last in server.requests] == [None, "99", "100", "554"]
    info = rt.retry_info(response)
    assert info.resumes == 3
    assert all(attempt.wait >= 0.2 for attempt in info.history[:3])  # retry: 200


@pytest.mark.parametrize("mode", MODES)
def test_httpx_sse_gets_each_event_once(mode: str) -> None:
    server = EventStreamServer(cuts=CUTS[:2], bom=True).start()
    built = transport(mode)
    try:
        if mode == "sync":
            with httpx.Client(transport=built, timeout=httpx.Timeout(10.0)) as client:
                with httpx_sse.connect_sse(client, "GET", f"{server.url}/events") as source:
                    events = [(sse.id, sse.data) for sse in source.iter_sse() if sse.data]
                    response = source.response
        else:
            async def main() -> tuple[list[tuple[str, str]], Any]:
                async with httpx.AsyncClient(transport=built,
                                             timeout=httpx.Timeout(10.0)) as client:
                    async with httpx_sse.aconnect_sse(client, "GET",
                                                      f"{server.url}/events") as source:
                        return [(sse.id, sse.data) async for sse in source.aiter_sse()
                                if sse.data], source.response

            events, response = anyio.run(main, backend=mode)
    finally:
        server.stop()
    assert [int(id_) for id_, _ in events] == list(range(1, 1001))
    assert events[99] == ("100", "event 100 begins\nand goes on\nto its end")
    assert all(data.startswith("event ") for _, data in events)  # no BOM reached a field
    assert rt.retry_info(response).resumes == 2


@pytest.mark.parametrize("mode", MODES)
def test_an_event_stream_without_ids_ends_with_the_error(mode: str) -> None:
    server = EventStreamServer(count=50, cuts=[(20, "data")], ids=False).start()
    got: list[bytes] = []
    try:
        with pytest.raises(httpx.RemoteProtocolError) as caught:
            stream(mode, f"{server.url}/events", got.append)
    finally:
        server.stop()
    body = b"".join(got)
    assert body == b"retry: 200\n\n" + b"".join(event(n).split(b"\n", 1)[1]
                                                 for n in range(1, 20))
    assert caught.value.__notes__[-1].endswith("no event ID to resume from")
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_post_event_stream_is_not_resent(mode: str) -> None:
    server = EventStreamServer(count=50, cuts=[(20, "data")]).start()
    try:
        with pytest.raises(httpx.RemoteProtocolError) as caught:
            stream(mode, f"{server.url}/chat", lambda chunk: None, method="POST")
    finally:
        server.stop()
    assert server.requests == [("POST", None)]
    assert not getattr(caught.value, "__notes__", None)


@table("limit, reason", [
    ({"resume": "Resume(2)"}, "max_attempts"),
    ({"budget": "RetryBudget(capacity=10.0)"}, "budget_exhausted"),
    ({"deadline": 0.5}, "deadline"),
    ({"breaker": "open"}, "circuit_open"),
], ids=["max_resumes", "budget", "deadline", "breaker"], over="mode", modes=MODES)
def test_limits_end_resumption_with_their_note(mode: str, limit: dict[str, Any],
                                               reason: str) -> None:
    # every resumption breaks before its first event: none makes progress (one that did
    # would count max_resumes from zero again and get its cost back)
    server = EventStreamServer(count=100, cuts=[(10, "data"), (10, "id"), (10, "data"),
                                                (10, "data")]).start()
    kwargs: dict[str, Any] = {}
    ambient = None
    if "resume" in limit:
        kwargs["resume"] = rt.Resume(2)
    elif "budget" in limit:
        kwargs["budget"] = rt.RetryBudget(capacity=10.0)
    elif "deadline" in limit:
        ambient = limit["deadline"]  # an ambient deadline, set by the caller
    else:
        breaker = kwargs["breaker"] = rt.CircuitBreaker(min_requests=2)

        def fail(event: Any) -> None:  # other requests fail while this one waits
            if event.kind == "resume":
                for _ in range(2):
                    breaker.record(server.origin, True)

        kwargs["hooks"] = fail
    got: list[bytes] = []
    try:
        with pytest.raises(httpx.TransportError) as caught:
            if ambient is None:
                stream(mode, f"{server.url}/events", got.append, **kwargs)
            else:
                with rt.deadline(ambient):
                    stream(mode, f"{server.url}/events", got.append, **kwargs)
    finally:
        server.stop()
    info = rt.retry_info(caught.value)
    assert info.stop_reason.value == reason
    assert f"({reason}): " in caught.value.__notes__[-1]
    assert ids_in(b"".join(got).decode().split("\n")) == list(range(1, 1 + len(ids_in(
        b"".join(got).decode().split("\n")))))  # whole events, in order, none twice


# -- nothing left behind -----------------------------------------------------------------


def _sockets() -> int:
    """This process's open sockets."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{name}").startswith("socket:")
        except FileNotFoundError:  # the listing's own descriptor, closed since
            pass
    return count


@pytest.mark.parametrize("mode, end", [
    (mode, end) for mode in MODES for end in ("completed", "abandoned", "cancelled")
    if mode != "sync" or end != "cancelled"  # a sync read is not cancelled
])
def test_nothing_is_left_behind(mode: str, end: str) -> None:
    # A cancel lands in the stream's 200 ms wait; the others need no such wait.
    server = EventStreamServer(count=200, cuts=[(10, "data"), (20, "id")],
                               retry=200 if end == "cancelled" else 1).start()
    threads, sockets = threading.active_count(), _sockets()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        built = transport(mode)
        url = f"{server.url}/events"
        if mode == "sync":
            with httpx.Client(transport=built) as client:
                with client.stream("GET", url) as response:
                    for line in response.iter_lines():
                        if end == "abandoned" and line == "id: 50":
                            break
        else:
            async def main() -> None:
                async with httpx.AsyncClient(transport=built) as client:
                    with anyio.move_on_after(0.3 if end == "cancelled" else 10):
                        async with client.stream("GET", url) as response, \
                                aclosing(response.aiter_lines()) as read:
                            async for line in read:
                                if end == "abandoned" and line == "id: 50":
                                    break

            anyio.run(main, backend=mode)
        gc.collect()
    server.stop()
    # trio's notices of async generators left unexhausted (a body abandoned mid-way leaves
    # httpx's generators so, with or without resumption) are hints, not leaks: the sockets
    # are counted below
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)
            and not str(w.message).startswith("Async generator ")] == []
    assert threading.active_count() <= threads
    assert _sockets() <= sockets
    if end != "cancelled":
        assert [last for _, last in server.requests][:2] == [None, "9"]
