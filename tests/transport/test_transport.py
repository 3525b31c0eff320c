"""The retrying transports, driven through httpx clients: every test runs sync, and async on
asyncio and on trio (the ``harness`` fixture), with virtual time and a seeded random source.
A table of values runs its first row so and its other rows sync (``tests.tables``).
"""

from __future__ import annotations

import builtins
import functools
import gc
import io
import logging
import sys
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

Handler = Callable[["httpx.Request"], "httpx.Response"]


def script(*outcomes: int | BaseException | httpx.Response) -> tuple[Handler, list[httpx.Request]]:
    """A handler that answers each request with the next outcome (the last one repeats)."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        request.read()  # consume the body, as a real transport would
        outcome = outcomes[min(len(seen), len(outcomes)) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        if isinstance(outcome, httpx.Response):
            return outcome
        return httpx.Response(outcome, text=f"attempt {len(seen)}")

    return handler, seen


def stop_reason(obj: object) -> str:
    info = rt.retry_info(obj)
    assert info is not None
    return info.stop_reason.value


# -- statuses --------------------------------------------------------------------------


@table("status", [408, 429, 502, 503, 504])
def test_retryable_statuses_are_retried(harness: Harness, status: int) -> None:
    """A transient status is retried and the caller only sees the success."""
    handler, seen = script(status, 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 200
    assert response.text == "attempt 2"
    assert len(seen) == 2
    assert len(harness.waits) == 1
    info = rt.retry_info(response)
    assert info is not None
    assert (info.attempts, info.retries, info.stop_reason) == (2, 1, rt.StopReason.SUCCESS)
    assert [a.status for a in info.history] == [status, 200]


@table("status", [400, 401, 403, 404, 422, 500, 501, 409])
def test_permanent_statuses_are_never_retried(harness: Harness, status: int) -> None:
    """A status a retry cannot fix is returned at once, as httpx returns it (no raising)."""
    handler, seen = script(status, 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == status
    assert len(seen) == 1
    assert harness.waits == []
    assert stop_reason(response) == "not_retryable"


@table("status", [200, 201, 204, 301, 304])
def test_success_is_one_attempt(harness: Harness, status: int) -> None:
    """A status below 400 ends at once with stop reason ``success``."""
    handler, seen = script(status)
    response = harness.send(harness.transport(handler), follow_redirects=False)
    assert len(seen) == 1
    info = rt.retry_info(response)
    assert info is not None
    assert info == rt.RetryInfo(1, 0, (rt.Attempt(status, None, None, 0.0),), 0.0,
                                rt.StopReason.SUCCESS)
    assert response.extensions["retry"] is info


def test_gives_up_after_max_attempts_and_returns_the_last_response(harness: Harness) -> None:
    """When attempts run out, the last response is handed over, unraised."""
    handler, seen = script(503)
    response = harness.send(harness.transport(handler, max_attempts=4))
    assert response.status_code == 503
    assert response.text == "attempt 4"
    assert len(seen) == 4
    info = rt.retry_info(response)
    assert info is not None
    assert info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    assert info.attempts == 4 and info.retries == 3
    assert [a.wait for a in info.history] == pytest.approx(harness.waits + [0.0])
    assert info.total_wait == pytest.approx(sum(harness.waits))


def test_max_attempts_one_never_retries(harness: Harness) -> None:
    """max_attempts counts the first attempt: 1 means no retry."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler, max_attempts=1))
    assert (response.status_code, len(seen)) == (503, 1)
    assert stop_reason(response) == "max_attempts"


def test_custom_statuses(harness: Harness) -> None:
    """retry_statuses replaces the default set."""
    handler, seen = script(500, 503, 200)
    response = harness.send(harness.transport(handler, retry_statuses={500}))
    assert response.status_code == 503
    assert len(seen) == 2
    assert stop_reason(response) == "not_retryable"


# -- backoff ---------------------------------------------------------------------------


def test_waits_follow_the_policy_without_jitter(harness: Harness) -> None:
    """Capped exponential backoff: base * 2**n, n = retries so far."""
    handler, _ = script(503)
    harness.send(harness.transport(handler, max_attempts=6, jitter="none", base_delay=0.5,
                                   max_delay=3.0))
    assert harness.waits == pytest.approx([0.5, 1.0, 2.0, 3.0, 3.0])


def test_full_jitter_waits_are_below_the_exponential_ceiling(harness: Harness) -> None:
    """Full jitter keeps every wait in [0, min(max_delay, base * 2**n)] and varies them."""
    handler, _ = script(503)
    harness.send(harness.transport(handler, max_attempts=8, base_delay=1.0, max_delay=10.0))
    assert len(harness.waits) == 7
    for n, wait in enumerate(harness.waits):
        assert 0.0 <= wait <= min(10.0, 2.0**n)
    assert len(set(harness.waits)) == 7


def test_seeded_rng_makes_waits_reproducible(harness: Harness) -> None:
    """The same seed gives the same waits; another seed gives others."""
    import random

    def waits(seed: int) -> list[float]:
        h = Harness(harness.mode)
        handler, _ = script(503)
        h.send(h.transport(handler, max_attempts=5, rng=random.Random(seed)))
        return h.waits

    assert waits(7) == waits(7)
    assert waits(7) != waits(8)


# -- transport errors ------------------------------------------------------------------

# Errors are parametrised by name and built inside each test, from the flavour under test
# (an instance built at import time would be an httpx error, also under the httpx2 id).


def errors(**messages: str) -> list[Any]:
    """One parameter per ``Name="message"``, its id the class name; ``make`` builds it."""
    return [pytest.param((name, message), id=name) for name, message in messages.items()]


