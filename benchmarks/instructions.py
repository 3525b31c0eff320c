"""The transport layer's cost in instructions, not seconds: each arm's requests counted by
valgrind's callgrind, exact and repeatable where wall-clock figures of a 1 us layer swing
with the load of a shared machine::

    apt-get install valgrind                  # Debian/Ubuntu: valgrind and callgrind.h
    python benchmarks/instructions.py         # every arm: about 2 minutes on 2 cores
    python benchmarks/instructions.py --against HEAD~3   # and a git ref's: 2 to 3 minutes
    python benchmarks/instructions.py --arms defaults,retry --requests 1024 --json out.json

Without valgrind it prints ``valgrind not found: skipped`` and exits 0; so it does without a
C compiler (``cc``) or ``<valgrind/callgrind.h>`` (Debian's valgrind package ships it).

How it counts: the working tree's ``src/`` is copied at the start (edits made meanwhile do not
reach the run) and a ref's is extracted with ``git archive``, both into a temporary folder.
Each tree is counted in one Python process of its own (two run at once), run by ``valgrind
--tool=callgrind --instr-atstart=no`` with ``PYTHONPATH=<copy>/src`` and
``PYTHONHASHSEED=0``. A small C library, compiled at run time from ``C_SOURCE`` below and
called through ``ctypes``, issues callgrind's client requests: once the packages are
imported (uninstrumented, so quickly), ``rt_begin()`` turns instrumentation on for good and
stops the main thread's collection; ``rt_start()`` zeroes every thread's counts (a dump
labelled ``-``) and resumes it; ``rt_stop(label)`` stops it and dumps the counts under
``label``. Other threads always collect: a hedged try's worker is counted in the window it
works in. (Instrumentation is not turned on and off per window: that throws valgrind's
translations away, and the first request after it would outlast a 50 ms hedging delay.)

The arms that do not run retry-transport (the baselines, httpx-retries, the floor) go first,
before the package is imported, so their counts do not depend on the tree's code; the hedged
arms go last. Each arm builds its transport once and makes ``--warmup`` requests, the
collector off from then on. Then come a window that is not kept (the code around a window
runs once before it counts) and, ``--splits`` times (32), a window of 0 requests and one of
the next share of ``--requests``, the heap moved a little before each pair (a few more
blocks of every small size kept): whether a request fills or empties one of pymalloc's pools
depends on where it finds them, and costs up to a few hundred instructions, so the figure
sums 32 such states rather than hitting one. A sync window ends with a 5 ms sleep (another
thread finishes what the last request left it), an async one by letting the event loop run
four times: the same in every window, so they cancel out. An arm's figure is the
instructions of its windows of requests minus those of its windows of 0, over the requests;
its overhead, that figure minus its baseline's in the same process.

Repeatability, as measured on a shared 2-core machine (runs of the same code): the arms that
go first count the same to the instruction in every run, whichever tree is counted.
Retry-transport's other arms moved by up to about 50 instructions per request between two
runs (the one-retry arm once by about 230), sync hedging by up to about 100, async hedging
by up to about 1,400 (of 533,000). The package reads the clock (latency windows, the
breaker's buckets, timers), and under valgrind the clock runs some 50 times faster against
the code, by an amount that depends on the load. A difference between trees smaller than
that is not resolved; ``--layouts K`` counts each tree in K processes whose heaps are laid
out differently and prints the medians with their range. An arm whose windows made other
than the expected attempts is flagged with a warning (on a loaded machine a request can be
held past the 50 ms hedging delay, and a hedge sent).

The arms (``--arms`` takes their names; baselines are added when missing) are sync
``handle_request`` calls on the transport itself, a prebuilt ``httpx.Request``, the response
closed, over ``httpx.MockTransport`` answering 200 unless said:

- ``bare``: the MockTransport alone (the baseline of the sync success arms);
- ``httpx-retries``: httpx-retries' ``RetryTransport``, ``Retry(total=2)`` (3 attempts);
- ``defaults``: ``RetryTransport(mock)``;
- ``breaker``: with ``CircuitBreaker(store=store)`` and ``store=MemoryStore()``;
- ``throttle``: with ``AdaptiveThrottle()``;
- ``hedging``: with ``Hedging(0.05)``, no hedge sent (the mock answers at once);
- ``floor``: the least any retry layer must do, a transport of this script's own: it calls
  the inner transport, looks the status up in a set and attaches a shared metadata object
  to ``response.extensions``;
- ``async-bare``, ``async-defaults``, ``async-breaker``, ``async-throttle``,
  ``async-hedging``: ``handle_async_request`` on an async MockTransport and an
  ``AsyncRetryTransport`` over it (as the sync arms of the same names), awaited in a loop
  under ``asyncio.run``; ``async-bare`` is their baseline;
- ``retry-bare``, ``retry``, ``retry-nobudget``, ``httpx-retries-retry``: one retry
  decided. The mock answers 503 and 200 alternately, so a request makes two attempts; the
  baseline is two bare requests (the 503 closed). ``RetryTransport(mock, sleep=...)``, its
  defaults otherwise (``budget=None`` too for ``retry-nobudget``), waits through a function
  that returns at once; httpx-retries (``total=2``) through a ``Retry`` subclass whose
  ``sleep`` returns at once (it would call ``time.sleep(0)``);
- ``async-retry-bare``, ``async-retry``, ``async-retry-nobudget``: the same on the async
  transport, waiting through an async function that returns at once.

The ratio column is an arm's overhead over httpx-retries' overhead: success arms (sync and
async) against its sync success arm, the retry arm against its retry arm.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import importlib.metadata
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import types
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

ROOT = Path(__file__).resolve().parent.parent
REQUESTS = 4096
WARMUP = 512
SPLITS = 32

C_SOURCE = r"""
#include <valgrind/callgrind.h>

