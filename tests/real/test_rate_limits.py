"""Quota pacing against a real server on 127.0.0.1 that enforces a rate limit: N requests per
fixed window, advertised on every response with ONE family of rate-limit headers, and 429
(same headers, no ``Retry-After``) for a request over the quota.

A client sends 3N requests back to back through one retry transport. With pacing on (the
default, ``respect_rate_limits=True``) the response that spends the quota (remaining 0) makes
the transport hold the next request until the window resets, so the server never answers 429.
The controls send the same requests with ``respect_rate_limits=False`` and meet 429s, which
proves that the server enforces what it advertises. Sync, and async on asyncio and trio, on
httpx and httpx2.

Real time is slept here, and that is the point: the transport waits for the server's clock.
The waits are what the server's headers say, so a run takes about two windows. A pacing test
runs the sync driver and the async one on asyncio and on trio side by side, each on a thread
of its own, through its own client to its own server (``side_by_side``): the runs spend their
time waiting for their servers' windows, not on the CPU, so the three take one run's time,
and each is checked as if it had run alone. The families of whole-second windows, whose runs
take about two seconds, go side by side in one test: nine runs, still one run's time.

The windows, per family (``Family.window`` and ``Family.wall_aligned``):

- A reset given as a DELAY (``RateLimit``'s ``t``, ``RateLimit-Reset``, ``X-RateLimit-Reset``
  below 1e9, Discord's ``X-RateLimit-Reset-After``, OpenAI's Go durations) needs no clock in
  common: the windows are ``window`` seconds long and start at the first request the server
  sees (``origin``), and the server rounds the delay UP (to the millisecond, or for
  ``RateLimit``'s Integer ``t`` to the second; rounding down would name an instant still
  inside the window, and the client's next request would meet the 429). ``t`` being whole
  seconds, the IETF family's windows are 1 s long: shorter ones would still be paced
  correctly, only with waits rounded up to a second. The other delay families' windows are
  0.5 s (``SHORT_WINDOW``): a held request comes back at most one jittered backoff step
  (``base_delay``, 0.1 s) after the reset, and the quota's requests follow it a few
  milliseconds apart, so they still fall in one window, which they spend, and the next
  hold is seen. A slower machine could only spread a quota over two windows: still no 429,
  but no hold either, and a run without one proves nothing about pacing. With two CPU-bound
  processes beside them, the requests of a run came up to 70 ms apart: windows of 0.2 s had
  room for a quota 33 ms apart after a late return, windows of 0.5 s have room at 130 ms.
- A reset given as a TIME (GitHub's epoch ``X-RateLimit-Reset``, Anthropic's RFC 3339) is
  measured by the client against the response's ``Date`` header, as the README says, and
  ``Date`` has a resolution of one second and is truncated (``Date`` = floor(now); a server
  that rounded it up would make every client wait too little). The windows of these families
  are therefore whole seconds of the server's wall clock (``[s, s + 1)``): then ``Date`` is
  exactly the window's start, the reset its end, and ``reset - Date`` one full window, which
  the client waits from the moment it has the response: never less than the time left
  (correct), at most the one window more than the time left (the offset into the window).
  Sub-second windows would be paced correctly too, but ``reset - Date`` would overshoot the
  time left by up to a second at every wait: slower runs for nothing.

The lower bound on the elapsed time follows from the server's rule alone: 3N answered
requests need at least 3 windows, so the last one is answered at least 2 windows after the
start of the first one's window. With windows starting at the first request that is 2
windows after the first request; with wall-aligned windows, minus how far into its window
the first request came (``QuotaServer.first_phase``). Only a generous sanity bound caps the
time from above: these tests are about correctness, not speed.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.real.clients import check_flavour, client_timeout
from tests.real.servers import BOUND, LocalHTTPServer, http_date, read_body

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

#: The quota: this many requests per window.
QUOTA = 4
#: The clients send ROUNDS windows' worth of requests, back to back.
ROUNDS = 3
REQUESTS = ROUNDS * QUOTA
#: Slack for the lower bound: the server's wall clock against the client's monotonic one.
TOLERANCE = 0.02
#: The sanity bound on a run, beyond its ROUNDS windows: generous, for a loaded machine
#: (threads starved of the GIL stretch a concurrent run of whole-second windows to ~5 s).
SANITY = 6.0
#: A spent quota whose reset is further away than this must hold the next request (a
#: closer one may be over before the next request starts).
HOLD_MIN = 0.05
#: The window of the families whose resets are sub-second delays, seconds.
SHORT_WINDOW = 0.5

Headers = tuple[tuple[str, str], ...]


def _ceil_ms(seconds: float) -> int:
    """``seconds`` in milliseconds, rounded up: never an instant before the reset."""
    return math.ceil(seconds * 1000)


def _delay(seconds: float) -> str:
    """Delay-seconds with a fraction, rounded up to the millisecond (``"0.396"``)."""
    return f"{_ceil_ms(seconds) / 1000:.3f}"


def _rfc3339(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


# Each family's headers for a response: (remaining, the window's reset as a wall-clock time,
# the response's wall-clock time, of which ``Date`` is the floor).


def _ietf(remaining: int, reset_at: float, now: float) -> Headers:
    # draft-ietf-httpapi-ratelimit-headers-09: t is an Integer, rounded up.
    return (
        ("RateLimit-Policy", f'"default";q={QUOTA};w=1'),
        ("RateLimit", f'"default";r={remaining};t={math.ceil(reset_at - now)}'),
    )


def _ratelimit_reset(remaining: int, reset_at: float, now: float) -> Headers:
    # The drafts up to -06, GitLab: delay-seconds.
    return (
        ("RateLimit-Limit", str(QUOTA)),
        ("RateLimit-Remaining", str(remaining)),
        ("RateLimit-Reset", _delay(reset_at - now)),
    )


def _x_ratelimit_delay(remaining: int, reset_at: float, now: float) -> Headers:
    # X-RateLimit-Reset at or below 1e9: delay-seconds.
    return (
        ("X-RateLimit-Limit", str(QUOTA)),
        ("X-RateLimit-Remaining", str(remaining)),
        ("X-RateLimit-Reset", _delay(reset_at - now)),
    )


def _x_ratelimit_epoch(remaining: int, reset_at: float, now: float) -> Headers:
    # GitHub: X-RateLimit-Reset is epoch seconds (whole: the windows are whole seconds).
    return (
        ("X-RateLimit-Limit", str(QUOTA)),
        ("X-RateLimit-Remaining", str(remaining)),
        ("X-RateLimit-Used", str(QUOTA - remaining)),
        ("X-RateLimit-Reset", str(int(reset_at))),
        ("X-RateLimit-Resource", "core"),
    )


def _discord(remaining: int, reset_at: float, now: float) -> Headers:
    # Discord: a fractional epoch AND X-RateLimit-Reset-After (delay-seconds), which the
    # transport prefers (it needs no clock: the epoch against Date would overshoot).
    return (
        ("X-RateLimit-Limit", str(QUOTA)),
        ("X-RateLimit-Remaining", str(remaining)),
        ("X-RateLimit-Reset", f"{math.ceil(reset_at * 1000) / 1000:.3f}"),
        ("X-RateLimit-Reset-After", _delay(reset_at - now)),
        ("X-RateLimit-Bucket", "abcd1234"),
    )


def _openai(remaining: int, reset_at: float, now: float) -> Headers:
    # OpenAI: Go durations. The tokens quota is far from spent: it must not count.
    return (
        ("x-ratelimit-limit-requests", str(QUOTA)),
        ("x-ratelimit-remaining-requests", str(remaining)),
        ("x-ratelimit-reset-requests", f"{_ceil_ms(reset_at - now)}ms"),
        ("x-ratelimit-limit-tokens", "100000"),
        ("x-ratelimit-remaining-tokens", "99000"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    )


def _anthropic(remaining: int, reset_at: float, now: float) -> Headers:
    # Anthropic: RFC 3339 times (whole seconds: the windows are). Tokens: far from spent.
    return (
        ("anthropic-ratelimit-requests-limit", str(QUOTA)),
        ("anthropic-ratelimit-requests-remaining", str(remaining)),
        ("anthropic-ratelimit-requests-reset", _rfc3339(reset_at)),
        ("anthropic-ratelimit-tokens-limit", "100000"),
        ("anthropic-ratelimit-tokens-remaining", "99000"),
        ("anthropic-ratelimit-tokens-reset", _rfc3339(math.floor(now) + 60)),
    )


@dataclass(frozen=True)
class Family:
    """One family of rate-limit headers, and the windows it can describe exactly."""

    name: str
    headers: Callable[[int, float, float], Headers]
    #: the window, seconds
    window: float
    #: True: windows are whole seconds of the wall clock (resets given as times, against
    #: ``Date``); False: windows start at the server's first request (resets as delays)
    wall_aligned: bool
    #: the header the transport names as the signal of its waits
    signal: str

    def __str__(self) -> str:
        return self.name


FAMILIES = [
    Family("ietf-ratelimit", _ietf, 1.0, False, "ratelimit"),
    Family("ratelimit-reset", _ratelimit_reset, SHORT_WINDOW, False, "ratelimit-reset"),
    Family("x-ratelimit-delay", _x_ratelimit_delay, SHORT_WINDOW, False, "x-ratelimit-reset"),
    Family("x-ratelimit-epoch", _x_ratelimit_epoch, 1.0, True, "x-ratelimit-reset"),
    Family("discord", _discord, SHORT_WINDOW, False, "x-ratelimit-reset-after"),
    Family("openai", _openai, SHORT_WINDOW, False, "x-ratelimit-reset-requests"),
    Family("anthropic", _anthropic, 1.0, True, "anthropic-ratelimit-requests-reset"),
]
BY_NAME = {family.name: family for family in FAMILIES}


# -- the server ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """One request as the server judged it."""

    at: float  # wall-clock time
    window: int
    status: int
    remaining: int
    reset_at: float  # wall-clock time


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True
    timeout = BOUND  # an idle keep-alive connection ends by itself
    server: QuotaServer

    def _serve(self) -> None:
        read_body(self.rfile, {k.lower(): v for k, v in self.headers.items()})
        now, status, remaining, reset_at = self.server._admit()
        body = b"ok" if status == 200 else b"over quota"
        self.send_response_only(status)
        self.send_header("Date", http_date(now))  # truncated to the second, as usual
        for name, value in self.server.family.headers(remaining, reset_at, now):
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


class QuotaServer(LocalHTTPServer):
    """QUOTA requests per fixed window of the family's length on the server's wall clock;
    each response advertises the quota in the family's headers; over the quota, 429."""

    # The concurrent test connects REQUESTS times at once: the default backlog (5) could
    # drop SYNs on a busy machine, and a dropped SYN costs a 1 s retransmission.
    request_queue_size = 64

    def __init__(self, family: Family) -> None:
        super().__init__(_Handler)
        self.family = family
        self._lock = threading.Lock()
        self._origin: float | None = 0.0 if family.wall_aligned else None
        self._used: dict[int, int] = {}
        self.answers: list[Answer] = []

    @property
    def url(self) -> str:
        return self.origin + "/quota"

    def _admit(self) -> tuple[float, int, int, float]:
        """(now, status, remaining, reset) for a request arriving now."""
        window = self.family.window
        with self._lock:
            now = time.time()
            if self._origin is None:
                self._origin = now  # the first request opens the first window
            index = math.floor((now - self._origin) / window)
            used = self._used.get(index, 0)
            if used < QUOTA:
                self._used[index] = used + 1
                status, remaining = 200, QUOTA - used - 1
            else:
                status, remaining = 429, 0
            reset_at = self._origin + (index + 1) * window
            self.answers.append(Answer(now, index, status, remaining, reset_at))
            return now, status, remaining, reset_at

    # -- records ---------------------------------------------------------------------

    def statuses(self) -> list[int]:
        with self._lock:
            return [answer.status for answer in self.answers]

    def windows(self) -> dict[int, int]:
        """Window -> requests answered 200 in it."""
        with self._lock:
            counts: dict[int, int] = {}
            for answer in self.answers:
                if answer.status == 200:
                    counts[answer.window] = counts.get(answer.window, 0) + 1
            return counts

    @property
    def first_phase(self) -> float:
        """How far into its window the first request came (0 when it opened the window)."""
        with self._lock:
            first = self.answers[0]
            assert self._origin is not None
            return first.at - self._origin - first.window * self.family.window


