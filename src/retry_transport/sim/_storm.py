"""The retry storm: a few clients, one overloaded service, virtual time.

The model's rules are written out in the package docstring (``retry_transport.sim``); the
code that applies them is :class:`_Service`. In short: calls occupy ``[start, end)``; a call
that shares any instant with more than ``capacity`` calls in flight is doomed and times out
at its end; the decision reads recorded times only, never the event loop's wake-up order,
so a run depends on its seed alone, and runs sharing one event loop (:func:`run_storms`)
do not affect each other.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import httpx

from retry_transport import AsyncRetryTransport, RetryBudget, RetryPolicy, retry_info

from . import _virtual as virtual
from ._results import Call, ClientResult, Reply, StormResult
from ._virtual import EPSILON, run_jumping

__all__ = ["BudgetFactory", "StormSpec", "run_storm", "run_storms"]

#: Builds one client's retry budget: ``RetryBudget`` for the default, or any callable.
BudgetFactory = Callable[[], RetryBudget]

_URL: Final = httpx.URL("http://service.sim/work")
#: Every answer's empty body, as a stream: a response given none reads its content at once,
#: many times as long to build.
_EMPTY: Final = httpx.ByteStream(b"")


class RunOver(Exception):
    """Raised by the simulated service for an attempt that would start after the run's end.

    Not an ``httpx`` error, so the transport does not retry it and hands it straight over.
    """


@dataclass(frozen=True, slots=True)
class StormSpec:
    """One storm run's parameters (see :func:`run_storm`)."""

    policy: RetryPolicy
    seed: int = 0
    clients: int = 6
    capacity: int | None = 4
    call_time: float = 0.1
    duration: float = 2.0
    budget: BudgetFactory | None = None
    cooldown: bool = True
    script: Mapping[int, Sequence[Reply]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.clients < 1:
            raise ValueError(f"clients must be >= 1, got {self.clients!r}")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError(f"capacity must be >= 1 or None, got {self.capacity!r}")
        if not self.call_time > 0:
            raise ValueError(f"call_time must be > 0 seconds, got {self.call_time!r}")
        if not self.duration > 0:
            raise ValueError(f"duration must be > 0 seconds, got {self.duration!r}")


class _Flight:
    """A call in flight: when it started and ends, and whether it is doomed."""

    __slots__ = ("doomed", "end", "start")

    def __init__(self, start: float, end: float) -> None:
        self.start = start
        self.end = end
        self.doomed = False


class _Service:
    """The overloaded service of one run; each client reaches it through its own ``_Port``.

    On each attempt: refuse it if the run is over; forget the calls that ended by now (ends
    come before starts); add the call; if more than ``capacity`` are now in flight, doom
    them all. Then wait ``call_time`` and answer: a doomed call raises ``ReadTimeout``,
    another gets its scripted reply or 200.
    """

    def __init__(self, spec: StormSpec, t0: float) -> None:
        self.spec = spec
        self.t0 = t0
        self.in_flight: list[_Flight] = []
        self.calls: list[Call] = []
        self.attempts = [0] * (spec.clients + 1)

    async def call(self, client: int, request: httpx.Request) -> httpx.Response:
        spec = self.spec
        now = virtual.now() - self.t0
        if now >= spec.duration - EPSILON:
            raise RunOver(f"the run ended at {spec.duration:g} s")
        self.attempts[client] += 1
        attempt = self.attempts[client]
        flight = _Flight(now, now + spec.call_time)
        # Ends before starts: a call whose end is now has left before this one arrives.
        flights = [f for f in self.in_flight if f.end > now + EPSILON]
        flights.append(flight)
        self.in_flight = flights
        if spec.capacity is not None and len(flights) > spec.capacity:
            for f in flights:
                f.doomed = True
        await virtual.sleep(spec.call_time)
        if flight.doomed:
            self.calls.append(Call(client, attempt, flight.start, flight.end, None))
            raise httpx.ReadTimeout(
                f"more than {spec.capacity} calls in flight: timed out", request=request
            )
        replies = spec.script.get(client, ())
        reply = replies[attempt - 1] if attempt <= len(replies) else Reply(200)
        self.calls.append(Call(client, attempt, flight.start, flight.end, reply.status))
        headers = {"Retry-After": reply.retry_after} if reply.retry_after is not None else None
        return httpx.Response(reply.status, headers=headers, stream=_EMPTY, request=request)


class _Port(httpx.AsyncBaseTransport):
    """One client's way into the shared service: tells the service who is calling."""

    def __init__(self, service: _Service, client: int) -> None:
        self._service = service
        self._client = client

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._service.call(self._client, request)


async def _client(spec: StormSpec, service: _Service, k: int, out: list[ClientResult]) -> None:
    transport = AsyncRetryTransport(
        _Port(service, k),
        policy=spec.policy,
        budget=spec.budget() if spec.budget is not None else None,
        cooldown=spec.cooldown,
        rng=random.Random(f"storm:{spec.seed}:{k}"),
    )
    outcome: httpx.Response | Exception
    # The request as an httpx.AsyncClient builds it for client.get(_URL), handed to the
    # transport as the client hands it: the client itself adds no wait and no decision,
    # only CPU time (a quarter of a run's).
    request = virtual.get(_URL)
    try:
        response = await transport.handle_async_request(request)
        await response.aclose()  # an empty body: nothing to read
        outcome = response
    except (httpx.TransportError, RunOver) as exc:
        outcome = exc
    finally:
        await transport.aclose()
    now = virtual.now() - service.t0
    info = retry_info(outcome)
    waits = tuple(a.wait for a in info.history[:-1]) if info is not None else ()
    attempts = service.attempts[k]
    if isinstance(outcome, RunOver):
        out.append(ClientResult(k, attempts, False, "cut off", "run_over", None, waits))
    elif isinstance(outcome, httpx.Response):
        reason = info.stop_reason.value if info is not None else "success"
        ok = outcome.status_code < 400
        out.append(ClientResult(k, attempts, ok, str(outcome.status_code), reason, now, waits))
    else:
        reason = info.stop_reason.value if info is not None else "not_retryable"
        out.append(ClientResult(k, attempts, False, type(outcome).__name__, reason, now, waits))


async def _storm(spec: StormSpec, t0: float) -> StormResult:
    service = _Service(spec, t0)
    out: list[ClientResult] = []
    async with virtual.task_group() as group:
        for k in range(1, spec.clients + 1):
            group.start_soon(_client, spec, service, k, out)
    calls = tuple(sorted(service.calls, key=lambda c: (c.start, c.client)))
    return StormResult(
        policy=spec.policy,
        seed=spec.seed,
        clients=spec.clients,
        capacity=spec.capacity,
        call_time=spec.call_time,
        duration=spec.duration,
        budgeted=spec.budget is not None,
        calls=calls,
        results=tuple(sorted(out, key=lambda r: r.client)),
    )


def run_storms(specs: Sequence[StormSpec]) -> list[StormResult]:
    """Run several storm scenarios side by side in one virtual-time event loop.

    The results are those :func:`run_storm` gives for each spec alone; sharing one loop
    between a few runs saves the loop's start-up (about a fifth of a short run's cost).
    """

    async def main() -> list[StormResult]:
        t0 = virtual.now()
        results: list[StormResult | None] = [None] * len(specs)

        async def one(i: int) -> None:
            results[i] = await _storm(specs[i], t0)

        async with virtual.task_group() as group:
            for i in range(len(specs)):
                group.start_soon(one, i)
        return [r for r in results if r is not None]

    return run_jumping(main)


def run_storm(
    policy: RetryPolicy,
    *,
    clients: int = 6,
    capacity: int | None = 4,
    call_time: float = 0.1,
    duration: float = 2.0,
    seed: int = 0,
    budget: BudgetFactory | None = None,
    cooldown: bool = True,
    script: Mapping[int, Sequence[Reply]] | None = None,
) -> StormResult:
    """Run the storm scenario once, in virtual time, through the real async transport.

    Args:
        policy: the retry policy of every client.
        clients: clients, each sending one call at ``t = 0``.
        capacity: calls the service works on at once; more in flight and every call in
            flight times out. ``None``: no limit (only scripted replies fail).
        call_time: seconds each call takes.
        duration: seconds the run lasts: attempts that would start later are not sent.
        seed: seeds the clients' jitter; the same seed gives the same run.
        budget: builds each client's retry budget (``RetryBudget`` for the default one);
            ``None``: no budget.
        cooldown: the transports' ``cooldown`` option. Each client has its own transport and
            sends one request, so a cooldown never holds another request here.
        script: per client (1-based), fixed replies to its first attempts.

    Returns:
        A frozen :class:`StormResult` with every call and each client's outcome.
    """
    spec = StormSpec(
        policy,
        seed=seed,
        clients=clients,
        capacity=capacity,
        call_time=call_time,
        duration=duration,
        budget=budget,
        cooldown=cooldown,
        script=dict(script or {}),
    )
    return run_storms([spec])[0]
