"""Errors from beneath the HTTP library that escape its own mapping: a raw ``ssl.SSLError``
(a TLS record that fails after the handshake, on asyncio), ``anyio.EndOfStream`` and
``anyio.BrokenResourceError``. They mean what the flavour's read errors mean: transient, and
of no known phase, so a request that may have been sent (a POST without a key) is not sent
again, and the one not retried reaches the caller as the very object raised. A raw
``ssl.SSLCertVerificationError`` is a certificate that failed: never retried. Both flavours,
sync and async on asyncio and trio, in virtual time."""

from __future__ import annotations

import random
import ssl
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://api.example.com/items"


def tls_record() -> ssl.SSLError:
    """What asyncio's TLS stream raises for a record that fails to decrypt."""
    return ssl.SSLError(1, "[SSL: DECRYPTION_FAILED_OR_BAD_RECORD_MAC] decryption failed or "
                           "bad record mac (_ssl.c:2580)")


def tls_eof() -> ssl.SSLEOFError:
    return ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2427)")


#: The raw errors, each made fresh for every attempt.
RAW: dict[str, Callable[[], Exception]] = {
    "SSLError": tls_record,
    "SSLEOFError": tls_eof,
    "EndOfStream": anyio.EndOfStream,
    "BrokenResourceError": anyio.BrokenResourceError,
}


class Above(random.Random):
    """Every draw is just below 1.0: no probability the throttle computes here refuses."""

    def random(self) -> float:
        return 1.0 - 1e-9


class Failing:
    """A handler that raises ``make()`` for its first ``times`` calls, then answers 200;
    keeps every error it raised."""

    def __init__(self, make: Callable[[], Exception], times: int = 1_000) -> None:
        self.make = make
        self.times = times
        self.raised: list[Exception] = []
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.times:
            error = self.make()
            self.raised.append(error)
            raise error
        return httpx.Response(200)


@table("name", list(RAW))
def test_a_get_is_retried(harness: Harness, name: str) -> None:
    handler = Failing(RAW[name], times=2)
    transport = harness.transport(handler)
    response = harness.send(transport)
    assert response.status_code == 200
    assert handler.calls == 3
    info = rt.retry_info(response)
    assert (info.attempts, info.stop_reason) == (3, rt.StopReason.SUCCESS)
    assert [a.error for a in info.history] == [name, name, None]


@table("name", list(RAW))
def test_a_post_without_a_key_is_not_sent_again(harness: Harness, name: str) -> None:
    """Nothing proves the error came before the request was sent: a POST may have been
    carried out, so it is not sent again, and the caller gets the very error raised."""
    handler = Failing(RAW[name])
    transport = harness.transport(handler)
    with pytest.raises(type(RAW[name]())) as caught:
        harness.send(transport, method="POST", content=b"{}")
    assert handler.calls == 1
    assert caught.value is handler.raised[0]
    info = rt.retry_info(caught.value)
    assert (info.attempts, info.stop_reason) == (1, rt.StopReason.UNSAFE_METHOD)
    assert transport.stats.gave_up == {rt.StopReason.UNSAFE_METHOD: 1}


def test_a_post_with_a_key_is_retried(harness: Harness) -> None:
    handler = Failing(tls_record, times=1)
    transport = harness.transport(handler)
    response = harness.send(transport, method="POST", content=b"{}",
                            headers={"Idempotency-Key": "k-1"})
    assert response.status_code == 200
    assert handler.calls == 2


def test_a_raw_certificate_failure_is_never_retried(harness: Harness) -> None:
    """A certificate that failed verification meets the next handshake too: the GET ends at
    once with the very error, and says nothing of the origin's health."""
    handler = Failing(lambda: ssl.SSLCertVerificationError(
        1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"))
    breaker = rt.CircuitBreaker(min_requests=1, failure_ratio=1.0, clock=harness.clock)
    transport = harness.transport(handler, breaker=breaker)
    with pytest.raises(ssl.SSLCertVerificationError) as caught:
        harness.send(transport)
    assert handler.calls == 1
    assert caught.value is handler.raised[0]
    info = rt.retry_info(caught.value)
    assert (info.attempts, info.stop_reason) == (1, rt.StopReason.NOT_RETRYABLE)
    assert breaker.state(URL) == "closed"


def judged(harness: Harness, make: Callable[[], Exception]) -> tuple[Any, ...]:
    """Three GETs of two attempts each, all failing with ``make()``, through a breaker and a
    throttle: what the metadata, the stats and both guards made of them."""
    breaker = rt.CircuitBreaker(min_requests=6, failure_ratio=1.0, clock=harness.clock)
    throttle = rt.AdaptiveThrottle(rng=Above(0), clock=harness.clock)
    transport = harness.transport(Failing(make), breaker=breaker, throttle=throttle,
                                  max_attempts=2, budget=None, jitter="none")
    infos = []
    for _ in range(3):
        with pytest.raises(Exception) as caught:
            harness.send(transport)
        info = rt.retry_info(caught.value)
        infos.append((type(caught.value).__name__ == "CircuitOpenError", info.attempts,
                      info.retries, info.stop_reason, len(info.history)))
    stats = transport.stats
    return (infos, stats.requests, stats.retries, dict(stats.gave_up), breaker.state(URL),
            throttle.counts(URL))


@table("name", list(RAW))
def test_the_guards_and_the_stats_judge_it_as_a_read_error(harness: Harness,
                                                           name: str) -> None:
    """Each attempt is a failure for the breaker and a request without an accept for the
    throttle, as the flavour's ReadError is."""
    expected = judged(harness, lambda: httpx.ReadError("read failed"))
    assert expected[4] == "open" and expected[5] == (6, 0)  # the comparison means something
    assert judged(harness, RAW[name]) == expected


def test_a_body_that_breaks_with_one_is_read_again(harness: Harness) -> None:
    """Read inside the loop (``retry_body_errors``), a body broken by a raw error is a body
    error like the flavour's ReadError: the GET is sent again and its body read whole."""
    answers = [[b"par"], [b"full ", b"body"]]

    class Body(httpx.SyncByteStream, httpx.AsyncByteStream):  # the flavour's, at call time
        def __init__(self, chunks: list[bytes], error: Exception | None) -> None:
            self.chunks, self.error = chunks, error

        def __iter__(self) -> Any:
            yield from self.chunks
            if self.error is not None:
                raise self.error

        async def __aiter__(self) -> Any:
            for chunk in self.chunks:
                yield chunk
            if self.error is not None:
                raise self.error

    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        first = len(calls) == 1
        return httpx.Response(200, stream=Body(answers[len(calls) - 1],
                                               anyio.EndOfStream() if first else None))

    response = harness.send(harness.transport(handler, retry_body_errors=True))
    assert response.content == b"full body"
    assert len(calls) == 2
    assert [a.error for a in rt.retry_info(response).history] == ["EndOfStream", None]