def make(spec: tuple[str, str]) -> Exception:
    """A fresh ``Name(message)``: the flavour's class of that name, else the builtin one."""
    name, message = spec
    cls = getattr(httpx, name) if hasattr(httpx, name) else getattr(builtins, name)
    error: Exception = cls(message)
    return error


TRANSIENT = errors(
    ConnectError="refused",
    ConnectTimeout="connect timed out",
    ReadTimeout="read timed out",
    WriteTimeout="write timed out",
    PoolTimeout="pool timed out",
    ReadError="reset",
    WriteError="broken pipe",
    RemoteProtocolError="Server disconnected without sending a response.",
)


@table("spec", TRANSIENT)
def test_transient_errors_are_retried(harness: Harness, spec: tuple[str, str]) -> None:
    """Transient transport errors are retried like transient statuses."""
    error = make(spec)
    handler, seen = script(error, 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 200
    assert len(seen) == 2
    info = rt.retry_info(response)
    assert info is not None
    assert info.history[0] == rt.Attempt(None, type(error).__name__, None, harness.waits[0])


@table("spec", TRANSIENT)
def test_last_error_is_reraised_unchanged(harness: Harness, spec: tuple[str, str]) -> None:
    """Giving up re-raises the very exception the inner transport raised, with metadata."""
    error = make(spec)
    handler, seen = script(error)
    with pytest.raises(type(error)) as caught:
        harness.send(harness.transport(handler))
    assert caught.value is error
    assert len(seen) == 3
    info = rt.retry_info(caught.value)
    assert info is not None
    assert info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    assert [a.error for a in info.history] == [type(error).__name__] * 3
    if sys.version_info >= (3, 11):
        assert "gave up after 3 attempt(s) (max_attempts)" in caught.value.__notes__[-1]


@table(
    "spec",
    errors(
        UnsupportedProtocol="ftp",
        LocalProtocolError="bad header",
        ProxyError="proxy said no",
        ValueError="a bug in the inner transport",
        RuntimeError="anything else",
    ),
)
def test_non_transient_errors_are_raised_at_once(harness: Harness, spec: tuple[str, str]) -> None:
    """What a retry cannot fix is raised after one attempt, unchanged (no note added)."""
    error = make(spec)
    handler, seen = script(error, 200)
    with pytest.raises(type(error)) as caught:
        harness.send(harness.transport(handler))
    assert caught.value is error
    assert len(seen) == 1
    assert harness.waits == []
    assert stop_reason(caught.value) == "not_retryable"
    assert getattr(caught.value, "__notes__", []) == []


def test_base_exceptions_pass_through_untouched(harness: Harness) -> None:
    """KeyboardInterrupt and the like are not the transport's business."""
    handler, seen = script(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt) as caught:
        harness.send(harness.transport(handler))
    assert len(seen) == 1
    assert rt.retry_info(caught.value) is None


# -- idempotency -----------------------------------------------------------------------


@table("method", ["POST", "PATCH", "PURGE"])
def test_unsafe_method_without_key_is_sent_once(harness: Harness, method: str) -> None:
    """A non-idempotent request that got a retryable status is not sent again."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler), method, content=b"pay")
    assert response.status_code == 503
    assert len(seen) == 1
    assert stop_reason(response) == "unsafe_method"


@table("method", ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"])
def test_idempotent_methods_are_retried(harness: Harness, method: str) -> None:
    """RFC 9110's idempotent methods are retried without a key."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler), method)
    assert response.status_code == 200
    assert len(seen) == 2


def test_unsafe_method_with_key_is_retried_with_the_same_key(harness: Harness) -> None:
    """An Idempotency-Key opts a POST in; every attempt carries the same key and body."""
    handler, seen = script(503, 502, 200)
    response = harness.send(harness.transport(handler), "POST", content=b"charge 10",
                            headers={"Idempotency-Key": '"k-123"'})
    assert response.status_code == 200
    assert len(seen) == 3
    assert [r.headers["idempotency-key"] for r in seen] == ['"k-123"'] * 3
    assert [r.content for r in seen] == [b"charge 10"] * 3


def test_empty_key_does_not_count(harness: Harness) -> None:
    """A blank Idempotency-Key is no key."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler), "POST", headers={"Idempotency-Key": " "})
    assert (response.status_code, len(seen)) == (503, 1)


def test_custom_idempotency_header(harness: Harness) -> None:
    """The key header's name is configurable; None turns the opt-in off."""
    handler, seen = script(503, 200)
    transport = harness.transport(handler, idempotency_header="X-Request-Id")
    assert harness.send(transport, "POST", headers={"X-Request-Id": "abc"}).status_code == 200
    handler, seen = script(503, 200)
    transport = harness.transport(handler, idempotency_header=None)
    response = harness.send(transport, "POST", headers={"Idempotency-Key": "abc"})
    assert (response.status_code, len(seen)) == (503, 1)


@table("spec", errors(ConnectError="refused", ConnectTimeout="slow", PoolTimeout="full"))
def test_never_sent_failures_are_retried_for_any_method(
    harness: Harness, spec: tuple[str, str]
) -> None:
    """A failure that proves nothing reached the server may be retried even for POST."""
    handler, seen = script(make(spec), 200)
    response = harness.send(harness.transport(handler), "POST", content=b"x")
    assert response.status_code == 200
    assert len(seen) == 2


@table(
    "spec",
    errors(ReadTimeout="slow", ReadError="reset", RemoteProtocolError="disconnected",
           WriteTimeout="slow"),
)
def test_post_is_not_retried_when_the_server_may_have_seen_it(
    harness: Harness, spec: tuple[str, str]
) -> None:
    """A read error on a POST could mean the payment went through: sent once, error raised."""
    error = make(spec)
    handler, seen = script(error, 200)
    with pytest.raises(type(error)) as caught:
        harness.send(harness.transport(handler), "POST", content=b"pay")
    assert len(seen) == 1
    assert stop_reason(caught.value) == "unsafe_method"


# -- bodies ----------------------------------------------------------------------------


def chunks() -> Iterator[bytes]:
    yield b"one-"
    yield b"shot"


async def achunks() -> AsyncIterator[bytes]:
    yield b"one-"
    yield b"shot"


def streaming_body(harness: Harness) -> Any:
    return chunks() if harness.mode == "sync" else achunks()


def test_streaming_body_is_never_sent_twice(harness: Harness) -> None:
    """A generator body cannot be replayed: the 503 is handed over after one attempt."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler), "PUT", content=streaming_body(harness))
    assert response.status_code == 503
    assert len(seen) == 1
    assert stop_reason(response) == "body_not_replayable"


def test_streaming_body_is_sent_after_a_connect_error(harness: Harness) -> None:
    """When the failure proves nothing was sent, the untouched stream is sent once."""
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if not bodies:
            bodies.append(b"<not read>")
            raise httpx.ConnectError("refused")
        bodies.append(request.read())
        return httpx.Response(200)

    if harness.mode != "sync":
        async def ahandler(request: httpx.Request) -> httpx.Response:
            if not bodies:
                bodies.append(b"<not read>")
                raise httpx.ConnectError("refused")
            bodies.append(await request.aread())
            return httpx.Response(200)

        transport = harness.transport(None, inner=httpx.MockTransport(ahandler))
    else:
        transport = harness.transport(handler)
    response = harness.send(transport, "PUT", content=streaming_body(harness))
    assert response.status_code == 200
    assert bodies == [b"<not read>", b"one-shot"]


def test_bytes_body_is_replayed(harness: Harness) -> None:
    """A bytes body goes out whole on every attempt."""
    handler, seen = script(503, 503, 200)
    harness.send(harness.transport(handler), "PUT", content=b"payload")
    assert [r.content for r in seen] == [b"payload"] * 3


def test_json_and_form_bodies_are_replayed(harness: Harness) -> None:
    """JSON and urlencoded bodies are bytes underneath."""
    handler, seen = script(503, 200)
    harness.send(harness.transport(handler), "PUT", json={"a": 1})
    handler2, seen2 = script(503, 200)
    harness.send(harness.transport(handler2), "PUT", data={"a": "1"})
    assert [r.content for r in seen] == [b'{"a":1}'] * 2
    assert [r.content for r in seen2] == [b"a=1"] * 2


def test_multipart_with_seekable_file_is_replayed(harness: Harness) -> None:
    """httpx rewinds seekable files, so a multipart upload can be sent again."""
    handler, seen = script(503, 200)
    files = {"upload": ("a.txt", io.BytesIO(b"file contents"), "text/plain")}
    response = harness.send(harness.transport(handler), "PUT", files=files)
    assert response.status_code == 200
    assert len(seen) == 2
    assert seen[0].content == seen[1].content
    assert b"file contents" in seen[1].content


class OneWayFile(io.RawIOBase):
    """A readable file that cannot seek, like a pipe."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, size: int = -1) -> bytes:
        data, self.data = self.data, b""
        return data


def test_multipart_with_unseekable_file_is_not_replayed(harness: Harness) -> None:
    """A pipe cannot be rewound: the upload is sent once."""
    handler, seen = script(503, 200)
    files = {"upload": ("a.txt", OneWayFile(b"contents"), "text/plain")}
    response = harness.send(harness.transport(handler), "PUT", files=files)
    assert (response.status_code, len(seen)) == (503, 1)
    assert stop_reason(response) == "body_not_replayable"


# -- Retry-After -----------------------------------------------------------------------


def ra(status: int, value: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers={"Retry-After": value, **headers})


@table("status", [429, 503])
def test_retry_after_seconds_sets_the_floor(harness: Harness, status: int) -> None:
    """The wait is Retry-After plus this retry's jittered backoff."""
    handler, seen = script(ra(status, "3"), 200)
    response = harness.send(harness.transport(handler, base_delay=0.5))
    assert response.status_code == 200
    (wait,) = harness.waits
    assert 3.0 <= wait <= 3.5
    info = rt.retry_info(response)
    assert info is not None and info.history[0].retry_after == 3.0


def test_retry_after_http_date_is_measured_against_the_date_header(harness: Harness) -> None:
    """A server whose clock is off by years still gets the wait it asked for."""
    handler, _ = script(
        ra(503, "Sun, 06 Nov 1994 08:49:47 GMT", Date="Sun, 06 Nov 1994 08:49:37 GMT"), 200
    )
    harness.send(harness.transport(handler, jitter="none", base_delay=0.25))
    assert harness.waits == pytest.approx([10.25])


def test_retry_after_http_date_without_date_uses_the_wallclock(harness: Harness) -> None:
    """Without a Date header the injected wall clock is the reference."""
    # harness wall clock: 1_700_000_000 = Tue, 14 Nov 2023 22:13:20 GMT
    handler, _ = script(ra(503, "Tue, 14 Nov 2023 22:13:50 GMT"), 200)
    harness.send(harness.transport(handler, jitter="none", base_delay=0.0))
    assert harness.waits == pytest.approx([30.0])


@table("value", ["soon", "-5", "1.5", "", "Sun, 99 Nov 1994 08:49:37 GMT"])
def test_malformed_retry_after_is_ignored(harness: Harness, value: str) -> None:
    """A garbage Retry-After never raises: the backoff applies instead."""
    handler, seen = script(ra(503, value), 200)
    response = harness.send(harness.transport(handler, jitter="none", base_delay=0.2))
    assert response.status_code == 200
    assert harness.waits == pytest.approx([0.2])
    info = rt.retry_info(response)
    assert info is not None and info.history[0].retry_after is None


@table("value", ["61", "3600", "9" * 40, "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_retry_after_longer_than_the_cap_stops_at_once(harness: Harness, value: str) -> None:
    """No server can park the client: a too-long Retry-After returns the response now."""
    handler, seen = script(ra(503, value), 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 503
    assert len(seen) == 1
    assert harness.waits == []
    assert stop_reason(response) == "retry_after_too_long"


def test_retry_after_cap_is_configurable(harness: Harness) -> None:
    """max_retry_after raises or lowers the cap."""
    handler, _ = script(ra(503, "120"), 200)
    response = harness.send(harness.transport(handler, max_retry_after=300, jitter="none",
                                              base_delay=0.0))
    assert response.status_code == 200
    assert harness.waits == [120.0]


def test_retry_after_can_be_ignored(harness: Harness) -> None:
    """respect_retry_after=False uses the backoff alone, and never stops on the header."""
    handler, _ = script(ra(503, "3600"), 200)
    response = harness.send(harness.transport(handler, respect_retry_after=False,
                                              jitter="none", base_delay=0.1))
    assert response.status_code == 200
    assert harness.waits == pytest.approx([0.1])


def test_retry_after_on_a_non_retryable_status_is_not_a_retry(harness: Harness) -> None:
    """Retry-After on a 400 does not make it retryable."""
    handler, seen = script(ra(400, "1"), 200)
    response = harness.send(harness.transport(handler))
    assert (response.status_code, len(seen)) == (400, 1)


# -- per-request configuration ---------------------------------------------------------


def test_per_request_mapping_override(harness: Harness) -> None:
    """extensions={"retry": {...}} changes fields for one request only."""
    handler, seen = script(503)
    transport = harness.transport(handler)
    harness.send(transport, extensions={"retry": {"max_attempts": 5}})
    assert len(seen) == 5
    harness.send(transport)
    assert len(seen) == 8


def test_per_request_policy_override(harness: Harness) -> None:
    """A whole RetryPolicy can be given per request."""
    handler, seen = script(500, 200)
    transport = harness.transport(handler)
    policy = rt.RetryPolicy(retry_statuses={500}, max_attempts=2)
    response = harness.send(transport, extensions={"retry": policy})
    assert response.status_code == 200


def test_per_request_override_can_opt_a_post_in(harness: Harness) -> None:
    """Adding POST to retry_methods for one request retries it without a key."""
    handler, seen = script(503, 200)
    methods = rt.DEFAULT_RETRY_METHODS | {"POST"}
    response = harness.send(harness.transport(handler), "POST",
                            extensions={"retry": {"retry_methods": methods}})
    assert (response.status_code, len(seen)) == (200, 2)


def test_per_request_false_disables_retries(harness: Harness) -> None:
    """extensions={"retry": False}: sent once, stop reason ``disabled``."""
    handler, seen = script(503, 200)
    response = harness.send(harness.transport(handler), extensions={"retry": False})
    assert (response.status_code, len(seen)) == (503, 1)
    assert stop_reason(response) == "disabled"


def test_disabled_request_still_reports_success(harness: Harness) -> None:
    """Disabled only matters when there was something to retry."""
    handler, _ = script(200)
    response = harness.send(harness.transport(handler), extensions={"retry": False})
    assert stop_reason(response) == "success"


@table(
    ("override", "field", "error"),
    [
        ({"max_attempts": 0}, "max_attempts", ValueError),
        ({"jitter": "wobbly"}, "jitter", ValueError),
        ({"max_attempt": 5}, "max_attempt", ValueError),
        ({"max_attempts": "5"}, "max_attempts", TypeError),
        ("five", "extensions", TypeError),
        (5, "extensions", TypeError),
    ],
)
def test_invalid_override_raises_before_sending(
    harness: Harness, override: Any, field: str, error: type[Exception]
) -> None:
    """A bad override is an error naming the problem (a TypeError for the wrong kind, a
    ValueError for a wrong value or an unknown field), and nothing is sent."""
    handler, seen = script(200)
    with pytest.raises(error, match=field):
        harness.send(harness.transport(handler), extensions={"retry": override})
    assert seen == []


# -- resources -------------------------------------------------------------------------


def tracked_stream(log: list[str], name: str) -> Any:
    """A body stream of the flavour under test that logs its closing as ``close <name>``."""

    class TrackedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
        def __init__(self, log: list[str], name: str) -> None:
            self.log = log
            self.name = name

        def __iter__(self) -> Iterator[bytes]:
            yield b"body"

        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"body"

        def close(self) -> None:
            self.log.append(f"close {self.name}")

        async def aclose(self) -> None:
            self.log.append(f"close {self.name}")

    return TrackedStream(log, name)


def test_discarded_responses_are_closed_before_the_wait(harness: Harness) -> None:
    """Each replaced response is closed (returning its connection) before sleeping."""
    log: list[str] = []
    count = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal count
        count += 1
        status = 200 if count == 3 else 503
        return httpx.Response(status, stream=tracked_stream(log, f"#{count}"))

    transport = harness.transport(handler)
    sleep = transport._sleep

    if harness.mode == "sync":
        def logged_sleep(seconds: float) -> None:
            log.append("sleep")
            sleep(seconds)  # type: ignore[misc]
    else:
        async def logged_sleep(seconds: float) -> None:  # type: ignore[misc]
            log.append("sleep")
            await sleep(seconds)  # type: ignore[misc]

    transport._sleep = logged_sleep  # type: ignore[assignment]
    response = harness.send(transport)
    assert response.status_code == 200
    assert log[:4] == ["close #1", "sleep", "close #2", "sleep"]


# -- logging ---------------------------------------------------------------------------


def test_logging_levels_and_redaction(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """Retries log at INFO, the final failure at ERROR, success says nothing; no secrets."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    url = "https://user:hunter2@api.example.com/v1/items?api_key=s3cret"
    handler, _ = script(200)
    harness.send(harness.transport(handler), url=url)
    assert caplog.records == []

    handler, _ = script(503)
    harness.send(harness.transport(handler), url=url)
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.INFO, logging.INFO, logging.ERROR]
    text = caplog.text
    assert "https://api.example.com/v1/items" in text
    for secret in ("hunter2", "s3cret", "api_key", "user:"):
        assert secret not in text


def test_refused_retry_is_a_warning(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """A retryable failure the transport refuses to retry (unsafe POST) warns once."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    handler, _ = script(503)
    harness.send(harness.transport(handler), "POST")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "unsafe_method" in caplog.text


def test_recovery_is_logged_at_info(harness: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """A request that succeeds after retries says so at INFO, never at WARNING or above."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    handler, _ = script(503, 200)
    harness.send(harness.transport(handler))
    assert [r.levelno for r in caplog.records] == [logging.INFO, logging.INFO]
    assert "succeeded after 2 attempts" in caplog.records[-1].getMessage()


# -- construction ----------------------------------------------------------------------

#: The two transports, by name: ``getattr(rt, name)`` is the flavour's class.
TRANSPORTS = ["RetryTransport", "AsyncRetryTransport"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unknown_keyword_is_a_type_error(transport: str) -> None:
    """A misspelt keyword is caught at once."""
    cls = getattr(rt, transport)
    with pytest.raises(TypeError, match="max_attempt"):
        cls(max_attempt=3)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_transport_keywords_with_a_transport_are_a_type_error(transport: str) -> None:
    """http2=/limits= configure the inner transport it builds, not one it is given."""
    cls = getattr(rt, transport)
    inner = httpx.MockTransport(lambda r: httpx.Response(200))
    with pytest.raises(TypeError, match="limits"):
        cls(inner, limits=httpx.Limits(max_connections=3))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_invalid_field_is_a_value_error(transport: str) -> None:
    """Policy fields given as keywords are validated like the policy's own."""
    cls = getattr(rt, transport)
    with pytest.raises(ValueError, match="base_delay"):
        cls(base_delay=-1)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_retry_transport_cannot_wrap_a_retry_transport(transport: str) -> None:
    """Retry at one layer only."""
    cls = getattr(rt, transport)
    with pytest.raises(ValueError, match="one layer"):
        cls(cls())


def test_keywords_override_the_policy() -> None:
    """Keywords win over the policy object's values."""
    transport = rt.RetryTransport(policy=rt.RetryPolicy(max_attempts=7, base_delay=2.0),
                                  max_attempts=2)
    assert (transport.policy.max_attempts, transport.policy.base_delay) == (2, 2.0)


def test_transport_keywords_reach_the_inner_transport() -> None:
    """Client settings are not lost: limits and retries go to the HTTPTransport it builds."""
    transport = rt.RetryTransport(limits=httpx.Limits(max_connections=7), retries=2)
    pool = transport._transport._pool  # type: ignore[attr-defined]
    assert pool._max_connections == 7
    assert pool._retries == 2
    atransport = rt.AsyncRetryTransport(limits=httpx.Limits(max_keepalive_connections=3))
    assert atransport._transport._pool._max_keepalive_connections == 3  # type: ignore[attr-defined]


def test_default_inner_transport_with_pytest_httpx(mock_router: Any) -> None:
    """The default inner HTTPTransport is a real httpx transport (here mocked by pytest-httpx,
    or httpx2-pytest under httpx2)."""
    mock_router.add_response(status_code=503, headers={"Retry-After": "0"})
    mock_router.add_response(status_code=200, text="ok")
    waits: list[float] = []
    with httpx.Client(transport=rt.RetryTransport(sleep=waits.append)) as client:
        response = client.get("https://api.example.com/")
    assert response.text == "ok"
    assert len(mock_router.get_requests()) == 2
    assert len(waits) == 1


@pytest.mark.anyio
async def test_async_default_inner_transport_with_pytest_httpx(mock_router: Any) -> None:
    """The async twin builds an AsyncHTTPTransport and sleeps with anyio (virtual here)."""
    mock_router.add_response(status_code=502)
    mock_router.add_response(status_code=200)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with httpx.AsyncClient(transport=rt.AsyncRetryTransport(sleep=sleep)) as client:
        response = await client.get("https://api.example.com/")
    assert response.status_code == 200
    assert len(waits) == 1


def test_mounts(harness: Harness) -> None:
    """Different policies per host through httpx's mounts."""
    handler, seen = script(503)
    strict = harness.transport(handler, max_attempts=1)
    patient = harness.transport(handler, max_attempts=4)
    mounts = {"https://strict.example.com": strict, "https://patient.example.com": patient}
    if harness.mode == "sync":
        with httpx.Client(mounts=mounts) as client:  # type: ignore[arg-type]
            client.get("https://strict.example.com/")
            client.get("https://patient.example.com/")
    else:
        async def main() -> None:
            async with httpx.AsyncClient(mounts=mounts) as client:  # type: ignore[arg-type]
                await client.get("https://strict.example.com/")
                await client.get("https://patient.example.com/")

        harness.run(main)
    assert [r.url.host for r in seen] == ["strict.example.com"] + ["patient.example.com"] * 4


def test_close_closes_the_inner_transport() -> None:
    """close() and the context manager reach the inner transport."""
    closed: list[str] = []

    class Inner(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200)

        def close(self) -> None:
            closed.append("close")

    with rt.RetryTransport(Inner()):
        pass
    rt.RetryTransport(Inner()).close()
    assert closed == ["close", "close"]


@pytest.mark.anyio
async def test_aclose_closes_the_inner_transport() -> None:
    """aclose() and the async context manager reach the inner transport."""
    closed: list[str] = []

    class Inner(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(200)

        async def aclose(self) -> None:
            closed.append("aclose")

    async with rt.AsyncRetryTransport(Inner()):
        pass
    await rt.AsyncRetryTransport(Inner()).aclose()
    assert closed == ["aclose", "aclose"]


def test_retry_info_of_anything_else_is_none() -> None:
    """retry_info() answers None for objects the transport never touched."""
    assert rt.retry_info(httpx.Response(200)) is None
    assert rt.retry_info(ValueError()) is None
    assert rt.retry_info("text") is None


# -- configuration errors found in review ----------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field", "error"),
    [
        ({"auto_idempotency_key": "no"}, "auto_idempotency_key", TypeError),
        ({"sleep": 5}, "sleep", TypeError),
        ({"clock": "x"}, "clock", TypeError),
        ({"wallclock": 1.0}, "wallclock", TypeError),
        ({"hooks": 5}, "hooks", TypeError),
        ({"jitter": ["full"]}, "jitter", TypeError),
        ({"jitter": "wobbly"}, "jitter", ValueError),
        ({"retry_statuses": [[503]]}, "retry_statuses", TypeError),
        ({"retry_statuses": [200]}, "retry_statuses", ValueError),
        ({"cooldown": 1}, "cooldown", TypeError),
        ({"budget": 500}, "budget", TypeError),
        ({"rng": 42}, "rng", TypeError),
        ({"policy": {"max_attempts": 2}}, "policy", TypeError),
    ],
)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_transport_options_name_the_field(
    transport: str, kwargs: dict[str, Any], field: str, error: type[Exception]
) -> None:
    """Every option is checked at construction, with an error that names it: a TypeError
    for a value of the wrong kind, a ValueError for a wrong value."""
    cls = getattr(rt, transport)
    with pytest.raises(error, match=field):
        cls(**kwargs)


@table("kwargs", [
    {"attempt_header": "Idempotency-Key"},
    {"attempt_header": "idempotency-key", "idempotency_header": None},
    {"attempt_header": "X-Key", "idempotency_header": "x-key"},
    {"attempt_header": "X-KEY", "policy": "X-Key"},
], ids=["default-key", "key-without-opt-in", "keyword", "policy"],
   over="transport", modes=TRANSPORTS)
def test_the_attempt_header_may_not_be_a_key(transport: str, kwargs: dict[str, Any]) -> None:
    """attempt_header="Idempotency-Key" sent an unkeyed POST three times, keyed 1, 2, 3: the
    idempotency header in effect (in any case), and Idempotency-Key itself, are refused."""
    kwargs = dict(kwargs)
    if "policy" in kwargs:
        kwargs["policy"] = rt.RetryPolicy(idempotency_header=kwargs["policy"])
    with pytest.raises(ValueError, match="attempt_header"):
        getattr(rt, transport)(**kwargs)


@table("name", [
    "Content-Length", "transfer-encoding", "HOST", "Connection", "Upgrade", "TE", "Trailer",
    "Keep-Alive", "Proxy-Connection", "Expect", "Authorization", "Proxy-Authorization",
    "Cookie", "Content-Type", "User-Agent", "If-Match", "Range",
], over="transport", modes=TRANSPORTS)
def test_the_attempt_header_may_not_be_one_http_defines(transport: str, name: str) -> None:
    """The attempt number replaces the header's value: Content-Length: 1 corrupts the
    request, Authorization: 1 drops the credentials. Refused at construction."""
    with pytest.raises(ValueError, match=f"attempt_header must not be '{name}'"):
        getattr(rt, transport)(attempt_header=name)


@table("name", ["Content-Type", "authorization", "Accept", "User-Agent", "Content-Length",
                "Host", "Cookie", "Date"], over="transport", modes=TRANSPORTS)
def test_the_idempotency_header_may_not_be_one_http_defines(transport: str, name: str) -> None:
    """idempotency_header="Content-Type" made every POST with a body "keyed", and retried."""
    with pytest.raises(ValueError, match=f"idempotency_header must not be '{name}'"):
        getattr(rt, transport)(idempotency_header=name)


@table("override", [
    {"idempotency_header": "Content-Type"},
    {"idempotency_header": "x-attempt"},
    "policy",
], ids=["http-header", "attempt-header", "policy"])
def test_an_override_may_not_make_any_request_keyed(harness: Harness, override: Any) -> None:
    """A per-request idempotency header that every attempt carries (the attempt header, or
    one HTTP defines) is refused before anything is counted or sent."""
    if override == "policy":
        override = rt.RetryPolicy(idempotency_header="X-ATTEMPT")
    handler, seen = script(503, 200)
    transport = harness.transport(handler, attempt_header="X-Attempt")
    with pytest.raises(ValueError, match="idempotency_header"):
        harness.send(transport, "POST", content=b"order", extensions={"retry": override},
                     headers={"Content-Type": "text/plain"})
    assert seen == []
    assert transport.stats.requests == 0


def test_an_attempt_header_of_its_own_numbers_an_unkeyed_post_once(harness: Harness) -> None:
    """What stays allowed: a header of its own numbers the attempts, and an unkeyed POST is
    still sent once, under the default idempotency header or another."""
    for kwargs in ({}, {"idempotency_header": "X-Request-Id"}, {"idempotency_header": None}):
        handler, seen = script(503, 200)
        transport = harness.transport(handler, attempt_header="X-Attempt", **kwargs)
        response = harness.send(transport, "POST", content=b"order")
        assert response.status_code == 503 and stop_reason(response) == "unsafe_method"
        assert [r.headers["x-attempt"] for r in seen] == ["1"]


def test_wrong_kind_of_inner_transport() -> None:
    """A sync retry transport over an async transport (or the reverse) fails at once."""
    with pytest.raises(TypeError, match="AsyncRetryTransport"):
        rt.RetryTransport(httpx.AsyncHTTPTransport())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="RetryTransport"):
        rt.AsyncRetryTransport(httpx.HTTPTransport())  # type: ignore[arg-type]


def test_async_hooks_are_refused() -> None:
    """A hook is called, never awaited: a coroutine function would silently do nothing."""
    async def hook(event: rt.RetryEvent) -> None:
        pass

    class Hook:
        async def __call__(self, event: rt.RetryEvent) -> None:
            pass

    for bad in (hook, Hook()):
        with pytest.raises(TypeError, match="never awaited"):
            rt.AsyncRetryTransport(hooks=[bad])


def test_redacted_urls_keep_ipv6_brackets_and_encoding(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Logged URLs stay valid URLs: IPv6 brackets, percent-encoding, no secrets."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    events: list[rt.RetryEvent] = []
    handler, _ = script(503, 200)
    harness.send(harness.transport(handler, hooks=events.append),
                 url="http://user:pw@[::1]:8080/a%3Fb/c?token=secret#frag")
    assert events[0].url == "http://[::1]:8080/a%3Fb/c"
    assert httpx.URL(events[0].url).host == "::1"
    assert "secret" not in caplog.text and "pw" not in caplog.text


@table("length", ["\xb2", "1e3", "-1", " ", "12abc"])
def test_malformed_content_length_never_raises(harness: Harness, length: str) -> None:
    """A garbage Content-Length (from an ASGI app or a custom transport) is ignored."""
    count = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        count[0] += 1
        return httpx.Response(503 if count[0] == 1 else 200, content=b"x",
                              headers={"Content-Length": length.encode("latin-1")})

    transport = harness.transport(handler, retry_body_errors=True)
    if harness.mode == "sync":
        response = transport.handle_request(  # type: ignore[union-attr]
            httpx.Request("GET", "https://api.example.com/"))
    else:
        async def main() -> httpx.Response:
            return await transport.handle_async_request(  # type: ignore[union-attr]
                httpx.Request("GET", "https://api.example.com/"))

        response = harness.run(main)
    assert response.status_code == 200
    assert count[0] == 2


@pytest.mark.anyio
async def test_cancelled_while_buffering_closes_the_body(anyio_backend: str) -> None:
    """Cancellation while reading the body in the loop still closes the response."""
    import anyio

    closed: list[str] = []

    class Slow(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"a"
            await anyio.sleep(3600)
            yield b"b"

        async def aclose(self) -> None:
            closed.append("closed")

    transport = rt.AsyncRetryTransport(
        httpx.MockTransport(lambda r: httpx.Response(200, stream=Slow())),
        retry_body_errors=True,
    )
    with anyio.move_on_after(0.05):
        await transport.handle_async_request(httpx.Request("GET", "https://api.example.com/"))
    assert closed == ["closed"]


def test_contact_may_carry_a_display_name(harness: Harness) -> None:
    """From takes a mailbox, so "Name <address>" is accepted and sent as given."""
    handler, seen = script(200)
    harness.send(harness.transport(handler, contact="Ops Team <ops@example.com>"))
    assert seen[0].headers["from"] == "Ops Team <ops@example.com>"


# -- misuse that used to fail late or silently -------------------------------------------


def _plain_sleep(seconds: float) -> None:
    pass


class _Sleeper:
    def nap(self, seconds: float) -> None:
        pass


@pytest.mark.parametrize("bad", [
    time.sleep, [].append, _plain_sleep, _Sleeper().nap, functools.partial(time.sleep),
    functools.partial(_plain_sleep), lambda seconds: anyio.sleep(seconds),
], ids=["time.sleep", "list.append", "def", "method", "partial-builtin", "partial-def",
        "lambda"])
def test_a_plain_sleep_is_refused_by_the_async_transport(bad: Any) -> None:
    """AsyncRetryTransport(sleep=time.sleep) would block the event loop for the whole wait,
    then fail: a function that is not async is a TypeError at construction, naming sleep (a
    lambda too, even one that returns a coroutine: the kind is what the function is)."""
    with pytest.raises(TypeError, match="sleep must be an async function"):
        rt.AsyncRetryTransport(sleep=bad)
    rt.RetryTransport(sleep=bad)  # the right kind for the sync transport


def test_a_coroutine_sleep_is_refused_by_the_sync_transport() -> None:
    """RetryTransport(sleep=asyncio.sleep) would never wait: a TypeError at construction."""
    import asyncio

    class AsyncSleeper:
        async def __call__(self, seconds: float) -> None:
            pass

        async def nap(self, seconds: float) -> None:
            pass

    for bad in (asyncio.sleep, AsyncSleeper(), AsyncSleeper().nap,
                functools.partial(anyio.sleep)):
        with pytest.raises(TypeError, match="sleep must be a plain function"):
            rt.RetryTransport(sleep=bad)  # type: ignore[arg-type]
        rt.AsyncRetryTransport(sleep=bad)  # the right kind for the async transport


class _Recorder:
    """A sleep whose kind cannot be told from it (a plain ``__call__``): records what it is
    given and returns what ``result`` makes of it."""

    def __init__(self, result: Callable[[float], object] = lambda seconds: None) -> None:
        self.given: list[float] = []
        self.result = result

    def __call__(self, seconds: float) -> Any:
        self.given.append(seconds)
        return self.result(seconds)


def test_a_sleep_returning_an_awaitable_fails_at_its_first_wait_on_the_sync_transport() -> None:
    """A sync transport given a sleep that returns a coroutine would never wait: its first
    wait raises TypeError, no further attempt is sent, and the coroutine is closed, so no
    "never awaited" warning follows. The sleep was asked for that one wait only."""
    handler, seen = script(503, 503, 200)
    sleep = _Recorder(anyio.sleep)
    transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=sleep, jitter="none",
                                  base_delay=0.25)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TypeError, match="sleep must be a plain function"):
            httpx.Client(transport=transport).get("https://api.example.com/")
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
    assert sleep.given == [0.25]
    assert len(seen) == 1


@pytest.mark.anyio
async def test_a_sleep_returning_no_awaitable_fails_at_its_first_wait_on_the_async_transport(
    anyio_backend: str,
) -> None:
    """An async transport given a sync sleep it cannot tell from an async one (an object
    with a plain __call__) finds out at its first wait: TypeError naming sleep, and no
    further attempt is sent."""
    handler, seen = script(503, 200)
    sleep = _Recorder()
    transport = rt.AsyncRetryTransport(httpx.MockTransport(handler), sleep=sleep,
                                       jitter="none", base_delay=0.25)
    request = httpx.Request("GET", "https://api.example.com/")
    with pytest.raises(TypeError, match="sleep must be an async function"):
        await transport.handle_async_request(request)
    assert sleep.given == [0.25]
    assert len(seen) == 1


def _recording_sleep(kind: str, harness: Harness) -> tuple[Any, Callable[[], list[float]]]:
    """A sleep of the harness's kind (plain for sync, async otherwise) built as ``kind``:
    a callable object, a bound method, a ``functools.partial`` or a mock; and a function
    returning what it was given so far."""
    from unittest import mock

    sync = harness.mode == "sync"
    if kind == "mock":
        recorder = (mock.Mock(side_effect=harness.clock.sleep) if sync
                    else mock.AsyncMock(side_effect=harness.clock.asleep))
        return recorder, lambda: [call.args[0] for call in recorder.call_args_list]
    given: list[float] = []
    wait: Callable[[float], Any] = harness.clock.sleep if sync else harness.clock.asleep

    def record(store: list[float], seconds: float) -> Any:
        store.append(seconds)
        return wait(seconds)

    class Sleeper:
        def __call__(self, seconds: float) -> Any:  # a plain __call__: its kind is unknown
            return record(given, seconds)

        def nap(self, seconds: float) -> Any:
            return record(given, seconds)

        async def anap(self, seconds: float) -> None:
            await record(given, seconds)

    sleep = {
        "object": Sleeper(),
        "method": Sleeper().nap if sync else Sleeper().anap,
        "partial": functools.partial(record, given) if sync else functools.partial(Sleeper()),
    }[kind]
    return sleep, lambda: list(given)


@pytest.mark.parametrize("kind", ["object", "method", "partial", "mock"])
def test_the_users_sleep_is_called_only_to_wait(harness: Harness, kind: str) -> None:
    """A user's sleep (a callable object, a bound method, a partial, a mock) is called once
    per wait with that wait, and never otherwise: not at construction, not before the
    first request, not on a success."""
    handler, seen = script(200, 503, 200, 503, 200)
    sleep, given = _recording_sleep(kind, harness)
    transport = harness.transport(handler, sleep=sleep, jitter="none", base_delay=0.5)
    assert given() == []
    assert harness.send(transport).status_code == 200
    assert given() == []
    for _ in range(2):
        assert harness.send(transport).status_code == 200
    assert given() == [0.5, 0.5]
    assert harness.waits == [0.5, 0.5]
    assert len(seen) == 5


@pytest.mark.parametrize("value", ["print", b"hook"])
def test_a_string_is_not_a_list_of_hooks(value: Any) -> None:
    """hooks="print" names the mistake: a string, not a list of callables."""
    with pytest.raises(TypeError, match="got the string"):
        rt.RetryTransport(hooks=value)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_signature_says_each_transport_gets_its_own_budget(transport: str) -> None:
    """help() must not read as one shared default budget."""
    import inspect

    cls = getattr(rt, transport)
    default = inspect.signature(cls).parameters["budget"].default
    assert repr(default) == "<a new RetryBudget() for each transport>"
    assert cls().budget is not cls().budget


def test_a_base_delay_over_max_delay_is_refused_everywhere(harness: Harness) -> None:
    """As keywords of the transports and per request, naming both."""
    with pytest.raises(ValueError, match=r"base_delay \(30\.0\) .* max_delay \(20\.0\)"):
        harness.transport(lambda request: httpx.Response(200), base_delay=30.0)
    transport = harness.transport(lambda request: httpx.Response(200), max_delay=1.0)
    with pytest.raises(ValueError, match=r"base_delay \(2\.0\) .* max_delay \(1\.0\)"):
        harness.send(transport, extensions={"retry": {"base_delay": 2.0}})


def test_an_unknown_keyword_suggests_the_nearest(harness: Harness) -> None:
    with pytest.raises(TypeError, match=r"'max_attemps' \(did you mean 'max_attempts'\?\)"):
        harness.transport(lambda request: httpx.Response(200), max_attemps=3)
    with pytest.raises(TypeError, match=r"'hook' \(did you mean 'hooks'\?\)"):
        harness.transport(lambda request: httpx.Response(200), hook=print)
    with pytest.raises(TypeError, match=r"'zzz': expected"):  # nothing near: no guess
        harness.transport(lambda request: httpx.Response(200), zzz=1)
