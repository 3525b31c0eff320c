"""The observer on its own: which hook events and which log records each thing it is told
produces, and how it rate-limits the lines for refused retries, on a fake clock."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from retry_transport import Attempt, RetryEvent, RetryInfo, StopReason
from retry_transport._base.counting import PRUNE_AT
from retry_transport._policy.observe import (
    REFUSAL_LOG_INTERVAL,
    Observer,
    emit,
    learned,
    sdk_retry_count,
)

#: A URL with credentials, path parameters, a query and a fragment: none may be logged.
RAW_URL = "https://user:secret@api.example.com/v1;session=abc/items?token=xyz#top"
URL = "https://api.example.com/v1/items"
ORIGIN = "https://api.example.com:443"


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Recorder:
    """A hook that keeps every event it is given."""

    def __init__(self) -> None:
        self.events: list[RetryEvent] = []

    def __call__(self, event: RetryEvent) -> None:
        self.events.append(event)


def request(method: str = "GET", url: str = RAW_URL) -> httpx.Request:
    """A real request (the observer reads its method and URL)."""
    return httpx.Request(method, url)


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    """The package's log records so far, as (level, message)."""
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "retry_transport"]


@pytest.fixture
def debug(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """caplog with the package's logger at DEBUG: every line the observer writes is kept."""
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    return caplog


def info(reason: StopReason, attempts: int, retries: int, *history: Attempt) -> RetryInfo:
    """The metadata of a request that ended with ``reason``."""
    return RetryInfo(attempts, retries, tuple(history), 0.0, reason)


def failed(status: int | None = 503, error: str | None = None,
           refused_wait: float | None = None) -> Attempt:
    """One failed attempt."""
    return Attempt(status, error, None, 0.0, None, refused_wait)


# -- retries and cooldowns -------------------------------------------------------------------

#: (status, error, signal, what the line says the attempt came to)
RETRIES: list[Any] = [
    pytest.param(503, None, None, "503", id="status"),
    pytest.param(429, None, "retry-after", "429", id="status-with-signal"),
    pytest.param(None, "ReadTimeout", None, "ReadTimeout", id="error"),
]


@pytest.mark.parametrize(("status", "error", "signal", "shown"), RETRIES)
def test_a_retry_gives_an_info_line_and_a_retry_event(
    debug: pytest.LogCaptureFixture, status: int | None, error: str | None,
    signal: str | None, shown: str,
) -> None:
    """A retry is one INFO line (redacted URL) and one ``retry`` event with its details."""
    hook = Recorder()
    Observer((hook,), FakeClock()).retry(request(), 1, 3, 0.5, status, error, signal)
    assert lines(debug) == [
        (logging.INFO, f"Retrying GET {URL} after {shown} (attempt 1 of 3) in 0.500 s")]
    assert hook.events == [RetryEvent("retry", "GET", URL, 1, 0.5, status, error, None, signal)]


@pytest.mark.parametrize(("level", "hooked", "logged", "told"),
                         [(logging.WARNING, False, 0, 0), (logging.WARNING, True, 0, 1),
                          (logging.INFO, False, 1, 0)],
                         ids=["no-one-to-tell", "hook-only", "log-only"])
def test_a_retry_tells_only_who_listens(caplog: pytest.LogCaptureFixture, level: int,
                                        hooked: bool, logged: int, told: int) -> None:
    """The INFO line needs INFO enabled, the event needs a hook; each goes without the other."""
    caplog.set_level(level, logger="retry_transport")
    hook = Recorder()
    Observer((hook,) if hooked else (), FakeClock()).retry(request(), 2, 3, 1.0, 503, None,
                                                           None)
    assert len(lines(caplog)) == logged
    assert len(hook.events) == told


@pytest.mark.parametrize(("signal", "shown"),
                         [("retry-after", "Retry-After"), ("x-ratelimit-reset",
                                                           "x-ratelimit-reset")],
                         ids=["retry-after", "rate-limit-reset"])
def test_a_cooldown_hold_gives_an_info_line_and_a_cooldown_event(
    debug: pytest.LogCaptureFixture, signal: str, shown: str,
) -> None:
    """A held first attempt is one INFO line naming the origin and header, and one event."""
    hook = Recorder()
    Observer((hook,), FakeClock()).cooldown(request(), ORIGIN, 5.25, signal)
    assert lines(debug) == [
        (logging.INFO, f"Holding GET {URL} for 5.250 s: {ORIGIN} asked for quiet ({shown})")]
    assert hook.events == [RetryEvent("cooldown", "GET", URL, 0, 5.25, None, None, None, signal)]


def test_a_hedge_gives_a_debug_line_and_a_hedge_event(debug: pytest.LogCaptureFixture) -> None:
    """A hedge is a DEBUG line and a ``hedge`` event whose wait is the hedging delay."""
    hook = Recorder()
    Observer((hook,), FakeClock()).hedge(request(), 2, 0.25)
    assert lines(debug) == [(logging.DEBUG, f"Hedging GET {URL}: attempt 2 sent while an "
                                            "earlier one is in flight (delay 0.250 s)")]
    assert hook.events == [RetryEvent("hedge", "GET", URL, 2, 0.25, None, None, None)]


def test_a_throttled_attempt_is_an_event_for_both_hook_sets_and_no_line(
    debug: pytest.LogCaptureFixture,
) -> None:
    """A throttle refusal goes to the transport's hooks and the throttle's own, unlogged."""
    mine, theirs = Recorder(), Recorder()
    Observer((mine,), FakeClock()).throttled(request("POST"), 1, (theirs,))
    expected = [RetryEvent("throttled", "POST", URL, 1, 0.0, None, None, StopReason.THROTTLED)]
    assert mine.events == theirs.events == expected
    assert lines(debug) == []


# -- the end of a request -----------------------------------------------------------------------

GIVE_UP = "Giving up on GET " + URL + " after {} attempt(s): {} ({})"

#: (info, detail, level, message)
FINISHES: list[Any] = [
    pytest.param(info(StopReason.MAX_ATTEMPTS, 3, 2, failed(), failed()), None, logging.ERROR,
                 GIVE_UP.format(3, 503, "max_attempts"), id="after-retries-error"),
    pytest.param(info(StopReason.NOT_RETRYABLE, 2, 1, failed(), failed(404)), None,
                 logging.ERROR, GIVE_UP.format(2, 404, "not_retryable"),
                 id="permanent-after-a-retry-error"),
    pytest.param(info(StopReason.UNSAFE_METHOD, 1, 0, failed()), None, logging.WARNING,
                 GIVE_UP.format(1, 503, "unsafe_method"), id="refused-retry-warning"),
    pytest.param(info(StopReason.BUDGET_EXHAUSTED, 1, 0, failed(None, "ConnectError")), None,
                 logging.WARNING, GIVE_UP.format(1, "ConnectError", "budget_exhausted"),
                 id="error-shown-by-name"),
    pytest.param(info(StopReason.THROTTLED, 2, 1, failed()), None, logging.WARNING,
                 GIVE_UP.format(2, 503, "throttled"), id="throttled-never-error"),
    pytest.param(info(StopReason.CLOSED, 1, 0, failed()), None, logging.INFO,
                 GIVE_UP.format(1, 503, "closed"), id="closed-info"),
    pytest.param(info(StopReason.DISABLED, 1, 0, failed()), None, logging.DEBUG,
                 GIVE_UP.format(1, 503, "disabled"), id="disabled-debug"),
    pytest.param(info(StopReason.CIRCUIT_OPEN, 0, 0), None, logging.DEBUG,
                 GIVE_UP.format(0, "no attempt", "circuit_open"), id="breaker-refused-debug"),
    pytest.param(info(StopReason.CIRCUIT_OPEN, 1, 0, failed()), None, logging.WARNING,
                 GIVE_UP.format(1, 503, "circuit_open"), id="breaker-vetoed-retry-warning"),
    pytest.param(info(StopReason.DEADLINE, 1, 0, failed(refused_wait=2.5)), "2.5 s left 1 s",
                 logging.WARNING, GIVE_UP.format(1, 503, "deadline: 2.5 s left 1 s"),
                 id="detail-appended"),
]


@pytest.mark.parametrize(("record", "detail", "level", "message"), FINISHES)
def test_a_give_up_line_and_its_level(debug: pytest.LogCaptureFixture, record: RetryInfo,
                                      detail: str | None, level: int, message: str) -> None:
    """A give-up is one line whose level says how bad it is, and one ``give_up`` event."""
    hook = Recorder()
    Observer((hook,), FakeClock()).finish(request(), record, True, detail)
    assert lines(debug) == [(level, message)]
    last = record.history[-1] if record.history else None
    assert hook.events == [RetryEvent(
        "give_up", "GET", URL, record.attempts, 0.0, last and last.status, last and last.error,
        record.stop_reason, refused_wait=last and last.refused_wait)]


def test_a_success_after_retries_is_an_info_line_and_no_event(
    debug: pytest.LogCaptureFixture,
) -> None:
    """A request that succeeded after retries says so at INFO, and no hook hears of it."""
    hook = Recorder()
    Observer((hook,), FakeClock()).finish(request(), info(StopReason.SUCCESS, 2, 1), False)
    assert lines(debug) == [(logging.INFO, f"GET {URL} succeeded after 2 attempts")]
    assert hook.events == []


def test_no_give_up_event_unless_the_request_gave_up(debug: pytest.LogCaptureFixture) -> None:
    """A stop that is not a give-up (``gave_up`` false) is logged but no event is sent."""
    hook = Recorder()
    record = info(StopReason.MAX_ATTEMPTS, 3, 2, failed(), failed())
    Observer((hook,), FakeClock()).finish(request(), record, False)
    assert [level for level, _ in lines(debug)] == [logging.ERROR]
    assert hook.events == []


def test_a_give_up_below_the_log_level_still_reaches_the_hooks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the logger above ERROR, a give-up writes no line and still sends its event."""
    caplog.set_level(logging.CRITICAL, logger="retry_transport")
    hook = Recorder()
    record = info(StopReason.MAX_ATTEMPTS, 3, 2, failed(), failed())
    Observer((hook,), FakeClock()).finish(request(), record, True)
    assert lines(caplog) == []
    assert [event.kind for event in hook.events] == ["give_up"]


# -- rate limiting of refusal lines -------------------------------------------------------------


def refuse(observer: Observer, reason: StopReason = StopReason.UNSAFE_METHOD,
           url: str = RAW_URL) -> None:
    """One request refused a retry (no retry made) with ``reason``."""
    observer.finish(request("POST", url), info(reason, 1, 0, failed()), True)


def summary(count: int, since: float, reason: str = "unsafe_method",
            origin: str = ORIGIN) -> tuple[int, str]:
    """The WARNING line that counts the refusals not logged one by one."""
    return (logging.WARNING, f"Gave up on {count} more request(s) to {origin} without a "
                             f"retry in the last {since:.0f} s ({reason})")


FIRST = (logging.WARNING, f"Giving up on POST {URL} after 1 attempt(s): 503 (unsafe_method)")


@pytest.mark.parametrize(("times", "expected"), [
    pytest.param([0.0], [FIRST], id="first-logged"),
    pytest.param([0.0, 1.0, 9.999], [FIRST], id="rest-of-interval-silent"),
    pytest.param([0.0, 1.0, 2.0, 10.0], [FIRST, summary(3, 10.0)], id="summary-at-interval"),
    pytest.param([0.0, 10.0], [FIRST, summary(1, 10.0)], id="one-more-at-interval"),
    pytest.param([0.0, 1.0, 10.0, 11.0, 25.0], [FIRST, summary(2, 10.0), summary(2, 15.0)],
                 id="a-summary-per-interval"),
])
def test_refusal_lines_are_rate_limited(debug: pytest.LogCaptureFixture, times: list[float],
                                        expected: list[tuple[int, str]]) -> None:
    """Per reason and origin: the first refusal is logged, then one counted summary per
    REFUSAL_LOG_INTERVAL (10 s), the time measured on the observer's clock."""
    assert REFUSAL_LOG_INTERVAL == 10.0
    clock = FakeClock(0.0)
    observer = Observer((), clock)
    for at in times:
        clock.now = at
        refuse(observer)
    assert lines(debug) == expected


def test_rate_limiting_is_per_reason_and_per_origin(debug: pytest.LogCaptureFixture) -> None:
    """Another stop reason, or another origin, gets its own first line at once."""
    observer = Observer((), FakeClock())
    refuse(observer)
    refuse(observer)
    refuse(observer, StopReason.BUDGET_EXHAUSTED)
    refuse(observer, url="https://other.example.com/x")
    assert [message.split(": ", 1)[1] for _, message in lines(debug)] == [
        "503 (unsafe_method)", "503 (budget_exhausted)", "503 (unsafe_method)"]
    assert "other.example.com" in lines(debug)[2][1]


def test_every_refusal_still_reaches_the_hooks(debug: pytest.LogCaptureFixture) -> None:
    """Rate limiting thins the log lines only: each refused request is a ``give_up`` event."""
    hook = Recorder()
    observer = Observer((hook,), FakeClock())
    for _ in range(5):
        refuse(observer)
    assert len(lines(debug)) == 1
    assert [event.stop_reason for event in hook.events] == [StopReason.UNSAFE_METHOD] * 5


def test_old_refusal_entries_are_pruned_with_their_counts_reported(
    debug: pytest.LogCaptureFixture,
) -> None:
    """When PRUNE_AT (reason, origin) pairs are held, those older than the interval are
    forgotten (their pending counts logged first); newer ones are kept and still counted."""
    clock = FakeClock(0.0)
    observer = Observer((), clock)
    origins = [f"https://o{number}.example" for number in range(PRUNE_AT)]
    for origin in origins[:-1]:
        refuse(observer, url=origin)
    clock.now = 1.0
    refuse(observer, url=origins[0])  # counted, not logged
    clock.now = 5.0
    refuse(observer, url=origins[-1])  # the table is full after this one
    debug.clear()
    clock.now = 10.0
    refuse(observer, url="https://new.example")  # a new pair: the table is pruned
    assert lines(debug) == [
        summary(1, 10.0, origin="https://o0.example:443"),
        (logging.WARNING, "Giving up on POST https://new.example/ after 1 attempt(s): 503 "
                          "(unsafe_method)"),
    ]
    debug.clear()
    refuse(observer, url=origins[1])  # forgotten: logged as a first refusal again
    refuse(observer, url=origins[-1])  # kept (5 s old): counted, not logged
    assert [message.split(" after")[0] for _, message in lines(debug)] == [
        "Giving up on POST https://o1.example/"]



def test_recent_refusal_entries_survive_a_prune(debug: pytest.LogCaptureFixture) -> None:
    """A prune forgets nothing younger than the interval: those pairs are still counted."""
    clock = FakeClock(0.0)
    observer = Observer((), clock)
    origins = [f"https://o{number}.example" for number in range(PRUNE_AT)]
    for origin in origins:
        refuse(observer, url=origin)
    clock.now = 9.0
    refuse(observer, url="https://new.example")  # the table is full: pruned, nothing old
    debug.clear()
    for origin in origins[:3]:
        refuse(observer, url=origin)
    assert lines(debug) == []


# -- breakers, hooks that raise, malformed Retry-After ------------------------------------------

#: (kind, level, message, wait in the event)
BREAKER: list[Any] = [
    pytest.param("breaker_open", logging.WARNING,
                 f"Circuit breaker opened for {ORIGIN} after 503: no request is sent for "
                 "30.000 s", 30.0, id="open"),
    pytest.param("breaker_half_open", logging.INFO,
                 f"Circuit breaker half-open for {ORIGIN}: sending a probe", 0.0,
                 id="half-open"),
    pytest.param("breaker_close", logging.INFO,
                 f"Circuit breaker closed for {ORIGIN}: it answered a probe", 0.0, id="close"),
]


@pytest.mark.parametrize(("kind", "level", "message", "wait"), BREAKER)
def test_a_breaker_transition(debug: pytest.LogCaptureFixture, kind: str, level: int,
                              message: str, wait: float) -> None:
    """Each transition is one line and one event, for the transport's and breaker's hooks."""
    mine, theirs = Recorder(), Recorder()
    Observer((mine,), FakeClock()).breaker([kind], request(), ORIGIN, 2, 30.0, 503, None,
                                           (theirs,))
    assert lines(debug) == [(level, message)]
    expected = [RetryEvent(kind, "GET", URL, 2, wait, 503, None, None)]  # type: ignore[arg-type]
    assert mine.events == theirs.events == expected


@pytest.mark.parametrize(("kind", "message", "wait"), [
    ("open", f"Circuit breaker opened for {ORIGIN} by another member of its store: no request "
             "is sent for 12.500 s", 30.0),
    ("close", f"Circuit breaker closed for {ORIGIN} by another member of its store: it "
              "answered a probe", 0.0),
], ids=["open", "close"])
def test_a_transition_learned_from_the_store(debug: pytest.LogCaptureFixture, kind: str,
                                             message: str, wait: float) -> None:
    """A transition learned from a store is an INFO line and a ``learned`` event."""
    hook = Recorder()
    learned(kind, ORIGIN, 12.5, 30.0, (hook,))
    assert lines(debug) == [(logging.INFO, message)]
    assert hook.events == [RetryEvent("breaker_open" if kind == "open" else "breaker_close",
                                      "", ORIGIN, 0, wait, None, None, None, learned=True)]


def test_a_hook_that_raises_is_logged_and_the_others_still_run(
    debug: pytest.LogCaptureFixture,
) -> None:
    """A failing hook costs a WARNING with its traceback; the hooks after it still hear."""

    def broken(event: RetryEvent) -> None:
        raise RuntimeError("metrics down")

    after = Recorder()
    event = RetryEvent("retry", "GET", URL, 1, 0.5, 503, None, None)
    emit(event, (broken, after))
    assert after.events == [event]
    [record] = [r for r in debug.records if r.name == "retry_transport"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == f"Retry hook {broken!r} raised on retry event"
    assert record.exc_info is not None and "metrics down" in str(record.exc_info[1])


def test_a_malformed_retry_after_is_logged_once_per_origin_and_value(
    debug: pytest.LogCaptureFixture,
) -> None:
    """One DEBUG line per (origin, value): repeats are silent, a new value or origin is not."""
    observer = Observer((), FakeClock())
    for origin, value in [(ORIGIN, "soon"), (ORIGIN, "soon"), (ORIGIN, "later"),
                          ("https://b.example:443", "soon")]:
        observer.ignored_retry_after(origin, value)
    assert lines(debug) == [
        (logging.DEBUG, f"Ignoring a malformed Retry-After from {origin}: {value!r} "
                        "(the backoff applies)")
        for origin, value in [(ORIGIN, "soon"), (ORIGIN, "later"),
                              ("https://b.example:443", "soon")]
    ]


def test_a_malformed_retry_after_is_remembered_only_when_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With DEBUG off nothing is logged nor remembered: once DEBUG is on, the line comes."""
    caplog.set_level(logging.INFO, logger="retry_transport")
    observer = Observer((), FakeClock())
    observer.ignored_retry_after(ORIGIN, "soon")
    assert lines(caplog) == []
    caplog.set_level(logging.DEBUG, logger="retry_transport")
    observer.ignored_retry_after(ORIGIN, "soon")
    assert len(lines(caplog)) == 1


def test_a_long_malformed_retry_after_is_cut_in_the_line(debug: pytest.LogCaptureFixture) -> None:
    """A huge value shows its first 200 characters only, and counts as that prefix."""
    observer = Observer((), FakeClock())
    observer.ignored_retry_after(ORIGIN, "x" * 1000)
    observer.ignored_retry_after(ORIGIN, "x" * 500)  # the same first 200: already logged
    [(_, message)] = lines(debug)
    assert repr("x" * 200) in message and "x" * 201 not in message


class OddHeaders(dict[str, str]):
    """Headers of neither library's layout: read through ``get``."""


class OddRequest:
    def __init__(self, **headers: str) -> None:
        self.headers = OddHeaders(headers)


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_the_sdk_retry_count_is_read_in_any_case(library: str) -> None:
    """The SDK's count, whatever the case of its name; ``None`` without it; the first of
    two lines."""
    module = pytest.importorskip(library)

    def request(*headers: tuple[str, str]) -> Any:
        return module.Request("POST", "https://api.example.com/", headers=list(headers))

    assert sdk_retry_count(request(("X-Stainless-Retry-Count", "2"))) == "2"
    assert sdk_retry_count(request(("x-stainless-retry-count", "0"), ("accept", "*/*"))) == "0"
    assert sdk_retry_count(request(("accept", "*/*"))) is None
    assert sdk_retry_count(request(("x-stainless-retry-count", "1"),
                                   ("x-stainless-retry-count", "2"))) == "1"
    assert sdk_retry_count(OddRequest(**{"x-stainless-retry-count": "3"})) == "3"  # type: ignore[arg-type]

