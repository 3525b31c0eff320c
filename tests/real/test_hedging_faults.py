"""Hedging against real servers on 127.0.0.1 where it meets a half-open breaker, a client's
own connection pool, and a tail it must go on cutting.

- A sync hedge that loses the race runs on to its end on its worker: a half-open probe slot
  it holds stays taken until then, so a recovering server never meets a second probe while
  the first is still on the wire, and that probe's answer is what closes the breaker.
- An async attempt still waiting for a connection of the client's own pool is not on the
  wire: a hedge that never left the pool is no hedge (not counted, its cost given back), so
  the counted hedges are the hedges the server receives, the retry budget stays full
  against a healthy server, and a busy pool is no slower hedged than not.
- ``Hedging("p95")`` on the sync transport goes on hedging a tail of 4.5% slow answers: the
  losers' whole slow answers do not lift the percentile its delay is read from (at 3% this
  machine never saw the drift; at 4.5% recording them lifted it for one seed of five).

The servers count what they receive: the attempt number each request carries
(``attempt_header``), when it arrived and when its answer went out, and how many requests
were in flight at once.
"""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import pytest

from tests.flavour import FLAVOURS, current, httpx, rt, use
from tests.real.clients import (  # paired_anyio_backend: the anyio_backend fixture
    client_timeout,
    paired_anyio_backend,  # noqa: F401
)
from tests.real.servers import BOUND, LocalHTTPServer

pytestmark = pytest.mark.real

#: The header each attempt carries its number in (1 for the first, more for a hedge).
ATTEMPT = "x-attempt"
#: Longest a test waits for the server to see a request, or for a thread, in seconds.
WAIT = 5.0
OFF = {"retry": False}

#: The half-open breaker: FAILS 503s open it (min_requests), for BREAK seconds of its own
#: clock, which the test moves on.
FAILS = 3
BREAK = 5.0
#: A hedge that is the probe: the request starts while the breaker is closed, its hedge goes
#: HEDGE_AFTER seconds later, once the breaker is half-open; the first attempt answers
#: FIRST_TAKES after it arrived, the hedge HEDGE_TAKES after it arrived (on the wire until
#: about 0.7 s, a quarter of a second after the race ended).
HEDGE_AFTER = 0.2
FIRST_TAKES = 0.45
HEDGE_TAKES = 0.5
#: A probe that is slow itself: PROBE_TAKES seconds, hedged after PROBE_HEDGE_AFTER.
PROBE_TAKES = 0.3
PROBE_HEDGE_AFTER = 0.05
#: What the second request takes at the server, and how often it is tried.
SECOND_TAKES = 0.02
KNOCK_EVERY = 0.005

#: The pool: POOL_REQUESTS concurrent GETs over POOL_SIZE connections, the server answering
#: each in POOL_DELAY seconds (uniform), hedged after POOL_HEDGE_AFTER.
POOL_REQUESTS = 120
POOL_SIZE = 4
POOL_DELAY = (0.020, 0.040)
POOL_HEDGE_AFTER = 0.05
#: The racing pool: the same, answered in RACING_DELAY seconds (uniform), so that hedges
#: wait in the pool for connections that other requests give back.
RACING_DELAY = (0.040, 0.080)
#: What the budget may have lost against a healthy server, in retry costs.
BUDGET_SLACK = 3
#: The busy pool: BUSY_REQUESTS concurrent GETs over BUSY_SIZE connections (BUSY_DELAY
#: seconds each), unhedged then hedged, in turns; hedged may take at most BUSY_RATIO times
#: the CPU time, plus BUSY_GRACE seconds, the best of up to BUSY_TRIES runs of each. An
#: answer held past the hedging delay on a loaded machine is hedged, rightly: at most
#: BUSY_STRAY of the requests (none is, on an idle one).
BUSY_REQUESTS = 600
BUSY_SIZE = 20
BUSY_DELAY = (0.020, 0.020)
BUSY_RATIO = 1.25
BUSY_GRACE = 0.5
BUSY_TRIES = 3
BUSY_STRAY = 0.05
#: The crowd: CROWD_TASKS tasks over CROWD_SIZE connections must finish hedged within
#: CROWD_BOUND seconds.
CROWD_TASKS = 2000
CROWD_SIZE = 50
CROWD_BOUND = 60.0
#: Client timeouts of the pool tests: a request may wait its turn in the pool for seconds.
POOL_TIMEOUT = 30.0
#: Interrupted sync requests: INTERRUPTED GETs in turn over INTERRUPT_POOL connections, each
#: answered INTERRUPTED_TAKES seconds after it arrives and interrupted INTERRUPT_AT seconds
#: in by a signal handler's exception; then a GET must get a connection within WAIT.
INTERRUPTED = 3
INTERRUPT_POOL = 2
INTERRUPTED_TAKES = 0.6
INTERRUPT_AT = 0.2

