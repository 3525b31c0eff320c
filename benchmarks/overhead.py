"""What does retry-transport cost on a request that needs no retry? And on one that does?

Run it from the repository root::

    python benchmarks/overhead.py            # default settings, about 1-2 minutes
    python benchmarks/overhead.py --quick    # a smoke run, a few seconds
    python benchmarks/overhead.py --profile  # cProfile of the success path, then exit
    python benchmarks/overhead.py --against REF  # each goal: the code of REF and the tree

Everything is measured in one process, arm against arm, interleaved over several rounds:
in each round every arm (the bare transport, retry-transport, and the peers a user would
pick instead) runs the same number of requests, in an order that rotates from round to
round. The overhead of an arm is computed pair by pair *within* a round (arm minus bare,
arm over bare), and the table shows the median over the rounds of those differences and
ratios, with their interquartile range. On a shared, noisy machine only such side-by-side
figures mean anything: never compare absolute microseconds across runs.

Sections:

1. ``MockTransport``: the pure CPU cost of the layer, calling ``transport.handle_request``
   directly in a tight loop, and through ``httpx.Client.get``. Sync, asyncio and trio.
2. Loopback: ``httpx.Client.get`` against a tiny keep-alive HTTP/1.1 server on 127.0.0.1
   that this script starts in a child process (so it does not share the GIL with the
   client) and that stops by itself: when this script closes its stdin, after serving a
   bounded number of requests, or after ``--server-lifetime`` seconds.
3. The retry path: a handler that answers 503 then 200, with a no-op sleep, against two
   bare requests; what remains is the cost of deciding one retry (and of the bookkeeping
   of a request that was retried), the wait excluded.
4. Memory: 100,000 successful requests through one ``RetryTransport`` must not grow the
   traced peak by 1 MiB or more (``tracemalloc``: peak during the run minus the traced
   size just before it, after a warm-up and a full collection).

The garbage collector is disabled inside each timed loop (and a full collection runs
before it, untimed): a collection landing in one arm and not the other is a large part of
the noise at this scale. The memory section leaves the collector on, as in real use.

Peers (optional, imported lazily, skipped with a note when missing):
``httpx-retries`` (its ``RetryTransport`` wrapping the same inner transport, ``Retry(total=2)``
i.e. 3 attempts) and ``tenacity`` (a ``tenacity.retry`` decorator, 3 attempts, retry on
``httpx.TransportError``, exponential full-jitter wait) around ``client.get`` or around the
inner ``handle_request``. Install them with ``pip install httpx-retries tenacity``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import importlib.metadata
import os
import platform
import pstats
import selectors
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import httpx

import retry_transport as rt

perf_counter_ns = time.perf_counter_ns

SyncRun = Callable[[int], int]  # run(n) -> elapsed ns for n requests
AsyncRun = Callable[[int], Awaitable[int]]

# Targets (see the README of this folder).
TARGET_SYNC_US = 1.5
TARGET_ASYNC_US = 2.5
TARGET_LOOPBACK_RATIO = 1.02
TARGET_MEMORY_BYTES = 1024 * 1024
TARGET_RETRY_US = 10.0
#: The most a closed circuit breaker may add to a successful request (section 7).
TARGET_BREAKER_US = 1.0
#: Cooling origins in section 5, and the most they may add to a request to another origin.
COOLING_ORIGINS = 10_000
TARGET_COOLDOWN_US = 1.0

# Requests per arm per turn within a round (a few milliseconds each).
BLOCK_DIRECT = 250
BLOCK_CLIENT = 50
BLOCK_SERVER = 20

URL = "http://127.0.0.1:8000/items"
RESPONSE_BYTES = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


# -- settings ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    rounds: int
    requests: int  # per arm per round, MockTransport direct loops
    client_requests: int  # per arm per round, MockTransport through a Client
    server_requests: int  # per arm per round, loopback
    retry_requests: int  # per arm per round, retry path
    memory_requests: int
    trio: bool
    server: bool
    peers: bool
    server_lifetime: float

    def warmup(self, n: int) -> int:
        return max(50, n // 5)


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    parser = argparse.ArgumentParser(
        description="Per-request overhead of retry-transport against a bare transport and peers."
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds per section (15)")
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per arm per round for direct MockTransport loops (4000); the client, "
        "loopback and retry sections use a fraction of it",
    )
    parser.add_argument(
        "--server-requests", type=int, default=None, help="loopback requests per arm per round"
    )
    parser.add_argument(
        "--memory-requests", type=int, default=None, help="requests for the memory check (100000)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: few rounds, few requests"
    )
    parser.add_argument("--no-trio", action="store_true", help="skip the trio sections")
    parser.add_argument("--no-server", action="store_true", help="skip the loopback sections")
    parser.add_argument("--no-peers", action="store_true", help="skip httpx-retries and tenacity")
    parser.add_argument(
        "--server-lifetime",
        type=float,
        default=600.0,
        help="the loopback server exits after this many seconds whatever happens (600)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print a cProfile of the success path (sync and asyncio) and exit",
    )
    parser.add_argument(
        "--against",
        metavar="REF",
        help="measure the goals' arms for the code of git ref REF and the working tree, "
        "interleaved in this process, and print the goals (nothing else is measured)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-max-requests", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rounds = args.rounds if args.rounds is not None else (5 if args.quick else 15)
    requests = args.requests if args.requests is not None else (500 if args.quick else 4000)
    server_requests = args.server_requests
    if server_requests is None:
        server_requests = 100 if args.quick else 400
    memory = args.memory_requests if args.memory_requests is not None else 100_000
    if args.quick and args.memory_requests is None:
        memory = 20_000
    for name, value in (
        ("--rounds", rounds),
        ("--requests", requests),
        ("--server-requests", server_requests),
        ("--memory-requests", memory),
    ):
        if value < 1:
            parser.error(f"{name} must be >= 1")
    settings = Settings(
        rounds=rounds,
        requests=requests,
        client_requests=max(1, requests // 4),
        server_requests=server_requests,
        retry_requests=max(1, requests // 2),
        memory_requests=memory,
        trio=not args.no_trio,
        server=not args.no_server,
        peers=not args.no_peers,
        server_lifetime=args.server_lifetime,
    )
    return args, settings


# -- optional peers ----------------------------------------------------------------------


def _optional(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


@dataclass
class Peers:
    httpx_retries: ModuleType | None = None
    tenacity: ModuleType | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, enabled: bool) -> Peers:
        peers = cls()
        if not enabled:
            peers.notes.append("peers skipped (--no-peers)")
            return peers
        peers.httpx_retries = _optional("httpx_retries")
        if peers.httpx_retries is None:
            peers.notes.append("httpx-retries not installed: skipped (pip install httpx-retries)")
        peers.tenacity = _optional("tenacity")
        if peers.tenacity is None:
            peers.notes.append("tenacity not installed: skipped (pip install tenacity)")
        return peers

    @property
    def hr_label(self) -> str:
        return f"httpx-retries {_version('httpx-retries')}"

    @property
    def tn_label(self) -> str:
        return f"tenacity {_version('tenacity')}"

    def hr_transport(self, inner: Any) -> Any:
        """httpx-retries wrapping ``inner``: 3 attempts, its defaults otherwise."""
        assert self.httpx_retries is not None
        hr = self.httpx_retries
        return hr.RetryTransport(transport=inner, retry=hr.Retry(total=2))

    def tn_decorator(self) -> Callable[[Any], Any]:
        """A tenacity decorator with a policy comparable to retry-transport's default."""
        assert self.tenacity is not None
        tn = self.tenacity
        decorator: Callable[[Any], Any] = tn.retry(
            stop=tn.stop_after_attempt(3),
            retry=tn.retry_if_exception_type(httpx.TransportError),
            wait=tn.wait_random_exponential(multiplier=0.1, max=20.0),
            reraise=True,
        )
        return decorator