int rt_running(void) { return RUNNING_ON_VALGRIND; }

/* Instrument from now on; the calling (main) thread stops collecting until rt_start. */
void rt_begin(void) {
    CALLGRIND_START_INSTRUMENTATION;
    CALLGRIND_TOGGLE_COLLECT;
}

/* A dump zeroes every thread's counts (what other threads did since the last window goes
   to a dump labelled "-"); then the main thread collects again. */
void rt_start(void) {
    CALLGRIND_DUMP_STATS_AT("-");
    CALLGRIND_TOGGLE_COLLECT;
}

void rt_stop(const char *label) {
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(label);
}
"""


@dataclass(frozen=True)
class ArmSpec:
    name: str
    label: str
    baseline: str | None  # None: the arm is a baseline
    peer: str | None  # the httpx-retries arm its ratio is against

    @property
    def ours(self) -> bool:
        """Whether the arm runs retry-transport's code (the others run first)."""
        return self.name not in PURE


ARMS: tuple[ArmSpec, ...] = (
    ArmSpec("bare", "bare MockTransport", None, None),
    ArmSpec("httpx-retries", "httpx-retries, success", "bare", None),
    ArmSpec("defaults", "RetryTransport(), success", "bare", "httpx-retries"),
    ArmSpec("breaker", "CircuitBreaker() + MemoryStore(), success", "bare", "httpx-retries"),
    ArmSpec("throttle", "AdaptiveThrottle(), success", "bare", "httpx-retries"),
    ArmSpec("hedging", "Hedging(0.05), success, no hedge", "bare", "httpx-retries"),
    ArmSpec("floor", "floor: call, status in a set, extensions", "bare", "httpx-retries"),
    ArmSpec("async-bare", "async: bare MockTransport", None, None),
    ArmSpec("async-defaults", "async: AsyncRetryTransport(), success", "async-bare",
            "httpx-retries"),
    ArmSpec("async-hedging", "async: Hedging(0.05), success, no hedge", "async-bare",
            "httpx-retries"),
    ArmSpec("retry-bare", "two bare requests (503, 200)", None, None),
    ArmSpec("httpx-retries-retry", "httpx-retries, one retry", "retry-bare", None),
    ArmSpec("retry", "RetryTransport(), one retry", "retry-bare", "httpx-retries-retry"),
    ArmSpec("retry-nobudget", "RetryTransport(budget=None), one retry", "retry-bare",
            "httpx-retries-retry"),
    ArmSpec("async-breaker", "async: CircuitBreaker() + MemoryStore(), success", "async-bare",
            "httpx-retries"),
    ArmSpec("async-throttle", "async: AdaptiveThrottle(), success", "async-bare",
            "httpx-retries"),
    ArmSpec("async-retry-bare", "async: two bare requests (503, 200)", None, None),
    ArmSpec("async-retry", "async: AsyncRetryTransport(), one retry", "async-retry-bare",
            "httpx-retries-retry"),
    ArmSpec("async-retry-nobudget", "async: AsyncRetryTransport(budget=None), one retry",
            "async-retry-bare", "httpx-retries-retry"),
)
SPECS = {spec.name: spec for spec in ARMS}
PURE = frozenset({"bare", "httpx-retries", "floor", "async-bare", "retry-bare",
                  "httpx-retries-retry", "async-retry-bare"})


