"""Against a real HTTP/1.1 server on 127.0.0.1 that answers 429/503 before a 200: what the
server counted proves what the transport sent. Each test runs sync, and async on asyncio and
trio (the ``anyio_backend`` fixture)."""

from __future__ import annotations

import pytest

from tests.flavour import rt
from tests.real.clients import STREAMED, Outcome, asend, send
from tests.real.servers import DATE_FORMATS, Reply, ScriptedHTTPServer, http_date, timestamp

pytestmark = [pytest.mark.real, pytest.mark.usefixtures("flavour")]

# -- idempotent requests: exactly as the policy says -----------------------------------

#: (statuses the server answers before 200, max_attempts, final status, stop reason)
SCHEDULES = [
    pytest.param((503,), 3, 200, "success", id="503-200"),
    pytest.param((503, 502, 504), 4, 200, "success", id="503-502-504-200"),
    pytest.param((429, 408), 3, 200, "success", id="429-408-200"),
    pytest.param((503,) * 5, 3, 503, "max_attempts", id="503x5-max3"),
    pytest.param((503,) * 5, 1, 503, "max_attempts", id="503-max1"),
    pytest.param((500, 503), 3, 500, "not_retryable", id="500-never-retried"),
    pytest.param((404,), 3, 404, "not_retryable", id="404-never-retried"),
]


def check_schedule(
    outcome: Outcome, server: ScriptedHTTPServer, statuses: tuple[int, ...], max_attempts: int,
    final: int, reason: str, method: str,
) -> None:
    sent = server.requests("/schedule")
    attempts = len(sent)
    assert outcome.error is None
    assert outcome.status == final
    info = outcome.info
    assert info.stop_reason.value == reason
    assert info.attempts == attempts <= max_attempts
    assert [a.status for a in info.history] == [*statuses, 200][:attempts]
    assert len(outcome.waits) == attempts - 1 == info.retries
    assert [a.wait for a in info.history] == [*outcome.waits, 0.0]
    assert {seen.method for seen in sent} == {method}
    assert outcome.transport.stats.requests == 1
    assert outcome.transport.stats.retries == attempts - 1


@pytest.mark.parametrize(("statuses", "max_attempts", "final", "reason"), SCHEDULES)
def test_idempotent_request_is_retried_as_the_policy_says(
    http_server: ScriptedHTTPServer, statuses: tuple[int, ...], max_attempts: int, final: int,
    reason: str,
) -> None:
    url = http_server.script("/schedule", *map(Reply, statuses))
    outcome = send("GET", url, max_attempts=max_attempts)
    check_schedule(outcome, http_server, statuses, max_attempts, final, reason, "GET")


@pytest.mark.anyio
@pytest.mark.parametrize(("statuses", "max_attempts", "final", "reason"), SCHEDULES)
async def test_idempotent_request_is_retried_as_the_policy_says_async(
    http_server: ScriptedHTTPServer, statuses: tuple[int, ...], max_attempts: int, final: int,
    reason: str,
) -> None:
    url = http_server.script("/schedule", *map(Reply, statuses))
    outcome = await asend("GET", url, max_attempts=max_attempts)
    check_schedule(outcome, http_server, statuses, max_attempts, final, reason, "GET")


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "PUT", "DELETE"])
def test_every_idempotent_method_is_retried(http_server: ScriptedHTTPServer, method: str) -> None:
    url = http_server.script("/schedule", Reply(503), Reply(503))
    outcome = send(method, url, content=b"same" if method == "PUT" else None)
    check_schedule(outcome, http_server, (503, 503), 3, 200, "success", method)
    if method == "PUT":
        assert [seen.body for seen in http_server.requests("/schedule")] == [b"same"] * 3


# -- Retry-After in every format, measured from the server's own Date header -----------

FORMATS = [pytest.param(fmt, status, id=f"{fmt}-{status}")
           for fmt in ("seconds", *DATE_FORMATS) for status in (429, 503)]