# -- the measurement engine --------------------------------------------------------------


@dataclass
class Result:
    title: str
    baseline: str
    per_request_ns: dict[str, list[float]]  # arm -> per-round ns per request
    n: int  # requests per arm per round
    rounds: int
    block: int  # requests per arm per turn within a round
    seconds: float = 0.0  # wall time of the section

    def per_round(self, arm: str) -> tuple[list[float], list[float]]:
        base = self.per_request_ns[self.baseline]
        values = self.per_request_ns[arm]
        diffs = [v - b for v, b in zip(values, base, strict=True)]
        ratios = [v / b for v, b in zip(values, base, strict=True)]
        return diffs, ratios

    def median_us(self, arm: str) -> float:
        return statistics.median(self.per_request_ns[arm]) / 1000.0

    def overhead_us(self, arm: str) -> float:
        return statistics.median(self.per_round(arm)[0]) / 1000.0

    def ratio(self, arm: str) -> float:
        return statistics.median(self.per_round(arm)[1])


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def _order(names: list[str], round_index: int) -> list[str]:
    shift = round_index % len(names)
    order = names[shift:] + names[:shift]
    return order if round_index % 2 == 0 else order[::-1]


def _blocks(n: int, block: int) -> tuple[int, int]:
    """Split ``n`` requests into blocks of about ``block``: (blocks, requests per block)."""
    count = max(1, round(n / max(1, block)))
    return count, max(1, n // count)


def measure_sync(
    title: str, arms: dict[str, SyncRun], n: int, block: int, settings: Settings
) -> Result:
    """Time ``n`` requests per arm per round, interleaving the arms block by block.

    Within a round the arms take turns, ``block`` requests at a time, in an order that
    rotates from block to block, so that a slow spell of the machine lands on every arm
    alike. The collector runs before the round and is off during it.
    """
    names = list(arms)
    count, per_block = _blocks(n, block)
    started = time.monotonic()
    gc.collect()
    for name in names:  # warm up: caches, connection pools, specialised bytecode
        arms[name](settings.warmup(n))
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(settings.rounds):
        totals = dict.fromkeys(names, 0)
        gc.collect()
        gc.disable()
        try:
            for block_index in range(count):
                for name in _order(names, index * count + block_index):
                    totals[name] += arms[name](per_block)
        finally:
            gc.enable()
        for name in names:
            samples[name].append(totals[name] / (count * per_block))
    seconds = time.monotonic() - started
    return Result(title, names[0], samples, count * per_block, settings.rounds, per_block, seconds)


async def measure_async(
    title: str, arms: dict[str, AsyncRun], n: int, block: int, settings: Settings
) -> Result:
    """The async twin of :func:`measure_sync`."""
    names = list(arms)
    count, per_block = _blocks(n, block)
    started = time.monotonic()
    gc.collect()
    for name in names:
        await arms[name](settings.warmup(n))
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(settings.rounds):
        totals = dict.fromkeys(names, 0)
        gc.collect()
        gc.disable()
        try:
            for block_index in range(count):
                for name in _order(names, index * count + block_index):
                    totals[name] += await arms[name](per_block)
        finally:
            gc.enable()
        for name in names:
            samples[name].append(totals[name] / (count * per_block))
    seconds = time.monotonic() - started
    return Result(title, names[0], samples, count * per_block, settings.rounds, per_block, seconds)


def print_result(result: Result) -> None:
    print(f"\n{result.title}")
    print(
        f"  {result.rounds} rounds x {result.n} requests per arm, arms interleaved in turns "
        f"of {result.block} requests ({result.seconds:.0f} s)"
    )
    width = max(len(name) for name in result.per_request_ns) + 2
    print(f"  {'arm':<{width}}{'us/req':>9}{'overhead us':>13}{'IQR':>16}{'ratio':>8}{'IQR':>16}")
    for name in result.per_request_ns:
        median = result.median_us(name)
        if name == result.baseline:
            print(f"  {name:<{width}}{median:>9.2f}{'(baseline)':>13}")
            continue
        diffs, ratios = result.per_round(name)
        d_lo, d_hi = _quartiles(diffs)
        r_lo, r_hi = _quartiles(ratios)
        print(
            f"  {name:<{width}}{median:>9.2f}{result.overhead_us(name):>+13.2f}"
            f"{f'[{d_lo / 1000:+.2f},{d_hi / 1000:+.2f}]':>16}"
            f"{result.ratio(name):>8.3f}{f'[{r_lo:.3f},{r_hi:.3f}]':>16}"
        )


# -- arms --------------------------------------------------------------------------------


def _ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=b"ok")


def _direct_sync(handle: Callable[[httpx.Request], Any], request: httpx.Request) -> SyncRun:
    def run(n: int) -> int:
        start = perf_counter_ns()
        for _ in range(n):
            handle(request)
        return perf_counter_ns() - start

    return run


def _direct_async(
    handle: Callable[[httpx.Request], Awaitable[Any]], request: httpx.Request
) -> AsyncRun:
    async def run(n: int) -> int:
        start = perf_counter_ns()
        for _ in range(n):
            await handle(request)
        return perf_counter_ns() - start

    return run


def _get_sync(get: Callable[[str], Any], url: str) -> SyncRun:
    def run(n: int) -> int:
        start = perf_counter_ns()
        for _ in range(n):
            get(url)
        return perf_counter_ns() - start

    return run


def _get_async(get: Callable[[str], Awaitable[Any]], url: str) -> AsyncRun:
    async def run(n: int) -> int:
        start = perf_counter_ns()
        for _ in range(n):
            await get(url)
        return perf_counter_ns() - start

    return run


def _request() -> httpx.Request:
    # One request per arm, reused: the arms must not share one (httpx-retries stores its
    # Retry in request.extensions["retry"], which retry-transport reads as an override).
    return httpx.Request("GET", URL)


