"""One way to drive both transports from the same test: sync, or async on asyncio or trio.

Time is virtual: the injected sleep records each wait and advances the injected clock, so
no test really sleeps and deadlines are exact.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import anyio

from tests.flavour import httpx, rt

MODES = ["sync", "asyncio", "trio"]


class FakeClock:
    """A monotonic clock that only moves when the transport sleeps (or a test says so)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


class Harness:
    """Builds a retry transport over a handler and sends requests through an httpx client."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.clock = FakeClock()

    @property
    def waits(self) -> list[float]:
        return self.clock.waits

    def transport(
        self, handler: Callable[[httpx.Request], httpx.Response] | None = None, **kwargs: Any
    ) -> rt.RetryTransport | rt.AsyncRetryTransport:
        inner = kwargs.pop("inner", None)
        kwargs.setdefault("rng", random.Random(1234))
        kwargs.setdefault("clock", self.clock)
        kwargs.setdefault("wallclock", lambda: 1_700_000_000.0)
        if self.mode == "sync":
            kwargs.setdefault("sleep", self.clock.sleep)
            return rt.RetryTransport(inner or httpx.MockTransport(handler), **kwargs)
        kwargs.setdefault("sleep", self.clock.asleep)
        return rt.AsyncRetryTransport(inner or httpx.MockTransport(handler), **kwargs)

    def send(
        self, transport: rt.RetryTransport | rt.AsyncRetryTransport, method: str = "GET",
        url: str = "https://api.example.com/items", **kwargs: Any,
    ) -> httpx.Response:
        """Send one request and read its body; exceptions propagate as the client raises them."""
        if isinstance(transport, rt.RetryTransport):
            with httpx.Client(transport=transport) as client:
                return client.request(method, url, **kwargs)

        async def main() -> httpx.Response:
            async with httpx.AsyncClient(transport=transport) as client:
                return await client.request(method, url, **kwargs)

        return anyio.run(main, backend=self.mode)

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an async function on this harness's event loop (sync mode: call it)."""
        return anyio.run(fn, *args, backend="asyncio" if self.mode == "sync" else self.mode)
