"""Server signals besides Retry-After, through the transports: retry-after-ms, the server's
verdict (x-should-retry), and pacing by rate-limit headers. Every test runs sync and async
(asyncio, trio), on httpx and httpx2; a table of values runs its first row so and its other
rows sync (``tests.tables``)."""

from __future__ import annotations

import itertools
from typing import Any

import httpx as httpx_plain
import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")

URL = "https://api.example.com/items"
#: The harness's wall clock, and the same moment as an HTTP-date (for Date headers).
WALL = 1_700_000_000.0
WALL_DATE = "Tue, 14 Nov 2023 22:13:20 GMT"
#: No jitter, no backoff: a wait is exactly the server's time.
EXACT: dict[str, Any] = {"jitter": "none", "base_delay": 0.0}


def answers(*replies: tuple[int, dict[str, str]] | int) -> tuple[Any, list[Any]]:
    """A handler giving each request the next (status, headers); the last one repeats."""
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        request.read()
        reply = replies[min(len(seen), len(replies)) - 1]
        status, headers = reply if isinstance(reply, tuple) else (reply, {})
        return httpx.Response(status, headers=headers, text=f"attempt {len(seen)}")

    return handler, seen


def info_of(response: Any) -> Any:
    info = rt.retry_info(response)
    assert info is not None
    return info


# -- retry-after-ms ----------------------------------------------------------------------


@table(
    ("headers", "floor", "signal"),
    [
        ({"retry-after-ms": "1500", "Retry-After": "10"}, 1.5, "retry-after-ms"),  # wins
        ({"retry-after-ms": "250.5"}, 0.2505, "retry-after-ms"),  # a fraction of a ms
        ({"retry-after-ms": "-5", "Retry-After": "3"}, 3.0, "retry-after"),  # malformed: next
        ({"retry-after-ms": "1e3", "Retry-After": "3"}, 3.0, "retry-after"),  # no exponent
        ({"retry-after-ms": "nan"}, None, None),  # nothing usable: the backoff alone
    ],
)
def test_retry_after_ms_sets_the_floor_before_retry_after(
    harness: Harness, headers: dict[str, str], floor: float | None, signal: str | None
) -> None:
    """retry-after-ms takes precedence when valid; a malformed one lets the next signal in."""
    handler, seen = answers((503, headers), 200)
    response = harness.send(harness.transport(handler, **EXACT))
    assert response.status_code == 200 and len(seen) == 2
    first = info_of(response).history[0]
    assert (first.retry_after, first.signal) == (floor, signal)
    assert harness.waits == [floor or 0.0]


def test_retry_after_ms_on_a_429_starts_the_cooldown(harness: Harness) -> None:
    """Like Retry-After: the origin cools down for the other requests too."""
    handler, seen = answers((429, {"retry-after-ms": "2000"}), 200)
    events: list[Any] = []
    transport = harness.transport(handler, max_attempts=1, hooks=events.append, **EXACT)
    assert harness.send(transport).status_code == 429
    assert harness.send(transport).status_code == 200
    assert harness.waits == [2.0]
    held = [(e.wait, e.signal) for e in events if e.kind == "cooldown"]
    assert held == [(2.0, "retry-after-ms")]


