"""The async transport on asyncio and on trio: the same code, one sleep for both (anyio).

    python examples/async_client.py
"""

from __future__ import annotations

import anyio
import httpx

import retry_transport as rt


def make_service() -> httpx.MockTransport:
    """A service that throttles the first call to each path, then answers."""
    seen: set[str] = set()

    async def handler(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(0.01)  # a little latency
        if request.url.path not in seen:
            seen.add(request.url.path)
            return httpx.Response(429, headers={"Retry-After": "0"})
        return httpx.Response(200, json={"path": request.url.path})

    return httpx.MockTransport(handler)


async def main() -> None:
    transport = rt.AsyncRetryTransport(make_service(), base_delay=0.02, cooldown=False)
    async with httpx.AsyncClient(transport=transport, base_url="https://api.example.com") as c:
        results: list[str] = []

        async def fetch(path: str) -> None:
            response = await c.get(path)
            info = rt.retry_info(response)
            assert info is not None
            results.append(f"{path}: {response.status_code} after {info.attempts} attempts")

        async with anyio.create_task_group() as group:
            for i in range(3):
                group.start_soon(fetch, f"/items/{i}")
    for line in sorted(results):
        print(f"  {line}")
    print(f"  stats: requests={transport.stats.requests} retries={transport.stats.retries}")


if __name__ == "__main__":
    for backend in ("asyncio", "trio"):
        print(f"on {backend}:")
        anyio.run(main, backend=backend)