# -- the child: runs under callgrind, one process per tree ------------------------------------

F = TypeVar("F", bound=Callable[..., Any])


def _fresh(function: F) -> F:
    """A copy of ``function`` with a code object of its own, so that the interpreter's
    specialisation of its call sites starts afresh for each arm."""
    copy = types.FunctionType(function.__code__.replace(), function.__globals__,
                              function.__name__, function.__defaults__, function.__closure__)
    return cast(F, copy)


def _loop(handle: Callable[[Any], Any], request: Any, n: int) -> None:
    for _ in range(n):
        handle(request).close()


def _pair_loop(handle: Callable[[Any], Any], request: Any, n: int) -> None:
    for _ in range(n):
        handle(request).close()  # the 503, closed as a retry layer closes it
        handle(request).close()


async def _async_loop(handle: Callable[[Any], Awaitable[Any]], request: Any, n: int) -> None:
    for _ in range(n):
        await (await handle(request)).aclose()


async def _async_pair_loop(handle: Callable[[Any], Awaitable[Any]], request: Any,
                           n: int) -> None:
    for _ in range(n):
        await (await handle(request)).aclose()  # the 503, closed as a retry layer closes it
        await (await handle(request)).aclose()


def _no_sleep(seconds: float) -> None:
    return None


async def _async_no_sleep(seconds: float) -> None:
    return None


class Handler:
    """The MockTransport's handler: 200, or 503 and 200 alternately; counts its calls."""

    def __init__(self, alternate: bool = False) -> None:
        import httpx

        self.calls = 0
        self.alternate = alternate
        self.response = httpx.Response

    def __call__(self, request: Any) -> Any:
        self.calls += 1
        return self.response(503 if self.alternate and self.calls % 2 else 200)


class AsyncHandler(Handler):
    """The async MockTransport's handler: 200, or 503 and 200 alternately; counts its
    calls."""

    async def __call__(self, request: Any) -> Any:  # type: ignore[override]
        self.calls += 1
        return self.response(503 if self.alternate and self.calls % 2 else 200)


@dataclass(frozen=True)
class FloorInfo:
    attempts: int = 1


FLOOR_INFO = FloorInfo()
RETRYABLE = frozenset({408, 429, 502, 503, 504})


class Floor:
    """The least a retry layer does on a success: the inner call, the status looked up in a
    set, a shared metadata object attached."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def handle_request(self, request: Any) -> Any:
        response = self._inner.handle_request(request)
        if response.status_code not in RETRYABLE:
            response.extensions["retry"] = FLOOR_INFO
        return response

    def close(self) -> None:
        self._inner.close()


class Marks:
    """The C library's client requests, through ctypes."""

    def __init__(self, path: str) -> None:
        lib = ctypes.CDLL(path)
        self._running = lib.rt_running
        self._running.restype = ctypes.c_int
        self._running.argtypes = []
        self._begin = lib.rt_begin
        self._begin.restype = None
        self._begin.argtypes = []
        self._start = lib.rt_start
        self._start.restype = None
        self._start.argtypes = []
        self._stop = lib.rt_stop
        self._stop.restype = None
        self._stop.argtypes = [ctypes.c_char_p]

    def running(self) -> bool:
        return bool(self._running())

    def begin(self) -> None:
        self._begin()

    def start(self) -> None:
        self._start()

    def stop(self, label: str) -> None:
        self._stop(label.encode())


@contextmanager
def _no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _settle() -> None:
    """A moment for other threads to finish what the last request left them (a hedged
    try's worker): counted alike in every window."""
    time.sleep(0.005)


async def _drain() -> None:
    """Run what the event loop still holds for the last request (counted alike in every
    window)."""
    for _ in range(4):
        await asyncio.sleep(0)


@dataclass
class Built:
    run: Callable[[int], None] | None = None
    arun: Callable[[int], Awaitable[None]] | None = None
    calls: Callable[[], int] = lambda: 0
    attempts: int = 1  # handler calls per request
    close: Callable[[], Any] = lambda: None


class Missing(Exception):
    """The tree's package has no such feature: the arm is skipped."""


def _package(name: str) -> Any:
    """retry_transport, for an arm that runs it (imported by the first such arm)."""
    return importlib.import_module("retry_transport") if SPECS[name].ours else None


