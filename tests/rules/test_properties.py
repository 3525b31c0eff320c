"""Hostile input, no network: property tests with hypothesis.

- ``parse_retry_after`` and ``parse_http_date`` take any text (as ``str``, as ``bytes``, or
  ``None``), any clock (``nan``, infinities, integers too big for a float) and any ``Date``
  header without raising, and never give a negative or non-finite wait.
- The transports (sync, and async on asyncio and trio) driven over ``MockTransport`` by
  arbitrary sequences of statuses, ``Retry-After`` and ``Date`` values, errors, body errors,
  methods, bodies, budgets and policies: nothing is raised but the inner transport's own
  exception, every wait is finite, ``>= 0`` and within the policy's caps and deadline,
  ``max_attempts`` holds, what may not be sent twice is sent at most once unless the failure
  proves nothing was sent, every discarded response is closed, and the metadata, stats and
  budget agree with what happened.
"""

from __future__ import annotations

import builtins
import functools
import math
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from retry_transport._wire.retry_after import MAX_SECONDS
from tests.flavour import MODULES, current, httpx, rt

#: The transport tests run once per flavour (httpx, httpx2); the parsers are flavour-neutral
#: (``retry_transport.httpx2`` exports the very same functions) and run once.
flavoured = pytest.mark.usefixtures("flavour")

SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_LONG_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
UTC = timezone.utc
YEAR_1 = datetime(1, 1, 1, tzinfo=UTC).timestamp()
YEAR_9999 = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def format_date(moment: datetime, fmt: str) -> str:
    clock = f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    day, month, year = moment.day, _MONTHS[moment.month - 1], moment.year
    if fmt == "imf":
        return f"{_DAYS[moment.weekday()]}, {day:02d} {month} {year:04d} {clock} GMT"
    if fmt == "rfc850":
        return f"{_LONG_DAYS[moment.weekday()]}, {day:02d}-{month}-{year % 100:02d} {clock} GMT"
    return f"{_DAYS[moment.weekday()]} {month} {day:>2} {clock} {year:04d}"


# -- strategies ------------------------------------------------------------------------

#: Any moment from year 1 to 9999, written in each of the three HTTP-date formats.
http_dates = st.builds(
    format_date,
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
    st.sampled_from(["imf", "rfc850", "asctime"]),
)
#: Dates that almost parse: impossible fields, leap seconds, odd spacing and case.
broken_dates = st.builds(
    lambda d, h, m, s, y, sep, case: case(
        f"Sun,{sep}{d:02d} Nov {y:04d} {h:02d}:{m:02d}:{s:02d} GMT"
    ),
    st.integers(0, 99), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99),
    st.integers(0, 9999), st.sampled_from([" ", "  ", "\t", ""]),
    st.sampled_from([str, str.upper, str.lower]),
)
SPECIALS = [
    "1e309", "-0", "0", "00", "NaN", "nan", "inf", "-inf", "Infinity", "+1", "-1", "1.5",
    "1_000", "0x10", "1e3", "\u0662", "\xb2", "\uff11", " 5 ", "5\x00", "\r\n5", "",
    "9" * 13, "9" * 5000, "0" * 5000 + "7", "1" + "0" * 400,
    "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
    "Mon, 01 Jan 0001 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
    "Friday, 31-Dec-99 23:59:60 GMT", "Sat Jan  1 00:00:00 0000", "Thu, 29 Feb 2001 00:00:00 GMT",
]
retry_after_values = st.one_of(
    st.text(),
    st.text(alphabet="0123456789 ,:-GMTSunNov", max_size=40),
    st.sampled_from(SPECIALS),
    st.integers(0, 10**500).map(str),
    http_dates,
    broken_dates,
    st.text(min_size=1000, max_size=5000),
)
nows = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=YEAR_1 - 10**6, max_value=YEAR_9999 + 10**6),
    st.integers(-(10**20), 10**20),
    st.integers(-(10**400), 10**400),  # mostly too big for a float
    st.sampled_from([0.0, -0.0, YEAR_1, YEAR_9999, 1.7e9, -1e-300, 5e-324, 10**400,
                     -(10**400), 2**1024, -(2**1024), math.inf, -math.inf, math.nan,
                     -1e300, 1e300]),
)
date_headers = st.one_of(st.none(), http_dates, broken_dates, st.text(max_size=60),
                         st.sampled_from(SPECIALS))


