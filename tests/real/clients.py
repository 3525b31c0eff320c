"""Client-side helpers for the real-server tests: one request through a real retry
transport (sync, or async on the running event loop), with waits recorded, never slept.

Everything here is built from the flavour under test (``tests.flavour``: httpx or httpx2)
when it is called, never at import time: a test run under httpx2 gets httpx2's clients,
transports, timeouts and errors."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from tests.flavour import FLAVOURS, current, httpx, rt, use


def client_timeout() -> httpx.Timeout:
    """Client timeouts: short, and never what a test's outcome depends on unless it says so."""
    return httpx.Timeout(2.0)


def short_read() -> httpx.Timeout:
    """For tests against a server that never answers: the read timeout IS the behaviour."""
    return httpx.Timeout(2.0, read=0.2)


def check_flavour(**objects: object) -> None:
    """Each object is an instance of the flavour's class of that name (``Timeout=timeout``):
    nothing built from the other library slipped in and worked by duck typing. (Classes, not
    ``__module__``: the SDKs rewrite the ``__module__`` of the httpx2 names they re-export.)"""
    for name, obj in objects.items():
        assert isinstance(obj, getattr(httpx, name)), (name, obj, current())


STREAMED = b"one-shot"


def chunks() -> Iterator[bytes]:
    """A one-shot (generator) request body, sent chunked."""
    yield b"one-"
    yield b"shot"


async def achunks() -> AsyncIterator[bytes]:
    yield b"one-"
    yield b"shot"


@dataclass
class Waits:
    """An injected sleep that records the waits and never sleeps on wall time."""

    waits: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.sleep(0)


@dataclass
class Outcome:
    """What one request through a retry transport ended with."""

    response: httpx.Response | None
    error: Exception | None
    transport: rt.RetryTransport | rt.AsyncRetryTransport
    waits: list[float]

    @property
    def info(self) -> rt.RetryInfo:
        info = rt.retry_info(self.response if self.response is not None else self.error)
        assert info is not None, (self.response, self.error)
        return info

    @property
    def status(self) -> int | None:
        return None if self.response is None else self.response.status_code


def send(
    method: str,
    url: str,
    *,
    content: bytes | None = None,
    streaming: bool = False,
    headers: dict[str, str] | None = None,
    timeout: httpx.Timeout | None = None,
    extensions: dict[str, Any] | None = None,
    **transport_kwargs: Any,
) -> Outcome:
    """One request through a fresh sync ``RetryTransport`` over a real ``HTTPTransport``,
    all of the flavour under test (``timeout`` defaults to :func:`client_timeout`); the body
    is read as ``client.request`` reads it. Exceptions are caught and returned."""
    recorder = Waits()
    transport = rt.RetryTransport(sleep=recorder.sleep, **transport_kwargs)
    timeout = client_timeout() if timeout is None else timeout
    body: Any = chunks() if streaming else content
    with httpx.Client(transport=transport, timeout=timeout) as client:
        check_flavour(Client=client, BaseTransport=transport,
                      HTTPTransport=transport._transport, Timeout=timeout)
        try:
            response = client.request(method, url, content=body, headers=headers,
                                      extensions=extensions)
        except Exception as exc:
            return Outcome(None, exc, transport, recorder.waits)
    return Outcome(response, None, transport, recorder.waits)


async def asend(
    method: str,
    url: str,
    *,
    content: bytes | None = None,
    streaming: bool = False,
    headers: dict[str, str] | None = None,
    timeout: httpx.Timeout | None = None,
    extensions: dict[str, Any] | None = None,
    **transport_kwargs: Any,
) -> Outcome:
    """The async twin of :func:`send`, on the running event loop (asyncio or trio)."""
    recorder = Waits()
    transport = rt.AsyncRetryTransport(sleep=recorder.asleep, **transport_kwargs)
    timeout = client_timeout() if timeout is None else timeout
    body: Any = achunks() if streaming else content
    async with httpx.AsyncClient(transport=transport, timeout=timeout) as client:
        check_flavour(AsyncClient=client, AsyncBaseTransport=transport,
                      AsyncHTTPTransport=transport._transport, Timeout=timeout)
        try:
            response = await client.request(method, url, content=body, headers=headers,
                                            extensions=extensions)
        except Exception as exc:
            return Outcome(None, exc, transport, recorder.waits)
    return Outcome(response, None, transport, recorder.waits)


def fd_count() -> int:
    """Open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


#: Each event loop with one flavour: every flavour and every loop once.
LOOP_PAIRS = [("asyncio", FLAVOURS[0]), ("trio", FLAVOURS[-1])]


@pytest.fixture(name="anyio_backend", params=LOOP_PAIRS,
                ids=[f"{loop}-{name}" for loop, name in LOOP_PAIRS])
def paired_anyio_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """A module that imports this runs its async tests on each loop with one flavour
    (``tests.flavour``'s ``httpx`` and ``rt`` stand for it while the test runs)."""
    loop, name = request.param
    with use(name):
        yield loop