def _build_sync(name: str) -> Built:
    import httpx

    rt = _package(name)
    request = httpx.Request("GET", "https://api.example.com/items")
    handler = Handler(alternate=name in ("retry-bare", "retry", "retry-nobudget",
                                        "httpx-retries-retry"))
    mock = httpx.MockTransport(handler)
    transport: Any
    loop: Callable[[Callable[[Any], Any], Any, int], None] = _fresh(_loop)
    attempts = 1
    try:
        if name == "bare":
            transport = mock
        elif name == "httpx-retries":
            hr = _httpx_retries()
            transport = hr.RetryTransport(transport=mock, retry=hr.Retry(total=2))
        elif name == "defaults":
            transport = rt.RetryTransport(mock)
        elif name == "breaker":
            store = rt.MemoryStore()
            transport = rt.RetryTransport(mock, store=store,
                                          breaker=rt.CircuitBreaker(store=store))
        elif name == "throttle":
            transport = rt.RetryTransport(mock, throttle=rt.AdaptiveThrottle())
        elif name == "hedging":
            transport = rt.RetryTransport(mock, hedging=rt.Hedging(0.05))
        elif name == "floor":
            transport = Floor(mock)
        elif name == "retry-bare":
            transport, loop, attempts = mock, _fresh(_pair_loop), 2
        elif name == "retry":
            transport, attempts = rt.RetryTransport(mock, sleep=_no_sleep), 2
        elif name == "retry-nobudget":
            transport, attempts = rt.RetryTransport(mock, sleep=_no_sleep, budget=None), 2
        elif name == "httpx-retries-retry":
            hr = _httpx_retries()

            class NoSleepRetry(hr.Retry):  # type: ignore[misc,name-defined]
                def sleep(self, response: object) -> None:
                    return None

            transport = hr.RetryTransport(transport=mock, retry=NoSleepRetry(total=2))
            attempts = 2
        else:
            raise ValueError(name)
    except (AttributeError, TypeError) as error:  # an older tree without the feature
        raise Missing(f"{type(error).__name__}: {error}") from error
    handle = transport.handle_request
    return Built(run=lambda n: loop(handle, request, n), calls=lambda: handler.calls,
                 attempts=attempts, close=transport.close)


def _build_async(name: str) -> Built:
    import httpx

    rt = _package(name)
    request = httpx.Request("GET", "https://api.example.com/items")
    handler = AsyncHandler(alternate="retry" in name)
    mock = httpx.MockTransport(handler)
    transport: Any
    loop: Callable[[Callable[[Any], Awaitable[Any]], Any, int], Awaitable[None]]
    loop = _fresh(_async_loop)
    attempts = 1
    try:
        if name == "async-bare":
            transport = mock
        elif name == "async-defaults":
            transport = rt.AsyncRetryTransport(mock)
        elif name == "async-breaker":
            store = rt.MemoryStore()
            transport = rt.AsyncRetryTransport(mock, store=store,
                                               breaker=rt.CircuitBreaker(store=store))
        elif name == "async-throttle":
            transport = rt.AsyncRetryTransport(mock, throttle=rt.AdaptiveThrottle())
        elif name == "async-hedging":
            transport = rt.AsyncRetryTransport(mock, hedging=rt.Hedging(0.05))
        elif name == "async-retry-bare":
            transport, loop, attempts = mock, _fresh(_async_pair_loop), 2
        elif name == "async-retry":
            transport = rt.AsyncRetryTransport(mock, sleep=_async_no_sleep)
            attempts = 2
        elif name == "async-retry-nobudget":
            transport = rt.AsyncRetryTransport(mock, sleep=_async_no_sleep, budget=None)
            attempts = 2
        else:
            raise ValueError(name)
    except (AttributeError, TypeError) as error:
        raise Missing(f"{type(error).__name__}: {error}") from error
    handle = transport.handle_async_request
    return Built(arun=lambda n: loop(handle, request, n), calls=lambda: handler.calls,
                 attempts=attempts, close=transport.aclose)


def _httpx_retries() -> Any:
    return importlib.import_module("httpx_retries")


def _windows(name: str, n: int, splits: int) -> list[tuple[str, int, bool]]:
    """An arm's windows: (label, requests, whether to move the heap first). A first window is
    not kept (the code around a window runs once before it counts); then, ``splits`` times,
    the heap is moved a little and a window of 0 requests and one of a share of ``n`` are
    counted."""
    windows = [("-", 0, False)]
    for index in range(splits):
        share = n // splits + (index < n % splits)
        windows += [(f"{name}#{index}@0", 0, True), (f"{name}#{index}@{share}", share, False)]
    return windows