@pytest.fixture(params=FAMILIES, ids=str)
def family(request: pytest.FixtureRequest) -> Family:
    """Each test runs once per family of headers (some tests pick theirs)."""
    chosen: Family = request.param
    return chosen


@pytest.fixture
def server(family: Family) -> Iterator[QuotaServer]:
    quota = QuotaServer(family).start()
    try:
        yield quota
    finally:
        quota.stop()


# -- the clients -----------------------------------------------------------------------------


@dataclass
class Run:
    """What a client's requests ended with, what the transport told its hook, how long."""

    responses: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def statuses(self) -> list[int]:
        return [response.status_code for response in self.responses]

    def infos(self) -> list[Any]:
        infos = [rt.retry_info(response) for response in self.responses]
        assert None not in infos
        return infos

    def held(self) -> list[Any]:
        """The cooldown events: requests held before their first attempt."""
        return [event for event in self.events if event.kind == "cooldown"]


def run_sync(url: str, **transport_kwargs: Any) -> Run:
    """REQUESTS back to back through one sync client and retry transport (real sleep)."""
    run = Run()
    transport = rt.RetryTransport(hooks=run.events.append, **transport_kwargs)
    with httpx.Client(transport=transport, timeout=client_timeout()) as client:
        check_flavour(Client=client, HTTPTransport=transport._transport)
        start = time.monotonic()
        for _ in range(REQUESTS):
            run.responses.append(client.get(url))
        run.elapsed = time.monotonic() - start
    return run


