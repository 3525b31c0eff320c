"""The two drivers, sync and async, written once for both flavours (httpx and httpx2).

Each does the I/O and the sleeping and nothing else: every decision is made by the shared
core in ``_call/core.py``. Their loops are one: the async driver's is written in
``_async_loop.py`` and the sync driver's generated from it (``_sync_loop.py``, by
``python scripts/unasync.py``), so the two differ only in ``await`` and names. What the
generator cannot translate is written here, once per driver: the hooks the loops call
(``_first``, ``_pause``, ``_hedged_try``, ``_drain``, ``_close``), the constructors and
closing. What differs between httpx and httpx2 (exception classes, stream and transport
classes) comes from the class's ``_flavour``; each flavour's public ``RetryTransport`` and
``AsyncRetryTransport`` subclass these drivers and that flavour's own transport base classes
(``_io/transports.py``, ``httpx2.py``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import anyio

from .._base.flavour import Flavour, Request, Response
from .._call.controller import Controller
from .._call.hedged_call import HedgedCall
from .._call.hedging import Hedging
from .._call.options import (
    DEFAULT_BUDGET,
    BudgetArg,
    TransportOptions,
    configure,
)
from .._call.resume import Resume
from .._guards.breaker import CircuitBreaker
from .._guards.throttle import AdaptiveThrottle
from .._policy.observe import RetryHook
from .._policy.policy import RetryPolicy
from .._stores.memory import MemoryStore
from ._async_hedging import AsyncHedgingLoop
from ._async_loop import AsyncLoop
from ._common import _PUBLIC, _check_request
from ._sync_hedging import SyncHedgingLoop
from ._sync_loop import SyncLoop
from .bodies import aclose as aclose_response, adrain, drain
from .hedge_async import AsyncHedger
from .hedge_shared import Ended
from .hedge_sync import SyncHedger
from .hedge_workers import Workers

if TYPE_CHECKING:  # typing.Unpack and Self are new in 3.11; nothing is imported at run time
    from typing_extensions import Self, Unpack

__all__ = ["AsyncRetry", "SyncRetry"]

#: The flavour's sync / async transport base class, as the constructor's ``transport``.
_Sync = TypeVar("_Sync")
_Async = TypeVar("_Async")


def _build(driver: SyncRetry[Any] | AsyncRetry[Any], values: dict[str, Any], *, sync: bool,
           clock: Callable[[], float]) -> None:
    """Both constructors' body, given their ``locals()``: the options checked once
    (``_options``), the controller and the inner transport."""
    flavour = driver._flavour
    policy, settings, transport = configure(flavour, values, sync=sync,
                                            retry_types=(SyncRetry, AsyncRetry))
    driver._controller = Controller(policy, flavour=flavour, settings=settings,
                                    clock=settings.clock or clock)
    driver._transport = transport
    # httpx's own async transport keeps a pool and traces each request: a hedged try can
    # tell an attempt waiting for a connection from one on the wire (``AsyncHedger``).
    driver._pooled = not sync and isinstance(transport, cast(type, flavour.async_transport))
    driver._untried = True
    driver._quick = driver._controller.quick
    driver._memory = flavour.byte_stream
    driver._lap = driver._controller.clock
    driver._record = driver._controller.latency.record


class _LoopChosen:
    """Both drivers' making: the loop is chosen once, as the transport is made. With
    ``hedging``, it is made of its class's twin that runs the hedging loop
    (:func:`_with_hedging`), before it has an attribute: an object whose ``__class__`` is
    assigned afterwards has its attributes read the slow way for good. (A base after the
    driver, so that ``inspect.signature`` reads the driver's ``__init__``.)"""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("hedging") is not None:  # one of the wrong kind: refused by __init__
            cls = _with_hedging(cast(type, cls), cls._sync)  # type: ignore[attr-defined]
        return object.__new__(cls)


@functools.cache
def _with_hedging(cls: type[Any], sync: bool) -> type[Any]:
    """``cls`` (a flavour's transport, or a user's subclass of one) running the hedging
    loop (``_sync_hedging.py``'s or ``_async_hedging.py``'s) in place of the plain one:
    its twin, of the same name, with the loop mixed in after it (a subclass's own methods
    still come first). A transport built with ``hedging`` is one (:class:`_LoopChosen`),
    so that one without runs the plain loop, which names no race: the loop is chosen
    once."""
    loop = SyncHedgingLoop if sync else AsyncHedgingLoop
    return type(cls.__name__, (cls, loop), {
        "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
    })


def _wrong_client(flavour: Flavour, *, sync: bool) -> TypeError:
    """The error for a transport given to a client of the other kind (an ``AsyncClient``
    over the sync transport, or the reverse), naming the class to use: raised by the
    other kind's entry points, which a transport has only to say so."""
    module = _PUBLIC[flavour.name]
    ours, theirs = ("RetryTransport", "AsyncRetryTransport")[::1 if sync else -1]
    client, other = ("Client", "AsyncClient")[::1 if sync else -1]
    return TypeError(
        f"{module}.{ours} is the transport for {flavour.name}.{client}; for "
        f"an {flavour.name}.{other} use {module}.{theirs}"
    )


def _awaitable(result: object) -> Awaitable[object]:
    """What an async transport's ``sleep`` returned, checked: a sync function (such as
    ``time.sleep``) returns no awaitable, and would block the event loop besides."""
    if not inspect.isawaitable(result):
        raise TypeError(
            f"sleep must be an async function of seconds (such as anyio.sleep), but it "
            f"returned {result!r}, which cannot be awaited"
        )
    return result


def _waited(result: object) -> None:
    """What a sync transport's ``sleep`` returned, checked: an awaitable means that it did
    not wait (an async function's call only makes a coroutine). The awaitable is closed, so
    that no "never awaited" warning follows the error."""
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if callable(close):
            close()
        raise TypeError(
            f"sleep must be a plain function of seconds for RetryTransport, but it returned "
            f"{result!r}, an awaitable, so it did not wait (use AsyncRetryTransport with "
            "async code)"
        )


def _loop_clock() -> Callable[[], float]:
    """The running event loop's clock, as ``anyio.current_time`` reads it, without finding
    the loop at each reading: asyncio's is ``time.monotonic``; trio's is
    ``trio.current_time`` (virtual under its ``MockClock``). A transport's connections
    belong to one event loop, so its first request's loop is the one it runs on."""
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_task()
        except RuntimeError:  # trio is imported, but this is not its loop
            pass
        else:
            return trio.current_time  # type: ignore[no-any-return]
    loop = asyncio.get_running_loop()
    return loop.time if type(loop).time is not asyncio.BaseEventLoop.time else time.monotonic


class SyncRetry(SyncLoop, _LoopChosen, Generic[_Sync]):
    """The sync driver: each flavour's ``RetryTransport`` is this and its ``BaseTransport``."""

    _sync = True

    def __init__(
        self,
        transport: _Sync | None = None,
        *,
        policy: RetryPolicy | None = None,
        budget: BudgetArg = DEFAULT_BUDGET,
        cooldown: bool = True,
        breaker: CircuitBreaker | None = None,
        throttle: AdaptiveThrottle | None = None,
        hedging: Hedging | None = None,
        resume: Resume | None = None,
        store: MemoryStore | None = None,
        hooks: Iterable[RetryHook] | RetryHook | None = None,
        contact: str | None = None,
        auto_idempotency_key: bool = False,
        attempt_header: str | None = None,
        deadline_header: str | None = None,
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
            throttle: an :class:`AdaptiveThrottle` (one state per origin; may be shared by
                several transports): every attempt, first tries and retries, with retries
                on or off, is refused locally with a probability that grows as the origin
                accepts fewer than one in ``k`` of the attempts it gets (``ThrottledError``
                for a first attempt, stop reason ``throttled`` for a retry). Default
                ``None``: no throttle.
            hedging: a :class:`Hedging`: a request that may be sent again without risk and
                has not answered after its delay gets another copy, and whichever answers
                first wins (the others are cancelled). Sync transports run hedged
                requests' attempts on worker threads of their own (at most
                ``HEDGE_WORKERS``, started as needed; ``close()`` waits for them). Default
                ``None``: no hedging.
            resume: a :class:`Resume`: the body of a final response to a ``GET`` that
                breaks while the caller reads it goes on where it stopped, by byte range
                (a strong ``ETag``) or by event ID (``text/event-stream``); each resumption
                is an attempt the guards admit and the budget pays for. Default ``None``:
                no resumption, and nothing on the success path.
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
                tell a retry from a first try. Default ``None``: no header. Refused
                (``ValueError``), in any case: the policy's ``idempotency_header`` (or a
                request override's), ``Idempotency-Key``, and every request header HTTP
                itself defines, whose value the number would replace (framing, routing,
                credentials, representation metadata, negotiation, request context,
                caching, conditions: ``Content-Length``, ``Host``, ``Authorization``...;
                the list and its RFC 9110, 9111 and 9112 sections:
                ``retry_transport._base.validate.HTTP_FIELDS``).
            deadline_header: a header name (such as ``"x-request-deadline-ms"``): when a
                deadline applies to the request (the policy's ``deadline``, an ambient
                :class:`deadline`, or both), every attempt carries the whole milliseconds
                left of it, rounded down, computed as the attempt is sent, so the service
                called can stop working when the caller gives up (its middleware:
                ``retry_transport.asgi`` / ``retry_transport.wsgi``). A caller's own value
                is replaced; without a deadline the request is left as it is. An attempt
                that would carry 0 ms is not sent. Default ``None``. Refused as
                ``attempt_header`` is.
            rng: a ``random.Random`` for the jitter (seed it for reproducible waits).
            sleep: the function that waits, given seconds, called once per wait with that
                wait and never otherwise. A plain function: a coroutine function, or a
                partial or bound method of one, or an object whose ``__call__`` is one,
                raises ``TypeError`` (it would never be awaited). Default: a wait in real
                time (as ``time.sleep``) that ``close()`` ends at once.
                One whose kind cannot be told without calling it (an object with a plain
                ``__call__``, a mock) is taken as it is; if a wait's call returns an
                awaitable, it did not wait: the awaitable is closed unawaited and that
                wait raises ``TypeError``.
            clock: a monotonic clock in seconds, for deadlines and cooldowns. Default
                ``time.monotonic``.
            wallclock: the POSIX time in seconds, for ``Retry-After`` dates. Default
                ``time.time``.
            **kwargs: :class:`RetryPolicy` fields, and transport keywords when
                ``transport`` is not given. Anything else raises ``TypeError``.

        Raises:
            TypeError: a value of the wrong kind (the message names the argument or field):
                a string where a number goes, a ``bool`` or a float where a count goes, no
                ``RetryPolicy`` for ``policy``, a callable of the wrong kind (``sleep``,
                ``clock``, ``wallclock``, ``hooks``), a ``transport`` that is no transport of
                the library and kind (a ``RetryPolicy`` given there: it says ``policy=``); or
                an unknown keyword (another library's, such as ``max_retries=3``, with what
                it is here: ``max_attempts=4``).
            ValueError: an invalid value (the message names the argument or field), or
                ``transport`` is itself a retry transport.
        """
        _build(self, locals(), sync=True, clock=time.monotonic)
        self._sleep = sleep  # None: wait on ``_wakeup``, which close() sets
        self._wakeup = threading.Event()
        self._workers = Workers()
        if self._controller.hedging is not None:
            self._hedger = SyncHedger(self._controller, self._workers, self._record,
                                      self._lap)

    def _first(self, request: Request) -> None:
        """Before the first request: its library, checked."""
        _check_request(self._flavour, request, sync=True)
        self._untried = False

    def _pause(self, seconds: float, closes: int) -> None:
        """Wait ``seconds`` before the next attempt of a request begun at close count
        ``closes``. The default wait ends at once when the transport is closed (the next
        attempt then is not sent); the user's ``sleep`` is called as it is."""
        sleep = self._sleep
        if sleep is None:
            wakeup = self._wakeup  # read before the count: close() counts, then sets it
            if self._controller.closes == closes:
                wakeup.wait(seconds)
            return
        slept = sleep(seconds)
        if slept is not None:
            _waited(slept)

    def _hedged_try(self, call: HedgedCall) -> Ended:
        """Run the first try of a hedged ``call`` on the workers: how it ended, or
        ``(None, None)`` when no worker is free (its attempts then go unhedged, at once)."""
        return self._hedger.run(self._transport, call)

    def _drain(self, response: Response) -> None:
        """Read a discarded response's body, within ``DRAIN_MAX_SECONDS`` of the clock."""
        drain(response, self._controller.clock)

    def _close(self, response: Response) -> None:
        """Close a response."""
        response.close()

    # An AsyncClient's entry points: refused, naming AsyncRetryTransport, nothing sent.
    def handle_async_request(self, request: Request) -> Response:
        raise _wrong_client(self._flavour, sync=True)

    def __aenter__(self) -> Self:
        raise _wrong_client(self._flavour, sync=True)

    def __aexit__(self, *exc_info: object) -> None:
        raise _wrong_client(self._flavour, sync=True)

    def aclose(self) -> None:
        raise _wrong_client(self._flavour, sync=True)

    def _count_close(self) -> None:
        super()._count_close()
        wakeup, self._wakeup = self._wakeup, threading.Event()
        wakeup.set()  # the waits under way end now

    def close(self) -> None:
        """Close the inner transport: the requests under way start no attempt after this
        (a wait between attempts ends at once); the hedged attempts still running on the
        workers are waited for first, and the workers stopped."""
        self._count_close()
        # The workers' attempts end first, as they would have: a pool closed under a read
        # blocked on another thread does not wake it, so it would wait for its timeout.
        self._workers.close()
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
        self._count_close()
        self._workers.close()  # as in close()
        self._transport.__exit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._transport!r}, policy={self.policy!r})"


