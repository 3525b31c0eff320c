"""Another library's keyword, refused with what it is here: ``max_retries=3`` is
``max_attempts=4``, not httpcore's ``retries`` (the nearest spelling).

The table of docs/guides/migrating.md's "Another library's keyword" section is
:func:`guide_table`'s output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import httpx_retries
import pytest
import tenacity
import urllib3

import retry_transport as rt
from retry_transport._policy.peers import PEERS, peer_hint

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "migrating.md"

#: (keyword, value, what the hint says it is here), one row per keyword of PEERS: the
#: guide's table.
EXAMPLES: list[tuple[str, Any, str]] = [
    ("max_retries", 3, "max_attempts=4"),
    ("total", 3, "max_attempts=4"),
    ("connect", 2, "max_attempts=3"),
    ("read", 2, "max_attempts=3"),
    ("status", 2, "max_attempts=3"),
    ("other", 2, "max_attempts=3"),
    ("status_forcelist", [503, 429, 502], "retry_statuses={429, 502, 503}"),
    ("allowed_methods", ["get", "put"], 'retry_methods={"GET", "PUT"}'),
    ("method_whitelist", ["GET"], 'retry_methods={"GET"}'),
    ("backoff_factor", 0.5, "base_delay=0.5"),
    ("backoff_max", 30, "max_delay=30"),
    ("max_backoff_wait", 60.0, "max_delay=60.0"),
    ("backoff_jitter", 1.0, 'jitter="full"'),
    ("respect_retry_after_header", False, "respect_retry_after=False"),
    ("retry_after_max", 300, "max_retry_after=300"),
    ("total_timeout", 10.0, "deadline=10.0"),
    ("validate_response", print, "retry_if="),
    ("retry_on_exceptions", [httpx.ReadError], "retry_if="),
    ("retry", httpx_retries.Retry(total=3, backoff_factor=0.5, status_forcelist=[503]),
     'max_attempts=4, retry_statuses={503}, retry_methods={"DELETE", "GET", "HEAD", '
     '"OPTIONS", "PUT", "TRACE"}, base_delay=0.5'),
    ("raise_on_status", False, "raise_for_status()"),
    ("redirect", 5, "follow_redirects="),
    ("raise_on_redirect", False, "follow_redirects="),
    ("stop", tenacity.stop_after_attempt(5), "max_attempts=5"),
    ("stop_after_attempt", 5, "max_attempts=5"),
    ("stop_after_delay", 30, "deadline=30"),
    ("wait", tenacity.wait_random_exponential(multiplier=0.5, max=10),
     'base_delay=0.5, max_delay=10.0, jitter="full"'),
    ("before_sleep", print, "hooks="),
    ("before", print, "hooks="),
    ("after", print, "hooks="),
    ("reraise", True, "re-raised unchanged"),
    ("attempts", 5, "max_attempts=5"),
    ("timeout", 45.0, "deadline=45.0"),
    ("wait_initial", 0.1, "base_delay=0.1"),
    ("wait_max", 5.0, "max_delay=5.0"),
    ("wait_jitter", 1.0, 'jitter="full"'),
    ("on", httpx.HTTPError, "retry_if="),
    ("max_tries", 5, "max_attempts=5"),
    ("max_time", 60, "deadline=60"),
    ("factor", 0.5, "base_delay=0.5"),
    ("max_value", 10, "max_delay=10"),
    ("giveup", print, "retry_if="),
    ("on_backoff", print, "hooks="),
    ("on_giveup", print, "hooks="),
    ("retries", 3, "max_attempts=4"),
]


def _shown(value: Any) -> str:
    """A value as the guide writes it."""
    if isinstance(value, httpx_retries.Retry):
        return "Retry(total=3, backoff_factor=0.5, status_forcelist=[503])"
    if isinstance(value, tenacity.stop_after_attempt):
        return "stop_after_attempt(5)"
    if isinstance(value, tenacity.wait_random_exponential):
        return "wait_random_exponential(multiplier=0.5, max=10)"
    if value is print:
        return "f"
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, list) and value and isinstance(value[0], type):
        return "[" + ", ".join(kind.__name__ for kind in value) + "]"
    return repr(value)


def test_every_keyword_has_an_example() -> None:
    assert [name for name, _, _ in EXAMPLES] == list(PEERS)


@pytest.mark.parametrize(("name", "value", "said"), EXAMPLES,
                         ids=[name for name, _, _ in EXAMPLES])
def test_the_hint_gives_the_equivalent_with_its_value(name: str, value: Any,
                                                      said: str) -> None:
    hint = peer_hint(name, value)
    assert hint is not None and said in hint, hint


def test_urllib3s_retry_and_tenacitys_stops_are_read_too() -> None:
    """A urllib3 ``Retry`` (requests') is read as httpx-retries' is; tenacity's delay stop,
    its plain exponential wait and its fixed wait have their equivalents."""
    retry = urllib3.Retry(total=2, backoff_factor=1.0, status_forcelist=[429],
                          allowed_methods=["GET"])
    assert 'max_attempts=3, retry_statuses={429}, retry_methods={"GET"}, base_delay=1.0' in (
        peer_hint("retry", retry) or "")
    assert "deadline=30.0" in (peer_hint("stop", tenacity.stop_after_delay(30)) or "")
    assert 'base_delay=1, max_delay=8.0, jitter="none"' in (
        peer_hint("wait", tenacity.wait_exponential(multiplier=1, max=8)) or "")
    assert 'base_delay=2.0, max_delay=2.0, jitter="none"' in (
        peer_hint("wait", tenacity.wait_fixed(2)) or "")


@pytest.mark.parametrize(("name", "value", "placeholder"), [
    ("max_retries", "3", "max_attempts=<max_retries + 1>"),
    ("total", None, "max_attempts=<total + 1>"),
    ("max_retries", True, "max_attempts=<max_retries + 1>"),
    ("status_forcelist", 503, "retry_statuses=..."),
    ("stop", tenacity.stop_after_attempt(3) | tenacity.stop_after_delay(5),
     "stop_after_attempt(n) is max_attempts=n"),
])
def test_a_value_that_cannot_be_read_gets_the_form(name: str, value: Any,
                                                   placeholder: str) -> None:
    """A value the hint cannot work out is not guessed at: the form is given."""
    assert placeholder in (peer_hint(name, value) or "")


def test_max_retries_on_the_transport_is_max_attempts_not_retries() -> None:
    """The nearest spelling, httpcore's connect retries, is not suggested."""
    with pytest.raises(TypeError) as caught:
        rt.RetryTransport(max_retries=3)  # type: ignore[call-arg]
    message = str(caught.value)
    assert "'max_retries'" in message and "max_attempts=4" in message
    assert "did you mean" not in message


def test_several_keywords_are_each_explained() -> None:
    with pytest.raises(TypeError) as caught:
        rt.RetryTransport(total=3, backoff_factor=0.5, status_forcelist=[503])  # type: ignore[call-arg]
    message = str(caught.value)
    for said in ("max_attempts=4", "base_delay=0.5", "retry_statuses={503}"):
        assert said in message


def test_the_policy_its_replace_and_a_preset_say_the_same() -> None:
    for make in (lambda: rt.RetryPolicy(total=3),  # type: ignore[call-arg]
                 lambda: rt.RetryPolicy().replace(total=3),
                 lambda: rt.presets.openai(total=3)):
        with pytest.raises(TypeError, match=r"'total' .*max_attempts=4"):
            make()


def test_a_per_request_override_says_the_same_as_a_value_error() -> None:
    """A mapping in ``extensions['retry']``: the extension's value is wrong, and nothing is
    sent."""
    seen: list[httpx.Request] = []
    transport = rt.RetryTransport(httpx.MockTransport(
        lambda request: seen.append(request) or httpx.Response(200)))
    with httpx.Client(transport=transport) as client, \
            pytest.raises(ValueError, match=r"'status_forcelist' .*retry_statuses=\{503\}"):
        client.get("https://api.example.com/",
                   extensions={"retry": {"status_forcelist": [503]}})
    assert seen == []


@pytest.mark.parametrize(("value", "keyword"), [
    (rt.RetryPolicy(), "policy"), (rt.presets.openai(), "policy"), (rt.RetryBudget(), "budget"),
    (rt.CircuitBreaker(), "breaker"), (rt.AdaptiveThrottle(), "throttle"),
    (rt.Hedging(), "hedging"), (rt.Resume(), "resume"), (rt.MemoryStore(), "store"),
])
def test_a_setting_given_as_the_transport_names_its_keyword(value: object, keyword: str) -> None:
    """``RetryTransport(rt.RetryPolicy(...))``: the first argument is the transport to
    wrap; the error says which keyword takes the value."""
    said = f"got a {type(value).__name__}: give it as {keyword}="
    with pytest.raises(TypeError, match=said):
        rt.RetryTransport(value)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=said):
        rt.AsyncRetryTransport(value)  # type: ignore[arg-type]


def test_an_httpx_retries_retry_given_as_the_transport_is_translated() -> None:
    with pytest.raises(TypeError, match=r"transport must be .*max_attempts=4"):
        rt.RetryTransport(httpx_retries.Retry(total=3))  # type: ignore[arg-type]


def test_a_callable_jitter_says_which_string() -> None:
    """backoff's ``jitter=backoff.full_jitter`` is a function; here a name says it."""
    with pytest.raises(TypeError, match='jitter="full"'):
        rt.RetryPolicy(jitter=lambda value: value)  # type: ignore[arg-type]


def guide_table() -> str:
    """The guide's table of hints: each keyword, an example value, what it is here."""
    lines = ["| you write | whose | the error says it is |", "|---|---|---|"]
    for name, value, said in EXAMPLES:
        whose = PEERS[name][0]
        lines.append(f"| `{name}={_shown(value)}` | {whose} | `{said}` |")
    return "\n".join(lines) + "\n"


def test_the_guide_table_is_the_tested_one() -> None:
    """docs/guides/migrating.md shows :func:`guide_table` as it is."""
    assert guide_table() in GUIDE.read_text(encoding="utf-8")