async def run_async(url: str, **transport_kwargs: Any) -> Run:
    """The same, one request after another on a shared AsyncClient (``anyio.sleep``)."""
    run = Run()
    transport = rt.AsyncRetryTransport(hooks=run.events.append, **transport_kwargs)
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as client:
        check_flavour(AsyncClient=client, AsyncHTTPTransport=transport._transport)
        start = time.monotonic()
        for _ in range(REQUESTS):
            run.responses.append(await client.get(url))
        run.elapsed = time.monotonic() - start
    return run


async def run_concurrently(url: str, **transport_kwargs: Any) -> Run:
    """REQUESTS tasks at once on a shared AsyncClient."""
    run = Run()
    transport = rt.AsyncRetryTransport(hooks=run.events.append, **transport_kwargs)
    slots: list[Any] = [None] * REQUESTS
    async with httpx.AsyncClient(transport=transport, timeout=client_timeout()) as client:
        check_flavour(AsyncClient=client, AsyncHTTPTransport=transport._transport)

        async def task(index: int) -> None:
            slots[index] = await client.get(url)

        start = time.monotonic()
        async with anyio.create_task_group() as group:
            for index in range(REQUESTS):
                group.start_soon(task, index)
        run.elapsed = time.monotonic() - start
    run.responses = slots
    return run


