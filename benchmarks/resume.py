"""What resumable bodies cost the client while nothing breaks::

    python benchmarks/resume.py               # a few seconds
    python benchmarks/resume.py --rounds 5

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

Wall-clock figures of a shared machine swing with its load: these are CPU times of this
process, interleaved, so that both arms meet the same load; compare only figures of one run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds per part (default 9)")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
