"""Guards for the properties the success path's speed relies on (no timing in here).

benchmarks/overhead.py measures the cost of the layer; these tests pin down, through the
public API, the reasons it is cheap, so that a change that quietly gives one up fails here
rather than only showing up as a slower benchmark:

* a first-attempt success reads nothing of the response but its status, its header
  names (no value decoded, no body, no Retry-After parsing; each name searched for
  ``ratelimit`` once per process, then looked up) and its stream's class (a body in memory
  is handed over as it is), and hands the inner transport's response object over;
* a closed circuit breaker counts a success in the current bucket without its lock and
  without keeping memory for it, and a request's origin is spelt out once;
* every first-attempt success (and every first-attempt final failure) of one transport
  shares one cached ``RetryInfo`` per status instead of building a new one;
* without a deadline the inner transport gets the caller's request object itself: no copy,
  no added header or extension;
* the transport keeps nothing of a request once it is over: after 1,000 requests (some of
  them retried) every request and response is freed by reference counting alone, the
  collector switched off, so the layer creates no reference cycles for the GC to chase.
"""

from __future__ import annotations

import functools
import gc
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.flavour import MODULES, current, httpx, rt

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://api.example.com/items"

#: What a driver may touch on a response it hands over after one attempt: the status to
#: decide, the headers (one pass over the raw list, for rate-limit headers and the server's
#: verdict), the extensions to attach the RetryInfo, the stream to tell a body in memory
#: (handed over as it is) from a streamed one (which may need a hint, ``_call/hints.py``).
ALLOWED_ON_SUCCESS = {"status_code", "headers", "extensions", "stream"}
#: ... and without rate-limit pacing, on a success: the status, the extensions and the
#: stream alone.
ALLOWED_WITHOUT_PACING = {"status_code", "extensions", "stream"}


class Recording:
    """Mixed into the flavour's ``Response``: logs the name of every attribute read on the
    response once ``seen`` is set."""

    seen: list[str] | None = None

    def __getattribute__(self, name: str) -> Any:
        seen = object.__getattribute__(self, "__dict__").get("seen")
        if seen is not None and not name.startswith("__"):
            seen.append(name)
        return object.__getattribute__(self, name)


class Recorder:
    """Mixed into the flavour's transport base classes: an inner transport that records the
    requests it gets and returns prepared responses."""

    def __init__(self, make: Callable[[int], httpx.Response]) -> None:
        self.make = make
        self.attempts = 0  # attempts seen so far, across requests
        self.requests: list[httpx.Request] = []
        self.extensions: list[dict[str, Any]] = []  # each request's extensions when sent
        self.responses: list[httpx.Response] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.attempts += 1
        self.requests.append(request)
        self.extensions.append(dict(request.extensions))
        response = self.make(self.attempts)
        self.responses.append(response)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.handle_request(request)


@functools.cache
def _classes(name: str) -> tuple[type[Any], type[Any]]:
    """``RecordingResponse`` and ``Inner`` bound to flavour ``name``'s classes, built once
    (at import time they could only subclass httpx's, also under the httpx2 id)."""
    module = MODULES[name][0]
    recording_response = type("RecordingResponse", (Recording, module.Response), {})
    inner = type("Inner", (Recorder, module.BaseTransport, module.AsyncBaseTransport), {})
    return recording_response, inner


def inner_transport(make: Callable[[int], httpx.Response]) -> Any:
    """An inner transport of the flavour under test (see :class:`Recorder`)."""
    return _classes(current())[1](make)


def recording(status: int, seen: list[str], headers: dict[str, str] | None = None) -> Any:
    response = _classes(current())[0](status, headers=headers, content=b"ok")
    response.seen = seen  # from here on, reads are logged
    return response


def no_sleep(seconds: float) -> None:
    return None


async def no_sleep_async(seconds: float) -> None:
    return None


# -- a first-attempt success reads only the status -------------------------------------


