"""What the core and the drivers need from an HTTP library: one binding per flavour.

retry-transport serves two libraries with the same API under two import names: ``httpx``
and its successor ``httpx2``. Their classes are distinct (an ``httpx2.ConnectError`` is no
``httpx.ConnectError``), so nothing outside the flavour modules names either library. The
core and the drivers ask a :class:`Flavour` instead: which errors a retry may fix, which
prove that nothing was sent, which body streams can be sent again, what a transport's base
classes are. :meth:`Flavour.of` builds one from the library's module, the same way for both,
so the two bindings cannot drift apart.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Any, Final

import anyio

__all__ = ["RAW_ERRORS", "Flavour", "Request", "Response", "URL"]

#: An ``httpx.Request`` or an ``httpx2.Request``: the core reads ``method``, ``url``,
#: ``headers``, ``extensions`` and ``stream``, which both spell alike.
Request = Any
#: An ``httpx.Response`` or an ``httpx2.Response`` (``status_code``, ``headers.raw``,
#: ``extensions``, ``stream``).
Response = Any
#: An ``httpx.URL`` or an ``httpx2.URL`` (``scheme``, ``host``, ``port``, ``netloc``,
#: ``raw_path``).
URL = Any


#: Errors from beneath the library that escape its own mapping into its transport errors:
#: a TLS failure on an established connection (asyncio's TLS stream raises ``ssl.SSLError``
#: for a record that fails, and httpx and httpx2 map it only during the handshake), and the
#: end or the breaking of an anyio stream. Both libraries map every failure of the handshake
#: itself to their ``ConnectError``, in every backend, so nothing proves one of these came
#: before the request was sent: they are read errors (retried for idempotent requests, and
#: for others only with an idempotency key). A certificate that failed verification
#: (``ssl.SSLCertVerificationError``) is never retried, raw or wrapped (``_wire.http``'s
#: ``permanent``).
RAW_ERRORS: Final[tuple[type[BaseException], ...]] = (
    ssl.SSLError, anyio.EndOfStream, anyio.BrokenResourceError)


class _SyncTail:
    """A body read past the buffer limit: the chunks already read, then the rest. Mixed
    into the flavour's ``SyncByteStream`` by :meth:`Flavour.of`."""

    def __init__(self, head: list[bytes], rest: Iterator[bytes], stream: Any) -> None:
        self._head, self._rest, self._stream = head, rest, stream

    def __iter__(self) -> Iterator[bytes]:
        head, self._head = self._head, []
        yield from head
        yield from self._rest

    def close(self) -> None:
        self._stream.close()


class _AsyncTail:
    """The async twin of :class:`_SyncTail`."""

    def __init__(self, head: list[bytes], rest: AsyncIterator[bytes], stream: Any) -> None:
        self._head, self._rest, self._stream = head, rest, stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        head, self._head = self._head, []
        for chunk in head:
            yield chunk
        async for chunk in self._rest:
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


@dataclass(frozen=True, slots=True, eq=False)
class Flavour:
    """One HTTP library as the transports see it.

    Attributes:
        name: the library's import name, ``"httpx"`` or ``"httpx2"``.
        request: the library's ``Request`` class (a request of the other library is
            refused on a transport's first request, with the class to use instead).
        retryable: transport errors a retry may fix: timeouts, network errors (connect,
            read, write) and remote protocol errors such as a connection dropped before the
            response; and :data:`RAW_ERRORS`, which mean what a read error means.
        never_sent: errors that prove the request never reached the server (connect errors
            and timeouts, pool timeouts): safe to retry for any method and any body.
        no_verdict: retryable errors that say nothing of the origin's health: a pool
            timeout (the client's own pool had no connection free in time; nothing was sent).
        timeouts: errors that are timeouts (a retry after one costs the budget more).
        byte_stream: the in-memory body stream (bytes, text, forms, JSON, a read body):
            always replayable, and what a buffered response body becomes.
        sync_byte_stream, async_byte_stream: the response body stream base classes.
        sync_base, async_base: the transport base classes.
        sync_transport, async_transport: the default inner transports' classes.
        errors: the flavour's errors a guard's refusal raises, by the refusal's kind:
            ``"cooldown"`` (its ``CooldownError``), ``"circuit_open"`` (its
            ``CircuitOpenError``) and ``"throttled"`` (its ``ThrottledError``), each a
            subclass of its ``TransportError``.
        deadline_error: the flavour's ``DeadlineExceeded`` (a subclass of its
            ``TimeoutException``).
        idle_error: the flavour's ``StreamIdleTimeout`` (a subclass of its ``ReadTimeout``):
            what a read of a body handed over raises when the stream stalls
            (``idle_timeout``).
        transport_error: the flavour's ``TransportError`` (a request under way when its
            transport was closed ends with one).
        protocol_error: the flavour's ``RemoteProtocolError`` (a resumable body that ends
            before, or goes on past, the length its headers declared is one, as the
            flavour's own reading of a body shorter than its ``Content-Length`` is).
        sync_tail, async_tail: body streams that put back what was read ahead of the rest.
    """

    name: str
    request: type[Any]
    retryable: tuple[type[BaseException], ...]
    never_sent: tuple[type[BaseException], ...]
    no_verdict: tuple[type[BaseException], ...]
    timeouts: tuple[type[BaseException], ...]
    byte_stream: type[Any]
    sync_byte_stream: type[Any]
    async_byte_stream: type[Any]
    sync_base: type[Any]
    async_base: type[Any]
    sync_transport: Callable[..., Any]
    async_transport: Callable[..., Any]
    errors: Mapping[str, type[Any]]
    deadline_error: type[Any]
    idle_error: type[Any]
    transport_error: type[Any]
    protocol_error: type[Any]
    sync_tail: type[Any]
    async_tail: type[Any]

    @classmethod
    def of(
        cls, module: ModuleType, cooldown_error: type[Any], circuit_open_error: type[Any],
        deadline_error: type[Any], throttled_error: type[Any], idle_error: type[Any],
    ) -> Flavour:
        """The binding of ``module`` (``httpx`` or ``httpx2``, which share one API)."""
        return cls(
            name=module.__name__,
            request=module.Request,
            retryable=(module.TimeoutException, module.NetworkError, module.RemoteProtocolError,
                       *RAW_ERRORS),
            never_sent=(module.ConnectError, module.ConnectTimeout, module.PoolTimeout),
            no_verdict=(module.PoolTimeout,),
            timeouts=(module.TimeoutException,),
            byte_stream=module.ByteStream,
            sync_byte_stream=module.SyncByteStream,
            async_byte_stream=module.AsyncByteStream,
            sync_base=module.BaseTransport,
            async_base=module.AsyncBaseTransport,
            sync_transport=module.HTTPTransport,
            async_transport=module.AsyncHTTPTransport,
            errors=MappingProxyType({"cooldown": cooldown_error,
                                     "circuit_open": circuit_open_error,
                                     "throttled": throttled_error}),
            deadline_error=deadline_error,
            idle_error=idle_error,
            transport_error=module.TransportError,
            protocol_error=module.RemoteProtocolError,
            # A response's stream must be of the flavour's own base class for its
            # iter_raw() / aiter_raw() to accept it.
            sync_tail=type("SyncTail", (_SyncTail, module.SyncByteStream), {}),
            async_tail=type("AsyncTail", (_AsyncTail, module.AsyncByteStream), {}),
        )

    def __repr__(self) -> str:
        return f"<Flavour {self.name}>"
