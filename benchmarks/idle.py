"""What ``idle_timeout`` costs an event stream, per event, counted in instructions.

One stream of 20,000 events (one event per chunk, as a server flushing each event sends
them) read to its end through a transport over ``MockTransport``, with ``idle_timeout=60``
and without, sync and async (asyncio); each run is a process of its own under valgrind's
callgrind, and only the reading of the body is counted (``instructions.py``'s client
requests mark it: the imports, the request and the hand-over are not). The difference of
the two runs of a mode, divided by the events, is the cost per event of the idle limit: the
scanner that counts dispatched events and the bound on each read (async: a cancel scope;
sync: the watchdog's alarm).

    python benchmarks/idle.py [--events 20000] [--json FILE]

``--json`` writes the figures (docs/performance.md quotes ``benchmarks/idle.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

MODES = ("sync", "async")
EVENT = b'event: message\ndata: {"type": "content_block_delta", "index": 0}\n\n'


def _child(mode: str, idle: bool, events: int, library: str) -> None:
    import httpx
    from instructions import Marks

    marks = Marks(library)
    marks.begin()

    import retry_transport as rt

    class Body(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for _ in range(events):
                yield EVENT

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for _ in range(events):
                yield EVENT

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=Body())

    limit = 60.0 if idle else None
    if mode == "sync":
        transport = rt.RetryTransport(httpx.MockTransport(handler), idle_timeout=limit)
        with httpx.Client(transport=transport) as client:
            with client.stream("GET", "https://api.example.com/stream") as response:
                marks.start()
                read = sum(1 for _ in response.iter_raw())
                marks.stop("read")
    else:
        async def main() -> int:
            transport = rt.AsyncRetryTransport(httpx.MockTransport(handler),
                                               idle_timeout=limit)
            async with httpx.AsyncClient(transport=transport) as client:
                async with client.stream("GET", "https://api.example.com/stream") as response:
                    marks.start()
                    chunks = sum([1 async for _ in response.aiter_raw()])
                    marks.stop("read")
                    return chunks
        read = asyncio.run(main())
    if read != events:
        raise SystemExit(f"read {read} chunks, not {events}")


def _count(valgrind: str, library: Path, mode: str, idle: bool, events: int) -> int:
    """The instructions of one run's read window, in a process of its own."""
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            [valgrind, "--tool=callgrind", "--quiet", "--instr-atstart=no",
             "--collect-atstart=yes", f"--callgrind-out-file={folder}/callgrind.out.%p",
             sys.executable, "-B", __file__, "--child", mode,
             "--idle" if idle else "--no-idle", "--events", str(events),
             "--lib", str(library)],
            capture_output=True, text=True, cwd=folder,
            env=dict(os.environ, PYTHONHASHSEED="0"),
        )
        if done.returncode != 0:
            raise SystemExit(f"the {mode} run failed:\n{done.stdout}\n{done.stderr}")
        prefix = "desc: Trigger: Client Request: "
        for dump in Path(folder).glob("callgrind.out.*"):
            label = None
            for line in dump.read_text().splitlines():
                if line.startswith(prefix):
                    label = line.removeprefix(prefix).strip()
                elif label == "read" and line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise SystemExit(f"the {mode} run left no count of its read")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--lib", help=argparse.SUPPRESS)
    parser.add_argument("--idle", action=argparse.BooleanOptionalAction,
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, bool(args.idle), args.events, args.lib)
        return 0
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed (apt install valgrind)")
    from instructions import _compile

    build = tempfile.TemporaryDirectory()
    library = _compile(Path(build.name))
    if isinstance(library, str):
        raise SystemExit(library)
    figures: dict[str, object] = {
        "events": args.events, "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(f"{args.events:,} events, one per chunk; instructions per event added by "
          "idle_timeout=60 (callgrind, a process per run)")
    for mode in MODES:
        off = _count(valgrind, library, mode, False, args.events)
        on = _count(valgrind, library, mode, True, args.events)
        per_event = round((on - off) / args.events)
        figures[mode] = per_event
        figures[f"{mode} read"] = round(off / args.events)  # the read's own, per event
        print(f"{mode:>5}: {per_event:,} instructions per event "
              f"({off:,} without, {on:,} with)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