@pytest.mark.parametrize("status", [200, 204, 304, 404])
def test_first_attempt_outcome_reads_only_status(status: int) -> None:
    """A final answer costs the status, one pass over the headers (for rate-limit headers
    and the server's verdict), and the shared metadata: a Retry-After on it is not parsed,
    and no new RetryInfo is built."""
    seen: list[str] = []
    # A Retry-After on a final response must not be parsed either.
    inner = inner_transport(lambda n: recording(status, seen, {"Retry-After": "5", "Date": "x"}))
    transport = rt.RetryTransport(inner)
    response = transport.handle_request(httpx.Request("GET", URL))
    reads = list(seen)  # before this test reads anything itself
    assert response is inner.responses[0]  # handed over as it is, not wrapped or copied
    assert "status_code" in reads  # the recorder works: the status is what decides
    assert set(reads) <= ALLOWED_ON_SUCCESS, reads
    assert reads.count("headers") <= 1
    assert rt.retry_info(response) is transport._controller.final_pairs[status][0]


@pytest.mark.parametrize("status", [200, 204, 304])
def test_without_pacing_a_success_reads_no_header(status: int) -> None:
    """respect_rate_limits=False: a success is decided by its status alone, as before."""
    seen: list[str] = []
    inner = inner_transport(lambda n: recording(status, seen, {"Retry-After": "5"}))
    transport = rt.RetryTransport(inner, respect_rate_limits=False)
    transport.handle_request(httpx.Request("GET", URL))
    assert "status_code" in seen
    assert set(seen) <= ALLOWED_WITHOUT_PACING, seen


@pytest.mark.anyio
async def test_first_attempt_success_reads_only_status_async() -> None:
    seen: list[str] = []
    inner = inner_transport(lambda n: recording(200, seen, {"Retry-After": "5"}))
    transport = rt.AsyncRetryTransport(inner)
    response = await transport.handle_async_request(httpx.Request("GET", URL))
    reads = list(seen)
    assert response is inner.responses[0]
    assert "status_code" in reads
    assert set(reads) <= ALLOWED_ON_SUCCESS, reads


def test_the_recorder_sees_header_reads_on_the_retry_path() -> None:
    """Control: deciding a retry does read the headers, and the recorder notices."""
    seen: list[str] = []
    inner = inner_transport(lambda n: recording(503 if n == 1 else 200, seen if n == 1 else []))
    transport = rt.RetryTransport(inner, sleep=no_sleep)
    transport.handle_request(httpx.Request("GET", URL))
    assert "headers" in seen


class Name(bytes):
    """A header name that counts the searches made in it (``b"ratelimit" in name``)."""

    searched = 0

    def __contains__(self, part: object) -> bool:
        Name.searched += 1
        return super().__contains__(part)  # type: ignore[operator]


class Value(bytes):
    """A header value that counts its decodings."""

    decoded = 0

    def decode(self, *args: Any, **kwargs: Any) -> str:
        Value.decoded += 1
        return super().decode(*args, **kwargs)


def with_headers(status: int, names: list[str]) -> Any:
    """A response whose header names and values count how they are read."""
    response = _classes(current())[0](status, content=b"ok")
    response.headers._list = [
        (name.encode(), Name(name.lower().encode()), Value(b"some value")) for name in names
    ]
    return response


def test_a_default_success_reads_header_names_only_and_searches_each_name_once() -> None:
    """With pacing on (the default), a success looks at every header name for rate-limit
    headers, but decodes no value, and a name is searched once per process: after that it
    is looked up among the names known to carry no signal."""
    names = [f"X-Plain-{i}" for i in range(20)] + ["Content-Type", "Server"]
    Name.searched = Value.decoded = 0
    transport = rt.RetryTransport(inner_transport(lambda n: with_headers(200, names)))
    for _ in range(50):
        response = transport.handle_request(httpx.Request("GET", URL))
        assert rt.retry_info(response).attempts == 1  # type: ignore[union-attr]
    assert Value.decoded == 0
    assert Name.searched <= len(names)  # at most once each, whatever the request count