#: The tail: a TAIL_SHARE of attempts (drawn per request number and attempt from each
#: seed) take TAIL_SLOW seconds, the others TAIL_FAST. TAIL_WARM GETs, then TAIL_GETS timed
#: ones, one at a time, per seed; at most TAIL_OVER of those may take over TAIL_BOUND.
TAIL_SEEDS = (11, 23, 37, 41, 59)
TAIL_SHARE = 0.045
TAIL_SLOW = 1.0
TAIL_FAST = 0.010
TAIL_WARM = 60
TAIL_GETS = 320
TAIL_BOUND = 0.5
TAIL_OVER = 3
#: The origin's p95 at the end must stay below this share of TAIL_SLOW.
TAIL_P95_SHARE = 0.2
TAIL_ATTEMPTS = 5


# -- the server --------------------------------------------------------------------------


@dataclass
class Visit:
    """One request as the server saw it: when it arrived and when its answer went out."""

    path: str
    query: str
    attempt: int
    arrived: float
    watched: bool
    left: float | None = None


#: What the server answers a request (path, query, attempt): seconds to wait, status.
Answer = Callable[[str, str, int], tuple[float, int]]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # TCP_NODELAY
    timeout = BOUND  # an idle keep-alive connection ends by itself
    server: CountingServer

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        attempt = int(self.headers.get(ATTEMPT) or "1")
        visit = self.server._arrive(path, query, attempt)
        seconds, status = self.server.answer(path, query, attempt)
        if seconds:
            self.server.stopping.wait(seconds)
        # Out of flight before the answer goes: a client that reads it and sends again at
        # once is never seen twice in flight.
        self.server._leave(visit)
        body = b"ok" if status < 500 else b"busy"
        self.send_response_only(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class CountingServer(LocalHTTPServer):
    """Answers as ``answer`` says, and counts: every request (``visits``), those in flight,
    and the most in flight at once among those that arrived while watched (``peak``)."""

    request_queue_size = 512

    def __init__(self, answer: Answer) -> None:
        super().__init__(_Handler)
        self.answer = answer
        self.stopping = threading.Event()
        self._seen = threading.Condition()
        self.visits: list[Visit] = []
        self._watching = False
        self._watched = 0
        self.peak = 0

    def stop(self) -> None:
        self.stopping.set()  # a slow answer in progress goes at once
        super().stop()

    def watch(self) -> None:
        """From now on, count the requests in flight at once (``peak``)."""
        with self._seen:
            self._watching = True

    def _arrive(self, path: str, query: str, attempt: int) -> Visit:
        with self._seen:
            visit = Visit(path, query, attempt, time.monotonic(), self._watching)
            self.visits.append(visit)
            if visit.watched:
                self._watched += 1
                self.peak = max(self.peak, self._watched)
            self._seen.notify_all()
            return visit

    def _leave(self, visit: Visit) -> None:
        with self._seen:
            visit.left = time.monotonic()
            if visit.watched:
                self._watched -= 1

    def seen(self, path: str, attempt: int | None = None) -> list[Visit]:
        with self._seen:
            return [v for v in self.visits
                    if v.path == path and (attempt is None or v.attempt == attempt)]

    def await_visit(self, path: str, attempt: int) -> Visit:
        """The first request to ``path`` carrying ``attempt``, once it has arrived."""
        with self._seen:
            found = self._seen.wait_for(lambda: self._find(path, attempt), WAIT)
            assert found is not None, f"no attempt {attempt} of {path} within {WAIT} s"
            return found

    def _find(self, path: str, attempt: int) -> Visit | None:
        return next((v for v in self.visits if v.path == path and v.attempt == attempt),
                    None)

    def hedges(self) -> int:
        """Requests received that were hedges (an attempt number above 1)."""
        with self._seen:
            return sum(v.attempt > 1 for v in self.visits)



@contextlib.contextmanager
def serving(answer: Answer) -> Iterator[CountingServer]:
    server = CountingServer(answer).start()
    try:
        yield server
    finally:
        server.stop()


# -- a losing sync hedge and the half-open breaker ----------------------------------------


class FakeClock:
    """The breaker's clock: it moves only when the test ends the break."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def recovering(slow: dict[int, float]) -> Answer:
    """``/fail`` answers 503 at once, ``/slow`` 200 after ``slow[attempt]`` seconds, and
    anything else 200 after ``SECOND_TAKES``."""
    def answer(path: str, query: str, attempt: int) -> tuple[float, int]:
        if path == "/fail":
            return 0.0, 503
        if path == "/slow":
            return slow[attempt], 200
        return SECOND_TAKES, 200

    return answer


@dataclass
class Knocks:
    """What a second request met while the probe was out: the refusals, then its way in."""

    refusals: int = 0
    through: float | None = None


class Recovery:
    """A breaker of one probe on a clock of its own, a hedged sync client and a plain one
    sharing it, and the breaker's transitions as ``(time.monotonic(), kind)``."""

    def __init__(self, server: CountingServer, delay: float) -> None:
        self.server = server
        self.clock = FakeClock()
        self.events: list[tuple[float, str]] = []
        self.breaker = rt.CircuitBreaker(half_open_probes=1, min_requests=FAILS,
                                         break_duration=BREAK, clock=self.clock,
                                         hooks=self._note)
        self.hedged = httpx.Client(
            transport=rt.RetryTransport(breaker=self.breaker, hedging=rt.Hedging(delay),
                                        attempt_header=ATTEMPT),
            timeout=client_timeout())
        self.idle_ticket = httpx.Client(transport=rt.RetryTransport(breaker=self.breaker),
                                  timeout=client_timeout())

    def __enter__(self) -> Recovery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.hedged.close()  # waits for a loser still on the wire
        self.idle_ticket.close()

    def _note(self, event: Any) -> None:
        self.events.append((time.monotonic(), event.kind))

    def kinds(self) -> list[str]:
        return [kind for _, kind in self.events]

    def closed_at(self) -> float:
        return next(when for when, kind in self.events if kind == "breaker_close")

    def open(self) -> None:
        """Open the breaker with ``FAILS`` 503s, watch the server from then on, and end the
        break: the next attempt admitted is the probe."""
        for _ in range(FAILS):
            response = self.idle_ticket.get(self.server.url + "/fail", extensions=OFF)
            assert response.status_code == 503
        assert self.breaker.state(self.server.url) == "open"
        self.server.watch()
        self.clock.advance(BREAK)
        assert self.breaker.state(self.server.url) == "half_open"

    def knock(self) -> Knocks:
        """Another request, tried again and again until the breaker lets it through."""
        knocks = Knocks()
        end = time.monotonic() + WAIT
        while time.monotonic() < end:
            try:
                response = self.idle_ticket.get(self.server.url + "/second", extensions=OFF)
            except rt.CircuitOpenError:
                knocks.refusals += 1
                time.sleep(KNOCK_EVERY)
                continue
            assert response.status_code == 200
            knocks.through = time.monotonic()
            return knocks
        raise AssertionError(f"the second request was refused for {WAIT} s")


@pytest.mark.usefixtures("flavour")
def test_a_losing_sync_hedge_keeps_its_probe_slot_until_it_ends() -> None:
    """A hedge admitted as the half-open probe that loses the race holds the slot until its
    answer, which closes the breaker: no second probe meets the recovering server."""
    with serving(recovering({1: FIRST_TAKES, 2: HEDGE_TAKES})) as server, \
            Recovery(server, HEDGE_AFTER) as rig, ThreadPoolExecutor(1) as pool:
        future = pool.submit(rig.hedged.get, server.url + "/slow")
        first = server.await_visit("/slow", 1)  # sent while the breaker is closed
        rig.open()
        hedge = server.await_visit("/slow", 2)  # the probe: the breaker is half-open
        knocks = rig.knock()  # a second request while the probe is on the wire
        response = future.result(WAIT)
    info = rt.retry_info(response)
    (knocked,) = server.seen("/second")
    assert first.left is not None and hedge.left is not None
    print(f"\nlosing hedge as the probe: race over at +{first.left - first.arrived:.3f}s, "
          f"hedge on the wire +{hedge.arrived - first.arrived:.3f}s to "
          f"+{hedge.left - first.arrived:.3f}s, second request refused {knocks.refusals}x, "
          f"arrived +{knocked.arrived - first.arrived:.3f}s, breaker closed "
          f"+{rig.closed_at() - first.arrived:.3f}s, peak in flight while half-open "
          f"{server.peak}, transitions {rig.kinds()}")
    assert response.status_code == 200
    assert info is not None and info.hedges == 1
    assert [(a.hedge, a.cancelled) for a in info.history] == [(False, False), (True, True)]
    assert server.peak == 1
    assert knocks.refusals > 0
    assert knocked.arrived >= hedge.left  # not admitted while the probe was on the wire
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_close"]
    assert rig.closed_at() >= hedge.left  # closed by the probe's own answer
    assert rig.breaker.state(server.url) == "closed"


@pytest.mark.usefixtures("flavour")
def test_a_slow_hedged_probe_is_alone_on_the_wire() -> None:
    """A request admitted as the probe and hedged: the breaker refuses the hedge (its one
    slot is taken), the probe goes on alone, and its answer closes the breaker."""
    with serving(recovering({1: PROBE_TAKES, 2: PROBE_TAKES})) as server, \
            Recovery(server, PROBE_HEDGE_AFTER) as rig, ThreadPoolExecutor(1) as pool:
        rig.open()
        future = pool.submit(rig.hedged.get, server.url + "/slow")
        probe = server.await_visit("/slow", 1)
        knocks = rig.knock()
        response = future.result(WAIT)
    info = rt.retry_info(response)
    (knocked,) = server.seen("/second")
    assert probe.left is not None
    print(f"\nslow probe, hedged: on the wire to +{probe.left - probe.arrived:.3f}s, second "
          f"request refused {knocks.refusals}x, arrived +{knocked.arrived - probe.arrived:.3f}s,"
          f" breaker closed +{rig.closed_at() - probe.arrived:.3f}s, peak in flight while "
          f"half-open {server.peak}, hedges {info.hedges if info else None}")
    assert response.status_code == 200
    assert info is not None and info.attempts == 1 and info.hedges == 0
    assert server.seen("/slow", 2) == []
    assert server.peak == 1
    assert knocks.refusals > 0
    assert knocked.arrived >= probe.left
    assert rig.kinds() == ["breaker_open", "breaker_half_open", "breaker_close"]
    assert rig.closed_at() >= probe.left
    assert rig.breaker.state(server.url) == "closed"


# -- a sync hedged request interrupted -----------------------------------------------------


class Interrupted(BaseException):
    """What the signal handler raises: the shape of a signal-based timeout, or of
    ``KeyboardInterrupt``."""


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted


@contextlib.contextmanager
def interrupting() -> Iterator[Callable[[], None]]:
    """A function that arms a one-shot timer: ``INTERRUPT_AT`` seconds later the main
    thread is interrupted (``Interrupted`` raised where it is). Disarmed at the end."""
    previous = signal.signal(signal.SIGALRM, _interrupt)
    try:
        yield lambda: signal.setitimer(signal.ITIMER_REAL, INTERRUPT_AT)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timer here")
@pytest.mark.usefixtures("flavour")
@pytest.mark.parametrize("delay", [5.0, 0.05], ids=["during the delay", "after a hedge"])
def test_an_interrupted_sync_hedged_request_holds_no_connection(
        delay: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """GETs interrupted while they wait for a slow answer, before their hedging delay is
    over or once a hedge is out: the late answers are closed as they come, so the pool's
    connections come back (a GET after them gets one), and no worker thread dies."""
    died: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    def answer(path: str, query: str, attempt: int) -> tuple[float, int]:
        return (INTERRUPTED_TAKES if path == "/late" else 0.0), 200

    interrupted = 0
    with serving(answer) as server, interrupting() as arm:
        transport = rt.RetryTransport(hedging=rt.Hedging(delay),
                                      limits=httpx.Limits(max_connections=INTERRUPT_POOL))
        with httpx.Client(transport=transport, timeout=httpx.Timeout(WAIT)) as client:
            for _ in range(INTERRUPTED):
                arm()
                try:
                    client.get(server.url + "/late")
                except Interrupted:
                    interrupted += 1
            response = client.get(server.url + "/after")  # PoolTimeout if they were kept
            assert response.status_code == 200
        # The client closed: its workers' attempts have ended.
    assert interrupted == INTERRUPTED
    assert died == []
    hedges = len(server.seen("/late")) - INTERRUPTED  # an attempt_header: not a quick request
    assert hedges == (0 if delay > INTERRUPTED_TAKES else INTERRUPTED)


# -- async hedges and the client's own pool -----------------------------------------------

class Delays:
    """Answers 200 after a delay drawn uniformly in ``(low, high)`` from a seeded source."""

    def __init__(self, low: float, high: float, seed: int = 20240901) -> None:
        self.low, self.high = low, high
        self._draw = random.Random(seed)
        self._lock = threading.Lock()

    def __call__(self, path: str, query: str, attempt: int) -> tuple[float, int]:
        with self._lock:
            return self._draw.uniform(self.low, self.high), 200


@pytest.fixture
def pool_server() -> Iterator[CountingServer]:
    with serving(Delays(*POOL_DELAY)) as server:
        yield server


@dataclass
class PoolRun:
    """What ``count`` concurrent GETs through one async client came to."""

    seconds: float
    cpu: float = 0.0  # this process's CPU time (client, server threads), seconds
    statuses: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    hedges: int = 0  # the sum of the responses' RetryInfo.hedges
    events: int = 0  # the transport's hedge events
    received: int = 0  # the hedges the server received
    stats: Any = None
    tokens: float = 0.0

    def report(self, name: str) -> str:
        return (f"{name}: {self.seconds:.2f}s, CPU {self.cpu:.2f}s, hedges counted "
                f"{self.stats.hedges} (responses {self.hedges}, events {self.events}), "
                f"received {self.received}, budget {self.tokens:g}, errors {len(self.errors)}")


async def pool_run(server: CountingServer, path: str, count: int, size: int,
                   hedging: Any) -> PoolRun:
    """``count`` GETs at once through a client whose pool holds ``size`` connections."""
    run = PoolRun(0.0)

    def hook(event: Any) -> None:
        run.events += event.kind == "hedge"

    transport = rt.AsyncRetryTransport(hedging=hedging, attempt_header=ATTEMPT, hooks=[hook],
                                       limits=httpx.Limits(max_connections=size))
    url = server.url + path
    before = server.hedges()

    async def one(number: int) -> None:
        try:
            response = await client.get(f"{url}?n={number}")
        except Exception as exc:
            run.errors.append(type(exc).__name__)
            return
        run.statuses.append(response.status_code)
        info = rt.retry_info(response)
        run.hedges += info.hedges if info is not None else 0

    started = time.monotonic()
    cpu = time.process_time()
    async with httpx.AsyncClient(transport=transport,
                                 timeout=httpx.Timeout(POOL_TIMEOUT)) as client:
        with anyio.fail_after(CROWD_BOUND):
            async with anyio.create_task_group() as group:
                for number in range(count):
                    group.start_soon(one, number)
    run.seconds = time.monotonic() - started
    run.cpu = time.process_time() - cpu
    run.received = server.hedges() - before
    run.stats = transport.stats
    budget = transport.budget
    run.tokens = budget.tokens
    return run


@pytest.mark.anyio
async def test_async_hedges_that_never_left_the_pool_are_not_hedges(
        pool_server: CountingServer) -> None:
    """120 GETs at once over 4 connections of a healthy server: the hedges counted are the
    hedges the server received, and the budget stays full."""
    run = await pool_run(pool_server, "/pool", POOL_REQUESTS, POOL_SIZE,
                         rt.Hedging(POOL_HEDGE_AFTER))
    budget = rt.RetryBudget()
    print("\n" + run.report(f"{POOL_REQUESTS} GETs over {POOL_SIZE}"))
    assert run.errors == []
    assert run.statuses == [200] * POOL_REQUESTS
    assert run.stats.hedges == run.hedges == run.events == run.received
    assert run.tokens >= budget.capacity - BUDGET_SLACK * budget.retry_cost


def test_on_trio_hedges_leaving_the_pool_as_their_race_ends_are_not_counted() -> None:
    """120 GETs at once over 4 connections on trio with httpcore 1's pool, answered in 40
    to 80 ms and hedged after 50: a hedge the pool hands a connection to in the same
    scheduling batch as its race ends runs on to the pool's trace before its cancellation
    is seen. It is no hedge for the stats or the events either: they count what the
    responses' ``RetryInfo`` counts."""
    async def main() -> PoolRun:
        with serving(Delays(*RACING_DELAY)) as server:
            return await pool_run(server, "/racing", POOL_REQUESTS, POOL_SIZE,
                                  rt.Hedging(POOL_HEDGE_AFTER))

    with use(FLAVOURS[0]):
        run = anyio.run(main, backend="trio")
    print("\n" + run.report(f"{POOL_REQUESTS} GETs over {POOL_SIZE}, trio"))
    assert run.errors == []
    assert run.statuses == [200] * POOL_REQUESTS
    assert run.hedges > 0  # the scenario hedges
    assert run.stats.hedges == run.hedges == run.events
    assert run.received <= run.hedges  # one cancelled just after leaving the pool: unseen


@pytest.mark.anyio
async def test_a_busy_pool_is_no_slower_hedged(pool_server: CountingServer) -> None:
    """600 GETs at once over 20 connections, unhedged and hedged in turns against the same
    server: hedged takes no more CPU, give or take, sends next to no hedges, and counts only
    the hedges the server received.

    The crowd is CPU-bound (the pool's bookkeeping, for hundreds of waiting requests), so its
    time on an idle machine is its CPU time; a hedge queued in the pool, or one sent, would
    add to it. The CPU time is compared, not the wall-clock time, which another process's
    load stretches by as much as it likes: in one run of two, hedged took 1.6 times as long
    as unhedged with two CPU-bound processes beside the suite, for the same CPU time."""
    pool_server.answer = Delays(*BUSY_DELAY)
    plain: list[PoolRun] = []
    hedged: list[PoolRun] = []
    for _ in range(BUSY_TRIES):  # the best of each: a busy machine slows one run or another
        plain.append(await pool_run(pool_server, "/busy", BUSY_REQUESTS, BUSY_SIZE, None))
        hedged.append(await pool_run(pool_server, "/busy", BUSY_REQUESTS, BUSY_SIZE,
                                     rt.Hedging(POOL_HEDGE_AFTER)))
        best_plain = min(run.cpu for run in plain)
        best_hedged = min(run.cpu for run in hedged)
        if best_hedged <= best_plain * BUSY_RATIO + BUSY_GRACE:
            break
    for number, (one, other) in enumerate(zip(plain, hedged, strict=True), 1):
        print(f"\n{one.report(f'{BUSY_REQUESTS} GETs over {BUSY_SIZE} unhedged, #{number}')}"
              f"\n{other.report(f'{BUSY_REQUESTS} GETs over {BUSY_SIZE} hedged, #{number}')}")
    for run in plain + hedged:
        assert run.errors == []
        assert run.statuses == [200] * BUSY_REQUESTS
    for run in hedged:
        assert run.stats.hedges == run.hedges == run.received
        assert run.received <= BUSY_STRAY * BUSY_REQUESTS
    assert best_hedged <= best_plain * BUSY_RATIO + BUSY_GRACE


@pytest.mark.anyio
async def test_a_crowd_of_tasks_ends_hedged_in_bounded_time(
        pool_server: CountingServer) -> None:
    """2,000 GETs at once over 50 connections, hedged: all answered, in bounded time."""
    if current() == "httpx":
        # httpcore 1's pool hands connections to waiting requests in time that grows with
        # the square of their number: unhedged, this crowd took 45 s with it (3 s with
        # httpcore2), which is not what this test measures.
        pytest.skip("httpcore 1's pool is too slow for a crowd of 2,000 waiting requests")
    pool_server.answer = Delays(*BUSY_DELAY)
    crowd = await pool_run(pool_server, "/crowd", CROWD_TASKS, CROWD_SIZE,
                           rt.Hedging(POOL_HEDGE_AFTER))
    print("\n" + crowd.report(f"{CROWD_TASKS} GETs over {CROWD_SIZE} hedged"))
    assert crowd.errors == []
    assert crowd.statuses == [200] * CROWD_TASKS
    assert crowd.seconds < CROWD_BOUND
    assert crowd.stats.hedges == crowd.hedges == crowd.received


# -- Hedging("p95") on the sync transport ---------------------------------------------------


class Tail:
    """Answers request ``?n=`` attempt ``k`` slowly when its draw from ``seed`` says so."""

    def __init__(self, seed: int) -> None:
        draw = random.Random(seed).random
        self.slow = [[draw() < TAIL_SHARE for _ in range(TAIL_ATTEMPTS)]
                     for _ in range(TAIL_WARM + TAIL_GETS)]

    def __call__(self, path: str, query: str, attempt: int) -> tuple[float, int]:
        number = int(query.partition("n=")[2])
        slow = attempt <= TAIL_ATTEMPTS and self.slow[number][attempt - 1]
        return (TAIL_SLOW if slow else TAIL_FAST), 200


@dataclass
class TailRun:
    """One seed's timed GETs: how many took over ``TAIL_BOUND``, and what the origin's
    latency and the transport's counters read at the end."""

    seed: int
    over: int
    drawn: int  # timed GETs whose first attempt drew a slow answer
    slowest: float
    hedges: int
    p95: float
    seconds: float


def tail_run(seed: int) -> TailRun:
    """``TAIL_WARM`` then ``TAIL_GETS`` GETs, one at a time, through a sync client hedged
    at the origin's p95, against a server of this seed's own."""
    tail = Tail(seed)
    started = time.monotonic()
    with serving(tail) as server:
        transport = rt.RetryTransport(hedging=rt.Hedging("p95"), attempt_header=ATTEMPT)
        with httpx.Client(transport=transport, timeout=client_timeout()) as client:
            latencies = []
            for number in range(TAIL_WARM + TAIL_GETS):
                start = time.monotonic()
                response = client.get(f"{server.url}/tail?n={number}")
                latencies.append(time.monotonic() - start)
                assert response.status_code == 200
            summary = transport.latency(server.url)
            stats = transport.stats
    timed = latencies[TAIL_WARM:]
    assert summary is not None
    return TailRun(seed, sum(seconds > TAIL_BOUND for seconds in timed),
                   sum(row[0] for row in tail.slow[TAIL_WARM:]), max(timed), stats.hedges,
                   summary.p95, time.monotonic() - started)


@pytest.fixture
def tail_flavour() -> Iterator[str]:
    """``tests.flavour``'s ``httpx`` and ``rt`` stand for the last flavour in the test."""
    with use(FLAVOURS[-1]) as name:
        yield name


@pytest.mark.usefixtures("tail_flavour")
def test_sync_p95_hedging_keeps_cutting_the_tail() -> None:
    """Five seeds at once, each on its own thread, server and transport: after the warm-up,
    hardly a GET waits for a slow answer, and the p95 stays far below one."""
    with ThreadPoolExecutor(len(TAIL_SEEDS)) as pool:
        runs = list(pool.map(tail_run, TAIL_SEEDS))
    for run in runs:
        print(f"\np95 seed {run.seed}: {run.over} of {TAIL_GETS} over {TAIL_BOUND}s "
              f"({run.drawn} slow first attempts drawn), slowest {run.slowest:.3f}s, "
              f"hedges {run.hedges}, p95 {run.p95 * 1000:.1f}ms, {run.seconds:.1f}s")
    for run in runs:
        assert run.over <= TAIL_OVER, run
        assert run.p95 < TAIL_P95_SHARE * TAIL_SLOW, run