def mock_direct_sync_arms(peers: Peers) -> dict[str, SyncRun]:
    mock = httpx.MockTransport(_ok)
    arms: dict[str, SyncRun] = {
        "bare MockTransport": _direct_sync(mock.handle_request, _request()),
        "retry-transport": _direct_sync(rt.RetryTransport(mock).handle_request, _request()),
    }
    if peers.httpx_retries is not None:
        arms[peers.hr_label] = _direct_sync(peers.hr_transport(mock).handle_request, _request())
    if peers.tenacity is not None:
        decorated = peers.tn_decorator()(mock.handle_request)
        arms[f"{peers.tn_label} (around handle_request)"] = _direct_sync(decorated, _request())
    return arms


def mock_client_sync_arms(peers: Peers) -> tuple[dict[str, SyncRun], list[httpx.Client]]:
    mock = httpx.MockTransport(_ok)
    clients = [httpx.Client(transport=mock), httpx.Client(transport=rt.RetryTransport(mock))]
    arms: dict[str, SyncRun] = {
        "bare Client(MockTransport)": _get_sync(clients[0].get, URL),
        "retry-transport": _get_sync(clients[1].get, URL),
    }
    if peers.httpx_retries is not None:
        clients.append(httpx.Client(transport=peers.hr_transport(mock)))
        arms[peers.hr_label] = _get_sync(clients[-1].get, URL)
    if peers.tenacity is not None:
        clients.append(httpx.Client(transport=mock))
        decorated = peers.tn_decorator()(clients[-1].get)
        arms[f"{peers.tn_label} (around client.get)"] = _get_sync(decorated, URL)
    return arms, clients


def mock_direct_async_arms(peers: Peers) -> dict[str, AsyncRun]:
    mock = httpx.MockTransport(_ok)
    arms: dict[str, AsyncRun] = {
        "bare MockTransport": _direct_async(mock.handle_async_request, _request()),
        "retry-transport": _direct_async(
            rt.AsyncRetryTransport(mock).handle_async_request, _request()
        ),
    }
    if peers.httpx_retries is not None:
        hr = peers.hr_transport(mock)
        arms[peers.hr_label] = _direct_async(hr.handle_async_request, _request())
    if peers.tenacity is not None:
        decorated = peers.tn_decorator()(mock.handle_async_request)
        arms[f"{peers.tn_label} (around handle_async_request)"] = _direct_async(
            decorated, _request()
        )
    return arms


def mock_client_async_arms(
    peers: Peers,
) -> tuple[dict[str, AsyncRun], list[httpx.AsyncClient]]:
    mock = httpx.MockTransport(_ok)
    clients = [
        httpx.AsyncClient(transport=mock),
        httpx.AsyncClient(transport=rt.AsyncRetryTransport(mock)),
    ]
    arms: dict[str, AsyncRun] = {
        "bare AsyncClient(MockTransport)": _get_async(clients[0].get, URL),
        "retry-transport": _get_async(clients[1].get, URL),
    }
    if peers.httpx_retries is not None:
        clients.append(httpx.AsyncClient(transport=peers.hr_transport(mock)))
        arms[peers.hr_label] = _get_async(clients[-1].get, URL)
    if peers.tenacity is not None:
        clients.append(httpx.AsyncClient(transport=mock))
        decorated = peers.tn_decorator()(clients[-1].get)
        arms[f"{peers.tn_label} (around client.get)"] = _get_async(decorated, URL)
    return arms, clients


# -- the loopback server -----------------------------------------------------------------


def serve(max_requests: int, lifetime: float) -> None:
    """The child process: a keep-alive HTTP/1.1 server answering ``200 ok`` to everything.

    It prints its port, then serves until its stdin closes (the parent is done or died),
    ``max_requests`` requests were answered, or ``lifetime`` seconds passed. Requests are
    bodiless GETs, so a request ends at each blank line.
    """
    served = 0

    async def main() -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def stop() -> None:
            if not done.done():
                done.set_result(None)

        class Protocol(asyncio.Protocol):
            def __init__(self) -> None:
                self.transport: asyncio.Transport | None = None
                self.buffer = b""

            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                assert isinstance(transport, asyncio.Transport)
                self.transport = transport

            def data_received(self, data: bytes) -> None:
                nonlocal served
                buffer = self.buffer + data
                count = buffer.count(b"\r\n\r\n")
                if count and self.transport is not None:
                    self.transport.write(RESPONSE_BYTES * count)
                    buffer = buffer[buffer.rfind(b"\r\n\r\n") + 4 :]
                    served += count
                    if served >= max_requests:
                        stop()
                self.buffer = buffer

        server = await loop.create_server(Protocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        stdin = sys.stdin.buffer.fileno()

        def on_stdin() -> None:
            if not os.read(stdin, 4096):
                loop.remove_reader(stdin)
                stop()

        loop.add_reader(stdin, on_stdin)
        loop.call_later(lifetime, stop)
        await done
        server.close()

    asyncio.run(main())


class LoopbackServer:
    """The parent's handle on the child server process."""

    def __init__(self, max_requests: int, lifetime: float) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--serve",
                "--serve-max-requests",
                str(max_requests),
                "--server-lifetime",
                str(lifetime),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=30):
                self.stop()
                raise RuntimeError("the loopback server did not start within 30 s")
        line = self.process.stdout.readline()
        if not line.strip():
            self.stop()
            raise RuntimeError("the loopback server exited before printing its port")
        self.url = f"http://127.0.0.1:{int(line)}/items"

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()  # the server stops on EOF
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def loopback_sync_arms(peers: Peers, url: str) -> tuple[dict[str, SyncRun], list[httpx.Client]]:
    # Each arm has its own client, hence its own pool and keep-alive connection.
    bare = httpx.Client(transport=httpx.HTTPTransport())
    wrapped = httpx.Client(transport=rt.RetryTransport(httpx.HTTPTransport()))
    clients = [bare, wrapped]
    arms: dict[str, SyncRun] = {
        "bare Client(HTTPTransport)": _get_sync(bare.get, url),
        "retry-transport": _get_sync(wrapped.get, url),
    }
    if peers.httpx_retries is not None:
        clients.append(httpx.Client(transport=peers.hr_transport(httpx.HTTPTransport())))
        arms[peers.hr_label] = _get_sync(clients[-1].get, url)
    if peers.tenacity is not None:
        clients.append(httpx.Client(transport=httpx.HTTPTransport()))
        decorated = peers.tn_decorator()(clients[-1].get)
        arms[f"{peers.tn_label} (around client.get)"] = _get_sync(decorated, url)
    return arms, clients


