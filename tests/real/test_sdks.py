"""The OpenAI and Anthropic SDKs on an httpx2 client whose transport is a retry transport,
against a fake API on 127.0.0.1 (``sdk_server.py``): what the server counted proves what was
sent, and the SDKs parse its answers into their own types.

Each test runs for both SDKs; most run sync, and async on asyncio and on trio (the
``anyio_backend`` fixture), the last few sync only. Both SDKs run on trio, since they sleep
with ``anyio.sleep`` and do their I/O through the httpx2 client. Our transport's waits are
recorded, never slept. The SDKs' own retries, where a test leaves them on, wait what the
server's ``retry-after-ms: 1`` asks (a header only the SDKs read): a millisecond each.

What the SDKs do on the wire, as these tests pin down:

- Both send ``x-stainless-retry-count`` with their own retry count. Our retries happen below
  the SDK and resend its request as it is, so each of our attempts carries the same count.
- Neither sends an ``Idempotency-Key``: both make one up for every non-GET call, but have no
  header to send it in. So without ``auto_idempotency_key`` (or a key in ``extra_headers``),
  our transport sends a POST once; the SDKs' own retries resend it regardless.
- OpenAI raises ``InternalServerError`` for a 503; Anthropic raises ``ServiceUnavailableError``,
  a subclass of its ``InternalServerError``. Either way ``error.response`` is the httpx2
  response our transport returned, with its retry metadata.
- Both read ``retry-after-ms`` and ``x-should-retry`` for their own retries, as our transport
  does for its own: with ``max_retries=0`` (the README's advice) only ours act on them.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

httpx2 = pytest.importorskip("httpx2")  # Python 3.11+
openai = pytest.importorskip("openai", minversion="3")  # the SDKs built on httpx2
anthropic = pytest.importorskip("anthropic", minversion="2")

import retry_transport.httpx2 as rt  # noqa: E402
from retry_transport.testing import retry_testing  # noqa: E402
from tests.real.sdk_server import (  # noqa: E402
    ANSWER,
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    FakeAPI,
    Fault,
)
from tests.real.servers import Seen, closed_port  # noqa: E402

pytestmark = pytest.mark.real

#: The SDK clients' timeout, seconds: no test's outcome depends on it.
TIMEOUT = 2.0
#: A 503 storm the SDKs wait a millisecond after (``retry-after-ms``), and ours the backoff.
STORM = Fault(503, headers=(("retry-after-ms", "1"),))
#: The SDKs' default ``max_retries``, and our default ``max_attempts``.
SDK_DEFAULT_RETRIES = 2
OUR_DEFAULT_ATTEMPTS = 3

PROMPT = [{"role": "user", "content": "Hello?"}]

#: A 429 whose server says a retry will work, after 50 ms (the headers both APIs send).
RATE_LIMITED = Fault(429, headers=(("retry-after-ms", "50"), ("x-should-retry", "true")))
#: A spent requests quota resets this many seconds after the answer (recorded, not slept).
QUOTA_RESET = 20


def _openai_spent_quota(now: float) -> tuple[tuple[str, str], ...]:
    """OpenAI's rate-limit headers: requests spent for QUOTA_RESET s, tokens to spare."""
    return (
        ("x-ratelimit-limit-requests", "60"),
        ("x-ratelimit-remaining-requests", "0"),
        ("x-ratelimit-reset-requests", f"{QUOTA_RESET}s"),
        ("x-ratelimit-limit-tokens", "150000"),
        ("x-ratelimit-remaining-tokens", "149000"),
        ("x-ratelimit-reset-tokens", "6m0s"),
    )


def _anthropic_spent_quota(now: float) -> tuple[tuple[str, str], ...]:
    """Anthropic's: the reset an RFC 3339 time, QUOTA_RESET s after the answer's ``Date``
    (``now`` truncated to the second, as the server's ``Date`` is)."""

    def at(seconds: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.floor(now) + seconds))

    return (
        ("anthropic-ratelimit-requests-limit", "60"),
        ("anthropic-ratelimit-requests-remaining", "0"),
        ("anthropic-ratelimit-requests-reset", at(QUOTA_RESET)),
        ("anthropic-ratelimit-tokens-limit", "150000"),
        ("anthropic-ratelimit-tokens-remaining", "149000"),
        ("anthropic-ratelimit-tokens-reset", at(60)),
    )


@dataclass
class Waits:
    """Our transport's injected sleep: records the waits, never sleeps on wall time."""

    waits: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        await anyio.sleep(0)


@dataclass(frozen=True)
class Kit:
    """One SDK: its clients, the calls the tests make with them, and what they return."""

    api: str
    sync_client: Callable[..., Any]
    async_client: Callable[..., Any]
    #: what the SDK raises for a 503, and for a connection it could not make
    error: type[Exception]
    connection_error: type[Exception]
    #: what it raises for a 429, and for a 500
    rate_limit_error: type[Exception]
    internal_error: type[Exception]
    models_path: str
    create_path: str
    model_ids: tuple[str, ...]
    #: ``client.models.list()`` and ``client.models.with_raw_response.list()``
    list_models: Callable[[Any], Any]
    raw_list_models: Callable[[Any], Any]
    #: a chat completion (OpenAI) or a message (Anthropic): a POST; keywords go to the SDK
    create: Callable[..., Any]
    #: the same call's ``with_raw_response`` twin
    raw_create: Callable[..., Any]
    text: Callable[[Any], str]
    #: the API's rate-limit headers on an answer that spends the requests quota, and the
    #: header our transport names as the signal of the wait they cause
    spent_quota: Callable[[float], tuple[tuple[str, str], ...]]
    quota_signal: str

    def base_url(self, root: str) -> str:
        """The SDK's ``base_url`` for a server at ``root``: OpenAI's paths start after /v1."""
        return root + "/v1" if self.api == "openai" else root

    def ids(self, page: Any) -> tuple[str, ...]:
        return tuple(model.id for model in page.data)