def as_bytes(text: str) -> bytes:
    """Header bytes for a text: Latin-1 when it fits (as a server would send), else UTF-8."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


#: What ``response.headers.get()`` or the raw headers give: text, bytes, or no header.
header_values = st.one_of(
    retry_after_values,
    retry_after_values.map(as_bytes),
    st.binary(max_size=60),
    st.none(),
)
date_header_values = st.one_of(date_headers, date_headers.map(lambda d: d and as_bytes(d)),
                               st.binary(max_size=40))


def usable(result: float | None) -> bool:
    return result is None or (math.isfinite(result) and 0.0 <= result <= MAX_SECONDS)


# -- Retry-After -----------------------------------------------------------------------


@SETTINGS
@given(value=header_values, now=nows, date=date_header_values)
@example(value="Sunday, 06-Nov-94 08:49:37 GMT", now=YEAR_9999 - 86400, date=None)
@example(value="Sun, 06 Nov 1994 08:49:37 GMT", now=YEAR_9999,
         date="Sunday, 06-Nov-94 08:49:37 GMT")
@example(value="Sun, 06 Nov 1994 08:49:37 GMT", now=10**400, date=None)
@example(value=b"Sun, 06 Nov 1994 08:49:37 GMT", now=-(10**400),
         date=b"Sun, 06 Nov 1994 08:49:07 GMT")
@example(value=None, now=math.nan, date=None)
def test_parse_retry_after_never_raises_nor_gives_a_bad_wait(
    value: str | bytes | None, now: float, date: str | bytes | None
) -> None:
    """Any text or bytes or none, any Date header, any clock: None, or a finite wait >= 0."""
    assert usable(rt.parse_retry_after(value, now=now, date=date))


@SETTINGS
@given(value=retry_after_values, now=nows, date=date_headers)
@example(value="\u2008 5", now=0.0, date=None)
@example(value="Mon, 01 Jan 2001 00:00:00 GMT", now=0.0,
         date="Mon, 01 Jan 2001 00:00:00 GMT\u3000")
def test_bytes_mean_what_their_text_means(value: str, now: float, date: str | None) -> None:
    """Header bytes (Latin-1, or UTF-8 read as Latin-1, as malformed as its text) parse alike."""
    as_text = rt.parse_retry_after(value, now=now, date=date)
    encoded_date = None if date is None else as_bytes(date)
    assert rt.parse_retry_after(as_bytes(value), now=now, date=encoded_date) == as_text


@SETTINGS
@given(value=st.one_of(header_values, date_header_values.filter(bool)), now=nows)
@example(value="Sunday, 06-Nov-94 08:49:37 GMT", now=10**400)
@example(value=b"Sunday, 06-Nov-94 08:49:37 GMT", now=math.inf)
def test_parse_http_date_never_raises(value: str | bytes | None, now: float) -> None:
    """Any text or bytes or none and any clock: None, or an aware UTC datetime."""
    result = rt.parse_http_date(value, now=now)
    assert result is None or (result.tzinfo is not None and result.utcoffset() == timedelta(0))


@SETTINGS
@given(moment=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
       fmt=st.sampled_from(["imf", "asctime"]))
def test_a_date_is_measured_against_the_date_header(moment: datetime, fmt: str) -> None:
    """Against its own Date header a date means no wait; a day later, a day."""
    moment = moment.replace(microsecond=0)
    text = format_date(moment, fmt)
    assert rt.parse_retry_after(text, now=1.7e9, date=text) == 0.0
    if moment.year < 9999:
        later = format_date(moment + timedelta(days=1), fmt)
        assert rt.parse_retry_after(later, now=1.7e9, date=text) == 86400.0


# -- the transports over MockTransport -------------------------------------------------

# Errors are drawn by name and their classes looked up when the scenario runs, from the
# flavour under test: classes drawn at import time would be httpx's, also under the httpx2 id.
NEVER_SENT = ("ConnectError", "ConnectTimeout", "PoolTimeout")
ERRORS: list[str] = [
    "ConnectError", "ConnectTimeout", "PoolTimeout", "ReadTimeout",
    "WriteTimeout", "ReadError", "WriteError", "RemoteProtocolError",
    "UnsupportedProtocol", "LocalProtocolError", "ProxyError", "DecodingError",
    "ValueError", "RuntimeError", "OSError",
]
BODY_ERRORS: list[str] = ["ReadError", "RemoteProtocolError", "ReadTimeout", "ValueError"]
BUILTIN_ERRORS = {"ValueError", "RuntimeError", "OSError"}
METHODS = ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE", "POST", "PATCH", "PURGE"]


def error_class(name: str) -> type[Exception]:
    """The builtin error of that name, else the flavour's (``httpx2.ReadError`` under httpx2)."""
    cls: type[Exception] = getattr(builtins if name in BUILTIN_ERRORS else httpx, name)
    return cls


