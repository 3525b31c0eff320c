"""What does retry-transport cost against a real socket, and what does it keep in memory?

Run it from the repository root::

    python benchmarks/overhead.py            # default settings, about a minute
    python benchmarks/overhead.py --quick    # a smoke run, about 10 seconds

The layer's own cost on the success and retry paths (over ``httpx.MockTransport``, sync and
async, with a breaker, a throttle or hedging, and old code against new) is counted in
instructions by ``benchmarks/instructions.py``, exact where wall-clock figures of a 1 us
layer swing with the load of a shared machine. This script keeps what instruction counts
cannot show: the layer beside a real socket, and its memory over many requests.

Everything is measured in one process, arm against arm, interleaved over several rounds:
in each round every arm (the bare transport, retry-transport, and the peers a user would
pick instead) runs the same number of requests, in an order that rotates from round to
round. The overhead of an arm is computed pair by pair *within* a round (arm minus bare,
arm over bare), and the table shows the median over the rounds of those differences and
ratios, with their interquartile range. On a shared, noisy machine only such side-by-side
figures mean anything: never compare absolute microseconds across runs.

Sections:

1. Loopback: ``httpx.Client.get`` against a tiny keep-alive HTTP/1.1 server on 127.0.0.1
   that this script starts in a child process (so it does not share the GIL with the
   client) and that stops by itself: when this script closes its stdin, after serving a
   bounded number of requests, or after ``--server-lifetime`` seconds. Sync (1a), asyncio
   (1b) and trio (1c).
2. Memory: 100,000 successful requests through one ``RetryTransport`` must not grow the
   traced peak by 1 MiB or more (``tracemalloc``: peak during the run minus the traced
   size just before it, after a warm-up and a full collection).

The garbage collector is disabled inside each timed loop (and a full collection runs
before it, untimed): a collection landing in one arm and not the other is a large part of
the noise at this scale. The memory section leaves the collector on, as in real use.

Peers (optional, imported lazily, skipped with a note when missing):
``httpx-retries`` (its ``RetryTransport`` wrapping the same inner transport, ``Retry(total=2)``
i.e. 3 attempts) and ``tenacity`` (a ``tenacity.retry`` decorator, 3 attempts, retry on
``httpx.TransportError``, exponential full-jitter wait) around ``client.get``. Install them
with ``pip install httpx-retries tenacity``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import importlib.metadata
import os
import platform
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
TARGET_LOOPBACK_RATIO = 1.02
TARGET_MEMORY_BYTES = 1024 * 1024

# Requests per arm per turn within a round (a few milliseconds each).
BLOCK_SERVER = 20

URL = "http://127.0.0.1:8000/items"
RESPONSE_BYTES = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


# -- settings ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    rounds: int
    server_requests: int  # per arm per round, loopback
    memory_requests: int
    trio: bool
    server: bool
    peers: bool
    server_lifetime: float

    def warmup(self, n: int) -> int:
        return max(50, n // 5)


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    parser = argparse.ArgumentParser(
        description="Retry-transport against a bare transport and peers on a loopback server, "
        "and its memory over many requests. The success and retry paths' own cost is "
        "counted in instructions by benchmarks/instructions.py."
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds per section (15)")
    parser.add_argument(
        "--server-requests",
        type=int,
        default=None,
        help="loopback requests per arm per round (400)",
    )
    parser.add_argument(
        "--memory-requests", type=int, default=None, help="requests for the memory check (100000)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: few rounds, few requests"
    )
    parser.add_argument("--no-trio", action="store_true", help="skip the trio loopback section")
    parser.add_argument("--no-server", action="store_true", help="skip the loopback sections")
    parser.add_argument("--no-peers", action="store_true", help="skip httpx-retries and tenacity")
    parser.add_argument(
        "--server-lifetime",
        type=float,
        default=600.0,
        help="the loopback server exits after this many seconds whatever happens (600)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-max-requests", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rounds = args.rounds if args.rounds is not None else (5 if args.quick else 15)
    server_requests = args.server_requests
    if server_requests is None:
        server_requests = 100 if args.quick else 400
    memory = args.memory_requests if args.memory_requests is not None else 100_000
    if args.quick and args.memory_requests is None:
        memory = 20_000
    for name, value in (
        ("--rounds", rounds),
        ("--server-requests", server_requests),
        ("--memory-requests", memory),
    ):
        if value < 1:
            parser.error(f"{name} must be >= 1")
    settings = Settings(
        rounds=rounds,
        server_requests=server_requests,
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


async def _loopback_async(
    report: Report, settings: Settings, peers: Peers, url: str, loop: str
) -> None:
    arms, clients = loopback_async_arms(peers, url)
    try:
        report.add(
            f"loopback-{loop}",
            await measure_async(
                f"[1{'b' if loop == 'asyncio' else 'c'}] {loop}, loopback server, "
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
    """Section 1: Client.get against the loopback server, sync, asyncio and trio."""
    trio = _optional("trio") if settings.trio else None
    if settings.trio and trio is None:
        print("\n(trio not installed: section 1c skipped)")
    arm_count = 2 + (peers.httpx_retries is not None) + (peers.tenacity is not None)
    loops = 2 + (trio is not None)
    per_arm = settings.server_requests * settings.rounds + settings.warmup(settings.server_requests)
    bound = 2 * per_arm * arm_count * loops + 1000
    with LoopbackServer(bound, settings.server_lifetime) as server:
        print(f"\n(loopback server: child process {server.process.pid}, {server.url})")
        arms, clients = loopback_sync_arms(peers, server.url)
        try:
            report.add(
                "loopback-sync",
                measure_sync(
                    "[1a] sync, loopback server, httpx.Client.get(url)",
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
        if trio is not None:
            trio.run(_loopback_async, report, settings, peers, server.url, "trio")


def run_memory(report: Report, settings: Settings) -> None:
    """Section 2: what many successful requests through one transport grow and retain."""
    n = settings.memory_requests
    print(f"\n[2] memory: {n} successful requests, handle_request called directly")
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


def print_targets(report: Report) -> None:
    """The verdicts: each compares arms measured side by side in this run."""
    print("\n== targets ==")
    lines: list[str] = []
    for section, loop in (("1a", "sync"), ("1b", "asyncio"), ("1c", "trio")):
        result = report.results.get(f"loopback-{loop}")
        if result is None:
            continue
        ratio = result.ratio("retry-transport")
        lo, hi = _quartiles(result.per_round("retry-transport")[1])
        noise = "; IQR spans 1.000: no difference resolved" if lo <= 1.0 <= hi else ""
        lines.append(
            _check(
                f"{loop}: loopback ratio <= {TARGET_LOOPBACK_RATIO} ({section})",
                ratio <= TARGET_LOOPBACK_RATIO,
                f"{ratio:.3f} (IQR {lo:.3f}..{hi:.3f}{noise}; "
                f"{result.overhead_us('retry-transport'):+.2f} us)",
            )
        )
    if report.memory is not None:
        growth = report.memory.peak_growth
        lines.append(
            _check(
                f"memory: {report.memory.requests} requests grow the traced peak by < 1 MiB (2)",
                growth < TARGET_MEMORY_BYTES,
                f"{growth / 1024:.1f} KiB (retained {report.memory.retained / 1024:.1f} KiB)",
            )
        )
    print("\n".join(lines))


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
        "range. GC is disabled inside each timed loop. The success and retry paths' own cost "
        "is counted in instructions by benchmarks/instructions.py."
    )
    for note in peers.notes:
        print(f"note: {note}")
    report = Report()
    if settings.server:
        run_loopback(report, settings, peers)
    else:
        print("\n(--no-server: section 1 skipped)")
    run_memory(report, settings)
    print_targets(report)
    print(f"\n(total {time.monotonic() - started:.0f} s; load average now {_load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