def loopback_async_arms(
    peers: Peers, url: str
) -> tuple[dict[str, AsyncRun], list[httpx.AsyncClient]]:
    bare = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport())
    wrapped = httpx.AsyncClient(transport=rt.AsyncRetryTransport(httpx.AsyncHTTPTransport()))
    clients = [bare, wrapped]
    arms: dict[str, AsyncRun] = {
        "bare AsyncClient(AsyncHTTPTransport)": _get_async(bare.get, url),
        "retry-transport": _get_async(wrapped.get, url),
    }
    if peers.httpx_retries is not None:
        transport = peers.hr_transport(httpx.AsyncHTTPTransport())
        clients.append(httpx.AsyncClient(transport=transport))
        arms[peers.hr_label] = _get_async(clients[-1].get, url)
    if peers.tenacity is not None:
        clients.append(httpx.AsyncClient(transport=httpx.AsyncHTTPTransport()))
        decorated = peers.tn_decorator()(clients[-1].get)
        arms[f"{peers.tn_label} (around client.get)"] = _get_async(decorated, url)
    return arms, clients


# -- the retry path ----------------------------------------------------------------------


class Alternating:
    """A MockTransport handler answering 503, 200, 503, 200, ..."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        return httpx.Response(503 if self.calls % 2 else 200, content=b"ok")


def _no_sleep(seconds: float) -> None:
    return None


async def _no_sleep_async(seconds: float) -> None:
    return None


def _hr_no_sleep(peers: Peers) -> Any:
    """httpx-retries with its sleeps made no-ops (it would ``time.sleep(0)``)."""
    assert peers.httpx_retries is not None

    class NoSleepRetry(peers.httpx_retries.Retry):  # type: ignore[misc,name-defined]
        def sleep(self, response: object) -> None:
            return None

        async def asleep(self, response: object) -> None:
            return None

    return NoSleepRetry(total=2)


def retry_sync_arms(peers: Peers) -> dict[str, SyncRun]:
    bare = httpx.MockTransport(Alternating())
    wrapped = rt.RetryTransport(httpx.MockTransport(Alternating()), sleep=_no_sleep)

    def two_bare(n: int) -> int:
        handle, request = bare.handle_request, _request()
        start = perf_counter_ns()
        for _ in range(n):
            handle(request).close()  # the 503, closed as the retry transport closes it
            handle(request)
        return perf_counter_ns() - start

    arms: dict[str, SyncRun] = {
        "2 bare requests (503, 200)": two_bare,
        "retry-transport (1 retry)": _direct_sync(wrapped.handle_request, _request()),
    }
    if peers.httpx_retries is not None:
        hr = peers.httpx_retries.RetryTransport(
            transport=httpx.MockTransport(Alternating()), retry=_hr_no_sleep(peers)
        )
        arms[f"{peers.hr_label} (1 retry)"] = _direct_sync(hr.handle_request, _request())
    return arms


def retry_async_arms(peers: Peers) -> dict[str, AsyncRun]:
    bare = httpx.MockTransport(Alternating())
    wrapped = rt.AsyncRetryTransport(httpx.MockTransport(Alternating()), sleep=_no_sleep_async)

    async def two_bare(n: int) -> int:
        handle, request = bare.handle_async_request, _request()
        start = perf_counter_ns()
        for _ in range(n):
            await (await handle(request)).aclose()
            await handle(request)
        return perf_counter_ns() - start

    arms: dict[str, AsyncRun] = {
        "2 bare requests (503, 200)": two_bare,
        "retry-transport (1 retry)": _direct_async(wrapped.handle_async_request, _request()),
    }
    if peers.httpx_retries is not None:
        hr = peers.httpx_retries.RetryTransport(
            transport=httpx.MockTransport(Alternating()), retry=_hr_no_sleep(peers)
        )
        arms[f"{peers.hr_label} (1 retry)"] = _direct_async(hr.handle_async_request, _request())
    return arms


# -- memory ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Memory:
    requests: int
    peak_growth: int  # traced peak during the run minus the traced size before it
    retained: int  # traced size after the run (and a collection) minus before


def measure_memory(handle: Callable[[httpx.Request], httpx.Response], requests: int) -> Memory:
    url = httpx.URL(URL)  # parsed once: a fresh request per iteration, built cheaply

    def one() -> None:
        response = handle(httpx.Request("GET", url))
        response.close()

    for _ in range(1000):  # warm up outside the trace: caches, interned strings
        one()
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(1000):  # and inside it, so first-use allocations are not counted
            one()
        gc.collect()
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        for _ in range(requests):
            one()
        _, peak = tracemalloc.get_traced_memory()
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return Memory(requests, peak - before, after - before)


# -- profile -----------------------------------------------------------------------------


class _Canned(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """An inner transport returning one prepared response: only the layer is left to see."""

    def __init__(self) -> None:
        self.response = httpx.Response(200, content=b"ok")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.response


def profile(settings: Settings) -> None:
    """cProfile of the success path over an inner transport that does nothing.

    cProfile adds a fixed cost to every call, so it overstates small functions: read it as
    a map of where the calls are, and time changes side by side with the benchmark.
    """
    n = max(50_000, settings.requests * 10)
    transport = rt.RetryTransport(_Canned())
    handle, request = transport.handle_request, _request()
    for _ in range(1000):
        handle(request)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        handle(request)
    profiler.disable()
    _print_profile(f"sync: {n} x RetryTransport(<canned response>).handle_request", profiler, n)

    async_transport = rt.AsyncRetryTransport(_Canned())

    async def run() -> None:
        ahandle, arequest = async_transport.handle_async_request, _request()
        for _ in range(1000):
            await ahandle(arequest)
        profiler.enable()
        for _ in range(n):
            await ahandle(arequest)
        profiler.disable()

    profiler = cProfile.Profile()
    asyncio.run(run())
    _print_profile(f"asyncio: {n} x AsyncRetryTransport(<canned response>)", profiler, n)


def _print_profile(title: str, profiler: cProfile.Profile, n: int) -> None:
    stats = pstats.Stats(profiler)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in raw.values())
    rows = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)
    print(f"\n== cProfile, {title} ==")
    print(f"  total profiled time {total * 1e6 / n:.2f} us per request (cProfile-inflated)")
    print(f"  {'own us/req':>10} {'share':>6} {'calls/req':>9} {'cum us/req':>10}  function")
    for (filename, line, name), (_, calls, own, cumulative, _) in rows[:16]:
        where = f"{os.path.basename(filename)}:{line}" if line else filename
        print(
            f"  {own * 1e6 / n:>10.3f} {own / total:>6.1%} {calls / n:>9.2f} "
            f"{cumulative * 1e6 / n:>10.3f}  {name} ({where})"
        )


# -- the run -----------------------------------------------------------------------------


@dataclass
class Report:
    results: dict[str, Result] = field(default_factory=dict)
    memory: Memory | None = None
    bare_memory: Memory | None = None

    def add(self, key: str, result: Result) -> None:
        self.results[key] = result
        print_result(result)
        sys.stdout.flush()


def run_mock_sync(report: Report, settings: Settings, peers: Peers) -> None:
    report.add(
        "mock-direct-sync",
        measure_sync(
            "[1a] sync, MockTransport, transport.handle_request(request) called directly",
            mock_direct_sync_arms(peers),
            settings.requests,
            BLOCK_DIRECT,
            settings,
        ),
    )
    arms, clients = mock_client_sync_arms(peers)
    try:
        report.add(
            "mock-client-sync",
            measure_sync(
                "[1b] sync, MockTransport, through httpx.Client.get(url)",
                arms,
                settings.client_requests,
                BLOCK_CLIENT,
                settings,
            ),
        )
    finally:
        for client in clients:
            client.close()


async def _mock_async(report: Report, settings: Settings, peers: Peers, loop: str) -> None:
    report.add(
        f"mock-direct-{loop}",
        await measure_async(
            f"[1{'c' if loop == 'asyncio' else 'e'}] {loop}, MockTransport, "
            "await transport.handle_async_request(request) called directly",
            mock_direct_async_arms(peers),
            settings.requests,
            BLOCK_DIRECT,
            settings,
        ),
    )
    arms, clients = mock_client_async_arms(peers)
    try:
        report.add(
            f"mock-client-{loop}",
            await measure_async(
                f"[1{'d' if loop == 'asyncio' else 'f'}] {loop}, MockTransport, "
                "through httpx.AsyncClient.get(url)",
                arms,
                settings.client_requests,
                BLOCK_CLIENT,
                settings,
            ),
        )
    finally:
        for client in clients:
            await client.aclose()


async def _loopback_async(
    report: Report, settings: Settings, peers: Peers, url: str, loop: str
) -> None:
    arms, clients = loopback_async_arms(peers, url)
    try:
        report.add(
            f"loopback-{loop}",
            await measure_async(
                f"[2{'b' if loop == 'asyncio' else 'c'}] {loop}, loopback server, "
                "httpx.AsyncClient.get(url)",
                arms,
                settings.server_requests,
                BLOCK_SERVER,
                settings,
            ),
        )
    finally:
        for client in clients:
            await client.aclose()


def run_loopback(report: Report, settings: Settings, peers: Peers) -> None:
    arm_count = 2 + (peers.httpx_retries is not None) + (peers.tenacity is not None)
    loops = 2 + settings.trio
    per_arm = settings.server_requests * settings.rounds + settings.warmup(settings.server_requests)
    bound = 2 * per_arm * arm_count * loops + 1000
    with LoopbackServer(bound, settings.server_lifetime) as server:
        print(f"\n(loopback server: child process {server.process.pid}, {server.url})")
        arms, clients = loopback_sync_arms(peers, server.url)
        try:
            report.add(
                "loopback-sync",
                measure_sync(
                    "[2a] sync, loopback server, httpx.Client.get(url)",
                    arms,
                    settings.server_requests,
                    BLOCK_SERVER,
                    settings,
                ),
            )
        finally:
            for client in clients:
                client.close()
        asyncio.run(_loopback_async(report, settings, peers, server.url, "asyncio"))
        if settings.trio:
            trio = _optional("trio")
            if trio is None:
                print("\n(trio not installed: trio loopback section skipped)")
            else:
                trio.run(_loopback_async, report, settings, peers, server.url, "trio")


def run_retry(report: Report, settings: Settings, peers: Peers) -> None:
    report.add(
        "retry-sync",
        measure_sync(
            "[3a] sync, retry path: MockTransport answering 503 then 200, no-op sleep",
            retry_sync_arms(peers),
            settings.retry_requests,
            BLOCK_DIRECT,
            settings,
        ),
    )

    async def run_async() -> None:
        report.add(
            "retry-asyncio",
            await measure_async(
                "[3b] asyncio, retry path: MockTransport answering 503 then 200, no-op sleep",
                retry_async_arms(peers),
                settings.retry_requests,
                BLOCK_DIRECT,
                settings,
            ),
        )

    asyncio.run(run_async())


def _cooling_transport(origins: int, module: ModuleType = rt) -> tuple[Any, float]:
    """A transport whose table holds ``origins`` origins cooling down for an hour, each
    started by a real 503 with Retry-After; returns it and the seconds building it took."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host.startswith("cool-"):
            return httpx.Response(503, headers={"Retry-After": "3600"})
        return httpx.Response(200, content=b"ok")

    transport = module.RetryTransport(
        httpx.MockTransport(handler), max_attempts=1, max_retry_after=3600
    )
    start = time.perf_counter()
    for i in range(origins):
        transport.handle_request(httpx.Request("GET", f"https://cool-{i}.example.com/")).close()
    seconds = time.perf_counter() - start
    table = transport._controller.cooldowns  # a CooldownTable; a dict in older code
    assert len(getattr(table, "until", table)) == origins
    return transport, seconds / max(origins, 1)


