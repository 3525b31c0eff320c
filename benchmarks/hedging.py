"""What a hedged request costs when no hedge is sent: the same requests through a transport
without hedging and one with ``Hedging(60.0)`` (its delay never ends), over
``MockTransport`` answering 200 at once, side by side in one run::

    python benchmarks/hedging.py

A hedged try runs its first attempt on a worker thread (sync) or in a task group (async,
asyncio and trio), whatever happens next: this is that price, per request, in CPU.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

import anyio
import httpx

import retry_transport as rt

ROUNDS = 9
REQUESTS = 2000


def _print(label: str, results: dict[str, list[float]]) -> None:
    plain, hedged = (statistics.median(results[k]) for k in ("plain", "hedged"))
    print(f"  {label:<8} without {plain:7.1f} us/req, with {hedged:7.1f} us/req: "
          f"+{hedged - plain:.1f} us")


def sync_rounds(arms: dict[str, Any], rounds: int = ROUNDS, requests: int = REQUESTS
                ) -> dict[str, list[float]]:
    """Microseconds per request of each sync transport of ``arms``, one figure per round,
    the arms taking turns (after a warm-up)."""
    request = httpx.Request("GET", "https://api.example.com/items")
    results: dict[str, list[float]] = {name: [] for name in arms}
    for transport in arms.values():
        for _ in range(requests // 4):
            transport.handle_request(request)
    for _ in range(rounds):
        for name, transport in arms.items():
            start = time.perf_counter()
            for _ in range(requests):
                transport.handle_request(request)
            results[name].append((time.perf_counter() - start) / requests * 1e6)
    return results


def sync() -> None:
    arms = {
        "plain": rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(200))),
        "hedged": rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(200)),
                                    hedging=rt.Hedging(60.0)),
    }
    results = sync_rounds(arms)
    for transport in arms.values():
        transport.close()
    _print("sync", results)


async def asynchronous(backend: str) -> None:
    request = httpx.Request("GET", "https://api.example.com/items")
    arms: dict[str, Any] = {
        "plain": rt.AsyncRetryTransport(httpx.MockTransport(lambda r: httpx.Response(200))),
        "hedged": rt.AsyncRetryTransport(httpx.MockTransport(lambda r: httpx.Response(200)),
                                         hedging=rt.Hedging(60.0)),
    }
    results: dict[str, list[float]] = {name: [] for name in arms}
    for transport in arms.values():
        for _ in range(REQUESTS // 4):
            await transport.handle_async_request(request)
    for _ in range(ROUNDS):
        for name, transport in arms.items():
            start = time.perf_counter()
            for _ in range(REQUESTS):
                await transport.handle_async_request(request)
            results[name].append((time.perf_counter() - start) / REQUESTS * 1e6)
    _print(backend, results)


def main() -> int:
    print(f"Python {sys.version.split()[0]}, medians of {ROUNDS} rounds x {REQUESTS:,} "
          "requests per arm")
    sync()
    for backend in ("asyncio", "trio"):
        anyio.run(asynchronous, backend, backend=backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