def _move_heap(kept: list[object]) -> None:
    """Keep a few more blocks of every small size: the requests after this one find
    pymalloc's pools in another state (whether a request fills or empties a pool depends on
    it, and costs up to a few hundred instructions)."""
    kept.extend(bytes(size) for size in range(0, 512, 8) for _ in range(3))


def _measure_sync(name: str, marks: Marks, warmup: int, n: int,
                  splits: int) -> tuple[int, int]:
    """Attempts made in the counted windows, and those expected."""
    built = _build_sync(name)
    assert built.run is not None
    built.run(warmup)
    before = built.calls()
    kept: list[object] = []
    with _no_collector():
        for label, count, move in _windows(name, n, splits):
            if move:
                _move_heap(kept)
            marks.start()
            built.run(count)
            _settle()
            marks.stop(label)
    built.close()
    return built.calls() - before, built.attempts * n


async def _measure_async(name: str, marks: Marks, warmup: int, n: int,
                         splits: int) -> tuple[int, int]:
    built = _build_async(name)  # in the loop that runs it
    assert built.arun is not None
    await built.arun(warmup)
    await _drain()
    before = built.calls()
    kept: list[object] = []
    with _no_collector():
        for label, count, move in _windows(name, n, splits):
            if move:
                _move_heap(kept)
            marks.start()
            await built.arun(count)
            await _drain()
            marks.stop(label)
    await built.close()
    return built.calls() - before, built.attempts * n


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def child(args: argparse.Namespace) -> int:
    """Run the arms under callgrind; write what the parent needs besides the counts."""
    # A heap layout of its own: ``layout`` blocks of every small size kept alive before the
    # packages are imported shift where everything after them lands.
    ballast = [bytes(size) for size in range(0, 512, 8) for _ in range(args.layout)]
    marks = Marks(args.lib)
    import httpx

    meta: dict[str, Any] = {
        "python": sys.version.split()[0],
        "httpx": httpx.__version__,
        "httpx-retries": _version("httpx-retries"),
        "under valgrind": marks.running(),
        "layout": args.layout,
        "ballast blocks": len(ballast),
        "skipped": {},
        "failed": {},
        "checks": {},
    }
    if meta["httpx-retries"] != "not installed":
        _httpx_retries()
    marks.begin()  # the imports above ran uninstrumented: quickly
    # The arms that do not run retry-transport first, before it is imported: their counts
    # do not depend on the tree's code at all. The hedged ones last: their threads and
    # tasks move the heap a little differently in every run.
    arms = args.arms.split(",")
    for name in sorted(arms, key=lambda name: (SPECS[name].ours, "hedging" in name)):
        if "httpx-retries" in name and meta["httpx-retries"] == "not installed":
            meta["skipped"][name] = "httpx-retries not installed (pip install -e '.[bench]')"
            continue
        try:
            if name.startswith("async-"):
                made, expected = asyncio.run(
                    _measure_async(name, marks, args.warmup, args.requests, args.splits))
            else:
                made, expected = _measure_sync(name, marks, args.warmup, args.requests,
                                               args.splits)
        except Missing as missing:
            meta["skipped"][name] = f"not in this tree ({missing})"
            continue
        except Exception as error:
            meta["failed"][name] = "".join(traceback.format_exception(error))
            continue
        meta["checks"][name] = {"attempts": made, "expected": expected}
    import retry_transport

    meta["package"] = str(Path(retry_transport.__file__).resolve().parent)
    Path(args.meta).write_text(json.dumps(meta))
    return 0


# -- the parent: builds the marks, runs the children, prints -------------------------------


@dataclass
class Layout:
    """The counts of one child process."""

    windows: dict[str, int] = field(default_factory=dict)  # "arm#split@requests" -> Ir
    meta: dict[str, Any] = field(default_factory=dict)

    def per_request(self, arm: str) -> float | None:
        """The instructions of the arm's windows of requests, minus those of its windows of
        0, over the requests."""
        full = zero = requests = 0
        for label, instructions in self.windows.items():
            if label.partition("#")[0] != arm:
                continue
            count = int(label.rpartition("@")[2])
            requests += count
            if count:
                full += instructions
            else:
                zero += instructions
        return (full - zero) / requests if requests else None

    def overhead(self, arm: str) -> float | None:
        spec = SPECS[arm]
        mine = self.per_request(arm)
        if spec.baseline is None or mine is None:
            return None
        base = self.per_request(spec.baseline)
        return None if base is None else mine - base