KITS = {
    "openai": Kit(
        api="openai",
        sync_client=openai.OpenAI,
        async_client=openai.AsyncOpenAI,
        error=openai.InternalServerError,
        connection_error=openai.APIConnectionError,
        rate_limit_error=openai.RateLimitError,
        internal_error=openai.InternalServerError,
        models_path="/v1/models",
        create_path="/v1/chat/completions",
        model_ids=(OPENAI_MODEL, "gpt-test-mini"),
        list_models=lambda client: client.models.list(),
        raw_list_models=lambda client: client.models.with_raw_response.list(),
        create=lambda client, **extra: client.chat.completions.create(
            model=OPENAI_MODEL, messages=PROMPT, **extra),
        raw_create=lambda client, **extra: client.chat.completions.with_raw_response.create(
            model=OPENAI_MODEL, messages=PROMPT, **extra),
        text=lambda completion: completion.choices[0].message.content,
        spent_quota=_openai_spent_quota,
        quota_signal="x-ratelimit-reset-requests",
    ),
    "anthropic": Kit(
        api="anthropic",
        sync_client=anthropic.Anthropic,
        async_client=anthropic.AsyncAnthropic,
        error=anthropic.ServiceUnavailableError,
        connection_error=anthropic.APIConnectionError,
        rate_limit_error=anthropic.RateLimitError,
        internal_error=anthropic.InternalServerError,
        models_path="/v1/models",
        create_path="/v1/messages",
        model_ids=(ANTHROPIC_MODEL, "claude-test-mini"),
        list_models=lambda client: client.models.list(),
        raw_list_models=lambda client: client.models.with_raw_response.list(),
        create=lambda client, **extra: client.messages.create(
            model=ANTHROPIC_MODEL, max_tokens=64, messages=PROMPT, **extra),
        raw_create=lambda client, **extra: client.messages.with_raw_response.create(
            model=ANTHROPIC_MODEL, max_tokens=64, messages=PROMPT, **extra),
        text=lambda message: message.content[0].text,
        spent_quota=_anthropic_spent_quota,
        quota_signal="anthropic-ratelimit-requests-reset",
    ),
}


@pytest.fixture(scope="module")
def _apis() -> Iterator[dict[str, FakeAPI]]:
    servers = {api: FakeAPI(api).start() for api in KITS}
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(params=list(KITS))
def kit(request: pytest.FixtureRequest) -> Kit:
    """Each test runs once per SDK."""
    return KITS[str(request.param)]


@pytest.fixture
def server(kit: Kit, _apis: dict[str, FakeAPI]) -> FakeAPI:
    """The kit's fake API, with its scripts and records cleared for this test."""
    api = _apis[kit.api]
    api.reset()
    return api


@pytest.fixture
def waits() -> Waits:
    return Waits()


@contextmanager
def sdk(kit: Kit, root: str, waits: Waits, *, max_retries: int | None = 0,
        **transport_kwargs: Any) -> Iterator[Any]:
    """The kit's sync client on ``httpx2.Client(transport=rt.RetryTransport(...))``, as the
    README sets it up; ``max_retries=None`` leaves the SDK's own retries at its default."""
    transport = rt.RetryTransport(sleep=waits.sleep, **transport_kwargs)
    retries = {} if max_retries is None else {"max_retries": max_retries}
    with kit.sync_client(base_url=kit.base_url(root), api_key="test", timeout=TIMEOUT,
                         http_client=httpx2.Client(transport=transport), **retries) as client:
        yield client


@asynccontextmanager
async def asdk(kit: Kit, root: str, waits: Waits, *, max_retries: int | None = 0,
               **transport_kwargs: Any) -> AsyncIterator[Any]:
    """The async twin of :func:`sdk`: ``httpx2.AsyncClient`` and ``rt.AsyncRetryTransport``."""
    transport = rt.AsyncRetryTransport(sleep=waits.asleep, **transport_kwargs)
    retries = {} if max_retries is None else {"max_retries": max_retries}
    async with kit.async_client(
        base_url=kit.base_url(root), api_key="test", timeout=TIMEOUT,
        http_client=httpx2.AsyncClient(transport=transport), **retries,
    ) as client:
        yield client


def layering() -> Any:
    """The SDK's retries left on above the transport: its first retry of an answer handed
    back raises a ``LayeredRetriesWarning`` (the suite turns warnings into errors)."""
    return pytest.warns(rt.LayeredRetriesWarning, match="max_retries=0")


def retry_counts(sent: list[Seen]) -> list[str | None]:
    """The SDK's own ``x-stainless-retry-count`` on each request the server received."""
    return [seen.header("x-stainless-retry-count") for seen in sent]


def key_headers(seen: Seen) -> list[str]:
    return [value for name, value in seen.headers if name.lower() == "idempotency-key"]


# -- a listing GET: retried below the SDK, parsed by it ------------------------------------


def check_listing(kit: Kit, server: FakeAPI, waits: Waits, page: Any) -> None:
    assert kit.ids(page) == kit.model_ids
    sent = server.requests(kit.models_path)
    assert [seen.method for seen in sent] == ["GET", "GET"]
    assert len(waits.waits) == 1
    # the SDK made one attempt; it never learns of ours
    assert retry_counts(sent) == ["0", "0"]


