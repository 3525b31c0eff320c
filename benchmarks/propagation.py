"""How long a cooldown takes to reach another worker through a RedisStore.

Starts a throwaway ``redis-server`` on a free 127.0.0.1 port (or uses ``--url``), makes
two stores (two workers), and 100 times has the first transport receive ``429
Retry-After: 30`` from a new origin, timing until the second store knows it. Needs the
``redis`` extra and, without ``--url``, Debian's (or any) ``redis-server`` on PATH.

    python benchmarks/propagation.py [--url redis://127.0.0.1:6379/0] [--events 100]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import httpx

import retry_transport as rt


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a Redis to use (default: start a throwaway one)")
    parser.add_argument("--events", type=int, default=100, help="cooldowns to time (100)")
    args = parser.parse_args(argv)
    server = None
    url = args.url
    if url is None:
        binary = shutil.which("redis-server")
        if binary is None:
            print("redis-server is not on PATH: pass --url", file=sys.stderr)
            return 2
        port = _free_port()
        folder = tempfile.mkdtemp(prefix="propagation-")
        server = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", folder],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        time.sleep(0.3)
    prefix = f"propagation-{uuid.uuid4().hex}:"
    sender, receiver = rt.RedisStore(url, prefix=prefix), rt.RedisStore(url, prefix=prefix)
    try:
        if not (sender.connected and receiver.connected):
            print(f"cannot reach {url}", file=sys.stderr)
            return 2
        answer = httpx.Response(429, headers={"Retry-After": "30"})
        transport = rt.RetryTransport(httpx.MockTransport(lambda request: answer),
                                      store=sender, max_attempts=1)
        delays = []
        with httpx.Client(transport=transport) as client:
            for index in range(args.events):
                origin = f"http://o{index}.example:80"
                started = time.perf_counter()
                client.get(f"{origin}/")
                deadline = started + 5.0
                while origin not in receiver._cooldowns and time.perf_counter() < deadline:
                    time.sleep(0.0002)
                delays.append(time.perf_counter() - started)
                time.sleep(0.007 * (index % 7))  # spread the sends over the thread's poll
        ms = sorted(d * 1e3 for d in delays)
        print(f"cooldown from one worker to another over {len(ms)} events: median "
              f"{statistics.median(ms):.1f} ms, p95 {ms[int(len(ms) * 0.95) - 1]:.1f} ms, "
              f"max {ms[-1]:.1f} ms")
        return 0
    finally:
        sender.close()
        receiver.close()
        if server is not None:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