def test_a_rate_limit_header_on_a_success_is_still_read() -> None:
    """Control: a name that carries a signal is never taken for a plain one, however many
    plain names came before: an exhausted quota on a success makes the origin cool down."""
    names = [f"X-Plain-{i}" for i in range(20)]
    transport = rt.RetryTransport(inner_transport(lambda n: with_headers(200, names)),
                                  sleep=no_sleep)
    transport.handle_request(httpx.Request("GET", URL))

    def exhausted(n: int) -> Any:
        return _classes(current())[0](200, content=b"ok", headers={
            **{name: "x" for name in names}, "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": "30"})

    transport = rt.RetryTransport(inner_transport(exhausted), sleep=no_sleep)
    transport.handle_request(httpx.Request("GET", URL))
    assert list(transport._controller.cooldowns.until) == ["https://api.example.com:443"]


def test_the_origin_is_worked_out_once_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a breaker, a request's origin is spelt out once, retried or not."""
    import retry_transport._call.core as core
    import retry_transport._guards.breaker as breaker
    import retry_transport._wire.http as http

    calls: list[object] = []
    real = http.origin

    def counting(url: Any) -> str:
        calls.append(url)
        return real(url)

    monkeypatch.setattr(core, "origin_of", counting)
    monkeypatch.setattr(breaker, "origin_of", counting)
    inner = inner_transport(lambda n: recording(503 if n in (3, 4) else 200, []))
    transport = rt.RetryTransport(inner, breaker=rt.CircuitBreaker(), sleep=no_sleep)
    transport.handle_request(httpx.Request("GET", URL))  # attempt 1: 200
    assert len(calls) == 1
    transport.handle_request(httpx.Request("GET", URL))  # attempt 2: 200
    assert len(calls) == 2
    transport.handle_request(httpx.Request("GET", URL))  # attempts 3, 4, 5: 503, 503, 200
    assert len(calls) == 3 and inner.attempts == 5


def test_quick_records_equal_the_constructors() -> None:
    """The core builds Attempt and RetryInfo on an unfrozen twin; what it builds is the
    frozen record itself: equal, hashed alike, frozen, picklable, with every field."""
    import dataclasses
    import pickle

    from retry_transport._base.models import new_attempt, new_retry_info

    attempt = new_attempt(503, None, 1.5, 0.25, "retry-after")
    assert type(attempt) is rt.Attempt
    assert attempt == rt.Attempt(503, None, 1.5, 0.25, "retry-after")
    assert hash(attempt) == hash(rt.Attempt(503, None, 1.5, 0.25, "retry-after"))
    info = new_retry_info(2, 1, (attempt,), 0.25, rt.StopReason.SUCCESS, None)
    made = rt.RetryInfo(2, 1, (rt.Attempt(503, None, 1.5, 0.25, "retry-after"),), 0.25,
                        rt.StopReason.SUCCESS, None)
    assert info == made and repr(info) == repr(made)
    assert dataclasses.asdict(info) == dataclasses.asdict(made)
    for record, field in ((attempt, "wait"), (info, "retries")):
        assert pickle.loads(pickle.dumps(record)) == record
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, 1)
    assert [f.name for f in dataclasses.fields(rt.Attempt)] == list(rt.Attempt.__slots__)
    assert [f.name for f in dataclasses.fields(rt.RetryInfo)] == list(rt.RetryInfo.__slots__)


# -- one cached RetryInfo per status ----------------------------------------------------


def test_single_attempt_retry_info_is_shared() -> None:
    """Every first-attempt outcome with the same status shares one RetryInfo object."""
    statuses = [200, 200, 404, 200, 404]
    inner = inner_transport(lambda n: httpx.Response(statuses[n - 1]))
    transport = rt.RetryTransport(inner)
    infos = [rt.retry_info(transport.handle_request(httpx.Request("GET", URL))) for _ in statuses]
    ok, missing = infos[0], infos[2]
    assert ok is not None and missing is not None
    assert (ok.attempts, ok.retries, ok.stop_reason) == (1, 0, rt.StopReason.SUCCESS)
    assert missing.stop_reason is rt.StopReason.NOT_RETRYABLE
    assert infos[1] is ok and infos[3] is ok
    assert infos[4] is missing


