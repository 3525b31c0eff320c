"""The two drivers, sync and async, written once for both flavours (httpx and httpx2).

They are hand-written twins, as httpx's own transports are: each does the I/O and the
sleeping and nothing else, and every decision is made by the shared core in ``_core.py``.
The two ``handle_*`` loops differ only in ``await``. What differs between httpx and httpx2
(exception classes, stream and transport classes) comes from the class's ``_flavour``; each
flavour's public ``RetryTransport`` and ``AsyncRetryTransport`` subclass these drivers and
that flavour's own transport base classes (``_transports.py``, ``httpx2.py``).
"""

from __future__ import annotations

import enum
import importlib.util
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, Literal, TypedDict, TypeVar

import anyio

from ._breaker import CircuitBreaker
from ._budget import RetryBudget
from ._contact import check_contact
from ._core import (
    DRAIN_MAX_SECONDS,
    Controller,
    RetryCall,
    RetryHook,
    _hooks,
    is_async_function,
)
from ._flavour import Flavour, Request, Response
from ._models import RetryStats
from ._policy import _TOKEN, FIELDS, Jitter, RetryPolicy
from ._store import MemoryStore

if TYPE_CHECKING:  # typing.Unpack and Self are new in 3.11; nothing is imported at run time
    from typing_extensions import Self, Unpack

__all__ = ["DEFAULT_BUDGET", "AsyncRetry", "BudgetArg", "SyncRetry", "TransportOptions"]

#: The flavour's sync / async transport base class, as the constructor's ``transport``.
_Sync = TypeVar("_Sync")
_Async = TypeVar("_Async")


class _Default(enum.Enum):
    BUDGET = "default budget"

    def __repr__(self) -> str:
        # What it stands for, as help() shows it: not one shared default budget.
        return "<a new RetryBudget() for each transport>"


#: The default for ``budget=``: each transport owns a fresh ``RetryBudget()``.
DEFAULT_BUDGET: Final = _Default.BUDGET

#: Keywords forwarded to the inner ``HTTPTransport`` / ``AsyncHTTPTransport`` that the
#: retry transport builds when it is given none.
TRANSPORT_KEYWORDS: Final = frozenset(
    {
        "verify",
        "cert",
        "http1",
        "http2",
        "limits",
        "trust_env",
        "proxy",
        "uds",
        "local_address",
        "retries",
        "socket_options",
    }
)

BudgetArg = RetryBudget | None | Literal[_Default.BUDGET]


class TransportOptions(TypedDict, total=False):
    """The keywords the transports take besides their own: :class:`RetryPolicy` fields, and
    (without an inner transport) the keywords of ``httpx.HTTPTransport`` (or
    ``httpx2.HTTPTransport``). Spelt out so that a type checker catches a misspelt or
    mistyped keyword."""

    max_attempts: int
    retry_statuses: Iterable[int]
    retry_methods: Iterable[str]
    idempotency_header: str | None
    base_delay: float
    max_delay: float
    jitter: Jitter
    respect_retry_after: bool
    max_retry_after: float
    deadline: float | None
    retry_body_errors: bool
    max_body_buffer: int
    should_retry_header: str | None
    trust_should_retry: bool
    respect_rate_limits: bool
    verify: Any
    cert: Any
    http1: bool
    http2: bool
    limits: Any  # an httpx.Limits or an httpx2.Limits
    trust_env: bool
    proxy: Any
    uds: str | None
    local_address: str | None
    retries: int
    socket_options: Any


def _split_keywords(
    kwargs: Mapping[str, Any], transport: object
) -> tuple[dict[str, Any], dict[str, Any]]:
    policy_fields: dict[str, Any] = {}
    transport_kwargs: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name in FIELDS:
            policy_fields[name] = value
        elif name in TRANSPORT_KEYWORDS:
            transport_kwargs[name] = value
        else:
            raise TypeError(
                f"unexpected keyword argument {name!r}: expected a RetryPolicy field "
                f"({', '.join(sorted(FIELDS))}) or, without an inner transport, an "
                f"HTTPTransport argument ({', '.join(sorted(TRANSPORT_KEYWORDS))})"
            )
    if transport is not None and transport_kwargs:
        raise TypeError(
            f"{', '.join(sorted(transport_kwargs))}: transport keywords configure the inner "
            "transport the retry transport builds; configure the transport you pass instead"
        )
    return policy_fields, transport_kwargs


