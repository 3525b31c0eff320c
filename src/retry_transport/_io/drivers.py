"""The two drivers, sync and async, written once for both flavours (httpx and httpx2).

They are hand-written twins, as httpx's own transports are: each does the I/O and the
sleeping and nothing else, and every decision is made by the shared core in ``_call/core.py``.
The two ``handle_*`` loops differ only in ``await``. What differs between httpx and httpx2
(exception classes, stream and transport classes) comes from the class's ``_flavour``; each
flavour's public ``RetryTransport`` and ``AsyncRetryTransport`` subclass these drivers and
that flavour's own transport base classes (``_io/transports.py``, ``httpx2.py``).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

import anyio

from .._call.controller import Controller
from .._call.core import RetryCall
from .._call.hedged_call import HedgedCall
from .._call.hedging import Hedging
from .._call.latency import LatencySummary
from .._call.options import (
    DEFAULT_BUDGET,
    BudgetArg,
    TransportOptions,
    configure,
)
from .._guards.breaker import CircuitBreaker
from .._guards.throttle import AdaptiveThrottle
from .._leaves.flavour import Flavour, Request, Response
from .._leaves.models import RetryStats
from .._meaning.observe import RetryHook
from .._meaning.policy import RetryPolicy
from .._stores.memory import MemoryStore
from .._wire.http import normalise, origin as origin_of
from .bodies import abuffer, aclose as aclose_response, adrain, buffer, drain
from .hedge_loops import AsyncHedger, SyncHedger, Workers, sync_try

if TYPE_CHECKING:  # typing.Unpack and Self are new in 3.11; nothing is imported at run time
    from typing_extensions import Self, Unpack

    from .._guards.budget import RetryBudget

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
    driver._lap = driver._controller.clock
    driver._record = driver._controller.latency.record


#: Where each flavour's transports are public, by the library's import name.
_PUBLIC: dict[str, str] = {"httpx": "retry_transport", "httpx2": "retry_transport.httpx2"}


def _check_request(flavour: Flavour, request: object, *, sync: bool) -> None:
    """Refuse a request of the other HTTP library (a client of one library given the other's
    transport) with a ``TypeError`` naming the class to use: the libraries' classes do not
    mix, and the inner transport would fail with a bare ``AssertionError``. Run on a
    transport's first request, and when an attempt fails with an ``AssertionError`` or a
    ``TypeError``: never on the success path."""
    if isinstance(request, flavour.request):
        return
    library = type(request).__module__.partition(".")[0]
    name = "RetryTransport" if sync else "AsyncRetryTransport"
    ours = f"{_PUBLIC[flavour.name]}.{name}"
    if library in _PUBLIC:
        raise TypeError(
            f"{ours} serves {flavour.name} clients, but it was given an {library}.Request "
            f"(an {library}.{'Client' if sync else 'AsyncClient'}): use "
            f"{_PUBLIC[library]}.{name} with {library}"
        )
    raise TypeError(f"{ours} serves {flavour.name} clients, but it was given {request!r}, "
                    f"which is no {flavour.name}.Request")


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


class _Common:
    _controller: Controller
    _transport: Any
    _pooled: bool
    _flavour: ClassVar[Flavour]
    #: Whether no request was handled yet: the first one's library is checked, then this
    #: is False, so the success path checks nothing.
    _untried: bool = True
    #: The clock attempts' latencies are timed with, and where they are recorded.
    _lap: Callable[[], float]
    _record: Callable[[str, float, float], None]

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

    def latency(self, url_or_origin: object) -> LatencySummary | None:
        """The latency of ``url_or_origin``'s attempts over the last minute (from sending
        an attempt to its response's headers, on the transport's ``clock``): ``count`` and
        the ``p50``, ``p95``, ``p99`` and ``p999`` percentiles in seconds, each within 5%;
        ``None`` for an origin with none. Accepts a URL (of either library, or a string)
        or an origin (``"https://api.example.com"``)."""
        return self._controller.latency.summary(normalise(url_or_origin))

    def _call(self, request: Request, closes: int) -> RetryCall:
        controller = self._controller
        if controller.hedging is not None:
            return HedgedCall(controller, request, controller.hedging, closes)
        return RetryCall(controller, request, closes=closes)

    def _count_close(self) -> None:
        """The transport is being closed: no attempt of a request under way starts after
        this (``RetryCall.attempt_request``, ``HedgedCall.hedge``)."""
        self._controller.closes += 1


class SyncRetry(_Common, Generic[_Sync]):
    """The sync driver: each flavour's ``RetryTransport`` is this and its ``BaseTransport``."""

    _hedger: SyncHedger  # when hedging

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
                ``retry_transport._leaves.validate.HTTP_FIELDS``).
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
            ValueError: an invalid value (the message names the argument or field), or
                ``transport`` is itself a retry transport.
            TypeError: a callable of the wrong kind (``sleep``, ``clock``, ``wallclock``,
                ``hooks``), or an unknown keyword.
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

    def handle_request(self, request: Request) -> Response:
        if self._untried:
            self._first(request)
        controller = self._controller
        closes = controller.closes
        # None while the first attempt goes as it is (the usual case: the quick path).
        call = None if controller.quick.counted_first(request) else self._call(request, closes)
        stream = request.stream
        race = None  # a quick first attempt that a hedge may join, on a worker
        if call is None and controller.hedging is not None:
            call, race = self._hedger.start(self._transport, request, closes, stream)
        lap = self._lap
        timed = controller.timed
        try:
            wait = None if call is None else call.wait
            hedged = cast(HedgedCall, call) if call is not None and call.hedged else None
            transport = self._transport
            while True:
                if wait is not None:
                    self._pause(wait, closes)
                if hedged is not None:  # the first try, hedged (None: no worker is free)
                    ended = sync_try(hedged, transport, self._workers, self._record, lap)
                    hedged = None
                    if ended is not None:
                        done, wait = ended
                        if done is not None:
                            return done
                        continue
                attempt = request if call is None else call.ready or call.attempt_request()
                try:
                    if race is None:
                        start = lap() if timed() else None
                        response = transport.handle_request(attempt)
                        if start is not None:
                            end = lap()
                            self._record(origin_of(request.url), end - start, end)
                    else:  # timed by the race; None: it was hedged
                        response = race.attempt()
                except Exception as exc:
                    race = None
                    if call is None:
                        call = RetryCall(controller, request, quick=True, stream=stream,
                                         closes=closes)
                    wait = call.on_error(exc)
                    if wait is None:
                        if isinstance(exc, (AssertionError, TypeError)):
                            _check_request(self._flavour, request, sync=True)
                        raise
                    continue
                if race is not None:  # the quick first attempt, sent by the race
                    hedged_race, race = race, None
                    if response is None:  # hedged: the try's outcome
                        call = hedged_race.call
                        done, wait = hedged_race.outcome()
                        if done is not None:
                            return done
                        continue
                if call is None:
                    if controller.quick.ends(request, response):
                        return response
                    call = RetryCall(controller, request, quick=True, stream=stream,
                                         closes=closes)
                elif call.policy.retry_body_errors:
                    limit = call.body_limit(response)
                    if limit is not None:
                        try:
                            call.body_read(buffer(response, limit, self._flavour))
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
                        drain(response, controller.clock)
                except Exception:
                    pass  # a broken body is as good as discarded
                finally:
                    response.close()
        except BaseException:
            if call is not None:  # a cancel or an interrupt mid-attempt: the request back
                call.abandon()
            raise

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