def run_cooldowns(report: Report, settings: Settings) -> None:
    quiet, _ = _cooling_transport(0)  # the same handler and policy, nothing cooling
    cooling, seconds = _cooling_transport(COOLING_ORIGINS)
    print(
        f"\n(section 5: {COOLING_ORIGINS} cooling origins built in "
        f"{seconds * COOLING_ORIGINS * 1e3:.0f} ms, {seconds * 1e6:.1f} us per 503)"
    )
    report.add(
        "cooldown-table",
        measure_sync(
            f"[5] sync, a request to another origin while {COOLING_ORIGINS} origins cool down",
            {
                "nothing cooling": _direct_sync(quiet.handle_request, _request()),
                f"{COOLING_ORIGINS} cooling": _direct_sync(cooling.handle_request, _request()),
            },
            settings.requests,
            BLOCK_DIRECT,
            settings,
        ),
    )


def run_httpx2(report: Report, settings: Settings) -> None:
    """Section 6: the httpx2 flavour's success path over httpx2's own MockTransport."""
    httpx2 = _optional("httpx2")
    if httpx2 is None:
        print("\n(httpx2 not installed: section 6 skipped)")
        return
    import retry_transport.httpx2 as rt2

    def ok(request: Any) -> Any:
        return httpx2.Response(200, content=b"ok")

    mock = httpx2.MockTransport(ok)
    report.add(
        "httpx2-direct-sync",
        measure_sync(
            "[6a] sync, httpx2.MockTransport, transport.handle_request(request) called directly",
            {
                "bare httpx2 MockTransport": _direct_sync(
                    mock.handle_request, httpx2.Request("GET", URL)
                ),
                "retry-transport (httpx2)": _direct_sync(
                    rt2.RetryTransport(mock).handle_request, httpx2.Request("GET", URL)
                ),
            },
            settings.requests,
            BLOCK_DIRECT,
            settings,
        ),
    )

    async def run_async() -> None:
        report.add(
            "httpx2-direct-asyncio",
            await measure_async(
                "[6b] asyncio, httpx2.MockTransport, await transport.handle_async_request(request)",
                {
                    "bare httpx2 MockTransport": _direct_async(
                        mock.handle_async_request, httpx2.Request("GET", URL)
                    ),
                    "retry-transport (httpx2)": _direct_async(
                        rt2.AsyncRetryTransport(mock).handle_async_request,
                        httpx2.Request("GET", URL),
                    ),
                },
                settings.requests,
                BLOCK_DIRECT,
                settings,
            ),
        )

    asyncio.run(run_async())