def _checked(transport_kwargs: dict[str, Any], flavour: Flavour) -> dict[str, Any]:
    """The inner transport's keywords, with the Client's own check for HTTP/2 support."""
    if transport_kwargs.get("http2") and importlib.util.find_spec("h2") is None:
        raise ImportError(
            "Using http2=True, but the 'h2' package is not installed. "
            f"Make sure to install {flavour.name} using `pip install {flavour.name}[http2]`."
        )
    return transport_kwargs


def _controller(
    *,
    flavour: Flavour,
    transport: object,
    policy: RetryPolicy | None,
    policy_fields: dict[str, Any],
    budget: BudgetArg,
    cooldown: bool,
    hooks: Iterable[RetryHook] | RetryHook | None,
    rng: random.Random | None,
    sleep: object,
    clock: Callable[[], float],
    wallclock: Callable[[], float] | None,
    contact: str | None,
    auto_idempotency_key: bool,
    breaker: CircuitBreaker | None = None,
    attempt_header: str | None = None,
    store: MemoryStore | None = None,
) -> Controller:
    if isinstance(transport, (SyncRetry, AsyncRetry)):
        raise ValueError(
            "transport: a retry transport cannot wrap another one; retry at one layer only "
            "(retries at several layers multiply the load on a failing service)"
        )
    if policy is not None and not isinstance(policy, RetryPolicy):
        raise ValueError(f"policy must be a RetryPolicy, got {policy!r}")
    base = policy if policy is not None else RetryPolicy()
    if policy_fields:
        base = base.replace(**policy_fields)
    if budget is DEFAULT_BUDGET:
        budget = RetryBudget()
    elif budget is not None and not isinstance(budget, RetryBudget):
        raise ValueError(f"budget must be a RetryBudget or None, got {budget!r}")
    if rng is not None and not isinstance(rng, random.Random):
        raise ValueError(f"rng must be a random.Random, got {rng!r}")
    if attempt_header is not None and (
        not isinstance(attempt_header, str) or not _TOKEN.fullmatch(attempt_header)
    ):
        raise ValueError(f"attempt_header must be a header name or None, got {attempt_header!r}")
    if breaker is not None and not isinstance(breaker, CircuitBreaker):
        raise ValueError(f"breaker must be a CircuitBreaker or None, got {breaker!r}")
    if store is not None and not isinstance(store, MemoryStore):
        raise ValueError(f"store must be a MemoryStore, a RedisStore or None, got {store!r}")
    if not isinstance(cooldown, bool):
        raise ValueError(f"cooldown must be True or False, got {cooldown!r}")
    if not isinstance(auto_idempotency_key, bool):
        raise ValueError(
            f"auto_idempotency_key must be True or False, got {auto_idempotency_key!r}"
        )
    for name, function in (("sleep", sleep), ("clock", clock), ("wallclock", wallclock)):
        if function is not None and not callable(function):
            raise ValueError(f"{name} must be a function, got {function!r}")
    return Controller(
        base,
        flavour=flavour,
        budget=budget,
        cooldown=cooldown,
        hooks=_hooks(hooks),
        rng=rng if rng is not None else random.Random(),
        clock=clock,
        wallclock=wallclock if wallclock is not None else time.time,
        contact=check_contact(contact),
        auto_idempotency_key=auto_idempotency_key,
        breaker=breaker,
        attempt_header=attempt_header,
        store=store,
    )


