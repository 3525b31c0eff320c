"""A client of one HTTP library given the other library's retry transport: a ``TypeError``
naming the class to use, at the first request, instead of a bare ``AssertionError`` from
inside the library."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

import retry_transport

httpx2 = pytest.importorskip("httpx2")
rt2 = pytest.importorskip("retry_transport.httpx2")

URL = "http://127.0.0.1:1/"  # never reached: the request is refused before it is sent

#: (the client's library, the transports' module, the class the message must name)
PAIRS = [
    pytest.param(httpx2, retry_transport, "retry_transport.httpx2", id="httpx2-client"),
    pytest.param(httpx, rt2, "retry_transport", id="httpx-client"),
]


def send(mode: str, library: Any, transport: Any) -> Any:
    if mode == "sync":
        with library.Client(transport=transport) as client:
            return client.get(URL)

    async def main() -> Any:
        async with library.AsyncClient(transport=transport) as client:
            return await client.get(URL)

    return anyio.run(main, backend=mode)


@pytest.mark.parametrize("mode", ["sync", "asyncio", "trio"])
@pytest.mark.parametrize(("library", "module", "right"), PAIRS)
def test_the_other_librarys_client_is_refused_at_the_first_request(
    mode: str, library: Any, module: Any, right: str
) -> None:
    name = "RetryTransport" if mode == "sync" else "AsyncRetryTransport"
    transport = getattr(module, name)(max_attempts=1)
    with pytest.raises(TypeError, match=rf"use {right}\.{name} with {library.__name__}$"):
        send(mode, library, transport)
    with pytest.raises(TypeError, match=f"{library.__name__}.Request"):  # every time
        send(mode, library, transport)


@pytest.mark.parametrize("mode", ["sync", "asyncio", "trio"])
@pytest.mark.parametrize(("library", "module", "right"), PAIRS)
def test_a_transport_that_served_its_own_library_refuses_the_other_later(
    mode: str, library: Any, module: Any, right: str
) -> None:
    """Past the first request nothing is checked on success; a request of the other
    library still fails with the TypeError, not the inner transport's AssertionError."""
    own = httpx if library is httpx2 else httpx2
    name = "RetryTransport" if mode == "sync" else "AsyncRetryTransport"
    transport = getattr(module, name)(max_attempts=1)
    with pytest.raises(own.ConnectError):  # its own library's request: port 1 refuses it
        send(mode, own, transport)
    with pytest.raises(TypeError, match=rf"use {right}\.{name} with {library.__name__}$"):
        send(mode, library, transport)


#: (the library, its transports' public module)
LIBRARIES = [
    pytest.param(httpx, retry_transport, id="httpx"),
    pytest.param(httpx2, rt2, id="httpx2"),
]


def _recording(library: Any) -> tuple[Any, Any, list[Any]]:
    """A sync and an async mock transport of ``library`` that record what reaches them."""
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return library.Response(200)

    return library.MockTransport(handler), library.MockTransport(handler), seen


@pytest.mark.parametrize("entered", [True, False], ids=["with", "bare"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize(("library", "module"), LIBRARIES)
def test_an_async_client_over_the_sync_transport_is_refused(
    library: Any, module: Any, backend: str, entered: bool
) -> None:
    """AsyncClient(transport=RetryTransport()) names AsyncRetryTransport at ``async with``
    and at the first request, instead of a bare AttributeError; nothing is sent."""
    inner, _, seen = _recording(library)
    transport = module.RetryTransport(inner)
    expected = (rf"^{module.__name__}\.RetryTransport is the transport for "
                rf"{library.__name__}\.Client; for an {library.__name__}\.AsyncClient use "
                rf"{module.__name__}\.AsyncRetryTransport$")

    async def main() -> None:
        client = library.AsyncClient(transport=transport)
        if entered:
            async with client:
                pass  # pragma: no cover - refused on entering
        await client.get(URL)

    with pytest.raises(TypeError, match=expected):
        anyio.run(main, backend=backend)
    assert seen == []


@pytest.mark.parametrize("entered", [True, False], ids=["with", "bare"])
@pytest.mark.parametrize(("library", "module"), LIBRARIES)
def test_a_sync_client_over_the_async_transport_is_refused(
    library: Any, module: Any, entered: bool
) -> None:
    """Client(transport=AsyncRetryTransport()) names RetryTransport at ``with`` and at the
    first request, instead of a bare AttributeError; nothing is sent."""
    _, inner, seen = _recording(library)
    transport = module.AsyncRetryTransport(inner)
    expected = (rf"^{module.__name__}\.AsyncRetryTransport is the transport for "
                rf"{library.__name__}\.AsyncClient; for an {library.__name__}\.Client use "
                rf"{module.__name__}\.RetryTransport$")
    client = library.Client(transport=transport)
    with pytest.raises(TypeError, match=expected):
        if entered:
            with client:
                pass  # pragma: no cover - refused on entering
        client.get(URL)
    with pytest.raises(TypeError, match=expected):
        client.close()
    assert seen == []


@pytest.mark.parametrize(("library", "module"), LIBRARIES)
def test_a_wrong_kind_mount_is_refused_too(library: Any, module: Any) -> None:
    """A retry transport of the wrong kind mounted for one host is refused at the first
    request to that host."""
    _, inner, seen = _recording(library)
    client = library.Client(mounts={"all://": module.AsyncRetryTransport(inner)})
    with pytest.raises(TypeError, match=r"use .*\.RetryTransport$"):
        client.get(URL)
    assert seen == []