def test_listing_rides_out_a_503(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    server.fail(kit.models_path, Fault(503))
    with sdk(kit, server.url, waits) as client:
        page = kit.list_models(client)
    check_listing(kit, server, waits, page)


@pytest.mark.anyio
async def test_listing_rides_out_a_503_async(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    server.fail(kit.models_path, Fault(503))
    async with asdk(kit, server.url, waits) as client:
        page = await kit.list_models(client)
    check_listing(kit, server, waits, page)


# -- the raw response carries our metadata -----------------------------------------------


def check_raw(kit: Kit, server: FakeAPI, raw: Any, parsed: Any) -> None:
    assert isinstance(raw.http_response, httpx2.Response)
    info = rt.retry_info(raw.http_response)
    assert info is not None
    assert info.attempts == 2
    assert info.stop_reason is rt.StopReason.SUCCESS
    assert [attempt.status for attempt in info.history] == [503, 200]
    assert raw.retries_taken == 0  # the SDK's own count: it retried nothing
    assert kit.ids(parsed) == kit.model_ids
    assert len(server.requests(kit.models_path)) == 2


def test_raw_response_carries_retry_info(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    server.fail(kit.models_path, Fault(503))
    with sdk(kit, server.url, waits) as client:
        raw = kit.raw_list_models(client)
        parsed = raw.parse()
    check_raw(kit, server, raw, parsed)


@pytest.mark.anyio
async def test_raw_response_carries_retry_info_async(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.models_path, Fault(503))
    async with asdk(kit, server.url, waits) as client:
        raw = await kit.raw_list_models(client)
        parsed = raw.parse()
        if inspect.isawaitable(parsed):  # Anthropic's async raw response parses async
            parsed = await parsed
    check_raw(kit, server, raw, parsed)


# -- a POST without a key: sent once, the SDK's own error --------------------------------


def check_post_sent_once(kit: Kit, server: FakeAPI, waits: Waits, error: Exception) -> None:
    assert type(error) is kit.error
    assert isinstance(error, (openai.InternalServerError, anthropic.InternalServerError))
    assert error.status_code == 503  # type: ignore[attr-defined]
    assert rt.retry_info(error) is None  # the SDK's exception, not one of ours...
    info = rt.retry_info(error.response)  # type: ignore[attr-defined]
    assert info is not None  # ...but its response is the one our transport returned
    assert info.attempts == 1
    assert info.stop_reason is rt.StopReason.UNSAFE_METHOD
    sent = server.requests(kit.create_path)
    assert [seen.method for seen in sent] == ["POST"]
    assert sent[0].idempotency_key is None  # the SDK sends none of its own
    assert waits.waits == []


def test_post_without_a_key_is_sent_once(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    server.fail(kit.create_path, Fault(503))
    with sdk(kit, server.url, waits) as client, pytest.raises(kit.error) as caught:
        kit.create(client)
    check_post_sent_once(kit, server, waits, caught.value)


@pytest.mark.anyio
async def test_post_without_a_key_is_sent_once_async(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, Fault(503))
    async with asdk(kit, server.url, waits) as client:
        with pytest.raises(kit.error) as caught:
            await kit.create(client)
    check_post_sent_once(kit, server, waits, caught.value)


# -- a POST with auto_idempotency_key: retried, one key on both attempts ----------------


def check_keyed_post(kit: Kit, server: FakeAPI, waits: Waits, result: Any) -> None:
    assert kit.text(result) == ANSWER
    sent = server.requests(kit.create_path)
    assert [seen.method for seen in sent] == ["POST", "POST"]
    assert [len(key_headers(seen)) for seen in sent] == [1, 1]
    first, second = (seen.idempotency_key for seen in sent)
    assert first is not None and first == second
    assert first.startswith('"') and first.endswith('"')  # an sf-string: a quoted UUID
    assert sent[0].body == sent[1].body
    assert len(waits.waits) == 1


def test_post_with_auto_idempotency_key_is_retried(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, Fault(503))
    with sdk(kit, server.url, waits, auto_idempotency_key=True) as client:
        result = kit.create(client)
    check_keyed_post(kit, server, waits, result)


@pytest.mark.anyio
async def test_post_with_auto_idempotency_key_is_retried_async(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, Fault(503))
    async with asdk(kit, server.url, waits, auto_idempotency_key=True) as client:
        result = await kit.create(client)
    check_keyed_post(kit, server, waits, result)


# -- why max_retries=0: retries at two layers multiply ----------------------------------


def check_storm(kit: Kit, server: FakeAPI, waits: Waits, error: Exception, client: Any) -> None:
    assert client.max_retries == SDK_DEFAULT_RETRIES
    assert isinstance(error, kit.error)
    sent = server.requests(kit.models_path)
    # each of the SDK's 3 attempts is 3 of ours: 9 requests for one call
    assert len(sent) == (SDK_DEFAULT_RETRIES + 1) * OUR_DEFAULT_ATTEMPTS == 9
    assert retry_counts(sent) == ["0"] * 3 + ["1"] * 3 + ["2"] * 3
    assert len(waits.waits) == 6  # ours: two per SDK attempt


def test_sdk_retries_multiply_ours(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    server.fail(kit.models_path, forever=STORM)
    with layering(), sdk(kit, server.url, waits, max_retries=None) as client, \
            pytest.raises(kit.error) as caught:
        kit.list_models(client)
    check_storm(kit, server, waits, caught.value, client)

    server.reset()  # the same storm with the README's max_retries=0: three requests
    server.fail(kit.models_path, forever=STORM)
    with sdk(kit, server.url, waits) as client, pytest.raises(kit.error) as caught:
        kit.list_models(client)
    assert len(server.requests(kit.models_path)) == OUR_DEFAULT_ATTEMPTS
    info = rt.retry_info(caught.value.response)  # type: ignore[attr-defined]
    assert info is not None and info.stop_reason is rt.StopReason.MAX_ATTEMPTS


@pytest.mark.anyio
async def test_sdk_retries_multiply_ours_async(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    server.fail(kit.models_path, forever=STORM)
    with layering():
        async with asdk(kit, server.url, waits, max_retries=None) as client:
            with pytest.raises(kit.error) as caught:
                await kit.list_models(client)
    check_storm(kit, server, waits, caught.value, client)


# -- the SDKs' own retries resend a POST without a key ---------------------------------


def check_sdk_resent_post(kit: Kit, server: FakeAPI, waits: Waits, error: Exception) -> None:
    assert isinstance(error, kit.error)
    sent = server.requests(kit.create_path)
    # ours sent each SDK attempt once (unsafe_method); the SDK resent the POST, keyless
    assert len(sent) == SDK_DEFAULT_RETRIES + 1
    assert [seen.idempotency_key for seen in sent] == [None] * 3
    assert retry_counts(sent) == ["0", "1", "2"]
    info = rt.retry_info(error.response)  # type: ignore[attr-defined]
    assert info is not None and info.stop_reason is rt.StopReason.UNSAFE_METHOD
    assert waits.waits == []


def test_sdk_retries_resend_a_post_without_a_key(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, forever=STORM)
    with layering(), sdk(kit, server.url, waits, max_retries=None) as client, \
            pytest.raises(kit.error) as caught:
        kit.create(client)
    check_sdk_resent_post(kit, server, waits, caught.value)


@pytest.mark.anyio
async def test_sdk_retries_resend_a_post_without_a_key_async(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, forever=STORM)
    with layering():
        async with asdk(kit, server.url, waits, max_retries=None) as client:
            with pytest.raises(kit.error) as caught:
                await kit.create(client)
    check_sdk_resent_post(kit, server, waits, caught.value)


# -- server signals: a 429 the server says to retry, after retry-after-ms ----------------


def check_trusted_429(kit: Kit, server: FakeAPI, waits: Waits, raw: Any, result: Any) -> None:
    assert kit.text(result) == ANSWER
    sent = server.requests(kit.create_path)
    assert [seen.method for seen in sent] == ["POST", "POST"]
    assert sent[0].body == sent[1].body
    # no key: the server's x-should-retry: true stood in for one (trust_should_retry)
    assert [seen.idempotency_key for seen in sent] == [None, None]
    assert retry_counts(sent) == ["0", "0"]  # our retry, not the SDK's
    assert len(waits.waits) == 1 and waits.waits[0] >= 0.05
    info = rt.retry_info(raw.http_response)
    assert info is not None
    assert info.attempts == 2 and info.stop_reason is rt.StopReason.SUCCESS
    first = info.history[0]
    assert (first.status, first.retry_after, first.signal) == (429, 0.05, "retry-after-ms")
    assert first.wait == waits.waits[0]
    assert raw.retries_taken == 0


def test_trusted_429_on_a_post_is_retried_after_retry_after_ms(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, RATE_LIMITED)
    with sdk(kit, server.url, waits, trust_should_retry=True) as client:
        raw = kit.raw_create(client)
        result = raw.parse()
    check_trusted_429(kit, server, waits, raw, result)


@pytest.mark.anyio
async def test_trusted_429_on_a_post_is_retried_after_retry_after_ms_async(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, RATE_LIMITED)
    async with asdk(kit, server.url, waits, trust_should_retry=True) as client:
        raw = await kit.raw_create(client)
        result = raw.parse()
        if inspect.isawaitable(result):  # Anthropic's async raw response parses async
            result = await result
    check_trusted_429(kit, server, waits, raw, result)


def check_untrusted_429(kit: Kit, server: FakeAPI, waits: Waits, error: Exception) -> None:
    assert type(error) is kit.rate_limit_error
    assert error.status_code == 429  # type: ignore[attr-defined]
    info = rt.retry_info(error.response)  # type: ignore[attr-defined]
    assert info is not None
    assert info.attempts == 1
    assert info.stop_reason is rt.StopReason.UNSAFE_METHOD
    # what the server asked for is on the record, though nothing waited for it
    only = info.history[0]
    assert (only.status, only.retry_after, only.signal) == (429, 0.05, "retry-after-ms")
    sent = server.requests(kit.create_path)
    assert [seen.method for seen in sent] == ["POST"]
    assert waits.waits == []


def test_untrusted_429_on_a_post_is_sent_once(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    """Without ``trust_should_retry`` the server's ``true`` is no idempotency key."""
    server.fail(kit.create_path, RATE_LIMITED)
    with sdk(kit, server.url, waits) as client, \
            pytest.raises(kit.rate_limit_error) as caught:
        kit.create(client)
    check_untrusted_429(kit, server, waits, caught.value)


@pytest.mark.anyio
async def test_untrusted_429_on_a_post_is_sent_once_async(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.fail(kit.create_path, RATE_LIMITED)
    async with asdk(kit, server.url, waits) as client:
        with pytest.raises(kit.rate_limit_error) as caught:
            await kit.create(client)
    check_untrusted_429(kit, server, waits, caught.value)


# -- server signals: x-should-retry: false on a GET ------------------------------------

#: (status, stop reason): a 500 is not retryable anyway; a 503 is, and the server declines
DECLINED = [
    pytest.param(500, rt.StopReason.NOT_RETRYABLE, id="500-not_retryable"),
    pytest.param(503, rt.StopReason.SERVER_DECLINED, id="503-server_declined"),
]


def check_declined(kit: Kit, server: FakeAPI, waits: Waits, error: Exception, status: int,
                   reason: rt.StopReason) -> None:
    assert type(error) is (kit.internal_error if status == 500 else kit.error)
    assert error.status_code == status  # type: ignore[attr-defined]
    info = rt.retry_info(error.response)  # type: ignore[attr-defined]
    assert info is not None
    assert info.attempts == 1 and info.retries == 0
    assert info.stop_reason is reason
    assert [seen.method for seen in server.requests(kit.models_path)] == ["GET"]
    assert waits.waits == []


@pytest.mark.parametrize(("status", "reason"), DECLINED)
def test_get_the_server_declines_is_not_retried(
    kit: Kit, server: FakeAPI, waits: Waits, status: int, reason: rt.StopReason
) -> None:
    server.fail(kit.models_path, Fault(status, headers=(("x-should-retry", "false"),)))
    with sdk(kit, server.url, waits) as client, pytest.raises(kit.internal_error) as caught:
        kit.list_models(client)
    check_declined(kit, server, waits, caught.value, status, reason)


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "reason"), DECLINED)
async def test_get_the_server_declines_is_not_retried_async(
    kit: Kit, server: FakeAPI, waits: Waits, status: int, reason: rt.StopReason
) -> None:
    server.fail(kit.models_path, Fault(status, headers=(("x-should-retry", "false"),)))
    async with asdk(kit, server.url, waits) as client:
        with pytest.raises(kit.internal_error) as caught:
            await kit.list_models(client)
    check_declined(kit, server, waits, caught.value, status, reason)


# -- server signals: the API's rate-limit headers hold the next call ---------------------


def check_spent_quota(kit: Kit, server: FakeAPI, waits: Waits, events: list[rt.RetryEvent],
                      results: list[Any]) -> None:
    """The first answer (a 200) says the requests quota is spent for QUOTA_RESET s: the
    second call waits that long (recorded) before it is sent, and is sent once."""
    assert [kit.text(result) for result in results] == [ANSWER, ANSWER]
    assert [seen.method for seen in server.requests(kit.create_path)] == ["POST", "POST"]
    held = [(event.kind, event.signal) for event in events]
    assert held == [("cooldown", kit.quota_signal)]
    assert len(waits.waits) == 1
    # the time left (a little under QUOTA_RESET) plus a first jittered backoff step
    assert QUOTA_RESET - 1.0 <= waits.waits[0] <= QUOTA_RESET + 0.2
    assert events[0].wait == waits.waits[0]


def test_spent_quota_holds_the_next_call(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    server.annotate(kit.create_path, kit.spent_quota)
    events: list[rt.RetryEvent] = []
    with sdk(kit, server.url, waits, hooks=events.append) as client:
        results = [kit.create(client), kit.create(client)]
    check_spent_quota(kit, server, waits, events, results)


@pytest.mark.anyio
async def test_spent_quota_holds_the_next_call_async(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    server.annotate(kit.create_path, kit.spent_quota)
    events: list[rt.RetryEvent] = []
    async with asdk(kit, server.url, waits, hooks=events.append) as client:
        results = [await kit.create(client), await kit.create(client)]
    check_spent_quota(kit, server, waits, events, results)


# -- more of what the README promises, sync ------------------------------------------


def test_server_verdict_true_makes_a_500_retryable(
    kit: Kit, server: FakeAPI, waits: Waits
) -> None:
    """``x-should-retry: true`` on a status outside ``retry_statuses``: a GET is retried."""
    server.fail(kit.models_path, Fault(500, headers=(("x-should-retry", "true"),)))
    with sdk(kit, server.url, waits) as client:
        raw = kit.raw_list_models(client)
        page = raw.parse()
    assert kit.ids(page) == kit.model_ids
    assert len(server.requests(kit.models_path)) == 2
    info = rt.retry_info(raw.http_response)
    assert info is not None and info.stop_reason is rt.StopReason.SUCCESS
    assert [attempt.status for attempt in info.history] == [500, 200]
    assert len(waits.waits) == 1



def test_post_with_its_own_key_is_retried(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    """A key given to one call (``extra_headers``) opts that POST in, without
    ``auto_idempotency_key``."""
    server.fail(kit.create_path, Fault(503))
    with sdk(kit, server.url, waits) as client:
        result = kit.create(client, extra_headers={"Idempotency-Key": '"order-1"'})
    assert kit.text(result) == ANSWER
    sent = server.requests(kit.create_path)
    assert [seen.idempotency_key for seen in sent] == ['"order-1"', '"order-1"']


def test_connection_error_keeps_its_metadata_on_the_cause(kit: Kit, waits: Waits) -> None:
    """A refused connection is retried (nothing was sent); the SDK then wraps our final
    ``httpx2.ConnectError`` in its ``APIConnectionError``, as ``__cause__``."""
    with sdk(kit, f"http://127.0.0.1:{closed_port()}", waits) as client, \
            pytest.raises(kit.connection_error) as caught:
        kit.list_models(client)
    assert isinstance(caught.value.__cause__, httpx2.ConnectError)
    assert rt.retry_info(caught.value) is None
    info = rt.retry_info(caught.value.__cause__)
    assert info is not None
    assert info.attempts == 3 and info.stop_reason is rt.StopReason.MAX_ATTEMPTS
    assert len(waits.waits) == 2


def test_testing_mode_covers_sdk_clients(kit: Kit, server: FakeAPI) -> None:
    """``retry_testing()`` reaches a transport inside an SDK client: a ``Retry-After: 30``
    is recorded, not slept, and the SDK gets its answer."""
    server.fail(kit.models_path, Fault(503, headers=(("Retry-After", "30"),)))
    with retry_testing() as log, kit.sync_client(
        base_url=kit.base_url(server.url), api_key="test", timeout=TIMEOUT, max_retries=0,
        http_client=httpx2.Client(transport=rt.RetryTransport()),
    ) as client:
        page = kit.list_models(client)
    assert kit.ids(page) == kit.model_ids
    assert len(log.waits) == 1 and log.waits[0] >= 30
    assert len(server.requests(kit.models_path)) == 2


# -- the SDK guide's table: what each choice does with a POST that fails once ----------
#
# docs/guides/sdks.md tabulates, for a chat completion (OpenAI) or a message (Anthropic),
# what each set-up does when the first attempt meets one failure and the next would
# succeed. Each cell is tested here: the requests the server saw, the call's outcome, and
# the keys the requests carried.

#: The first POST's failure, by column. The answers carry ``retry-after-ms: 1`` (a header
#: both APIs send) so that the SDKs' own retries, where left on, wait a millisecond.
FAILURES = {
    "429-should-retry": Fault(429, headers=(("retry-after-ms", "1"), ("x-should-retry", "true"))),
    "429": Fault(429, headers=(("retry-after-ms", "1"),)),
    # the server did not receive the whole request (RFC 9110 section 15.5.9)
    "408": Fault(408, headers=(("retry-after-ms", "1"),)),
    "529": Fault(529, headers=(("retry-after-ms", "1"),)),
    "503-should-retry": Fault(503, headers=(("retry-after-ms", "1"), ("x-should-retry", "true"))),
    "503": Fault(503, headers=(("retry-after-ms", "1"),)),
    # a conflict (the SDKs retry it as a lock timeout): nothing says the server did not act
    "409": Fault(409, headers=(("retry-after-ms", "1"),)),
    # the request carried out, then the server failed
    "500": Fault(500, headers=(("retry-after-ms", "1"),)),
    # the request read (and carried out), the connection closed with no answer
    "dropped": Fault(drop=True),
    # the request carried out, its answer held back past the client's timeout
    "timeout": Fault(200, delay=1.0),
}
#: The columns whose failure comes after the server carried the request out: an attempt that
#: meets one of them counts as carried out, as does the answered one.
CARRIED_OUT = frozenset({"500", "dropped", "timeout"})
#: The call's own timeout in the "timeout" column (the server answers after FAILURES' delay).
CALL_TIMEOUT = 0.3
#: The key a caller gives one logical request (row "own-key").
OWN_KEY = '"chat-7f3c9a"'
#: Row "preset": the kit's own preset (``rt.presets.openai()`` or ``anthropic()``).
PRESET = "preset"

#: The rows: the SDK's max_retries (None: its default, 2), our transport's keywords, and
#: the call's extra_headers.
SETUPS: dict[str, tuple[int | None, dict[str, Any], dict[str, str]]] = {
    "preset": (0, {"policy": PRESET}, {}),
    "nothing": (0, {}, {}),
    "sdk-retries": (None, {}, {}),
    "auto-key": (0, {"auto_idempotency_key": True}, {}),
    "trust-should-retry": (0, {"trust_should_retry": True}, {}),
    "own-key": (0, {}, {"Idempotency-Key": OWN_KEY}),
}

#: What the SDK raised, by the first answer when it is handed back: "rate_limit" (its
#: RateLimitError), "request_timeout" (its 408 error), "status" (its 503 error), "conflict"
#: (its ConflictError), "server" (its 500 error), "overloaded" (its 529 error),
#: "connection" (its APIConnectionError), "timeout" (its APITimeoutError).
_FIRST = {"429-should-retry": "rate_limit", "429": "rate_limit", "408": "request_timeout",
          "529": "overloaded", "503-should-retry": "status", "503": "status",
          "409": "conflict", "500": "server", "dropped": "connection", "timeout": "timeout"}
#: The columns each row retries (and answers, with 2 requests); the rest are sent once.
_KEYED = {"429-should-retry", "429", "408", "503-should-retry", "503", "dropped", "timeout"}
_RETRIED = {
    "preset": {"429-should-retry", "429", "408", "503-should-retry"},
    "nothing": set(),
    "sdk-retries": set(FAILURES),
    "auto-key": _KEYED,
    "trust-should-retry": {"429-should-retry", "503-should-retry"},
    "own-key": _KEYED,
}
#: (row, column) -> (requests the server saw, outcome): "ok" or what the SDK raised.
TABLE: dict[tuple[str, str], tuple[int, str]] = {
    (row, column): (2, "ok") if column in _RETRIED[row] else (1, _FIRST[column])
    for row in SETUPS for column in FAILURES
}
#: The one cell that depends on the API: only the Anthropic preset retries a 529.
BY_API: dict[tuple[str, str], dict[str, tuple[int, str]]] = {
    ("preset", "529"): {"openai": (1, "overloaded"), "anthropic": (2, "ok")},
}
#: The keys each row's requests carry: none, one made up by our transport (the same on
#: every attempt), or the caller's own.
KEYS = {"preset": "none", "nothing": "none", "sdk-retries": "none", "auto-key": "ours",
        "trust-should-retry": "none", "own-key": "own"}


def cell(row: str, column: str, api: str) -> tuple[int, str]:
    """The table's cell for ``api``'s SDK."""
    return BY_API.get((row, column), {}).get(api) or TABLE[row, column]


def carried_out(column: str, requests: int) -> int:
    """How many times the server carried the call out: the first attempt if its failure came
    after, and the answered second one."""
    return (column in CARRIED_OUT) + (requests == 2)


def sdk_errors(kit: Kit) -> dict[str, type[Exception]]:
    module = openai if kit.api == "openai" else anthropic
    overloaded = anthropic.OverloadedError if kit.api == "anthropic" else openai.InternalServerError
    request_timeout = (anthropic.RequestTimeoutError if kit.api == "anthropic"
                       else openai.APIStatusError)
    return {"rate_limit": kit.rate_limit_error, "request_timeout": request_timeout,
            "status": kit.error, "conflict": module.ConflictError,
            "server": kit.internal_error, "overloaded": overloaded,
            "connection": kit.connection_error, "timeout": module.APITimeoutError}


def transport_keywords(kit: Kit, keywords: dict[str, Any]) -> dict[str, Any]:
    """A row's transport keywords, the preset resolved for the kit's SDK."""
    if keywords.get("policy") == PRESET:
        preset = rt.presets.openai if kit.api == "openai" else rt.presets.anthropic
        return {**keywords, "policy": preset()}
    return keywords


@pytest.mark.parametrize("column", list(FAILURES))
@pytest.mark.parametrize("row", list(SETUPS))
def test_guide_table(kit: Kit, server: FakeAPI, waits: Waits, row: str, column: str) -> None:
    max_retries, transport_kwargs, headers = SETUPS[row]
    requests, outcome = cell(row, column, kit.api)
    server.fail(kit.create_path, FAILURES[column])
    extra: dict[str, Any] = {"extra_headers": headers} if headers else {}
    if column == "timeout":
        extra["timeout"] = CALL_TIMEOUT
    with layering() if max_retries is None else contextlib.nullcontext(), \
            sdk(kit, server.url, waits, max_retries=max_retries,
                **transport_keywords(kit, transport_kwargs)) as client:
        if outcome == "ok":
            assert kit.text(kit.create(client, **extra)) == ANSWER
        else:
            with pytest.raises(sdk_errors(kit)[outcome]) as caught:
                kit.create(client, **extra)
            assert type(caught.value) is sdk_errors(kit)[outcome]
    sent = server.requests(kit.create_path)
    assert [seen.method for seen in sent] == ["POST"] * requests
    assert len({seen.body for seen in sent}) == 1  # the same request each time
    assert all(len(key_headers(seen)) <= 1 for seen in sent)
    keys = [seen.idempotency_key for seen in sent]
    if KEYS[row] == "none":
        assert keys == [None] * requests
    elif KEYS[row] == "own":
        assert keys == [OWN_KEY] * requests
    else:
        assert keys[0] is not None and keys[0].startswith('"') and keys == keys[:1] * requests
    # who retried: the SDK counts its own retries in x-stainless-retry-count; ours resend
    # its request as it is
    counts = ["0", "1"] if row == "sdk-retries" else ["0"] * requests
    assert retry_counts(sent) == counts[:requests]
    assert len(waits.waits) == (1 if requests == 2 and row != "sdk-retries" else 0)
    # The preset set-up, as every keyless one, never gets a call carried out twice.
    if KEYS[row] == "none" and row != "sdk-retries":
        assert carried_out(column, requests) <= 1


@pytest.mark.anyio
@pytest.mark.parametrize("column", list(FAILURES))
@pytest.mark.parametrize("row", ["preset", "sdk-retries"])
async def test_guide_table_async(kit: Kit, server: FakeAPI, waits: Waits, row: str,
                                 column: str) -> None:
    """The preset's and the SDK-alone rows on the async clients, asyncio and trio: the same
    requests, the same outcome, and the preset never carries a call out twice."""
    max_retries, transport_kwargs, _ = SETUPS[row]
    requests, outcome = cell(row, column, kit.api)
    server.fail(kit.create_path, FAILURES[column])
    extra: dict[str, Any] = {"timeout": CALL_TIMEOUT} if column == "timeout" else {}
    with layering() if max_retries is None else contextlib.nullcontext():
        async with asdk(kit, server.url, waits, max_retries=max_retries,
                        **transport_keywords(kit, transport_kwargs)) as client:
            if outcome == "ok":
                assert kit.text(await kit.create(client, **extra)) == ANSWER
            else:
                with pytest.raises(sdk_errors(kit)[outcome]) as caught:
                    await kit.create(client, **extra)
                assert type(caught.value) is sdk_errors(kit)[outcome]
    sent = server.requests(kit.create_path)
    assert [seen.method for seen in sent] == ["POST"] * requests
    if row == "preset":
        assert carried_out(column, requests) <= 1
    elif column in CARRIED_OUT:
        assert carried_out(column, requests) == 2  # the SDK alone


def test_sdk_retries_send_a_fresh_key_each(kit: Kit, server: FakeAPI, waits: Waits) -> None:
    """With the SDK's retries left on, each of its attempts is a new request to our
    transport, so ``auto_idempotency_key`` gives each a key of its own: the server cannot
    tell that the three are one call. (Hence ``max_retries=0``.)"""
    server.fail(kit.create_path, forever=STORM)
    with layering(), \
            sdk(kit, server.url, waits, max_retries=None, auto_idempotency_key=True) as client, \
            pytest.raises(kit.error):
        kit.create(client)
    keys = [seen.idempotency_key for seen in server.requests(kit.create_path)]
    assert len(keys) == (SDK_DEFAULT_RETRIES + 1) * OUR_DEFAULT_ATTEMPTS
    assert len(set(keys)) == SDK_DEFAULT_RETRIES + 1  # one per SDK attempt
    assert [len(set(keys[i:i + 3])) for i in (0, 3, 6)] == [1, 1, 1]


def test_refused_post_is_retried_without_a_key(kit: Kit, waits: Waits) -> None:
    """The guide's footnote to its table: a connection that was never made sent nothing,
    so even a POST without a key is retried."""
    with sdk(kit, f"http://127.0.0.1:{closed_port()}", waits) as client, \
            pytest.raises(kit.connection_error) as caught:
        kit.create(client)
    info = rt.retry_info(caught.value.__cause__)
    assert info is not None
    assert info.attempts == OUR_DEFAULT_ATTEMPTS and info.stop_reason is rt.StopReason.MAX_ATTEMPTS


# -- the guide's examples, run against the fake APIs ------------------------------------

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "sdks.md"


def guide_blocks() -> list[str]:
    """The guide's ```python blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(), re.S | re.M)


def test_guide_has_blocks_for_both_sdks() -> None:
    blocks = guide_blocks()
    assert len(blocks) >= 4
    assert {"openai.OpenAI(" in block for block in blocks} == {True, False}


@pytest.mark.parametrize("index", range(len(guide_blocks())))
def test_guide_block_builds_its_client_and_sends_nothing(
    index: int, _apis: dict[str, FakeAPI], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the page says: with no base URL in the environment, a block builds its client and
    calls nothing (no API key needed)."""
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for api in _apis.values():
        api.reset()
    exec(compile(guide_blocks()[index], f"{GUIDE}:block{index}", "exec"), {})
    assert all(api.seen == [] for api in _apis.values())


@pytest.mark.parametrize("index", range(len(guide_blocks())))
def test_guide_block_rides_out_a_trusted_429(
    index: int, _apis: dict[str, FakeAPI], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block, its base URL pointed at the fake API whose first POST is a 429 with
    ``x-should-retry: true``: every set-up on the page retries it, once, and the call
    succeeds. The keys sent are those the block's set-up promises."""
    block = guide_blocks()[index]
    kit = KITS["openai" if "openai.OpenAI(" in block else "anthropic"]
    server = _apis[kit.api]
    server.reset()
    monkeypatch.setenv(f"{kit.api.upper()}_BASE_URL", kit.base_url(server.url))
    monkeypatch.setenv(f"{kit.api.upper()}_API_KEY", "test")
    server.fail(kit.create_path, FAILURES["429-should-retry"])
    namespace: dict[str, Any] = {}
    with retry_testing() as log:  # the transports' waits recorded, not slept
        try:
            exec(compile(block, f"{GUIDE}:block{index}", "exec"), namespace)
        finally:
            namespace["client"].close()  # the block's connections, closed
    sent = server.requests(kit.create_path)
    assert [seen.method for seen in sent] == ["POST", "POST"]
    assert retry_counts(sent) == ["0", "0"]  # the transport's retry, not the SDK's
    assert len(log.waits) == 1
    keys = [seen.idempotency_key for seen in sent]
    if "auto_idempotency_key=True" in block or "Idempotency-Key" in block:
        assert keys[0] is not None and keys == [keys[0]] * 2
    else:
        assert keys == [None, None]


# -- the guide's table is this module's TABLE ---------------------------------------------

#: How the guide names each column, row and outcome.
COLUMN_NAMES = {
    "429-should-retry": "429 with `x-should-retry: true`", "429": "429 (`retry-after-ms` only)",
    "408": "408", "529": "529 overloaded", "503-should-retry": "503 with `x-should-retry: true`",
    "503": "503", "409": "409", "500": "500 after carrying the request out",
    "dropped": "connection dropped after carrying the request out",
    "timeout": "timeout after carrying the request out",
}
ROW_NAMES = {
    "preset": "**the preset** (`policy=rt.presets.openai()` / `anthropic()`)",
    "nothing": "(a) nothing set",
    "sdk-retries": "(a) the SDK alone (its retries left on, no `max_retries=0`)",
    "auto-key": "(b) `auto_idempotency_key=True`",
    "trust-should-retry": "(c) `trust_should_retry=True`",
    "own-key": "(d) the caller's own `Idempotency-Key`",
}
OUTCOME_NAMES = {"ok": "answered", "rate_limit": "`RateLimitError`",
                 "request_timeout": "the SDK's 408 error", "conflict": "`ConflictError`",
                 "status": "the SDK's 503 error", "server": "the SDK's 500 error",
                 "overloaded": "the SDK's 529 error", "connection": "`APIConnectionError`",
                 "timeout": "`APITimeoutError`"}


def guide_table() -> str:
    """The guide's table, as the test above holds it: requests received, then the outcome;
    a cell carried out twice is in bold."""
    lines = ["| set-up | " + " | ".join(COLUMN_NAMES[c] for c in FAILURES) + " |",
             "|---|" + "---|" * len(FAILURES)]
    for row in SETUPS:
        cells = []
        for column in FAILURES:
            per_api = BY_API.get((row, column))
            answers = ([(None, TABLE[row, column])] if per_api is None
                       else [(api.capitalize() if api == "anthropic" else "OpenAI", value)
                             for api, value in per_api.items()])
            texts = []
            for api, (requests, outcome) in answers:
                text = f"{requests}, {OUTCOME_NAMES[outcome]}"
                if carried_out(column, requests) == 2:
                    text = f"**{text}, carried out twice**"
                texts.append(text if api is None else f"{api}: {text}")
            cells.append("; ".join(texts))
        lines.append(f"| {ROW_NAMES[row]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def test_the_guide_table_is_the_tested_one() -> None:
    """docs/guides/sdks.md shows :data:`TABLE` as it is (regenerate with guide_table())."""
    assert guide_table() in GUIDE.read_text()


#: Where the preset set-up is less resilient than the SDK alone, besides the columns
#: CARRIED_OUT, as the presets' docstring and the guide say: a bare 503 and a 409, after
#: which nothing says the server did not act on the POST, and OpenAI's 529, which the
#: OpenAI preset does not retry.
LESS_RESILIENT = {("503", "openai"), ("503", "anthropic"), ("409", "openai"),
                  ("409", "anthropic"), ("529", "openai")}


def test_the_preset_is_never_less_resilient_and_never_carries_out_twice() -> None:
    """Wherever the first attempt was not carried out, the preset set-up gets an answer as
    the SDK alone does, but for LESS_RESILIENT; where it was, the SDK alone carries the call
    out twice, the preset never."""
    for api in ("openai", "anthropic"):
        for column in FAILURES:
            alone, preset = cell("sdk-retries", column, api), cell("preset", column, api)
            assert alone == (2, "ok")
            if column in CARRIED_OUT:
                assert carried_out(column, alone[0]) == 2
                assert carried_out(column, preset[0]) == 1
            else:
                assert (preset == (2, "ok")) is ((column, api) not in LESS_RESILIENT), (
                    api, column)


# -- the SDK's retries left on over a preset: a warning, once per transport ---------------


#: A request met as usual, in a script of faults.
ANSWERED = Fault(200)


def preset_of(kit: Kit) -> rt.RetryPolicy:
    return rt.presets.openai() if kit.api == "openai" else rt.presets.anthropic()


def layered(caught: list[Any]) -> list[str]:
    """The messages of the ``LayeredRetriesWarning``s among ``caught``."""
    return [str(w.message) for w in caught if issubclass(w.category, rt.LayeredRetriesWarning)]


def test_an_sdk_retry_that_succeeds_at_once_is_warned_of_once_per_transport(
        kit: Kit, server: FakeAPI, waits: Waits) -> None:
    """The SDK's retries left on over a preset transport: each call's POST is answered 503,
    which the preset hands back without sending it again (a POST without a key), and the
    SDK's retry of it (``x-stainless-retry-count: 1``) is answered at once, on the quick
    path. That retry is warned of with a ``LayeredRetriesWarning`` (no logging configured),
    once per transport however many calls: two transports, three calls each, two
    warnings."""
    server.fail(kit.create_path, *[STORM, ANSWERED] * 6)
    for _ in range(2):
        with pytest.warns(rt.LayeredRetriesWarning) as caught, \
                sdk(kit, server.url, waits, max_retries=None, policy=preset_of(kit)) as client:
            for _ in range(3):
                assert kit.text(kit.create(client)) == ANSWER
        said = layered(caught.list)
        assert len(said) == 1
        assert "x-stainless-retry-count: 1" in said[0] and "max_retries=0" in said[0]
    assert retry_counts(server.requests(kit.create_path)) == ["0", "1"] * 6


@pytest.mark.anyio
async def test_an_sdk_retry_that_succeeds_at_once_is_warned_of_once_per_transport_async(
        kit: Kit, server: FakeAPI, waits: Waits) -> None:
    """The same with the async SDK client over ``AsyncRetryTransport``."""
    server.fail(kit.create_path, *[STORM, ANSWERED] * 3)
    with pytest.warns(rt.LayeredRetriesWarning) as caught:
        async with asdk(kit, server.url, waits, max_retries=None,
                        policy=preset_of(kit)) as client:
            for _ in range(3):
                assert kit.text(await kit.create(client)) == ANSWER
    assert len(layered(caught.list)) == 1
    assert retry_counts(server.requests(kit.create_path)) == ["0", "1"] * 3


def test_sdk_retries_above_the_transport_are_named_once(
        kit: Kit, server: FakeAPI, waits: Waits, caplog: pytest.LogCaptureFixture) -> None:
    """With the SDK's retries left on, its second attempt says so (x-stainless-retry-count:
    1): the transport logs one WARNING naming max_retries=0, and issues one
    LayeredRetriesWarning with the same words, however many calls follow."""
    server.fail(kit.create_path, forever=STORM)
    with caplog.at_level(logging.WARNING, logger="retry_transport"), \
            layering() as caught, sdk(kit, server.url, waits, max_retries=None) as client:
        for _ in range(2):
            with pytest.raises(kit.error):
                kit.create(client)
    assert "1" in retry_counts(server.requests(kit.create_path))
    said = [r for r in caplog.records if "x-stainless-retry-count" in r.getMessage()]
    assert len(said) == 1 and "max_retries=0" in said[0].getMessage()
    assert layered(caught.list) == [said[0].getMessage()]


# -- what the guide and the README say besides the table ------------------------------------


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_guide_says_which_client_the_sdk_takes(kit: Kit, server: FakeAPI,
                                                    waits: Waits) -> None:
    """The guide names the clients each SDK takes: an ``httpx2.Client`` always, an
    ``httpx.Client`` where the SDK accepts one (openai 3.63 does again, anthropic 2.17 does
    not). Where it does, that client over the httpx flavour's transport and preset rides out a
    503 and a trusted 429 on a POST as the httpx2 set-up does."""
    import httpx

    import retry_transport as rt_httpx

    transport = rt_httpx.RetryTransport(policy=getattr(rt_httpx.presets, kit.api)(),
                                        sleep=waits.sleep)
    try:
        client = kit.sync_client(base_url=kit.base_url(server.url), api_key="test",
                                 timeout=TIMEOUT, max_retries=0,
                                 http_client=httpx.Client(transport=transport))
    except TypeError as refused:
        assert "httpx2" in str(refused)
        takes = "an `httpx2.Client` only"
    else:
        takes = "an `httpx2.Client` or an `httpx.Client`"
        server.fail(kit.models_path, Fault(503))
        server.fail(kit.create_path, RATE_LIMITED)
        with client:
            assert kit.ids(kit.list_models(client)) == kit.model_ids
            assert kit.text(kit.create(client)) == ANSWER
        assert len(server.requests(kit.models_path)) == 2
        assert len(server.requests(kit.create_path)) == 2
    name = "OpenAI" if kit.api == "openai" else "Anthropic"
    assert f"The {name} SDK takes {takes}" in _flat(GUIDE.read_text())


class _Edge(random.Random):
    """A random source whose every draw is the same end of its range (0.0 or 1.0)."""

    def __init__(self, end: float) -> None:
        super().__init__(0)
        self.end = end

    def random(self) -> float:
        return self.end


def test_the_guide_says_what_the_preset_waits_on_a_429(kit: Kit, server: FakeAPI) -> None:
    """On a 429 with ``retry-after-ms`` the preset waits the server's time and its backoff on
    top, its jitter drawn anywhere from nothing to the first step, as the guide says for 700
    ms (it said the preset waited what the SDK does: the server's time alone)."""
    found = []
    for end in (0.0, 1.0):
        server.reset()
        server.fail(kit.create_path, Fault(429, headers=(("retry-after-ms", "700"),)))
        waits = Waits()
        preset = getattr(rt.presets, kit.api)()
        with sdk(kit, server.url, waits, policy=preset, rng=_Edge(end)) as client:
            assert kit.text(kit.create(client)) == ANSWER
        (wait,) = waits.waits
        found.append(wait)
    assert found == [pytest.approx(0.7), pytest.approx(0.7 + preset.base_delay)]
    said = f"for `retry-after-ms: 700`, {found[0]:g} to {found[1]:g} s where the SDK waits 0.7 s"
    assert said in _flat(GUIDE.read_text())


def test_the_readmes_opt_in_retries_what_the_preset_hands_back(kit: Kit, server: FakeAPI,
                                                               waits: Waits) -> None:
    """The README: with the preset a bare 409, 500 or 503 on a POST, and OpenAI's 529, reach
    the caller (one request each), where the SDK alone would retry them; an ``Idempotency-Key``
    in the call's ``extra_headers``, or ``auto_idempotency_key=True`` on the transport, opts
    in (and for OpenAI's 529, ``retry_statuses`` that include it)."""
    readme = _flat((Path(__file__).parents[2] / "README.md").read_text())
    assert ("So a bare `409`, `500` or `503` on a chat completion or a message, and OpenAI's "
            "`529`, reach the caller where the SDK alone would retry them") in readme
    assert ("opt in per request with an `Idempotency-Key` in the call's `extra_headers`, or "
            "per client with `auto_idempotency_key=True` on its transport (and for OpenAI's "
            "529, `retry_statuses` that include it)") in readme
    preset = getattr(rt.presets, kit.api)()
    statuses = [409, 500, 503] + ([529] if kit.api == "openai" else [])
    for status in statuses:
        server.reset()
        server.fail(kit.create_path, Fault(status))
        with sdk(kit, server.url, waits, policy=preset) as client, \
                pytest.raises(Exception) as handed_back:
            kit.create(client)
        assert getattr(handed_back.value, "status_code", None) == status
        assert len(server.requests(kit.create_path)) == 1
        with_529 = preset.replace(retry_statuses=preset.retry_statuses | {529})
        for per_request, per_client in (({"Idempotency-Key": '"call-1"'}, {}),
                                        ({}, {"auto_idempotency_key": True})):
            server.reset()
            server.fail(kit.create_path, Fault(status))
            with sdk(kit, server.url, waits, policy=with_529 if status == 529 else preset,
                     **per_client) as client:
                assert kit.text(kit.create(client, extra_headers=per_request)) == ANSWER
            assert len(server.requests(kit.create_path)) == 2