def test_retry_after_ms_beyond_the_cap_stops_at_once(harness: Harness) -> None:
    """No server parks the client through retry-after-ms either."""
    handler, seen = answers((503, {"retry-after-ms": "3600000"}), 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 503 and len(seen) == 1
    assert info_of(response).stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG


# -- x-should-retry ----------------------------------------------------------------------


def test_should_retry_false_declines_a_retryable_status(harness: Harness) -> None:
    """x-should-retry: false stops a 503 at once, spends no budget, and its Retry-After
    still starts the origin's cooldown."""
    handler, seen = answers((503, {"x-should-retry": "false", "Retry-After": "4"}), 200)
    budget = rt.RetryBudget()
    transport = harness.transport(handler, budget=budget, **EXACT)
    response = harness.send(transport)
    assert response.status_code == 503 and len(seen) == 1
    info = info_of(response)
    assert info.stop_reason is rt.StopReason.SERVER_DECLINED
    assert budget.tokens == budget.capacity
    assert transport.stats.gave_up == {rt.StopReason.SERVER_DECLINED: 1}
    assert harness.send(transport).status_code == 200
    assert harness.waits == [4.0]  # the next request waited out the cooldown


@table("status", [404, 400, 200])
def test_should_retry_false_leaves_other_outcomes_alone(harness: Harness, status: int) -> None:
    """On an outcome that is not retried anyway, the verdict changes no stop reason."""
    handler, seen = answers((status, {"x-should-retry": "false"}))
    response = harness.send(harness.transport(handler))
    expected = rt.StopReason.SUCCESS if status < 400 else rt.StopReason.NOT_RETRYABLE
    assert info_of(response).stop_reason is expected and len(seen) == 1


@table(("value", "status"), itertools.product(["true", "TRUE", "True"], [500, 409, 418]))
def test_should_retry_true_retries_any_error_status(
    harness: Harness, status: int, value: str
) -> None:
    """x-should-retry: true (any case) makes a 500 or a 409 retryable for a GET."""
    handler, seen = answers((status, {"x-should-retry": value}), 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 200 and len(seen) == 2


@table("value", ["yes", "1", "", "true, false", "tru"])
def test_other_verdicts_are_ignored(harness: Harness, value: str) -> None:
    """Only true and false are verdicts: a 500 with anything else is not retried."""
    handler, seen = answers((500, {"x-should-retry": value}), 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 500 and len(seen) == 1


def test_should_retry_is_ignored_below_400(harness: Harness) -> None:
    """A success or a redirect is never retried, whatever it says."""
    handler, seen = answers((200, {"x-should-retry": "true"}), 200)
    assert info_of(harness.send(harness.transport(handler))).attempts == 1


def test_should_retry_true_does_not_open_an_unsafe_request_by_default(harness: Harness) -> None:
    """A POST without a key stays sent once unless trust_should_retry is on; then the
    server's word stands in for the key."""
    handler, seen = answers((429, {"x-should-retry": "true"}), 200)
    response = harness.send(harness.transport(handler), "POST", content=b"hello")
    assert response.status_code == 429 and len(seen) == 1
    assert info_of(response).stop_reason is rt.StopReason.UNSAFE_METHOD
    handler, seen = answers((429, {"x-should-retry": "true"}), 200)
    response = harness.send(harness.transport(handler, trust_should_retry=True), "POST",
                            content=b"hello")
    assert response.status_code == 200 and [r.content for r in seen] == [b"hello", b"hello"]


def test_trust_should_retry_needs_the_servers_true(harness: Harness) -> None:
    """trust_should_retry alone never retries an unsafe request."""
    handler, seen = answers(429, 200)
    response = harness.send(harness.transport(handler, trust_should_retry=True), "POST")
    assert response.status_code == 429 and len(seen) == 1


def test_should_retry_header_can_be_renamed_or_ignored(harness: Harness) -> None:
    """should_retry_header names the header; None turns the verdict off."""
    handler, seen = answers((503, {"X-Retry-Verdict": "false"}), 200)
    response = harness.send(harness.transport(handler, should_retry_header="x-retry-verdict"))
    assert info_of(response).stop_reason is rt.StopReason.SERVER_DECLINED
    handler, seen = answers((503, {"x-should-retry": "false"}), 200)
    response = harness.send(harness.transport(handler, should_retry_header=None))
    assert response.status_code == 200 and len(seen) == 2


@pytest.mark.parametrize(("bad", "error"), [
    ("", ValueError), ("two words", ValueError), (5, TypeError), (b"x-should-retry", TypeError),
])
def test_a_bad_should_retry_header_is_refused(bad: object, error: type[Exception]) -> None:
    """The header name is validated at construction, naming the field: a string that is
    no header name is a ValueError, anything but a string a TypeError."""
    with pytest.raises(error, match="should_retry_header"):
        rt.RetryPolicy(should_retry_header=bad)  # type: ignore[arg-type]


# -- pacing by rate-limit headers ----------------------------------------------------------

EXHAUSTED = [
    pytest.param({"ratelimit": '"default";r=0;t=5'}, "ratelimit", id="ietf"),
    pytest.param({"ratelimit-remaining": "0", "ratelimit-reset": "5"}, "ratelimit-reset",
                 id="ratelimit-reset"),
    pytest.param({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "5"},
                 "x-ratelimit-reset", id="x-ratelimit-delay"),
    pytest.param({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL) + 5),
                  "date": WALL_DATE}, "x-ratelimit-reset", id="x-ratelimit-epoch"),
    pytest.param({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "5s"},
                 "x-ratelimit-reset-requests", id="openai"),
    pytest.param({"anthropic-ratelimit-requests-remaining": "0",
                  "anthropic-ratelimit-requests-reset": "2023-11-14T22:13:25Z",
                  "date": WALL_DATE}, "anthropic-ratelimit-requests-reset", id="anthropic"),
]


@table(("headers", "signal"), EXHAUSTED)
def test_an_exhausted_quota_holds_the_next_request(
    harness: Harness, headers: dict[str, str], signal: str
) -> None:
    """A 200 saying the quota is spent until 5 s from now: the next request to the origin
    waits for the reset instead of being sent into a certain 429."""
    handler, seen = answers((200, headers), 200)
    events: list[Any] = []
    transport = harness.transport(handler, hooks=events.append, **EXACT)
    assert harness.send(transport).status_code == 200
    assert harness.waits == []
    assert harness.send(transport).status_code == 200
    assert harness.waits == [5.0]
    assert [(e.kind, e.signal) for e in events] == [("cooldown", signal)]
    assert harness.send(transport, url="https://other.example.com/").status_code == 200
    assert harness.waits == [5.0]  # another origin is not held


@table("option", [{"respect_rate_limits": False}, {"cooldown": False}])
def test_pacing_can_be_turned_off(harness: Harness, option: dict[str, Any]) -> None:
    """respect_rate_limits=False stops reading the headers; cooldown=False stops all holds."""
    handler, seen = answers((200, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "5"}))
    transport = harness.transport(handler, **option)
    harness.send(transport)
    harness.send(transport)
    assert harness.waits == [] and len(seen) == 2


