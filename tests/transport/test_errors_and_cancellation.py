"""What the caller gets back when an attempt ends badly: the very exception it raised, and
its own request, whatever ends the attempt (an error, a cancel, an interrupt)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from tests.flavour import current, httpx, rt
from tests.harness import Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")


@dataclasses.dataclass(frozen=True)
class FrozenError(Exception):
    """A permanent error that refuses new attributes."""

    code: int = 9


@functools.cache
def _errors_of(name: str) -> SimpleNamespace:
    """The error classes that subclass the HTTP library's own, built once per flavour (at
    import time they could only subclass httpx's, also under the httpx2 id)."""
    assert name == current()  # ``httpx`` below is that flavour's module

    @dataclasses.dataclass(frozen=True)
    class FrozenReadError(httpx.ReadError):
        """A transient error that refuses new attributes, as a frozen dataclass does."""

        code: int = 7

        def __str__(self) -> str:
            return f"frozen read error {self.code}"

    class GuardedError(httpx.ConnectError):
        """A transient error whose ``__setattr__`` refuses everything after construction."""

        _sealed = False

        def __init__(self, message: str) -> None:
            super().__init__(message)
            object.__setattr__(self, "_sealed", True)

        def __setattr__(self, name: str, value: object) -> None:
            if self._sealed:
                raise AttributeError(f"{type(self).__name__} is read-only")
            super().__setattr__(name, value)

    return SimpleNamespace(FrozenReadError=FrozenReadError, GuardedError=GuardedError)


def errors() -> SimpleNamespace:
    """``FrozenReadError`` and ``GuardedError`` of the flavour under test."""
    return _errors_of(current())


def direct(harness: Harness, transport: Any, request: httpx.Request) -> httpx.Response:
    """Call the transport itself (no client in between), sync or async."""
    if harness.mode == "sync":
        return transport.handle_request(request)  # type: ignore[no-any-return]

    async def main() -> httpx.Response:
        return await transport.handle_async_request(request)  # type: ignore[no-any-return]

    return harness.run(main)  # type: ignore[no-any-return]


@table(
    ("make", "attempts", "reason"),
    [
        (lambda: errors().FrozenReadError(), 3, "MAX_ATTEMPTS"),
        (lambda: FrozenError(), 1, "NOT_RETRYABLE"),
        (lambda: errors().GuardedError("refused"), 3, "MAX_ATTEMPTS"),
    ],
    ids=["frozen-transient", "frozen-permanent", "setattr-refused"],
)
def test_an_exception_that_refuses_attributes_is_raised_unchanged(
    harness: Harness, make: Any, attempts: int, reason: str
) -> None:
    """The very object the inner transport raised reaches the caller, and retry_info
    still answers for it (the metadata is kept beside it)."""
    raised: list[BaseException] = []

    def handler(request: httpx.Request) -> httpx.Response:
        error = make()
        raised.append(error)
        raise error

    transport = harness.transport(handler)
    with pytest.raises(BaseException) as caught:
        direct(harness, transport, httpx.Request("GET", "https://api.example.com/"))
    assert caught.value is raised[-1]
    assert len(raised) == attempts
    info = rt.retry_info(caught.value)
    assert info is not None
    assert (info.attempts, info.stop_reason) == (attempts, rt.StopReason[reason])
    assert rt.retry_info(make()) is None  # an equal but other object has no metadata


def test_metadata_kept_beside_an_exception_goes_with_it(harness: Harness) -> None:
    """Nothing is retained once such an exception is gone."""
    import gc

    from retry_transport._wire import http as _http

    def handler(request: httpx.Request) -> httpx.Response:
        raise FrozenError()

    transport = harness.transport(handler)
    gc.collect()
    before = len(_http._side_infos)
    for _ in range(20):
        with pytest.raises(FrozenError) as caught:
            direct(harness, transport, httpx.Request("GET", "https://api.example.com/"))
        assert len(_http._side_infos) > before  # kept while the exception lives
        del caught
    gc.collect()
    assert len(_http._side_infos) <= before


# -- cancellation mid-attempt ----------------------------------------------------------

CALLER_TIMEOUT = {"connect": 5.0, "read": 30.0, "write": 5.0, "pool": 5.0}


def caller_request() -> httpx.Request:
    return httpx.Request(
        "GET", "https://api.example.com/", extensions={"timeout": dict(CALLER_TIMEOUT)}
    )


def test_an_interrupt_mid_attempt_restores_the_callers_extensions() -> None:
    """KeyboardInterrupt inside an attempt with a deadline: the request's timeouts are
    the caller's again, not the clipped ones of the attempt."""
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.extensions["timeout"]))
        raise KeyboardInterrupt

    transport = rt.RetryTransport(httpx.MockTransport(handler), deadline=2.0)
    request = caller_request()
    with pytest.raises(KeyboardInterrupt):
        transport.handle_request(request)
    assert seen[0]["read"] == pytest.approx(2.0, abs=0.5)  # the attempt was clipped...
    assert request.extensions["timeout"] == CALLER_TIMEOUT  # ...the caller's came back


@pytest.mark.anyio
@pytest.mark.parametrize("phase", ["attempt", "wait"])
async def test_a_cancel_scope_restores_the_callers_extensions(
    anyio_backend: str, phase: str
) -> None:
    """An anyio cancel during an attempt or during the wait after it."""
    seen: list[dict[str, Any]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(dict(request.extensions["timeout"]))
        if phase == "attempt":
            await anyio.sleep(3600)
        return httpx.Response(503)

    transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), deadline=20.0,
                                       base_delay=10.0, jitter="none")
    request = caller_request()
    with anyio.move_on_after(0.05) as scope:
        await transport.handle_async_request(request)
    assert scope.cancelled_caught
    assert len(seen) == 1 and seen[0]["read"] <= 20.0
    assert request.extensions["timeout"] == CALLER_TIMEOUT


def test_task_cancel_restores_the_callers_extensions() -> None:
    """asyncio's task.cancel() mid-attempt, as a web framework does when a client leaves."""
    started = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        started.set()
        await asyncio.sleep(3600)
        raise AssertionError("not reached")

    async def main() -> httpx.Request:
        transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), deadline=5.0)
        request = caller_request()
        task = asyncio.ensure_future(transport.handle_async_request(request))
        await started.wait()
        assert request.extensions["timeout"]["read"] <= 5.0  # clipped while in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return request

    request = asyncio.run(main())
    assert request.extensions["timeout"] == CALLER_TIMEOUT