#: The drivers a pacing test runs side by side: sync, and async on asyncio and on trio.
DRIVERS = ("sync", "asyncio", "trio")


def run_driver(driver: str, url: str, **transport_kwargs: Any) -> Run:
    """``run_sync``, or ``run_async`` in an event loop of its own on ``driver``."""
    if driver == "sync":
        return run_sync(url, **transport_kwargs)
    return anyio.run(functools.partial(run_async, url, **transport_kwargs), backend=driver)


def side_by_side(
    pairs: Sequence[tuple[Family, str]], run: Callable[[str, str], Run]
) -> dict[str, tuple[Run, QuotaServer, Family]]:
    """``run(driver, url)`` for each (family, driver) pair at once, each on a thread of its
    own against a QuotaServer of its family of its own: ``family/driver`` -> (its run, its
    server, its family). The runs spend their time waiting for their servers' windows, so
    side by side they take one run's time."""
    servers = [QuotaServer(family).start() for family, _ in pairs]
    try:
        with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
            futures = [pool.submit(run, driver, server.url)
                       for (_, driver), server in zip(pairs, servers, strict=True)]
            runs = [future.result() for future in futures]
    finally:
        for server in servers:
            server.stop()
    return {f"{family}/{driver}": (done, server, family)
            for (family, driver), done, server in zip(pairs, runs, servers, strict=True)}


def check_each(
    runs: dict[str, tuple[Run, QuotaServer, Family]],
    check: Callable[[Run, QuotaServer, Family], None],
) -> None:
    """``check`` every run; fail naming every ``family/driver`` whose run failed it."""
    failures = []
    for name, (run, server, family) in runs.items():
        try:
            check(run, server, family)
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)


# -- the checks ------------------------------------------------------------------------------


def check_within_quota(server: QuotaServer) -> None:
    """The server's rule, as it applied it: at most QUOTA answered per window, and REQUESTS
    answered in all, so over at least ROUNDS windows."""
    windows = server.windows()
    assert sum(windows.values()) == REQUESTS
    assert max(windows.values()) <= QUOTA
    assert len(windows) >= ROUNDS


def check_elapsed(run: Run, server: QuotaServer, family: Family) -> None:
    """At least ROUNDS - 1 windows after the first request's window opened; a sanity cap."""
    lower = (ROUNDS - 1) * family.window - server.first_phase - TOLERANCE
    assert run.elapsed >= lower, (run.elapsed, lower, server.answers)
    assert run.elapsed < ROUNDS * family.window + SANITY, (run.elapsed, server.answers)