def _configure(
    flavour: Flavour, transport: object, kwargs: Mapping[str, Any], *, sync: bool,
    **options: Any,
) -> tuple[Controller, Any]:
    """What both drivers' constructors do: check every option, build the controller, and
    check (or build) the inner transport of the flavour and the kind (sync or async)."""
    policy_fields, transport_kwargs = _split_keywords(kwargs, transport)
    controller = _controller(
        flavour=flavour, transport=transport, policy_fields=policy_fields, **options
    )
    base, build = (
        (flavour.sync_base, flavour.sync_transport) if sync
        else (flavour.async_base, flavour.async_transport)
    )
    if transport is None:
        return controller, build(**_checked(transport_kwargs, flavour))
    if not isinstance(transport, base):
        other = "handle_async_request" if sync else "handle_request"
        raise ValueError(
            f"transport must be {'a sync' if sync else 'an'} {flavour.name}."
            f"{base.__name__}, got {transport!r}"
            + (f": use {'AsyncRetryTransport' if sync else 'RetryTransport'}"
               if hasattr(transport, other) else "")
        )
    return controller, transport


def _buffer(response: Response, limit: int, flavour: Flavour) -> bool:
    """Read the raw body into memory, up to ``limit`` bytes; True if it was all read.

    A longer body stays a stream: what was read is put back in front of the rest.
    """
    stream = response.stream
    assert isinstance(stream, flavour.sync_byte_stream)
    if limit <= 0:
        return False
    head: list[bytes] = []
    size = 0
    chunks = iter(stream)
    for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size > limit:
            response.stream = flavour.sync_tail(head, chunks, stream)
            return False
    stream.close()
    response.stream = flavour.byte_stream(b"".join(head))
    return True


async def _abuffer(response: Response, limit: int, flavour: Flavour) -> bool:
    """The async twin of :func:`_buffer`."""
    stream = response.stream
    assert isinstance(stream, flavour.async_byte_stream)
    if limit <= 0:
        return False
    head: list[bytes] = []
    size = 0
    chunks = aiter(stream)
    async for chunk in chunks:
        head.append(chunk)
        size += len(chunk)
        if size > limit:
            response.stream = flavour.async_tail(head, chunks, stream)
            return False
    await stream.aclose()
    response.stream = flavour.byte_stream(b"".join(head))
    return True


def _drain(response: Response, clock: Callable[[], float]) -> None:
    """Read a discarded response's small body so its connection can be reused, for at most
    ``DRAIN_MAX_SECONDS``: a sync read cannot be interrupted, so the time is checked between
    chunks (each chunk is bounded by the read timeout). Past it, the connection is dropped."""
    end = clock() + DRAIN_MAX_SECONDS
    for _ in response.iter_raw():
        if clock() >= end:
            return


async def _adrain(response: Response) -> None:
    """The async twin of :func:`_drain`: the read itself is cut off at the time limit."""
    with anyio.move_on_after(DRAIN_MAX_SECONDS):
        async for _ in response.aiter_raw():
            pass


def _awaitable(result: object) -> Awaitable[object]:
    """What an async transport's ``sleep`` returned, checked: a sync function (such as
    ``time.sleep``) returns no awaitable, and would block the event loop besides."""
    if not inspect.isawaitable(result):
        raise TypeError(
            f"sleep must be an async function of seconds (such as anyio.sleep), but it "
            f"returned {result!r}, which cannot be awaited"
        )
    return result


async def _aclose(response: Response) -> None:
    """Close a response even while the task is being cancelled."""
    with anyio.CancelScope(shield=True):
        await response.aclose()


class _Common:
    _controller: Controller

    @property
    def policy(self) -> RetryPolicy:
        """The transport's default policy (per-request overrides apply on top of it)."""
        return self._controller.policy

    @property
    def budget(self) -> RetryBudget | None:
        """The retry budget this transport spends, or ``None``."""
        return self._controller.budget

    @property
    def stats(self) -> RetryStats:
        """A snapshot of this transport's counters."""
        return self._controller.stats()