@dataclass
class Tree:
    """One tree's code: its title, its ``src`` folder, one Layout per child process."""

    title: str
    src: Path
    origin: str
    layouts: list[Layout] = field(default_factory=list)

    @staticmethod
    def _median(values: list[float | None]) -> float | None:
        known = [value for value in values if value is not None]
        return statistics.median(known) if known and len(known) == len(values) else None

    def per_request(self, arm: str) -> float | None:
        return self._median([layout.per_request(arm) for layout in self.layouts])

    def overhead(self, arm: str) -> float | None:
        return self._median([layout.overhead(arm) for layout in self.layouts])

    def spread(self, arm: str) -> float | None:
        """Max minus min of the arm's figure over the layouts (with two or more)."""
        spec = SPECS[arm]
        values = [layout.per_request(arm) if spec.baseline is None else layout.overhead(arm)
                  for layout in self.layouts]
        known = [value for value in values if value is not None]
        return max(known) - min(known) if len(known) > 1 else None

    def ratio(self, arm: str) -> float | None:
        peer = SPECS[arm].peer
        mine = self.overhead(arm)
        theirs = self.overhead(peer) if peer is not None else None
        if mine is None or theirs is None or theirs <= 0:
            return None
        return mine / theirs

    def note(self, arm: str) -> str | None:
        """Why an arm has no figure."""
        meta = self.layouts[0].meta
        if arm in meta["skipped"]:
            return f"skipped: {meta['skipped'][arm]}"
        for layout in self.layouts:
            if arm in layout.meta["failed"]:
                last = layout.meta["failed"][arm].strip().splitlines()[-1]
                return f"failed: {last}"
        return None