def check_retry_after(outcome: Outcome, server: ScriptedHTTPServer) -> None:
    assert outcome.status == 200
    assert server.count("/throttled") == 2
    info = outcome.info
    assert info.history[0].retry_after == 7.0
    # the server's value is the floor, the (jitter-free) backoff comes on top
    assert outcome.waits == [pytest.approx(7.0 + 0.01)]
    assert info.total_wait == pytest.approx(7.01)


@pytest.mark.parametrize(("fmt", "status"), FORMATS)
def test_retry_after_in_every_format(
    http_server: ScriptedHTTPServer, fmt: str, status: int
) -> None:
    url = http_server.script("/throttled", Reply(status, retry_after=(fmt, 7)))
    outcome = send("GET", url, jitter="none", base_delay=0.01)
    check_retry_after(outcome, http_server)


@pytest.mark.anyio
@pytest.mark.parametrize(("fmt", "status"), FORMATS)
async def test_retry_after_in_every_format_async(
    http_server: ScriptedHTTPServer, fmt: str, status: int
) -> None:
    url = http_server.script("/throttled", Reply(status, retry_after=(fmt, 7)))
    outcome = await asend("GET", url, jitter="none", base_delay=0.01)
    check_retry_after(outcome, http_server)


# -- no server can park the client -----------------------------------------------------

PARKING = [
    pytest.param(("seconds", 999_999_999), id="999999999-seconds"),
    pytest.param(("raw", "9" * 400), id="400-digits"),
    pytest.param(("raw", http_date(timestamp(2100), "imf")), id="imf-2100"),
    pytest.param(("raw", http_date(timestamp(2100), "asctime")), id="asctime-2100"),
    pytest.param(("imf", 61), id="date-61s-after-Date"),
]


def check_not_parked(outcome: Outcome, server: ScriptedHTTPServer) -> None:
    assert outcome.status == 503
    assert outcome.waits == []
    assert server.count("/park") == 1
    info = outcome.info
    assert info.stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG
    assert info.history[0].retry_after is not None and info.history[0].retry_after > 60


@pytest.mark.parametrize("retry_after", PARKING)
def test_a_huge_retry_after_returns_the_response_at_once(
    http_server: ScriptedHTTPServer, retry_after: tuple[str, object]
) -> None:
    url = http_server.script("/park", Reply(503, retry_after=retry_after))
    check_not_parked(send("GET", url), http_server)


@pytest.mark.anyio
@pytest.mark.parametrize("retry_after", PARKING)
async def test_a_huge_retry_after_returns_the_response_at_once_async(
    http_server: ScriptedHTTPServer, retry_after: tuple[str, object]
) -> None:
    url = http_server.script("/park", Reply(503, retry_after=retry_after))
    check_not_parked(await asend("GET", url), http_server)


@pytest.mark.parametrize("value", ["1e309", "-0", "NaN", "-5", "1.5", "\u0662", "inf", ""])
def test_a_malformed_retry_after_falls_back_to_the_backoff(
    http_server: ScriptedHTTPServer, value: str
) -> None:
    """Hostile Retry-After text on the wire: ignored, the ordinary backoff applies."""
    header = ("raw", value.encode("utf-8").decode("latin-1"))
    url = http_server.script("/odd", Reply(503, retry_after=header))
    outcome = send("GET", url, jitter="none", base_delay=0.01)
    assert outcome.status == 200
    assert http_server.count("/odd") == 2
    assert outcome.info.history[0].retry_after is None
    assert outcome.waits == [pytest.approx(0.01)]


# -- unsafe requests -------------------------------------------------------------------

KEY = '"order-8e03978e"'


def check_keyed(outcome: Outcome, server: ScriptedHTTPServer, body: bytes) -> None:
    assert outcome.status == 200
    sent = server.requests("/pay")
    assert len(sent) == 4 == outcome.info.attempts
    assert [seen.idempotency_key for seen in sent] == [KEY] * 4
    assert [seen.body for seen in sent] == [body] * 4
    assert [seen.method for seen in sent] == ["POST"] * 4