class SyncRetry(_Common, Generic[_Sync]):
    """The sync driver: each flavour's ``RetryTransport`` is this and its ``BaseTransport``."""

    _flavour: ClassVar[Flavour]

    def __init__(
        self,
        transport: _Sync | None = None,
        *,
        policy: RetryPolicy | None = None,
        budget: BudgetArg = DEFAULT_BUDGET,
        cooldown: bool = True,
        breaker: CircuitBreaker | None = None,
        store: MemoryStore | None = None,
        hooks: Iterable[RetryHook] | RetryHook | None = None,
        contact: str | None = None,
        auto_idempotency_key: bool = False,
        attempt_header: str | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] | None = None,
        wallclock: Callable[[], float] | None = None,
        **kwargs: Unpack[TransportOptions],
    ) -> None:
        """Wrap ``transport`` (default: a new ``HTTPTransport`` of the same library).

        Args:
            transport: the transport to wrap. Default: a new ``HTTPTransport`` built with the
                transport keywords given here (``verify``, ``cert``, ``http1``, ``http2``,
                ``limits``, ``trust_env``, ``proxy``, ``uds``, ``local_address``,
                ``retries``, ``socket_options``).
            policy: the :class:`RetryPolicy`; keywords naming its fields override it.
            budget: the :class:`RetryBudget` to spend; default: a budget of its own;
                ``None``: no budget. Share one budget between transports (of either
                library, sync or async) to bound them together.
            cooldown: when an origin answers 429 or 503 with ``Retry-After``, hold other
                requests to it until then. Default True.
            breaker: a :class:`CircuitBreaker` (one state per origin; may be shared by
                several transports); ``None`` (default): no breaker.
            store: a :class:`MemoryStore` or :class:`RedisStore` to share cooldowns
                through: one started here is applied by every transport of the store (in
                this process, or across a fleet for a ``RedisStore``), and theirs here.
                Default ``None``: this transport's own table. Give the breaker the same
                store to share its transitions too. A transport never closes its store.
            hooks: callables given a :class:`RetryEvent` for each retry and each give-up.
            contact: an e-mail address sent as the ``From`` header, so an API owner can
                reach whoever runs the client.
            auto_idempotency_key: give each request whose method is outside
                ``retry_methods`` a fresh ``Idempotency-Key``, so that it may be retried.
                Only safe with servers that deduplicate by key. Default False.
            attempt_header: a header name (such as ``"x-attempt"``): every attempt, the
                first included, carries its 1-based number in it, so servers and proxies can
                tell a retry from a first try. Default ``None``: no header.
            rng: a ``random.Random`` for the jitter (seed it for reproducible waits).
            sleep: the function that waits, given seconds. Default ``time.sleep``.
            clock: a monotonic clock in seconds, for deadlines and cooldowns. Default
                ``time.monotonic``.
            wallclock: the POSIX time in seconds, for ``Retry-After`` dates. Default
                ``time.time``.
            **kwargs: :class:`RetryPolicy` fields, and transport keywords when
                ``transport`` is not given. Anything else raises ``TypeError``.

        Raises:
            ValueError: an invalid value (the message names the argument or field), or
                ``transport`` is itself a retry transport.
        """
        if is_async_function(sleep):
            raise ValueError(
                f"sleep must be a plain function of seconds for RetryTransport, got the "
                f"coroutine function {sleep!r}: it would never be awaited, so no wait would "
                "happen (use AsyncRetryTransport with async code)"
            )
        self._controller, self._transport = _configure(
            self._flavour, transport, kwargs, sync=True, policy=policy, budget=budget,
            cooldown=cooldown, breaker=breaker, store=store, hooks=hooks, rng=rng, sleep=sleep,
            clock=clock or time.monotonic, wallclock=wallclock, contact=contact,
            auto_idempotency_key=auto_idempotency_key, attempt_header=attempt_header,
        )
        self._sleep = sleep if sleep is not None else time.sleep

    def handle_request(self, request: Request) -> Response:
        call = RetryCall(self._controller, request)
        try:
            wait = call.start()
            transport = self._transport
            while True:
                if wait is not None:
                    self._sleep(wait)
                try:
                    response = transport.handle_request(call.attempt_request())
                except Exception as exc:
                    wait = call.on_error(exc)
                    if wait is None:
                        raise
                    continue
                if call.policy.retry_body_errors:
                    limit = call.body_limit(response)
                    if limit is not None:
                        try:
                            call.body_read(_buffer(response, limit, self._flavour))
                        except Exception as exc:
                            response.close()
                            wait = call.on_error(exc)
                            if wait is None:
                                raise
                            continue
                        except BaseException:
                            response.close()
                            raise
                wait = call.on_response(response)
                if wait is None:
                    return response
                try:
                    if call.should_drain(response):
                        _drain(response, self._controller.clock)
                except Exception:
                    pass  # a broken body is as good as discarded
                finally:
                    response.close()
        except BaseException:
            call.abandon()  # a cancel or an interrupt mid-attempt: the caller's request back
            raise

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Self:
        self._transport.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self._transport.__exit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._transport!r}, policy={self.policy!r})"