def _compile(folder: Path) -> Path | str:
    """The marks library, or why it cannot be built."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler (cc) found"
    source = folder / "rt_marks.c"
    source.write_text(C_SOURCE)
    library = folder / "rt_marks.so"
    done = subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-o", str(library),
                           str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        return ("could not compile the marks library (is valgrind/callgrind.h installed?)\n"
                + done.stderr.strip())
    return library


def _extract(ref: str, folder: Path) -> Path:
    """``src/`` of ``ref`` in ``folder`` (``git archive``: the work tree and index untouched)."""
    archive = subprocess.run(["git", "archive", "--format=tar", ref, "src"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def _snapshot(folder: Path) -> Path:
    """A copy of the working tree's ``src/``, taken once: edits made during the run do not
    reach it, and its path is as long as a ref's (the heap layout depends on such things)."""
    shutil.copytree(ROOT / "src", folder / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
    return folder / "src"


def _short(ref: str) -> str:
    done = subprocess.run(["git", "rev-parse", "--verify", "--short", f"{ref}^{{commit}}"],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"--against {ref}: not a commit in {ROOT}")
    return done.stdout.strip()


@dataclass(frozen=True)
class Harness:
    valgrind: str
    library: Path  # the marks
    script: Path  # this script, alone in a folder: the child's sys.path[0] holds nothing else
    args: argparse.Namespace
    arms: Sequence[str]


def _start(tree: Tree, layout: int, harness: Harness, folder: Path) -> subprocess.Popen[str]:
    folder.mkdir()
    args = harness.args
    env = dict(os.environ, PYTHONPATH=str(tree.src), PYTHONHASHSEED="0")
    command = [harness.valgrind, "--tool=callgrind", "--quiet", "--instr-atstart=no",
               "--collect-atstart=yes", f"--callgrind-out-file={folder}/callgrind.out.%p",
               sys.executable, str(harness.script), "--child",
               "--lib", str(harness.library), "--meta", str(folder / "meta.json"),
               "--requests", str(args.requests), "--warmup", str(args.warmup),
               "--layout", str(layout), "--splits", str(args.splits),
               "--arms", ",".join(harness.arms)]
    return subprocess.Popen(command, env=env, cwd=folder, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _collect(tree: Tree, folder: Path, process: subprocess.Popen[str]) -> None:
    output, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"{tree.title}: the run under callgrind failed "
                         f"(exit {process.returncode}):\n{output}")
    layout = Layout(meta=json.loads((folder / "meta.json").read_text()))
    if not layout.meta["under valgrind"]:
        raise SystemExit(f"{tree.title}: the child did not run under valgrind")
    if Path(layout.meta["package"]) != (tree.src / "retry_transport").resolve():
        raise SystemExit(f"{tree.title}: imported retry_transport from "
                         f"{layout.meta['package']}, not from {tree.src}")
    prefix = "desc: Trigger: Client Request: "
    for dump in folder.glob("callgrind.out.*"):
        label, total = None, None
        for line in dump.read_text().splitlines():
            if line.startswith(prefix):
                label = line.removeprefix(prefix).strip()
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
        if label is not None and label != "-" and total is not None:
            layout.windows[label] = total
    tree.layouts.append(layout)


def _run_all(jobs: list[tuple[Tree, int]], harness: Harness, folder: Path) -> None:
    """Each (tree, layout) in a child of its own, as many at once as there are CPUs."""
    width = max(1, min(len(jobs), os.cpu_count() or 1))
    running: list[tuple[Tree, Path, subprocess.Popen[str]]] = []
    try:
        for index, (tree, layout) in enumerate(jobs):
            if len(running) == width:
                _collect(*running[0])
                running.pop(0)
            where = folder / f"job{index:03d}"
            running.append((tree, where, _start(tree, layout, harness, where)))
        while running:
            _collect(*running[0])
            running.pop(0)
    finally:  # a child failed, or an interrupt: stop the others this run started
        for _, _, process in running:
            if process.poll() is None:
                process.kill()
                process.wait()


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+,.0f}" if signed else f"{value:,.0f}"


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _print_tree(tree: Tree, arms: Sequence[str]) -> None:
    layouts = len(tree.layouts)
    print(f"\n{tree.title}: {tree.origin}")
    width = max(len(SPECS[a].label) for a in arms) + 2
    head = f"{'arm':<{width}}{'Ir/request':>12}{'over baseline':>15}{'x httpx-retries':>17}"
    print(head + (f"{'range':>9}" if layouts > 1 else ""))
    for arm in arms:
        spec = SPECS[arm]
        note = tree.note(arm)
        if note is not None:
            print(f"{spec.label:<{width}}  {note}")
            continue
        shown = "(baseline)" if spec.baseline is None else _fmt(tree.overhead(arm), True)
        line = (f"{spec.label:<{width}}{_fmt(tree.per_request(arm)):>12}{shown:>15}"
                f"{_fmt_ratio(tree.ratio(arm)):>17}")
        print(line + (f"{_fmt(tree.spread(arm)):>9}" if layouts > 1 else ""))
    for layout in tree.layouts:
        for arm, check in layout.meta["checks"].items():
            if check["attempts"] != check["expected"]:
                print(f"  warning: {arm} made {check['attempts']:,} attempts in its windows, "
                      f"not {check['expected']:,} (layout {layout.meta['layout']})")
        for arm, trace in layout.meta["failed"].items():
            print(f"  {arm} failed (layout {layout.meta['layout']}):")
            print("    " + trace.strip().replace("\n", "\n    "))


def _print_against(old: Tree, new: Tree, arms: Sequence[str]) -> None:
    print(f"\nover baseline, Ir per request: {old.title} (old) against {new.title} (new)")
    width = max(len(SPECS[a].label) for a in arms) + 2
    print(f"{'arm':<{width}}{'old':>10}{'new':>10}{'change':>10}{'new/old':>9}"
          f"{'old x hr':>10}{'new x hr':>10}")
    for arm in arms:
        spec = SPECS[arm]
        if spec.baseline is None:
            before, after = old.per_request(arm), new.per_request(arm)
            label, signed = f"{spec.label} (Ir/request)", False
        else:
            before, after = old.overhead(arm), new.overhead(arm)
            label, signed = spec.label, True
        change = None if before is None or after is None else after - before
        ratio = None if before is None or after is None or before <= 0 else after / before
        line = (f"{label:<{width}}{_fmt(before, signed):>10}{_fmt(after, signed):>10}"
                f"{_fmt(change, True):>10}")
        if spec.baseline is not None:
            line += (f"{_fmt_ratio(ratio):>9}{_fmt_ratio(old.ratio(arm)):>10}"
                     f"{_fmt_ratio(new.ratio(arm)):>10}")
        print(line)


