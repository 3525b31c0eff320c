"""Deadline propagation: a chain of retrying services over a bottom service that is down.

The model (:func:`run_chain`):

* ``users`` (20) users each send one GET to service 1, at times drawn uniformly over
  ``spread`` seconds (10) from ``random.Random(f"chain:{seed}:users")``, through an
  ``httpx.AsyncClient`` over an :class:`~retry_transport.AsyncRetryTransport` that does not
  retry (``max_attempts=1``) with a timeout of ``user_timeout`` (2 s): a user waits that
  long at most, then gives up.
* Services 1, 2 and 3 are servers. Each one handles a request by calling the next (service
  3 calls the bottom service) through its one ``AsyncClient`` over its one
  ``AsyncRetryTransport``, shared by all its requests (``policy``: ``RetryPolicy()``, so at
  most 3 attempts, full jitter; jitter from ``random.Random(f"chain:{seed}:{n}")`` for
  service ``n``; ``budget=None``: the point is the deadline, not the budget), with a
  timeout per attempt of ``timeouts`` (1.5, 1 and 0.5 s: each service's client gives the
  one below it less than it is given itself), and answers what it got: the bottom's 503
  relayed, or 504 when its own call timed out. One user request can reach the bottom
  3 x 3 x 3 = 27 times.
* The bottom service is down: it answers every attempt 503 (no ``Retry-After``) after
  ``service_time`` (100 ms).
* A call is a request handed to a task of the called server, which runs in the server's
  own nursery (started with the simulation, outside every caller's context), and the
  caller waiting for the answer with the attempt's read timeout (its
  ``extensions["timeout"]["read"]``, as the retry transport set it: the client's, clipped
  by the deadline); past it the caller's attempt raises ``httpx.ReadTimeout`` (retried by
  the caller's transport) while the server task goes on by itself, as a real server that
  does not notice that its client stopped waiting. The network takes no time.
* Propagated (``propagate=True``): each user makes its request inside
  ``retry_transport.deadline(user_timeout)``, every transport (the users' too) has
  ``deadline_header="x-request-deadline-ms"``, and each server, the bottom included, runs
  its handler inside the deadline the header carries, as
  ``retry_transport.asgi.DeadlineMiddleware`` does: the header's milliseconds from when the
  server reads it, as the only ambient deadline; 0 ms: 504 without calling the handler.
  The middleware measures that deadline on ``time.monotonic``, which virtual time does not
  move, so the servers here enter ``retry_transport.deadline(ms / 1000,
  clock=trio.current_time)`` themselves (the transports' clock is the virtual one too).
  Without propagation each service has only its own timeouts, and the user's give-up is
  its own 2 s timeout.
* Counting: every call carries its user's number in a trace header that each service
  passes on. A call that reached a service or the bottom counts *while waiting* if it
  arrived before its user's request ended (its timeout or an answer), *after give-up* if it
  arrived once ``user_timeout`` had passed since the user's request started (the user had
  given up by then, or had its answer earlier), and *after an answer* in between: an
  answer can come before the user's deadline (a service whose next backoff would end past
  it answers at once) while a call it gave up on goes on below, until the deadline at the
  latest. The run goes on until every server task has ended, so the work a departed user
  leaves behind is all counted.
* Determinism: the users' start times and each service's jitter come from the seed, and
  every call's timing follows from them (the bottom answers after a fixed time), so a run
  depends on its seed alone; both runs of the command use the same seed.

With the defaults (seed 0): without propagation 540 attempts reach the bottom, 27 per user
request, 288 of them after their user had given up (the last one 2.59 s after), and each
user's own timeout ends its wait at 2 s; propagated, 257 reach it, all while their user
waits, none after, and each user gets the chain's 504 (or 503) just before its 2 s. Over
seeds 0-99, none after give-up with propagation; calls after an answer are rare (one or
two to service 2 or 3 in 7 of the 100 runs, none to the bottom).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import httpx
import trio

import retry_transport
from retry_transport import AsyncRetryTransport, RetryPolicy

from ._results import ChainResult
from ._virtual import run_virtual

__all__ = ["DEADLINE_HEADER", "run_chain"]

#: The header every transport sends the milliseconds left in, when propagating.
DEADLINE_HEADER: Final = "x-request-deadline-ms"
#: The trace header carrying the user's number down the chain (for counting only).
_USER_HEADER: Final = "x-sim-user"
#: The most digits a deadline header's value may have (as the middlewares read it).
_MAX_DIGITS: Final = 15


@dataclass(slots=True)
class _Call:
    """One attempt on the wire: what the server reads, and its answer once it comes."""

    headers: httpx.Headers
    answered: trio.Event = field(default_factory=trio.Event)
    status: int = 0


class _Wire(httpx.AsyncBaseTransport):
    """Hands each attempt to the server behind ``send`` and waits for the answer, at most the
    attempt's read timeout; the server's work goes on if the wait ends first."""

    def __init__(self, send: trio.MemorySendChannel[_Call]) -> None:
        self.send = send

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        read = timeouts.get("read")
        call = _Call(request.headers.copy())
        self.send.send_nowait(call)
        with trio.move_on_after(math.inf if read is None else read):
            await call.answered.wait()
            return httpx.Response(call.status, request=request)
        raise httpx.ReadTimeout(f"no answer within {read:g} s", request=request)


def _granted_ms(headers: httpx.Headers) -> int | None:
    """The milliseconds the deadline header grants; ``None``: no deadline (no header, a
    malformed value, or several), as the middlewares read it."""
    values = headers.get_list(DEADLINE_HEADER)
    if len(values) != 1:
        return None
    value = values[0].strip()
    if not value.isascii() or not value.isdigit() or len(value) > _MAX_DIGITS:
        return None
    return int(value)


def _check(
    users: int,
    spread: float,
    user_timeout: float,
    timeouts: Sequence[float],
    service_time: float,
) -> None:
    if users < 1:
        raise ValueError(f"users must be >= 1, got {users!r}")
    if not spread >= 0 or not user_timeout > 0 or not service_time >= 0:
        raise ValueError("spread and service_time must be >= 0, user_timeout > 0")
    if not timeouts or not all(t > 0 for t in timeouts):
        raise ValueError(f"timeouts must be one or more seconds > 0, got {tuple(timeouts)!r}")


def run_chain(
    policy: RetryPolicy | None = None,
    *,
    propagate: bool = True,
    users: int = 20,
    spread: float = 10.0,
    user_timeout: float = 2.0,
    timeouts: Sequence[float] = (1.5, 1.0, 0.5),
    service_time: float = 0.1,
    seed: int = 0,
) -> ChainResult:
    """Run the deadline-propagation scenario once, in virtual time.

    Run it with ``propagate`` True and False (the same seed) to compare a chain that carries
    the user's deadline down with one that has only its timeouts.

    Args:
        policy: every service's policy; default ``RetryPolicy()`` (3 attempts).
        propagate: the users' deadline, ``deadline_header`` on every transport and the
            servers' handlers inside the deadline it carries; False: timeouts only.
        users: users, one request each.
        spread: the users start at uniform random times in ``[0, spread)`` seconds.
        user_timeout: how long a user waits (its client's timeout, and its deadline).
        timeouts: each service's timeout per attempt of its calls, service 1's first; there
            are as many services as timeouts.
        service_time: seconds the bottom service takes to answer 503.
        seed: seeds the users' start times and the services' jitter.
    """
    policy = policy if policy is not None else RetryPolicy()
    timeouts = tuple(float(t) for t in timeouts)
    _check(users, spread, user_timeout, timeouts, service_time)
    header = DEADLINE_HEADER if propagate else None
    levels = len(timeouts) + 1  # the services, then the bottom
    urls = [f"http://service-{n}.sim/" for n in range(1, levels)] + ["http://bottom.sim/"]

    async def main() -> ChainResult:
        """The chain in virtual time: each level's servers and clients started, the
        load offered, the arrivals and outcomes gathered."""
        t0 = trio.current_time()
        arrived: list[list[tuple[int, float]]] = [[] for _ in range(levels)]
        channels = [trio.open_memory_channel[_Call](math.inf) for _ in range(levels)]
        stack = contextlib.AsyncExitStack()

        def client(send: trio.MemorySendChannel[_Call], timeout: float,
                   transport_policy: RetryPolicy, jitter: str) -> httpx.AsyncClient:
            transport = AsyncRetryTransport(
                _Wire(send),
                policy=transport_policy,
                budget=None,
                deadline_header=header,
                rng=random.Random(f"chain:{seed}:{jitter}"),
            )
            return httpx.AsyncClient(transport=transport, timeout=timeout, trust_env=False)

        async def handle(level: int, call: _Call, below: httpx.AsyncClient | None) -> None:
            user = int(call.headers[_USER_HEADER])
            arrived[level].append((user, trio.current_time() - t0))
            scope: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
            if propagate:
                ms = _granted_ms(call.headers)
                if ms == 0:  # the caller's deadline has passed
                    call.status = 504
                    call.answered.set()
                    return
                if ms is not None:
                    scope = retry_transport.deadline(ms / 1000, clock=trio.current_time)
            with scope:
                if below is None:  # the bottom service, down
                    await trio.sleep(service_time)
                    status = 503
                else:
                    try:
                        response = await below.get(
                            urls[level + 1], headers={_USER_HEADER: str(user)}
                        )
                        status = response.status_code
                    except httpx.TimeoutException:  # its timeout, or the deadline's
                        status = 504
            call.status = status
            call.answered.set()

        async def serve(level: int, below: httpx.AsyncClient | None) -> None:
            """A server's accept loop: each call in a task of its own, until no caller is
            left; then it tells the next server that it will call it no more."""
            async with channels[level][1] as receive, trio.open_nursery() as tasks:
                async for call in receive:
                    tasks.start_soon(handle, level, call, below)
            if level + 1 < levels:
                await channels[level + 1][0].aclose()

        starts_rng = random.Random(f"chain:{seed}:users")
        starts = sorted(starts_rng.uniform(0.0, spread) for _ in range(users))
        ended: list[float] = [math.nan] * users
        outcomes: list[str] = [""] * users
        user_policy = policy.replace(max_attempts=1)

        async def user(number: int, at: float, front: httpx.AsyncClient) -> None:
            await trio.sleep_until(t0 + at)
            waiting: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
            if propagate:
                waiting = retry_transport.deadline(user_timeout, clock=trio.current_time)
            with waiting:
                try:
                    response = await front.get(urls[0], headers={_USER_HEADER: str(number)})
                    outcome = str(response.status_code)
                except httpx.TimeoutException as exc:
                    outcome = type(exc).__name__
            ended[number] = trio.current_time() - t0
            outcomes[number] = outcome

        async with stack:
            front = await stack.enter_async_context(
                client(channels[0][0], user_timeout, user_policy, "users")
            )
            below: list[httpx.AsyncClient | None] = []
            for level, timeout in enumerate(timeouts):
                below.append(
                    await stack.enter_async_context(
                        client(channels[level + 1][0], timeout, policy, str(level + 1))
                    )
                )
            below.append(None)
            async with trio.open_nursery() as servers:
                for level in range(levels):
                    servers.start_soon(serve, level, below[level])
                async with trio.open_nursery() as people:
                    for number, at in enumerate(starts):
                        people.start_soon(user, number, at, front)
                await channels[0][0].aclose()  # no user is left to call service 1

        per_user: list[list[list[float]]] = [[[] for _ in range(users)] for _ in arrived]
        for level, calls in enumerate(arrived):
            for number, at in calls:
                per_user[level][number].append(at - starts[number])
        arrivals = tuple(tuple(tuple(sorted(times)) for times in level) for level in per_user)
        counts: dict[str, int] = {}
        for outcome in outcomes:
            counts[outcome] = counts.get(outcome, 0) + 1
        return ChainResult(
            policy=policy,
            propagated=propagate,
            seed=seed,
            users=users,
            spread=spread,
            user_timeout=user_timeout,
            timeouts=timeouts,
            service_time=service_time,
            starts=tuple(starts),
            waited=tuple(end - at for end, at in zip(ended, starts, strict=True)),
            outcomes=tuple(sorted(counts.items())),
            arrivals=arrivals,
        )

    return run_virtual(main)