def never_sent(name: str) -> bool:
    """Whether error ``name`` proves the request never left (a connect or pool failure)."""
    return issubclass(error_class(name), tuple(getattr(httpx, n) for n in NEVER_SENT))


@dataclass(frozen=True)
class Answer:
    status: int
    retry_after: str | None
    date: str | None


@dataclass(frozen=True)
class Raise:
    error: str  # the name of the error class, see error_class()


@dataclass(frozen=True)
class BodyFails:
    """A 200 whose body breaks after a few bytes."""

    error: str  # the name of the error class, see error_class()


answers = st.builds(
    Answer,
    st.one_of(st.sampled_from([408, 429, 502, 503, 504, 200]), st.integers(100, 599)),
    st.one_of(st.none(), retry_after_values),
    st.one_of(st.none(), date_headers),
)
outcomes = st.lists(
    st.one_of(answers, st.builds(Raise, st.sampled_from(ERRORS)),
              st.builds(BodyFails, st.sampled_from(BODY_ERRORS))),
    min_size=1, max_size=8,
)
# RetryPolicy, RetryBudget and the defaults are flavour-neutral: retry_transport.httpx2
# exports the very same objects, so building them at import time is safe.
def _policy(delays: tuple[float, float], **fields: Any) -> rt.RetryPolicy:
    """A policy whose two delays are drawn freely and ordered (base_delay <= max_delay)."""
    return rt.RetryPolicy(base_delay=min(delays), max_delay=max(delays), **fields)


policies = st.builds(
    _policy,
    max_attempts=st.integers(1, 6),
    # Only error statuses may be retried; the answers still include every status.
    retry_statuses=st.one_of(st.just(rt.DEFAULT_RETRY_STATUSES),
                             st.frozensets(st.integers(400, 599), max_size=6),
                             st.frozensets(st.sampled_from([400, 404, 408, 429, 500, 502, 503,
                                                            504, 599]), max_size=4)),
    retry_methods=st.one_of(st.just(rt.DEFAULT_RETRY_METHODS),
                            st.frozensets(st.sampled_from(METHODS), max_size=4)),
    idempotency_header=st.sampled_from(["Idempotency-Key", "X-Request-Id", None]),
    delays=st.tuples(st.one_of(st.floats(0, 10), st.sampled_from([0.0, 1e-300, 1e6, 1e9])),
                     st.one_of(st.floats(0, 100), st.sampled_from([0.0, 1e9]))),
    jitter=st.sampled_from(["full", "equal", "decorrelated", "none"]),
    respect_retry_after=st.booleans(),
    max_retry_after=st.one_of(st.floats(0, 1e6), st.sampled_from([0.0, 1e9])),
    deadline=st.one_of(st.none(), st.floats(1e-3, 1e6)),
    retry_body_errors=st.booleans(),
    max_body_buffer=st.sampled_from([0, 3, 10 * 1024 * 1024]),
)
budgets = st.one_of(
    st.none(),
    st.builds(rt.RetryBudget, capacity=st.integers(20, 60), retry_cost=st.integers(0, 10),
              timeout_retry_cost=st.integers(0, 20), success_refund=st.integers(0, 3)),
)