def keyed_script(server: ScriptedHTTPServer) -> str:
    return server.script("/pay", Reply(503), Reply(429, retry_after=("seconds", 1)), Reply(502))


def test_post_with_a_key_is_retried_with_the_same_key_and_body(
    http_server: ScriptedHTTPServer,
) -> None:
    outcome = send("POST", keyed_script(http_server), content=b'{"amount": 10}',
                   headers={"Idempotency-Key": KEY}, max_attempts=4)
    check_keyed(outcome, http_server, b'{"amount": 10}')


@pytest.mark.anyio
async def test_post_with_a_key_is_retried_with_the_same_key_and_body_async(
    http_server: ScriptedHTTPServer,
) -> None:
    outcome = await asend("POST", keyed_script(http_server), content=b'{"amount": 10}',
                          headers={"Idempotency-Key": KEY}, max_attempts=4)
    check_keyed(outcome, http_server, b'{"amount": 10}')


def test_auto_idempotency_key_is_the_same_on_every_attempt(
    http_server: ScriptedHTTPServer,
) -> None:
    """auto_idempotency_key: one fresh key per request, repeated on each of its attempts."""
    outcome = send("POST", keyed_script(http_server), content=b"x", max_attempts=4,
                   auto_idempotency_key=True)
    assert outcome.status == 200
    keys = [seen.idempotency_key for seen in http_server.requests("/pay")]
    assert len(keys) == 4 and len(set(keys)) == 1 and keys[0]
    http_server.reset()
    second = send("POST", keyed_script(http_server), content=b"x", max_attempts=4,
                  auto_idempotency_key=True)
    assert second.status == 200
    assert http_server.requests("/pay")[0].idempotency_key not in keys


#: What may not be sent twice: (method, headers, streaming body, expected stop reason).
ONE_SHOT = [
    pytest.param("POST", {}, False, "unsafe_method", id="post-no-key"),
    pytest.param("PATCH", {"Idempotency-Key": ""}, False, "unsafe_method", id="patch-empty-key"),
    pytest.param("PUT", {}, True, "body_not_replayable", id="put-generator"),
    pytest.param("POST", {"Idempotency-Key": KEY}, True, "body_not_replayable",
                 id="post-key-generator"),
]


def check_sent_once(
    outcome: Outcome, server: ScriptedHTTPServer, streaming: bool, reason: str
) -> None:
    assert outcome.status == 503
    assert outcome.waits == []
    sent = server.requests("/once")
    assert len(sent) == 1
    assert sent[0].body == (STREAMED if streaming else b"pay")
    assert outcome.info.stop_reason.value == reason
    assert outcome.transport.stats.gave_up == {rt.StopReason(reason): 1}


@pytest.mark.parametrize(("method", "headers", "streaming", "reason"), ONE_SHOT)
def test_503_on_a_one_shot_request_is_not_sent_again(
    http_server: ScriptedHTTPServer, method: str, headers: dict[str, str], streaming: bool,
    reason: str,
) -> None:
    url = http_server.script("/once", Reply(503))
    outcome = send(method, url, content=None if streaming else b"pay", streaming=streaming,
                   headers=headers)
    check_sent_once(outcome, http_server, streaming, reason)


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "headers", "streaming", "reason"), ONE_SHOT)
async def test_503_on_a_one_shot_request_is_not_sent_again_async(
    http_server: ScriptedHTTPServer, method: str, headers: dict[str, str], streaming: bool,
    reason: str,
) -> None:
    url = http_server.script("/once", Reply(503))
    outcome = await asend(method, url, content=None if streaming else b"pay",
                          streaming=streaming, headers=headers)
    check_sent_once(outcome, http_server, streaming, reason)