def run_breaker(report: Report, settings: Settings) -> None:
    """Section 7: what a closed circuit breaker adds to the success path."""
    mock = httpx.MockTransport(_ok)
    report.add(
        "breaker-closed",
        measure_sync(
            "[7] sync, MockTransport, a closed CircuitBreaker on the success path",
            {
                "no breaker": _direct_sync(rt.RetryTransport(mock).handle_request, _request()),
                "closed breaker": _direct_sync(
                    rt.RetryTransport(mock, breaker=rt.CircuitBreaker()).handle_request,
                    _request(),
                ),
            },
            settings.requests,
            BLOCK_DIRECT,
            settings,
        ),
    )


def run_store(report: Report, settings: Settings) -> None:
    """Section 8: what sharing through a store adds to the success path (nothing travels on
    it: the transport checks its own table, and a breaker its own state)."""
    mock = httpx.MockTransport(_ok)
    store = rt.MemoryStore()
    report.add(
        "store",
        measure_sync(
            "[8] sync, MockTransport, a transport and a breaker sharing through a store",
            {
                "no store": _direct_sync(
                    rt.RetryTransport(mock, breaker=rt.CircuitBreaker()).handle_request,
                    _request(),
                ),
                "MemoryStore": _direct_sync(
                    rt.RetryTransport(
                        mock, store=store, breaker=rt.CircuitBreaker(store=store)
                    ).handle_request,
                    _request(),
                ),
            },
            settings.requests,
            BLOCK_DIRECT,
            settings,
        ),
    )


def run_memory(report: Report, settings: Settings) -> None:
    n = settings.memory_requests
    print(f"\n[4] memory: {n} successful requests, handle_request called directly")
    transport = rt.RetryTransport(httpx.MockTransport(_ok))
    report.memory = measure_memory(transport.handle_request, n)
    # The bare transport's figure is the footprint of one request in flight: a reference.
    report.bare_memory = measure_memory(httpx.MockTransport(_ok).handle_request, min(n, 20_000))
    for label, memory in (
        ("RetryTransport(MockTransport)", report.memory),
        ("bare MockTransport (reference)", report.bare_memory),
    ):
        print(
            f"  {label:<31} {memory.requests:>7} requests: peak growth "
            f"{memory.peak_growth / 1024:6.1f} KiB, retained after the run "
            f"{memory.retained / 1024:5.1f} KiB"
        )
    print(
        "  (tracemalloc: traced peak during the run minus the traced size just before it,"
        " after a warm-up and gc.collect(); GC enabled; a fresh request per iteration,"
        " each response closed and dropped)"
    )
    stats = transport.stats
    print(f"  transport stats after the run: requests={stats.requests} retries={stats.retries}")


def _check(label: str, ok: bool, detail: str) -> str:
    return f"  [{'PASS' if ok else 'FAIL'}] {label}: {detail}"


def _iqr_us(result: Result, arm: str) -> str:
    lo, hi = _quartiles(result.per_round(arm)[0])
    return f"IQR {lo / 1000:+.2f}..{hi / 1000:+.2f}"


def print_targets(report: Report, peers: Peers) -> None:
    """The verdicts: each compares arms measured side by side in this run."""
    print("\n== targets ==")
    lines: list[str] = []
    info: list[str] = []
    results = report.results
    hr = peers.hr_label if peers.httpx_retries is not None else None
    for loop, limit in (
        ("sync", TARGET_SYNC_US),
        ("asyncio", TARGET_ASYNC_US),
        ("trio", TARGET_ASYNC_US),
    ):
        direct = results.get(f"mock-direct-{loop}")
        if direct is not None:
            overhead = direct.overhead_us("retry-transport")
            lines.append(
                _check(
                    f"{loop}: success-path overhead over MockTransport <= {limit} us",
                    overhead <= limit,
                    f"{overhead:+.2f} us ({_iqr_us(direct, 'retry-transport')}), "
                    f"ratio {direct.ratio('retry-transport'):.3f}",
                )
            )
            if hr is not None and hr in direct.per_request_ns:
                peer = direct.overhead_us(hr)
                lines.append(
                    _check(
                        f"{loop}: success-path overhead below httpx-retries'",
                        overhead < peer,
                        f"{overhead:+.2f} us vs {peer:+.2f} us ({_iqr_us(direct, hr)})",
                    )
                )
        client = results.get(f"mock-client-{loop}")
        if client is not None:
            # A client request costs ~50x the layer: the pairing leaves a noise of several
            # microseconds, so these are shown, not judged.
            overhead = client.overhead_us("retry-transport")
            peer_text = ""
            if hr is not None and hr in client.per_request_ns:
                peer_text = f"; httpx-retries {client.overhead_us(hr):+.2f} us"
            info.append(
                f"  [info] {loop}: overhead through Client.get: {overhead:+.2f} us "
                f"({_iqr_us(client, 'retry-transport')}){peer_text}"
            )
    for loop in ("sync", "asyncio", "trio"):
        result = results.get(f"loopback-{loop}")
        if result is None:
            continue
        ratio = result.ratio("retry-transport")
        lo, hi = _quartiles(result.per_round("retry-transport")[1])
        noise = "; IQR spans 1.000: no difference resolved" if lo <= 1.0 <= hi else ""
        lines.append(
            _check(
                f"{loop}: loopback ratio <= {TARGET_LOOPBACK_RATIO}",
                ratio <= TARGET_LOOPBACK_RATIO,
                f"{ratio:.3f} (IQR {lo:.3f}..{hi:.3f}{noise}; "
                f"{result.overhead_us('retry-transport'):+.2f} us)",
            )
        )
    for loop in ("sync", "asyncio"):
        result = results.get(f"retry-{loop}")
        if result is None:
            continue
        arm = "retry-transport (1 retry)"
        cost = result.overhead_us(arm)
        lines.append(
            _check(
                f"{loop}: cost of one retry decision < {TARGET_RETRY_US} us (wait excluded)",
                cost < TARGET_RETRY_US,
                f"{cost:+.2f} us over two bare requests ({_iqr_us(result, arm)})",
            )
        )
        peer_arm = f"{hr} (1 retry)" if hr is not None else None
        if peer_arm is not None and peer_arm in result.per_request_ns:
            info.append(
                f"  [info] {loop}: retry decision, httpx-retries: "
                f"{result.overhead_us(peer_arm):+.2f} us"
            )
    if report.memory is not None:
        growth = report.memory.peak_growth
        lines.append(
            _check(
                f"memory: {report.memory.requests} requests grow the traced peak by < 1 MiB",
                growth < TARGET_MEMORY_BYTES,
                f"{growth / 1024:.1f} KiB (retained {report.memory.retained / 1024:.1f} KiB)",
            )
        )
    for loop, limit in (("sync", TARGET_SYNC_US), ("asyncio", TARGET_ASYNC_US)):
        direct = results.get(f"httpx2-direct-{loop}")
        if direct is not None:
            arm = "retry-transport (httpx2)"
            overhead = direct.overhead_us(arm)
            lines.append(
                _check(
                    f"httpx2 {loop}: success-path overhead over MockTransport <= {limit} us",
                    overhead <= limit,
                    f"{overhead:+.2f} us ({_iqr_us(direct, arm)}), ratio {direct.ratio(arm):.3f}",
                )
            )
    closed = results.get("breaker-closed")
    if closed is not None:
        overhead = closed.overhead_us("closed breaker")
        lines.append(
            _check(
                f"breaker: a closed CircuitBreaker adds <= {TARGET_BREAKER_US} us to a success",
                overhead <= TARGET_BREAKER_US,
                f"{overhead:+.2f} us ({_iqr_us(closed, 'closed breaker')})",
            )
        )
    cooling = results.get("cooldown-table")
    if cooling is not None:
        arm = f"{COOLING_ORIGINS} cooling"
        overhead = cooling.overhead_us(arm)
        lines.append(
            _check(
                f"cooldowns: {COOLING_ORIGINS} cooling origins add <= {TARGET_COOLDOWN_US} us "
                "to a request elsewhere",
                overhead <= TARGET_COOLDOWN_US,
                f"{overhead:+.2f} us ({_iqr_us(cooling, arm)})",
            )
        )
    print("\n".join(lines + info))