@dataclass
class Scenario:
    method: str
    key: str | None
    streaming: bool
    script: list[Any]
    policy: rt.RetryPolicy
    budget: rt.RetryBudget | None
    spend: float
    seed: int


scenarios = st.builds(
    Scenario,
    method=st.sampled_from(METHODS),
    key=st.sampled_from([None, "", " ", '"k-1"']),
    streaming=st.booleans(),
    script=outcomes,
    policy=policies,
    budget=budgets,
    spend=st.floats(0, 5),
    seed=st.integers(0, 2**32),
)


class Stream:
    """A response body that may break; records its closing. Mixed into the flavour's byte
    stream classes by stream(): a response only accepts a stream of its own flavour."""

    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield b"part"
        if self.error is not None:
            raise self.error
        yield b"-rest"

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"part"
        if self.error is not None:
            raise self.error
        yield b"-rest"

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


def stream(error: Exception | None) -> Stream:
    """A :class:`Stream` of the flavour under test."""
    return _classes(current())[0](error)  # type: ignore[no-any-return]


@dataclass
class Run:
    """What the inner transport and the sleep saw during one request."""

    scenario: Scenario
    now: float = 1000.0
    served: list[Any] = field(default_factory=list)  # the script item each attempt got
    raised: list[BaseException] = field(default_factory=list)
    responses: list[tuple[httpx.Response, Stream]] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        deadline = self.scenario.policy.deadline
        if deadline is not None:  # no wait may end past the deadline
            assert self.now + seconds < 1000.0 + deadline
        self.now += seconds

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)

    def next_item(self) -> Any:
        script = self.scenario.script
        item = script[min(len(self.served), len(script) - 1)]
        self.served.append(item)
        self.now += self.scenario.spend
        return item

    def answer(self, item: Any, body: bytes) -> httpx.Response:
        self.bodies.append(body)
        if isinstance(item, Raise):
            error = error_class(item.error)("scripted")
            self.raised.append(error)
            raise error
        if isinstance(item, BodyFails):
            error = error_class(item.error)("scripted body error")
            self.raised.append(error)
            body_stream = stream(error)
            response = httpx.Response(200, stream=body_stream)
        else:
            headers = []
            if item.retry_after is not None:
                headers.append((b"Retry-After", item.retry_after.encode("utf-8")))
            if item.date is not None:
                headers.append((b"Date", item.date.encode("utf-8")))
            body_stream = stream(None)
            response = httpx.Response(item.status, headers=headers, stream=body_stream)
        self.responses.append((response, body_stream))
        return response

    def handler(self, request: httpx.Request) -> httpx.Response:
        item = self.next_item()
        if isinstance(item, Raise) and never_sent(item.error):
            return self.answer(item, b"<never sent>")  # fails before the body is touched
        return self.answer(item, request.read())

    async def ahandler(self, request: httpx.Request) -> httpx.Response:
        item = self.next_item()
        if isinstance(item, Raise) and never_sent(item.error):
            return self.answer(item, b"<never sent>")
        return self.answer(item, await request.aread())


def body(scenario: Scenario, mode: str) -> Any:
    if not scenario.streaming:
        return b"payload"
    if mode == "sync":
        def chunks() -> Iterator[bytes]:
            yield b"pay"
            yield b"load"
        return chunks()

    async def achunks() -> AsyncIterator[bytes]:
        yield b"pay"
        yield b"load"
    return achunks()