def check_paced(run: Run, server: QuotaServer, family: Family) -> None:
    # no 429 at all: the server answered every request 200 at its first attempt
    assert server.statuses() == [200] * REQUESTS
    assert run.statuses == [200] * REQUESTS
    for info in run.infos():
        assert info.attempts == 1
        assert info.stop_reason is rt.StopReason.SUCCESS
    check_within_quota(server)
    # each spent quota held the request after it (on the family's reset header), unless
    # it was the last request or the reset was already at hand
    held = run.held()
    answers = server.answers[:-1]
    spent = [answer for answer in answers if answer.remaining == 0]
    due = [answer for answer in spent if answer.reset_at - answer.at > HOLD_MIN]
    assert held and len(due) <= len(held) <= len(spent), (held, server.answers)
    assert {event.signal for event in held} == {family.signal}
    assert all(event.wait > 0 for event in held)
    assert [event.kind for event in run.events] == ["cooldown"] * len(held)  # no retries
    check_elapsed(run, server, family)


def check_unpaced(run: Run, server: QuotaServer, family: Family) -> None:
    """Without pacing the client runs into the quota: the server answers 429s."""
    statuses = run.statuses
    assert statuses == server.statuses()  # max_attempts=1: the client saw every answer
    assert statuses[:QUOTA] == [200] * QUOTA  # whatever windows they fell in
    assert 429 in statuses
    assert max(server.windows().values()) <= QUOTA
    assert run.held() == []  # nothing held: the headers were not read
    for response in run.responses:
        if response.status_code == 429:
            assert "retry-after" not in response.headers
            assert "retry-after-ms" not in response.headers
            assert rt.retry_info(response).stop_reason is rt.StopReason.MAX_ATTEMPTS


# -- pacing on: no 429 -------------------------------------------------------------------------


#: The families whose windows are whole seconds: a pacing run of theirs takes about two
#: seconds, nearly all of it waiting, so their runs go side by side in one test.
WHOLE_SECONDS = [family for family in FAMILIES if family.window >= 1.0]


@pytest.mark.parametrize(
    "family", [family for family in FAMILIES if family not in WHOLE_SECONDS], ids=str,
    indirect=True,
)
def test_quota_headers_pace_requests(family: Family) -> None:
    """Sync, asyncio and trio (side by side, each against its own server): no 429."""
    check_each(side_by_side([(family, driver) for driver in DRIVERS], run_driver),
               check_paced)


def test_quota_headers_pace_requests_in_whole_second_windows() -> None:
    """The same for each family of whole-second windows, every family and driver side by
    side (each run against its own server, and checked as if it had run alone)."""
    runs = side_by_side([(family, driver) for family in WHOLE_SECONDS for driver in DRIVERS],
                        run_driver)
    assert len(runs) == 3 * len(DRIVERS) and len(WHOLE_SECONDS) == 3
    check_each(runs, check_paced)


# -- the controls: pacing off, 429s ------------------------------------------------------------


def test_without_pacing_the_server_answers_429_sync(
    family: Family, server: QuotaServer
) -> None:
    run = run_sync(server.url, respect_rate_limits=False, max_attempts=1)
    check_unpaced(run, server, family)


@pytest.mark.anyio
async def test_without_pacing_the_server_answers_429_async(
    family: Family, server: QuotaServer
) -> None:
    run = await run_async(server.url, respect_rate_limits=False, max_attempts=1)
    check_unpaced(run, server, family)


# -- concurrent tasks: the burst outruns the headers, the 429s' resets pace the retries ---


@pytest.mark.parametrize(
    "family", [BY_NAME["openai"], BY_NAME["anthropic"]], ids=str, indirect=True
)
def test_concurrent_burst_is_retried_at_the_resets(family: Family) -> None:
    """REQUESTS tasks at once: all are sent before any answer, so the server answers 429 to
    all but QUOTA of them (nothing a client can do about that); each 429 carries the spent
    quota's reset, which is the floor of its retry's wait, so every request ends 200 and no
    window takes more than its quota. max_attempts=5: three rounds are needed, two spare.
    On asyncio and on trio, side by side, each against its own server."""

    def burst(backend: str, url: str) -> Run:
        return anyio.run(functools.partial(run_concurrently, url, max_attempts=5),
                         backend=backend)

    def check(run: Run, server: QuotaServer, family: Family) -> None:
        assert run.statuses == [200] * REQUESTS, run.infos()
        assert server.statuses().count(429) >= 1
        check_within_quota(server)
        for info in run.infos():
            assert info.stop_reason is rt.StopReason.SUCCESS, info
            for attempt in info.history[:-1]:
                assert attempt.status == 429, info
                assert attempt.signal == family.signal, info
                assert attempt.retry_after is not None and attempt.retry_after > 0, info
                assert attempt.wait >= attempt.retry_after, info
        check_elapsed(run, server, family)

    check_each(side_by_side([(family, "asyncio"), (family, "trio")], burst), check)