# -- old code against new (--against REF) ------------------------------------------------

#: The goals of ``--against``: each is a ratio measured side by side in one run.
GOAL_DEFAULTS = 0.8  # sync success, defaults: overhead over httpx-retries'
GOAL_BREAKER = 1.0  # ... with CircuitBreaker() and a MemoryStore
GOAL_RETRY = 1.2  # one retry decided, over httpx-retries' cost of the same retry
GOAL_ASYNC = 1.25  # asyncio and trio overhead over the sync overhead
GOAL_HTTPX2 = 1.1  # httpx2 flavour's overhead over the httpx flavour's
GOAL_COOLING_US = 0.3  # what 10,000 cooling origins add to a request to another origin
GOAL_SEEN = 1.10  # a success after 100,000 distinct origins over one after 100
SEEN_ORIGINS = 100_000


@dataclass
class Goal:
    label: str
    figure: str
    ok: bool | None  # None: not measured (a peer or a flavour missing)


def _load_ref(ref: str) -> ModuleType:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from against import load  # the ref's package, importable beside the working tree's

    return load(ref)


def _arms_by_module(modules: dict[str, ModuleType], build: Callable[[ModuleType], SyncRun]
                    ) -> dict[str, SyncRun]:
    return {label: build(module) for label, module in modules.items()}


def _seen(module: ModuleType, origins: int, **options: Any) -> Any:
    """A transport that has served one success to each of ``origins`` distinct origins."""
    transport = module.RetryTransport(httpx.MockTransport(_ok), **options)
    for i in range(origins):
        transport.handle_request(httpx.Request("GET", f"https://o{i}.example.com/"))
    return transport


def _median_diff(result: Result, arm: str, base: str) -> float:
    """Median over the rounds of ``arm`` minus ``base``, in us."""
    values, bases = result.per_request_ns[arm], result.per_request_ns[base]
    return statistics.median(v - b for v, b in zip(values, bases, strict=True)) / 1000.0


def _median_ratio(result: Result, arm: str, base: str, baseline: str | None = None) -> float:
    """Median over the rounds of (arm - baseline) / (base - baseline); without a baseline,
    of arm / base."""
    values, bases = result.per_request_ns[arm], result.per_request_ns[base]
    if baseline is None:
        return statistics.median(v / b for v, b in zip(values, bases, strict=True))
    zero = result.per_request_ns[baseline]
    return statistics.median(
        (v - z) / (b - z) for v, b, z in zip(values, bases, zero, strict=True) if b > z
    )