class Inner:
    """The inner transport: hands each request to the run's handler. Mixed into the
    flavour's transport base classes by inner().

    Unlike ``MockTransport`` it does not read the request body before the handler runs, as
    a real transport does not read it before the connection is made: a "never sent" error
    leaves a streaming body untouched.
    """

    def __init__(self, run: Run) -> None:
        self.run = run

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.run.handler(request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.run.ahandler(request)


@functools.cache
def _classes(name: str) -> tuple[type[Any], type[Any]]:
    """:class:`Stream` and :class:`Inner` bound to flavour ``name``'s base classes."""
    module = MODULES[name][0]
    return (type("Stream", (Stream, module.SyncByteStream, module.AsyncByteStream), {}),
            type("Inner", (Inner, module.BaseTransport, module.AsyncBaseTransport), {}))


def inner(run: Run) -> Inner:
    """An :class:`Inner` of the flavour under test."""
    return _classes(current())[1](run)  # type: ignore[no-any-return]


def drive(scenario: Scenario, mode: str) -> tuple[Run, Any, Any]:
    """Send one request; returns (run, transport, response or exception)."""
    run = Run(scenario)
    headers = {} if scenario.key is None else {"Idempotency-Key": scenario.key,
                                                "X-Request-Id": scenario.key}
    kwargs: dict[str, Any] = dict(policy=scenario.policy, budget=scenario.budget,
                                  rng=random.Random(scenario.seed), clock=run.clock,
                                  wallclock=lambda: 1_700_000_000.0)
    url = "https://api.example.com/items"
    if mode == "sync":
        transport: Any = rt.RetryTransport(inner(run), sleep=run.sleep, **kwargs)
        with httpx.Client(transport=transport) as client:
            try:
                response = client.request(scenario.method, url, headers=headers,
                                          content=body(scenario, mode))
            except Exception as exc:
                return run, transport, exc
        return run, transport, response

    async def main() -> Any:
        transport = rt.AsyncRetryTransport(inner(run), sleep=run.asleep, **kwargs)
        async with httpx.AsyncClient(transport=transport) as client:
            try:
                return transport, await client.request(scenario.method, url, headers=headers,
                                                       content=body(scenario, mode))
            except Exception as exc:
                return transport, exc

    transport, result = anyio.run(main, backend=mode)
    return run, transport, result


def check(scenario: Scenario, run: Run, transport: Any, result: Any) -> None:
    policy = scenario.policy
    attempts = len(run.served)
    # Nothing but the inner transport's own exception (or its body's) ever comes out.
    if isinstance(result, BaseException):
        assert run.raised and result is run.raised[-1], (result, run.raised)
        info = rt.retry_info(result)
    else:
        assert isinstance(result, httpx.Response)
        assert run.responses and result is run.responses[-1][0]
        info = rt.retry_info(result)
    if info is None:
        # Only a body error raised in the caller's own read, after the transport was done.
        assert isinstance(run.served[-1], BodyFails) and isinstance(result, BaseException)
        info = rt.retry_info(run.responses[-1][0])
        assert info is not None
    assert 1 <= attempts <= policy.max_attempts
    assert info.attempts == attempts == len(info.history) == info.retries + 1
    # Every wait is finite, >= 0, and within the caps.
    assert len(run.waits) == attempts - 1
    assert [a.wait for a in info.history] == [*run.waits, 0.0]
    for attempt in info.history[:-1]:
        assert math.isfinite(attempt.wait) and attempt.wait >= 0.0
        assert attempt.wait <= policy.max_delay + policy.max_retry_after
        extra = attempt.retry_after or 0.0
        assert extra <= policy.max_retry_after
        assert attempt.wait <= policy.max_delay + extra or math.isclose(
            attempt.wait, policy.max_delay + extra)
    assert math.isfinite(info.total_wait) and info.total_wait >= 0.0
    # A success, a redirect or an informational response is never retried.
    for item in run.served[:-1]:
        assert not (isinstance(item, Answer) and item.status < 400), run.served
    # What may not be sent twice is sent at most once, unless nothing was sent.
    key = policy.idempotency_header and (scenario.key or "").strip()
    idempotent = scenario.method in policy.retry_methods or bool(key)
    if not idempotent or scenario.streaming:
        for item in run.served[:-1]:
            assert isinstance(item, Raise) and never_sent(item.error), run.served
    if scenario.streaming:
        assert [b for b in run.bodies if b != b"<never sent>"] in ([], [b"payload"])
    else:
        assert set(run.bodies) <= {b"payload", b"<never sent>"}
    # Every response the caller did not get was closed.
    for response, stream in run.responses[:-1]:
        assert stream.closed, (response, run.served)
    # Stats and budget agree.
    stats = transport.stats
    assert (stats.requests, stats.retries) == (1, attempts - 1)
    if scenario.budget is not None:
        assert 0 <= scenario.budget.tokens <= scenario.budget.capacity


# The flavour fixture only switches which library tests.flavour stands for (a global), so
# one setup serves every example; each example builds its own transport, mocks and errors.
@flavoured
@pytest.mark.parametrize("mode", ["sync", "asyncio", "trio"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios)
def test_the_transport_survives_anything(mode: str, scenario: Scenario) -> None:
    """Any script of answers, errors and policies: every invariant in check() holds."""
    run, transport, result = drive(scenario, mode)
    check(scenario, run, transport, result)


@flavoured
@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_an_rfc850_retry_after_near_the_end_of_the_calendar_is_not_an_error(mode: str) -> None:
    """A server's Retry-After must never make the transport raise: at worst it is ignored."""
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": "Sunday, 06-Nov-94 08:49:37 GMT"})

    kwargs: dict[str, Any] = {"wallclock": lambda: YEAR_9999 - 86400.0, "max_attempts": 2}
    if mode == "sync":
        transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=lambda s: None,
                                      **kwargs)
        with httpx.Client(transport=transport) as client:
            response = client.get("https://api.example.com/")
    else:
        async def nap(seconds: float) -> None:
            pass

        async def main() -> httpx.Response:
            atransport = rt.AsyncRetryTransport(httpx.MockTransport(handler), sleep=nap,
                                                **kwargs)
            async with httpx.AsyncClient(transport=atransport) as client:
                return await client.get("https://api.example.com/")

        response = anyio.run(main, backend=mode)
    assert response.status_code == 503
    info = rt.retry_info(response)
    assert info is not None and info.attempts == 2


@flavoured
@pytest.mark.parametrize("mode", ["sync", "asyncio", "trio"])
def test_a_streaming_body_survives_a_connect_error_with_a_deadline(mode: str) -> None:
    """MockTransport (and pytest-httpx) read the body before the handler runs; without a
    deadline the read body is replayed after a ConnectError, and with one it must be too."""
    seen: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        if len(seen) == 1:
            raise httpx.ConnectError("refused")
        return httpx.Response(200)

    kwargs: dict[str, Any] = {"deadline": 10.0}
    if mode == "sync":
        def chunks() -> Iterator[bytes]:
            yield b"one-"
            yield b"shot"

        transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=lambda s: None,
                                      **kwargs)
        with httpx.Client(transport=transport) as client:
            response = client.post("https://api.example.com/", content=chunks())
    else:
        async def ahandler(request: httpx.Request) -> httpx.Response:
            return handler(request)

        async def achunks() -> AsyncIterator[bytes]:
            yield b"one-"
            yield b"shot"

        async def nap(seconds: float) -> None:
            pass

        async def main() -> httpx.Response:
            atransport = rt.AsyncRetryTransport(httpx.MockTransport(ahandler), sleep=nap,
                                                **kwargs)
            async with httpx.AsyncClient(transport=atransport) as client:
                return await client.post("https://api.example.com/", content=achunks())

        response = anyio.run(main, backend=mode)
    assert response.status_code == 200
    assert seen == [b"one-shot", b"one-shot"]