@pytest.mark.anyio
async def test_single_attempt_retry_info_is_shared_async() -> None:
    transport = rt.AsyncRetryTransport(inner_transport(lambda n: httpx.Response(200)))
    first = await transport.handle_async_request(httpx.Request("GET", URL))
    second = await transport.handle_async_request(httpx.Request("GET", URL))
    assert rt.retry_info(first) is not None
    assert rt.retry_info(first) is rt.retry_info(second)


# -- the request goes through untouched -------------------------------------------------


def test_request_is_passed_through_unchanged_without_deadline() -> None:
    inner = inner_transport(lambda n: httpx.Response(200))
    transport = rt.RetryTransport(inner)
    timeout = {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}
    request = httpx.Request("POST", URL, content=b"{}", extensions={"timeout": timeout})
    headers, extensions = list(request.headers.raw), dict(request.extensions)
    transport.handle_request(request)
    assert inner.requests[0] is request
    assert inner.extensions[0] == extensions  # as sent: no timeout clipped, nothing added
    assert list(request.headers.raw) == headers
    assert request.extensions == extensions


@pytest.mark.anyio
async def test_request_is_passed_through_unchanged_without_deadline_async() -> None:
    inner = inner_transport(lambda n: httpx.Response(200))
    transport = rt.AsyncRetryTransport(inner)
    request = httpx.Request("GET", URL)
    headers = list(request.headers.raw)
    await transport.handle_async_request(request)
    assert inner.requests[0] is request
    assert inner.extensions[0] == {}
    assert list(request.headers.raw) == headers
    assert request.extensions == {}


def test_a_deadline_does_change_what_is_sent() -> None:
    """Control: with a deadline the timeouts sent are clipped, and the check above sees it."""
    inner = inner_transport(lambda n: httpx.Response(200))
    transport = rt.RetryTransport(inner, deadline=1.0)
    timeout = {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}
    request = httpx.Request("GET", URL, extensions={"timeout": timeout})
    transport.handle_request(request)
    assert inner.extensions[0] != {"timeout": timeout}
    assert inner.extensions[0]["timeout"]["read"] <= 1.0
    assert request.extensions == {"timeout": timeout}  # the caller's own, back as they were


# -- nothing is retained ----------------------------------------------------------------


@pytest.fixture
def no_gc() -> Iterator[None]:
    """Objects must die by reference counting: a cycle would outlive the test's loop."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _every_third_retried(n: int) -> httpx.Response:
    # Attempts 1, 4, 7, ... answer 503, so every other request is retried once.
    return httpx.Response(503 if n % 3 == 1 else 200, content=b"ok")


def test_nothing_is_retained_after_1000_requests(no_gc: None) -> None:
    inner = inner_transport(_every_third_retried)
    transport = rt.RetryTransport(inner, sleep=no_sleep)
    refs: list[weakref.ref[Any]] = []
    infos: set[int] = set()
    for _ in range(1000):
        request = httpx.Request("GET", URL)
        refs.append(weakref.ref(request))
        response = transport.handle_request(request)
        info = rt.retry_info(response)
        assert info is not None and info.stop_reason is rt.StopReason.SUCCESS
        infos.add(info.attempts)
        refs.extend(weakref.ref(r) for r in inner.responses)
        inner.requests.clear()
        inner.responses.clear()
        del request, response, info
    assert infos == {1, 2}  # both paths were taken
    assert transport.stats.requests == 1000
    alive = [ref() for ref in refs if ref() is not None]
    assert alive == []


@pytest.mark.anyio
async def test_nothing_is_retained_after_1000_requests_async(no_gc: None) -> None:
    inner = inner_transport(_every_third_retried)
    transport = rt.AsyncRetryTransport(inner, sleep=no_sleep_async)
    refs: list[weakref.ref[Any]] = []
    for _ in range(1000):
        request = httpx.Request("GET", URL)
        refs.append(weakref.ref(request))
        response = await transport.handle_async_request(request)
        refs.extend(weakref.ref(r) for r in inner.responses)
        inner.requests.clear()
        inner.responses.clear()
        del request, response
    assert transport.stats.retries > 0
    alive = [ref() for ref in refs if ref() is not None]
    assert alive == []