def run_against(ref: str, settings: Settings, peers: Peers) -> list[Goal]:
    """Every goal's arms for the code of ``ref`` and the working tree, in one process."""
    old = _load_ref(ref)
    modules = {ref: old, "working tree": rt}
    new, label = "working tree", ref
    hr = peers.httpx_retries
    goals: list[Goal] = []
    n, block = settings.requests, BLOCK_DIRECT

    def success(options: Callable[[ModuleType], dict[str, Any]]) -> dict[str, SyncRun]:
        mock = httpx.MockTransport(_ok)
        arms: dict[str, SyncRun] = {"bare MockTransport": _direct_sync(mock.handle_request,
                                                                       _request())}
        if hr is not None:
            arms[peers.hr_label] = _direct_sync(peers.hr_transport(mock).handle_request,
                                                _request())
        arms.update(_arms_by_module(modules, lambda m: _direct_sync(
            m.RetryTransport(mock, **options(m)).handle_request, _request())))
        return arms

    def versus_hr(result: Result, goal: float, what: str) -> None:
        if hr is None:
            goals.append(Goal(what, "httpx-retries not installed", None))
            return
        mine = _median_ratio(result, new, peers.hr_label, result.baseline)
        theirs = _median_ratio(result, label, peers.hr_label, result.baseline)
        goals.append(Goal(what, f"{mine:.2f}x httpx-retries' (goal <= {goal}x; {ref}: "
                                f"{theirs:.2f}x)", mine <= goal))

    defaults = measure_sync("[A1] sync success, defaults", success(lambda m: {}), n, block,
                            settings)
    print_result(defaults)
    versus_hr(defaults, GOAL_DEFAULTS, "sync success, defaults")

    def breaker(m: ModuleType) -> dict[str, Any]:
        store = m.MemoryStore()
        return {"store": store, "breaker": m.CircuitBreaker(store=store)}

    guarded = measure_sync("[A2] sync success, CircuitBreaker() and a MemoryStore",
                           success(breaker), n, block, settings)
    print_result(guarded)
    versus_hr(guarded, GOAL_BREAKER, "sync success, CircuitBreaker() + MemoryStore()")

    retry_arms = retry_sync_arms(peers)
    base_retry = next(iter(retry_arms))
    retry_arms = {base_retry: retry_arms[base_retry]}
    if hr is not None:
        retry_arms[peers.hr_label] = _direct_sync(peers.httpx_retries.RetryTransport(
            transport=httpx.MockTransport(Alternating()), retry=_hr_no_sleep(peers)
        ).handle_request, _request())
    retry_arms.update(_arms_by_module(modules, lambda m: _direct_sync(m.RetryTransport(
        httpx.MockTransport(Alternating()), sleep=_no_sleep, budget=None, cooldown=False
    ).handle_request, _request())))
    retried = measure_sync("[A3] one retry decided (503 then 200, waits not slept, no budget,"
                           " no cooldowns)", retry_arms, settings.retry_requests, block,
                           settings)
    print_result(retried)
    versus_hr(retried, GOAL_RETRY, "one retry decided")

    sync_overhead = {arm: _median_diff(defaults, arm, defaults.baseline) for arm in modules}

    async def async_section(loop: str) -> Result:
        mock = httpx.MockTransport(_ok)
        arms: dict[str, AsyncRun] = {
            "bare MockTransport": _direct_async(mock.handle_async_request, _request())}
        for arm, module in modules.items():
            arms[arm] = _direct_async(module.AsyncRetryTransport(mock).handle_async_request,
                                      _request())
        return await measure_async(f"[A4] {loop} success, defaults", arms, n, block, settings)

    loops: list[tuple[str, Callable[[], Result]]] = [
        ("asyncio", lambda: asyncio.run(async_section("asyncio")))]
    trio = _optional("trio") if settings.trio else None
    if trio is not None:
        loops.append(("trio", lambda: trio.run(async_section, "trio")))
    for loop, run in loops:
        result = run()
        print_result(result)
        mine = _median_diff(result, new, result.baseline) / sync_overhead[new]
        theirs = _median_diff(result, label, result.baseline) / sync_overhead[label]
        goals.append(Goal(f"{loop} success", f"{mine:.2f}x the sync overhead (goal <= "
                          f"{GOAL_ASYNC}x; {ref}: {theirs:.2f}x)", mine <= GOAL_ASYNC))

    httpx2 = _optional("httpx2")
    if httpx2 is None:
        goals.append(Goal("httpx2 flavour", "httpx2 not installed", None))
    else:
        def ok2(request: Any) -> Any:
            return httpx2.Response(200, content=b"ok")

        mock2 = httpx2.MockTransport(ok2)
        arms2: dict[str, SyncRun] = {
            "bare httpx2 MockTransport": _direct_sync(mock2.handle_request,
                                                      httpx2.Request("GET", URL))}
        for arm, module in modules.items():
            flavour = importlib.import_module(f"{module.__name__}.httpx2")
            arms2[arm] = _direct_sync(flavour.RetryTransport(mock2).handle_request,
                                      httpx2.Request("GET", URL))
        result = measure_sync("[A5] httpx2 flavour, sync success, defaults", arms2, n, block,
                              settings)
        print_result(result)
        mine = _median_diff(result, new, result.baseline) / sync_overhead[new]
        theirs = _median_diff(result, label, result.baseline) / sync_overhead[label]
        goals.append(Goal("httpx2 flavour", f"{mine:.2f}x the httpx flavour's overhead (goal "
                          f"<= {GOAL_HTTPX2}x; {ref}: {theirs:.2f}x)", mine <= GOAL_HTTPX2))

    cooling_arms: dict[str, SyncRun] = {}
    for arm, module in modules.items():
        quiet, _ = _cooling_transport(0, module)  # the same handler and policy, nothing cooling
        cooling, _ = _cooling_transport(COOLING_ORIGINS, module)
        cooling_arms[f"{arm}, nothing cooling"] = _direct_sync(quiet.handle_request, _request())
        cooling_arms[f"{arm}, {COOLING_ORIGINS:,} cooling"] = _direct_sync(
            cooling.handle_request, _request())
    result = measure_sync(f"[A6] sync success to another origin while {COOLING_ORIGINS:,} "
                          "origins cool down", cooling_arms, n, block, settings)
    print_result(result)
    added = {arm: _median_diff(result, f"{arm}, {COOLING_ORIGINS:,} cooling",
                               f"{arm}, nothing cooling") for arm in modules}
    goals.append(Goal(f"{COOLING_ORIGINS:,} cooling origins",
                      f"{added[new]:+.2f} us (goal <= +{GOAL_COOLING_US} us; {ref}: "
                      f"{added[label]:+.2f} us)", added[new] <= GOAL_COOLING_US))

    for title, options in (("defaults", lambda m: {}),
                           ("CircuitBreaker()", lambda m: {"breaker": m.CircuitBreaker()})):
        seen_arms: dict[str, SyncRun] = {}
        for arm, module in modules.items():
            for count in (100, SEEN_ORIGINS):
                transport = _seen(module, count, **options(module))
                request = httpx.Request("GET", "https://o0.example.com/")
                seen_arms[f"{arm}, {count:,} seen"] = _direct_sync(transport.handle_request,
                                                                   request)
        result = measure_sync(f"[A7] sync success after serving {SEEN_ORIGINS:,} distinct "
                              f"origins, against 100; {title}", seen_arms, n, block, settings)
        print_result(result)
        ratio = {arm: _median_ratio(result, f"{arm}, {SEEN_ORIGINS:,} seen", f"{arm}, 100 seen")
                 for arm in modules}
        goals.append(Goal(f"{SEEN_ORIGINS:,} origins seen, {title}",
                          f"{ratio[new]:.3f}x the cost after 100 (goal <= {GOAL_SEEN}x; "
                          f"{ref}: {ratio[label]:.3f}x)", ratio[new] <= GOAL_SEEN))
    return goals


def print_goals(goals: list[Goal]) -> None:
    print("\n== goals (ratios measured side by side in this run) ==")
    for goal in goals:
        verdict = "n/a " if goal.ok is None else "PASS" if goal.ok else "FAIL"
        print(f"  [{verdict}] {goal.label}: {goal.figure}")


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    args, settings = parse_args(argv)
    if args.serve:
        serve(args.serve_max_requests or 1_000_000, settings.server_lifetime)
        return 0
    if args.profile:
        profile(settings)
        return 0
    started = time.monotonic()
    peers = Peers.load(settings.peers)
    print(
        f"retry-transport {rt.__version__}, httpx {httpx.__version__}, "
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPUs, {platform.machine()}, load average {_load()}"
    )
    print(
        "Times are medians over rounds; 'overhead' and 'ratio' are medians of the per-round "
        "differences and ratios against the round's baseline arm; IQR = their interquartile "
        "range. GC is disabled inside each timed loop."
    )
    for note in peers.notes:
        print(f"note: {note}")
    if args.against:
        print_goals(run_against(args.against, settings, peers))
        print(f"\n(total {time.monotonic() - started:.0f} s; load average now {_load()})")
        return 0
    report = Report()
    run_mock_sync(report, settings, peers)
    asyncio.run(_mock_async(report, settings, peers, "asyncio"))
    if settings.trio:
        trio = _optional("trio")
        if trio is None:
            print("\n(trio not installed: trio sections skipped)")
            settings = Settings(**{**settings.__dict__, "trio": False})
        else:
            trio.run(_mock_async, report, settings, peers, "trio")
    if settings.server:
        run_loopback(report, settings, peers)
    run_retry(report, settings, peers)
    run_cooldowns(report, settings)
    run_httpx2(report, settings)
    run_breaker(report, settings)
    run_store(report, settings)
    run_memory(report, settings)
    print_targets(report, peers)
    print(f"\n(total {time.monotonic() - started:.0f} s; load average now {_load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
