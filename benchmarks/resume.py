"""What resumable bodies cost the client while nothing breaks::

    python benchmarks/resume.py               # some ten seconds
    python benchmarks/resume.py --rounds 5
    python benchmarks/resume.py --against REF # also the event scanner of git ref REF

1. **A 64 MB download** in 64 KiB chunks from nginx on 127.0.0.1 (Debian's ``nginx-light``,
   started here with a configuration of its own; without it this part is skipped), read
   with ``iter_raw()`` through ``RetryTransport()`` and through
   ``RetryTransport(resume=Resume())``: the client process's CPU time (user + system) per
   download, the two arms interleaved round by round; the figure is the median of the
   per-round ratios. The goal: at most 1.05.
2. **An event stream** of 20,000 events (an id and two ``data`` lines each, 1.0 MB)
   in 64 KiB chunks, in memory (``MockTransport``): the CPU time of reading it raw without
   resumption (the baseline), raw with ``Resume()`` (the transport's scanner), and with
   httpx-sse's ``iter_sse()`` without resumption (its parsing). The figure: the scanner's
   cost over the baseline against httpx-sse's, medians of per-round differences. The goal:
   less than httpx-sse's.
3. **One large event** (an id and ``data`` lines of 1 KiB) of 1 MiB and of 8 MiB, in
   1,000-byte chunks, read raw with and without ``Resume()``: the scanner's cost per byte
   (the difference, medians of per-round differences) at each size, and their ratio. The
   goal: linear, a ratio of about 1 (a cost that grows with the event's size would show 8
   or more); and the traced peak of memory (``tracemalloc``) reading the 8 MiB event, with
   ``Resume()`` and without.
4. With ``--against REF``: the event scanner (``_wire/events.py``) of git ref ``REF``
   against this tree's, fed directly, interleaved, on the stream of part 2 (the common
   case: many small events) and on one 1 MiB event in 1,000-byte chunks; CPU per feed of
   the whole input, medians.

Wall-clock figures of a shared machine swing with its load: these are CPU times of this
process, interleaved, so that both arms meet the same load; compare only figures of one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' servers
sys.path.insert(0, str(ROOT / "src"))

import retry_transport as rt  # noqa: E402

SIZE = 64 * 1024 * 1024
CHUNK = 64 * 1024


def _cpu(work: Callable[[], object]) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def _download(url: str, resume: rt.Resume | None) -> Callable[[], object]:
    def work() -> None:
        with httpx.Client(transport=rt.RetryTransport(resume=resume)) as client:
            with client.stream("GET", url) as response:
                for _ in response.iter_raw(CHUNK):
                    pass
            assert response.num_bytes_downloaded == SIZE
    return work


def downloads(rounds: int) -> tuple[float, float, float] | None:
    """(CPU s without, with, median ratio) of the 64 MB download, or ``None``."""
    from tests.real.resume_servers import Nginx, nginx_binary

    if nginx_binary() is None:
        print("1. nginx not found (Debian: apt install nginx-light): skipped")
        return None
    with tempfile.TemporaryDirectory() as folder:
        server = Nginx(Path(folder))
        try:
            server.publish("big.bin", random.Random(0).randbytes(SIZE), 1_700_000_000)
            url = f"http://127.0.0.1:{server.port}/big.bin"
            plain, resumed = _download(url, None), _download(url, rt.Resume())
            plain(), resumed()  # warm-up
            pairs = []
            for index in range(rounds):
                order = (plain, resumed) if index % 2 else (resumed, plain)
                times = {arm: _cpu(arm) for arm in order}
                pairs.append((times[plain], times[resumed]))
        finally:
            server.stop()
    return (statistics.median(p for p, _ in pairs), statistics.median(r for _, r in pairs),
            statistics.median(r / p for p, r in pairs))


def _events(count: int) -> bytes:
    return b"".join(b"id: %d\ndata: {\"delta\": \"token %d\"}\ndata: more\n\n" % (n, n)
                    for n in range(1, count + 1))


def events(rounds: int) -> tuple[float, float, float, int]:
    """(CPU s of the baseline, the scanner's cost, httpx-sse's cost, the stream's size) of
    the event stream."""
    import httpx_sse

    body = _events(20_000)
    chunks = [body[i:i + CHUNK] for i in range(0, len(body), CHUNK)]

    class Chunks(httpx.SyncByteStream):
        def __iter__(self):  # type: ignore[no-untyped-def]
            yield from chunks

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=Chunks())

    def raw(resume: rt.Resume | None) -> Callable[[], object]:
        def work() -> None:
            transport = rt.RetryTransport(httpx.MockTransport(handler), resume=resume)
            with httpx.Client(transport=transport) as client:
                with client.stream("GET", "http://sse.local/") as response:
                    for _ in response.iter_raw():
                        pass
        return work

    def sse() -> None:
        transport = rt.RetryTransport(httpx.MockTransport(handler))
        with httpx.Client(transport=transport) as client:
            with httpx_sse.connect_sse(client, "GET", "http://sse.local/") as source:
                for _ in source.iter_sse():
                    pass

    arms = [raw(None), raw(rt.Resume()), sse]
    for arm in arms:
        arm()
    rows = []
    for index in range(rounds):
        order = arms if index % 2 else arms[::-1]
        times = {arm: _cpu(arm) for arm in order}
        rows.append([times[arm] for arm in arms])
    base = statistics.median(r[0] for r in rows)
    return (base, statistics.median(r[1] - r[0] for r in rows),
            statistics.median(r[2] - r[0] for r in rows), len(body))


def _big_event(size: int) -> bytes:
    """One event of about ``size`` bytes: an id, then ``data`` lines of 1 KiB."""
    line = b"data: " + b"x" * 1017 + b"\n"
    return b"id: 1\n" + line * (size // len(line)) + b"\n"


def _stream_of(body: bytes, size: int) -> Callable[[httpx.Request], httpx.Response]:
    """A handler answering ``body`` in chunks of ``size`` bytes, each a new object (as a
    socket's reads are, so that what the reader holds on to is traced)."""
    class Chunks(httpx.SyncByteStream):
        def __iter__(self):  # type: ignore[no-untyped-def]
            for start in range(0, len(body), size):
                yield body[start:start + size]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=Chunks())
    return handler


def _read_raw(handler: Callable[[httpx.Request], httpx.Response],
              resume: rt.Resume | None) -> Callable[[], object]:
    def work() -> None:
        transport = rt.RetryTransport(httpx.MockTransport(handler), resume=resume)
        with httpx.Client(transport=transport) as client:
            with client.stream("GET", "http://sse.local/") as response:
                for _ in response.iter_raw():
                    pass
    return work


SIZES = (1024 * 1024, 8 * 1024 * 1024)
EVENT_CHUNK = 1000


def large_event(rounds: int) -> tuple[list[tuple[int, float]], int, int]:
    """For one event of each of :data:`SIZES` in 1,000-byte chunks: (size, the scanner's CPU
    seconds per byte); and the traced peaks (bytes) of reading the largest without and with
    ``Resume()``."""
    figures = []
    for size in SIZES:
        body = _big_event(size)
        handler = _stream_of(body, EVENT_CHUNK)
        plain, resumed = _read_raw(handler, None), _read_raw(handler, rt.Resume())
        plain(), resumed()
        costs = []
        for index in range(rounds):
            order = (plain, resumed) if index % 2 else (resumed, plain)
            times = {arm: _cpu(arm) for arm in order}
            costs.append(times[resumed] - times[plain])
        figures.append((len(body), statistics.median(costs) / len(body)))
    peaks = []
    for arm in (plain, resumed):
        tracemalloc.start()
        arm()
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return figures, peaks[0], peaks[1]


def _scanner_at(ref: str) -> ModuleType:
    """``_wire/events.py`` as it is at git ref ``ref``, imported beside this tree's."""
    source = subprocess.run(["git", "show", f"{ref}:src/retry_transport/_wire/events.py"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    name = "retry_transport._wire._events_at_ref"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "retry_transport._wire"
    exec(compile(source, f"{ref}:events.py", "exec"), module.__dict__)
    return module


def _feed_all(scanner_class: type, chunks: list[bytes]) -> Callable[[], object]:
    """Feed ``chunks`` to a new scanner and hand on what it gives, as the body does (a
    scanner whose ``feed`` returns bytes, or one that returns the pieces)."""
    pieces = not isinstance(scanner_class().feed(b"data: x\n\n"), bytes)

    def work() -> int:
        scanner = scanner_class()
        handed = 0
        if pieces:
            for chunk in chunks:
                for piece in scanner.feed(chunk):
                    handed += len(piece)
        else:
            for chunk in chunks:
                out = scanner.feed(chunk)
                if out:
                    handed += len(out)
        return handed
    return work


def scanners(ref: str, rounds: int) -> list[tuple[str, float, float]]:
    """(what, CPU s of ref's scanner, of this tree's) for many small events and one large
    one."""
    from retry_transport._wire.events import EventScanner

    old = _scanner_at(ref).EventScanner
    small = _events(20_000)
    large = _big_event(SIZES[0])
    inputs = [("20,000 small events in 64 KiB chunks",
               [small[i:i + CHUNK] for i in range(0, len(small), CHUNK)]),
              ("one 1 MiB event in 1,000-byte chunks",
               [large[i:i + EVENT_CHUNK] for i in range(0, len(large), EVENT_CHUNK)])]
    rows = []
    for what, chunks in inputs:
        arms = [_feed_all(old, chunks), _feed_all(EventScanner, chunks)]
        assert arms[0]() == arms[1]() == sum(map(len, chunks))  # the same bytes handed on
        times: list[list[float]] = [[], []]
        for index in range(rounds):
            for arm in (arms if index % 2 else arms[::-1]):
                times[arms.index(arm)].append(_cpu(arm))
        rows.append((what, statistics.median(times[0]), statistics.median(times[1])))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds per part (default 9)")
    parser.add_argument("--against", metavar="REF",
                        help="also time the event scanner of git ref REF against this tree's")
    args = parser.parse_args(argv)
    found = downloads(args.rounds)
    if found is not None:
        plain, resumed, ratio = found
        print(f"1. 64 MB download from nginx, CPU per download: without resume "
              f"{plain * 1000:.1f} ms, with Resume() {resumed * 1000:.1f} ms: "
              f"{ratio:.3f}x (goal <= 1.05: {'met' if ratio <= 1.05 else 'NOT met'})")
    base, scanner, parser_cost, size = events(args.rounds)
    print(f"2. 20,000 events ({size / 1e6:.1f} MB), CPU: reading raw {base * 1000:.1f} ms; "
          f"Resume()'s scanner +{scanner * 1000:.1f} ms; "
          f"httpx-sse's parsing +{parser_cost * 1000:.1f} ms: "
          f"{scanner / parser_cost:.2f}x httpx-sse's (goal < 1: "
          f"{'met' if scanner < parser_cost else 'NOT met'})")
    figures, peak_plain, peak_resumed = large_event(args.rounds)
    (small, per_small), (big, per_big) = figures
    growth = per_big / per_small
    print(f"3. one event in {EVENT_CHUNK:,}-byte chunks, Resume()'s scanner per byte: "
          f"{small / 2**20:.0f} MiB {per_small * 1e9:.2f} ns, {big / 2**20:.0f} MiB "
          f"{per_big * 1e9:.2f} ns: {growth:.2f}x (goal: linear, about 1: "
          f"{'met' if growth < 1.5 else 'NOT met'}); traced peak reading the "
          f"{big / 2**20:.0f} MiB event: {peak_plain / 2**20:.1f} MiB without resume, "
          f"{peak_resumed / 2**20:.1f} MiB with Resume()")
    if args.against is not None:
        for what, old, new in scanners(args.against, args.rounds):
            print(f"4. the scanner, {what}: {args.against} {old * 1000:.1f} ms, this tree "
                  f"{new * 1000:.1f} ms ({new / old:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