class AsyncRetry(AsyncLoop, _LoopChosen, Generic[_Async]):
    """The async driver: each flavour's ``AsyncRetryTransport``."""

    _sync = False

    def __init__(
        self,
        transport: _Async | None = None,
        *,
        policy: RetryPolicy | None = None,
        budget: BudgetArg = DEFAULT_BUDGET,
        cooldown: bool = True,
        breaker: CircuitBreaker | None = None,
        throttle: AdaptiveThrottle | None = None,
        hedging: Hedging | None = None,
        resume: Resume | None = None,
        store: MemoryStore | None = None,
        hooks: Iterable[RetryHook] | RetryHook | None = None,
        contact: str | None = None,
        auto_idempotency_key: bool = False,
        attempt_header: str | None = None,
        deadline_header: str | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        clock: Callable[[], float] | None = None,
        wallclock: Callable[[], float] | None = None,
        **kwargs: Unpack[TransportOptions],
    ) -> None:
        """Wrap ``transport`` (default: a new ``AsyncHTTPTransport`` of the same library).

        Runs on asyncio and trio alike: it waits with ``anyio.sleep`` unless given another
        ``sleep``, and its default clock is ``anyio.current_time`` (the event loop's clock,
        virtual under trio's ``MockClock``). Every other argument is as for
        ``RetryTransport``.

        ``sleep`` is called once per wait with that wait, and never otherwise. It must be an
        async function of seconds (an ``async def``, or a partial or bound method of one,
        or an object whose ``__call__`` is one): a plain function or a builtin
        (``time.sleep``, a ``lambda``, even one returning a coroutine) raises
        ``TypeError``, since it would block the event loop. One whose kind cannot be told
        without calling it (an object with a plain ``__call__``, a mock) is taken as it
        is; a wait whose call returns no awaitable raises ``TypeError``.
        """
        _build(self, locals(), sync=False, clock=anyio.current_time)
        self._sleep = sleep  # None: anyio.sleep, in a scope that aclose() cancels
        self._waits: set[anyio.CancelScope] = set()

    def _first(self, request: Request) -> None:
        """Before the first request: its library, checked, and the event loop's clock."""
        _check_request(self._flavour, request, sync=False)
        if self._controller.settings.clock is None:  # the event loop's own clock, cheaply
            self._lap = _loop_clock()
        if self._controller.hedging is not None:
            self._hedger = AsyncHedger(self._controller, self._record, self._lap,
                                       aclose_response, self._pooled)
        self._untried = False

    async def _pause(self, seconds: float, closes: int) -> None:
        """Wait ``seconds`` before the next attempt of a request begun at close count
        ``closes``. The default wait ends at once when the transport is closed (the next
        attempt then is not sent); the user's ``sleep`` is awaited as it is."""
        sleep = self._sleep
        if sleep is not None:
            await _awaitable(sleep(seconds))
            return
        if self._controller.closes != closes:
            return
        waits = self._waits
        with anyio.CancelScope() as scope:
            waits.add(scope)
            try:
                await anyio.sleep(seconds)
            finally:
                waits.discard(scope)

    async def _hedged_try(self, call: HedgedCall) -> Ended:
        """Run the first try of a hedged ``call``: how it ended."""
        return await self._hedger.run(self._transport, call)

    async def _drain(self, response: Response) -> None:
        """Read a discarded response's body, for ``DRAIN_MAX_SECONDS`` at most."""
        await adrain(response)

    async def _close(self, response: Response) -> None:
        """Close a response, even while the task is being cancelled."""
        await aclose_response(response, self._flavour)

    # A sync Client's entry points: refused, naming RetryTransport, nothing sent.
    def handle_request(self, request: Request) -> Response:
        raise _wrong_client(self._flavour, sync=False)

    def __enter__(self) -> Self:
        raise _wrong_client(self._flavour, sync=False)

    def __exit__(self, *exc_info: object) -> None:
        raise _wrong_client(self._flavour, sync=False)

    def close(self) -> None:
        raise _wrong_client(self._flavour, sync=False)

    def _count_close(self) -> None:
        super()._count_close()
        for scope in list(self._waits):  # the waits under way end now
            scope.cancel()

    async def aclose(self) -> None:
        """Close the inner transport: the requests under way start no attempt after this
        (a wait between attempts ends at once)."""
        self._count_close()
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
        self._count_close()
        await self._transport.__aexit__(exc_type, exc_value, traceback)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._transport!r}, policy={self.policy!r})"