@table(
    "headers",
    [
        {"x-ratelimit-remaining": "1", "x-ratelimit-reset": "5"},  # one left: no pacing
        {"x-ratelimit-remaining": "0"},  # no reset: nothing to wait for
        {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "soon"},  # malformed
        {"ratelimit": '"default";r=3;t=5'},
        {"ratelimit": "garbage;;;"},
    ],
)
def test_a_quota_not_shown_exhausted_holds_nothing(
    harness: Harness, headers: dict[str, str]
) -> None:
    handler, seen = answers((200, headers))
    transport = harness.transport(handler)
    harness.send(transport)
    harness.send(transport)
    assert harness.waits == []


def test_a_reset_beyond_the_cap_holds_nothing(harness: Harness) -> None:
    """A reset further away than max_retry_after starts no cooldown: no server parks the
    client; a 429 saying so is returned at once."""
    handler, seen = answers((200, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "7200"}),
                            (429, {"ratelimit": '"d";r=0;t=7200'}))
    transport = harness.transport(handler)
    harness.send(transport)
    response = harness.send(transport)
    assert harness.waits == [] and response.status_code == 429 and len(seen) == 2
    assert info_of(response).stop_reason is rt.StopReason.RETRY_AFTER_TOO_LONG


def test_a_429_with_only_a_quota_reset_waits_for_it(harness: Harness) -> None:
    """On a retryable response without Retry-After, the reset is the floor of the wait."""
    handler, seen = answers((429, {"ratelimit": '"d";r=0;t=2'}), 200)
    response = harness.send(harness.transport(handler, base_delay=0.5))
    assert response.status_code == 200
    first = info_of(response).history[0]
    assert (first.retry_after, first.signal) == (2.0, "ratelimit")
    assert 2.0 <= harness.waits[0] <= 2.5


def test_retry_after_takes_precedence_over_rate_limit_headers(harness: Harness) -> None:
    """Retry-After on the same response decides, whatever the quota headers say."""
    handler, seen = answers(
        (429, {"Retry-After": "1", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "9"}), 200
    )
    response = harness.send(harness.transport(handler, **EXACT))
    first = info_of(response).history[0]
    assert (first.retry_after, first.signal) == (1.0, "retry-after")
    assert harness.waits == [1.0]


def test_the_longest_exhausted_quota_wins(harness: Harness) -> None:
    """Requests and tokens both spent: the later reset is the one to wait for."""
    handler, seen = answers((200, {
        "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s",
        "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s",
    }), 200)
    transport = harness.transport(handler, max_retry_after=600, **EXACT)
    harness.send(transport)
    harness.send(transport)
    assert harness.waits == [360.0]


def test_a_held_request_that_cannot_wait_fails_fast(harness: Harness) -> None:
    """A quota cooldown acts like a Retry-After one: CooldownError, unsent, naming it."""
    handler, seen = answers((200, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "30"}))
    transport = harness.transport(handler)
    harness.send(transport)
    with pytest.raises(rt.CooldownError, match=r"x-ratelimit-reset") as caught:
        harness.send(transport, extensions={"retry": {"deadline": 10}})
    assert caught.value.remaining == 30.0 and len(seen) == 1
    assert isinstance(caught.value, httpx.TransportError)


def test_a_ratelimit_field_on_several_lines_is_read_whole(harness: Harness) -> None:
    """RateLimit is a list: two field lines are one list, and the exhausted item counts."""
    def handler(request: Any) -> Any:
        headers = [("RateLimit", '"minute";r=7;t=40'), ("RateLimit", '"second";r=0;t=3')]
        return httpx.Response(200, headers=headers)

    transport = harness.transport(handler, **EXACT)
    harness.send(transport)
    harness.send(transport)
    assert harness.waits == [3.0]


def test_thousands_of_rate_limit_lines_are_read_only_so_far() -> None:
    """A response with 4,000 RateLimit lines: the first ones are read (an exhausted quota
    among them counts), those past the first few dozen are not (one there says nothing),
    and a Retry-After after all of them still does."""
    import retry_transport as plain_rt
    from retry_transport._wire.http import SIGNAL_LINES, scan

    quiet = [("RateLimit", f'"q{i}";r=5;t=30') for i in range(4000)]
    late = httpx_plain.Response(200, headers=[*quiet[:3000], ("RateLimit", '"x";r=0;t=30'),
                                              *quiet[3000:], ("Retry-After", "7")])
    found = scan(late, None)
    assert found is not None
    assert found["ratelimit"].count('"q') == SIGNAL_LINES  # the first lines, no more
    assert '"x"' not in found["ratelimit"]
    assert found["retry-after"] == "7"
    early = httpx_plain.Response(200, headers=[("RateLimit", '"x";r=0;t=30'), *quiet])
    transport = plain_rt.RetryTransport(httpx_plain.MockTransport(lambda request: early))
    transport.handle_request(httpx_plain.Request("GET", "https://api.example.com/"))
    assert list(transport._controller.cooldowns.until) == ["https://api.example.com:443"]