class AsyncRetry(_Common, Generic[_Async]):
    """The async driver: each flavour's ``AsyncRetryTransport``."""

    _flavour: ClassVar[Flavour]

    def __init__(
        self,
        transport: _Async | None = None,
        *,
        policy: RetryPolicy | None = None,
        budget: BudgetArg = DEFAULT_BUDGET,
        cooldown: bool = True,
        breaker: CircuitBreaker | None = None,
        store: MemoryStore | None = None,
        hooks: Iterable[RetryHook] | RetryHook | None = None,
        contact: str | None = None,
        auto_idempotency_key: bool = False,
        attempt_header: str | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        clock: Callable[[], float] | None = None,
        wallclock: Callable[[], float] | None = None,
        **kwargs: Unpack[TransportOptions],
    ) -> None:
        """Wrap ``transport`` (default: a new ``AsyncHTTPTransport`` of the same library).

        Runs on asyncio and trio alike: it waits with ``anyio.sleep`` unless given another
        ``sleep`` (an async function of seconds), and its default clock is
        ``anyio.current_time`` (the event loop's clock, virtual under trio's
        ``MockClock``). Every other argument is as for ``RetryTransport``.
        """
        self._controller, self._transport = _configure(
            self._flavour, transport, kwargs, sync=False, policy=policy, budget=budget,
            cooldown=cooldown, breaker=breaker, store=store, hooks=hooks, rng=rng, sleep=sleep,
            clock=clock or anyio.current_time, wallclock=wallclock, contact=contact,
            auto_idempotency_key=auto_idempotency_key, attempt_header=attempt_header,
        )
        self._sleep = sleep if sleep is not None else anyio.sleep

    async def handle_async_request(self, request: Request) -> Response:
        call = RetryCall(self._controller, request)
        try:
            wait = call.start()
            transport = self._transport
            while True:
                if wait is not None:
                    await _awaitable(self._sleep(wait))
                try:
                    response = await transport.handle_async_request(call.attempt_request())
                except Exception as exc:
                    wait = call.on_error(exc)
                    if wait is None:
                        raise
                    continue
                if call.policy.retry_body_errors:
                    limit = call.body_limit(response)
                    if limit is not None:
                        try:
                            call.body_read(await _abuffer(response, limit, self._flavour))
                        except Exception as exc:
                            await _aclose(response)
                            wait = call.on_error(exc)
                            if wait is None:
                                raise
                            continue
                        except BaseException:
                            await _aclose(response)
                            raise
                wait = call.on_response(response)
                if wait is None:
                    return response
                try:
                    if call.should_drain(response):
                        await _adrain(response)
                except Exception:
                    pass  # a broken body is as good as discarded
                finally:
                    await _aclose(response)
        except BaseException:
            call.abandon()  # a cancel or an interrupt mid-attempt: the caller's request back
            raise

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        await self._transport.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self._transport.__aexit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._transport!r}, policy={self.policy!r})"