class AsyncRetry(_Common, Generic[_Async]):
    """The async driver: each flavour's ``AsyncRetryTransport``."""

    _hedger: AsyncHedger  # when hedging, from the first request on

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

    async def handle_async_request(self, request: Request) -> Response:
        if self._untried:
            self._first(request)
        controller = self._controller
        closes = controller.closes
        # None while the first attempt goes as it is (the usual case: the quick path).
        call = None if controller.quick.counted_first(request) else self._call(request, closes)
        stream = request.stream
        race = None  # a quick first attempt that a hedge may join (asyncio)
        if call is None and controller.hedging is not None:
            call, race = self._hedger.start(self._transport, request, closes, stream)
        lap = self._lap
        timed = controller.timed
        try:
            wait = None if call is None else call.wait
            hedged = cast(HedgedCall, call) if call is not None and call.hedged else None
            transport = self._transport
            while True:
                if wait is not None:
                    await self._pause(wait, closes)
                if hedged is not None:  # the first try, hedged
                    done, wait = await self._hedger.run(transport, hedged)
                    hedged = None
                    if done is not None:
                        return done
                    continue
                attempt = request if call is None else call.ready or call.attempt_request()
                try:
                    if race is None:
                        start = lap() if timed() else None
                        response = await transport.handle_async_request(attempt)
                        if start is not None:
                            end = lap()
                            self._record(origin_of(request.url), end - start, end)
                    else:  # timed by the race; None: it was hedged
                        response = await race.attempt()
                except Exception as exc:
                    race = None
                    if call is None:
                        call = RetryCall(controller, request, quick=True, stream=stream,
                                         closes=closes)
                    wait = call.on_error(exc)
                    if wait is None:
                        if isinstance(exc, (AssertionError, TypeError)):
                            _check_request(self._flavour, request, sync=False)
                        raise
                    continue
                if race is not None:  # the quick first attempt, sent by the race
                    hedged_race, race = race, None
                    if response is None:  # hedged: the try's outcome
                        call = hedged_race.call
                        done, wait = hedged_race.outcome()
                        if done is not None:
                            return done
                        continue
                if call is None:
                    if controller.quick.ends(request, response):
                        return response
                    call = RetryCall(controller, request, quick=True, stream=stream,
                                         closes=closes)
                elif call.policy.retry_body_errors:
                    limit = call.body_limit(response)
                    if limit is not None:
                        try:
                            call.body_read(await abuffer(response, limit, self._flavour))
                        except Exception as exc:
                            await aclose_response(response, self._flavour)
                            wait = call.on_error(exc)
                            if wait is None:
                                raise
                            continue
                        except BaseException:
                            await aclose_response(response, self._flavour)
                            raise
                wait = call.on_response(response)
                if wait is None:
                    return response
                try:
                    if call.should_drain(response):
                        await adrain(response)
                except Exception:
                    pass  # a broken body is as good as discarded
                finally:
                    await aclose_response(response, self._flavour)
        except BaseException:
            if call is not None:  # a cancel or an interrupt mid-attempt: the request back
                call.abandon()
            raise

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