def _figures(tree: Tree, arms: Sequence[str]) -> dict[str, Any]:
    return {
        "src": tree.origin,
        "meta": [layout.meta for layout in tree.layouts],
        "arms": {arm: {
            "label": SPECS[arm].label,
            "baseline": SPECS[arm].baseline,
            "instructions_per_request": tree.per_request(arm),
            "overhead": tree.overhead(arm),
            "ratio_to_httpx_retries": tree.ratio(arm),
            "range_over_layouts": tree.spread(arm),
            "windows": [{label: count for label, count in layout.windows.items()
                         if label.partition("#")[0] == arm} for layout in tree.layouts],
            "note": tree.note(arm),
        } for arm in arms},
    }


def _arms(chosen: str | None) -> list[str]:
    if chosen is None:
        return [spec.name for spec in ARMS]
    wanted = {name.strip() for name in chosen.split(",") if name.strip()}
    unknown = wanted - SPECS.keys()
    if unknown:
        raise SystemExit(f"unknown arms: {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(SPECS)})")
    for name in list(wanted):
        baseline = SPECS[name].baseline
        if baseline is not None:
            wanted.add(baseline)
    return [spec.name for spec in ARMS if spec.name in wanted]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].rstrip(":") + ".",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=REQUESTS,
                        help=f"requests counted per arm, over --splits windows "
                             f"(default {REQUESTS})")
    parser.add_argument("--warmup", type=int, default=WARMUP,
                        help=f"requests per arm before its windows (default {WARMUP})")
    parser.add_argument("--arms", help=f"comma-separated arms (default all: {', '.join(SPECS)})")
    parser.add_argument("--against", metavar="REF",
                        help="also count the code of git ref REF, and print old against new")
    parser.add_argument("--layouts", type=int, default=1, metavar="K",
                        help="count each tree in K processes whose heaps are laid out "
                             "differently; print the medians and the range (default 1)")
    parser.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--lib", help=argparse.SUPPRESS)
    parser.add_argument("--meta", help=argparse.SUPPRESS)
    parser.add_argument("--layout", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--splits", type=int, default=SPLITS, metavar="S",
                        help="count an arm's requests in S windows, the heap moved before "
                             f"each (default {SPLITS})")
    args = parser.parse_args(argv)
    if args.requests < args.splits or args.splits < 1 or args.warmup < 0 or args.layouts < 1:
        parser.error("--splits and --layouts must be >= 1, --requests >= --splits, "
                     "--warmup >= 0")
    if args.child:
        return child(args)

    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("valgrind not found: skipped (apt-get install valgrind)")
        return 0
    arms = _arms(args.arms)
    n = args.requests
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rt-instructions-") as temp:
        folder = Path(temp)
        library = _compile(folder)
        if isinstance(library, str):
            first, _, rest = library.partition("\n")
            print(f"{first}: skipped" + (f"\n{rest}" if rest else ""))
            return 0
        trees = [Tree("working tree", _snapshot(folder / "new"),
                      f"{ROOT / 'src'}, copied at the start")]
        if args.against is not None:
            sha = _short(args.against)
            trees.insert(0, Tree(f"{args.against} ({sha})", _extract(args.against,
                                                                    folder / "old"),
                                 f"git archive {sha} src"))
        version = subprocess.run([valgrind, "--version"], capture_output=True,
                                 text=True).stdout.strip()
        jobs = [(tree, layout) for layout in range(args.layouts) for tree in trees]
        print(f"callgrind ({version}): instructions of {n:,} requests minus those of 0, "
              f"after {args.warmup:,} warm-up requests, per request; {len(jobs)} "
              f"process(es), {min(len(jobs), os.cpu_count() or 1)} at a time")
        script = folder / "child" / Path(__file__).name
        script.parent.mkdir()
        shutil.copyfile(__file__, script)
        _run_all(jobs, Harness(valgrind, library, script, args, arms), folder)
    meta = trees[-1].layouts[0].meta
    print(f"Python {meta['python']}, httpx {meta['httpx']}, "
          f"httpx-retries {meta['httpx-retries']}; {time.monotonic() - started:.0f} s")
    for tree in trees:
        _print_tree(tree, arms)
    if len(trees) == 2:
        _print_against(trees[0], trees[1], arms)
    print("\nx httpx-retries: the overhead over httpx-retries' (sync and async success arms "
          "against its sync success arm, the retry arm against its retry arm)")
    if args.layouts > 1:
        print(f"range: max - min over the {args.layouts} layouts; figures are their medians")
    if args.json is not None:
        figures = {"requests": n, "warmup": args.warmup, "layouts": args.layouts,
                   "valgrind": version,
                   "trees": {tree.title: _figures(tree, arms) for tree in trees}}
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
