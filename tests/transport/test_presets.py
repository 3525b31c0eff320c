"""The SDK presets, and the warning when an SDK retries above the transport."""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from typing import Any

import httpx
import pytest

import retry_transport as rt
from retry_transport._policy.policy import FIELDS


def test_the_openai_preset_follows_the_sdk_where_it_is_safe() -> None:
    """Statuses, unapplied 408 and 429, trusted verdict, 120 s cap, 0.5..8 s backoff, 3
    attempts."""
    policy = rt.presets.openai()
    assert policy.retry_statuses == {408, 409, 429, 500, 502, 503, 504}
    assert policy.unapplied_statuses == {408, 429}
    assert policy.trust_should_retry and policy.should_retry_header == "x-should-retry"
    assert policy.respect_retry_after and policy.max_retry_after == 120.0
    assert (policy.base_delay, policy.max_delay, policy.max_attempts) == (0.5, 8.0, 3)
    assert policy.respect_rate_limits
    assert policy.retry_methods == rt.DEFAULT_RETRY_METHODS


def test_the_anthropic_preset_adds_529() -> None:
    """Anthropic's overloaded 529 is retried and taken as unapplied; the rest is OpenAI's."""
    policy = rt.presets.anthropic()
    assert policy.retry_statuses == rt.presets.openai().retry_statuses | {529}
    assert policy.unapplied_statuses == {408, 429, 529}
    assert policy.retry_event is rt.presets.anthropic_events
    assert rt.presets.openai().retry_event is rt.presets.openai_events
    others = FIELDS - {"retry_statuses", "unapplied_statuses", "retry_event"}
    assert all(getattr(policy, name) == getattr(rt.presets.openai(), name) for name in others)


@pytest.mark.parametrize("preset", [rt.presets.openai, rt.presets.anthropic])
def test_a_post_answered_408_is_sent_again(preset: Any) -> None:
    """A 408 says the server did not receive the whole request (RFC 9110 section 15.5.9):
    nothing was acted on, so a POST without a key is sent again, as the SDK alone would."""
    answers = iter([408, 200])
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(next(answers))

    transport = rt.RetryTransport(httpx.MockTransport(handler), policy=preset(),
                                  sleep=lambda seconds: None)
    with httpx.Client(transport=transport) as client:
        response = client.post("https://api.example.com/v1/chat/completions", json={})
    assert response.status_code == 200
    assert [request.method for request in seen] == ["POST", "POST"]
    info = rt.retry_info(response)
    assert info is not None and [a.status for a in info.history] == [408, 200]


def test_keywords_override_a_preset_as_replace_does() -> None:
    """An override changes its field alone; an unknown one is replace()'s TypeError."""
    assert rt.presets.openai(max_attempts=5) == rt.presets.openai().replace(max_attempts=5)
    with pytest.raises(TypeError, match="max_attempt"):
        rt.presets.anthropic(max_attempt=5)


def test_the_httpx2_name_is_the_same_module() -> None:
    """``retry_transport.httpx2.presets`` is an attribute and an importable module name."""
    rt2 = pytest.importorskip("retry_transport.httpx2")
    import retry_transport.httpx2.presets as imported

    assert rt2.presets is rt.presets is imported
    assert "presets" not in rt.__all__ and "presets" not in rt2.__all__


def test_presets_need_no_import_of_their_own() -> None:
    """In a fresh process, ``import retry_transport as rt; rt.presets`` works."""
    code = "import retry_transport as rt; print(rt.presets.openai().max_retry_after)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60)
    assert out.stdout.strip() == "120.0"


def _send(transport: rt.RetryTransport, count: str | None) -> httpx.Response:
    headers = {} if count is None else {"x-stainless-retry-count": count}
    with httpx.Client(transport=transport) as client:
        return client.post("https://api.example.com/v1/chat/completions", headers=headers)


@pytest.mark.parametrize(("counts", "expected"), [
    (["1", "2", "1"], 1), (["0", "0"], 0), (["x1", " 1", "1.0"], 0), ([None], 0),
    (["9" * 5000], 1),  # a number of any length: read without int()
])
def test_one_warning_per_transport_when_the_sdk_retries_above_it(
        caplog: pytest.LogCaptureFixture, counts: list[str | None], expected: int) -> None:
    """After a failure the SDK's call handed back (a 409, its count 0), a retry count above
    0 in ASCII digits: one WARNING line and one LayeredRetriesWarning per transport,
    however many such requests."""
    answers = iter([409] + [200] * len(counts))
    transport = rt.RetryTransport(
        httpx.MockTransport(lambda request: httpx.Response(next(answers))),
        policy=rt.presets.openai(), sleep=lambda seconds: None)
    with caplog.at_level(logging.WARNING, logger="retry_transport"), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _send(transport, "0").status_code == 409
        for count in counts:
            assert _send(transport, count).status_code == 200
    said = [r for r in caplog.records if "x-stainless-retry-count" in r.getMessage()]
    assert len(said) == expected
    assert all("max_retries=0" in r.getMessage() for r in said)
    assert [str(w.message) for w in caught] == [r.getMessage() for r in said]
    assert all(w.category is rt.LayeredRetriesWarning for w in caught)


def test_each_transport_warns_once() -> None:
    """Two transports: a warning each; retries off for the request do not silence it."""
    with pytest.warns(rt.LayeredRetriesWarning) as caught:
        for _ in range(2):
            transport = rt.RetryTransport(httpx.MockTransport(lambda r: httpx.Response(503)),
                                          max_attempts=1)
            for _ in range(3):
                _send(transport, "3")
    assert len(caught) == 2
