"""The pure rules of the decision, as tables: what a response or an error means, and whether
a request may be retried, with no transport, no flavour matrix and no I/O."""

from __future__ import annotations

import io
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest

from retry_transport import RetryPolicy, StopReason
from retry_transport._io.transports import HTTPX
from retry_transport._policy import rules
from retry_transport._policy.rules import (
    COOLDOWN_STATUSES,
    ORDER,
    RULES,
    Outcome,
    classify_error,
    classify_response,
    final_at_once,
    may_retry,
)

URL = "https://api.example.com/items"
DEFAULT = RetryPolicy()
#: The wall clock handed to the rules: any fixed time (the rules read no clock of their own).
NOW = 1_700_000_000.0


def wallclock() -> float:
    """A wall clock that never moves."""
    return NOW


def response(status: int, **headers: str) -> httpx.Response:
    """A response with ``headers`` (``_`` in a keyword stands for ``-``)."""
    return httpx.Response(status, headers={k.replace("_", "-"): v for k, v in headers.items()})


def classify(status: int, policy: RetryPolicy = DEFAULT, cooling: bool = True,
             **headers: str) -> Outcome:
    """What a response of ``status`` with ``headers`` means under ``policy``."""
    return classify_response(response(status, **headers), status, policy, wallclock, cooling)


# -- the rules as data ---------------------------------------------------------------------


def test_order_lists_every_stop_reason_once_in_the_enum_order() -> None:
    """ORDER holds each StopReason exactly once, in the order the enum declares them."""
    assert ORDER == tuple(StopReason)


def test_rule_groups_run_from_one_to_six_without_going_back() -> None:
    """The rules' groups never decrease and cover the six groups of the docstring."""
    groups = [rule.group for rule in RULES]
    assert groups == sorted(groups)
    assert set(groups) == {1, 2, 3, 4, 5, 6}


def test_module_docstring_names_the_reasons_in_rule_order() -> None:
    """The module docstring first names each stop reason in the order RULES gives."""
    doc = rules.__doc__ or ""
    firsts = [doc.index(f"``{reason.value}``") for reason in ORDER]
    assert firsts == sorted(firsts)


def test_only_429_and_503_start_a_cooldown() -> None:
    """The statuses whose Retry-After quiets a whole origin are 429 and 503."""
    assert frozenset({429, 503}) == COOLDOWN_STATUSES


# -- classify_response: statuses ------------------------------------------------------------

#: (status, stop, failure): a response without any signal header, default policy.
STATUSES = [
    (200, StopReason.SUCCESS, False),
    (400, StopReason.NOT_RETRYABLE, False),
    (401, StopReason.NOT_RETRYABLE, False),
    (403, StopReason.NOT_RETRYABLE, False),
    (404, StopReason.NOT_RETRYABLE, False),
    (422, StopReason.NOT_RETRYABLE, False),
    (500, StopReason.NOT_RETRYABLE, True),
    (408, None, True),
    (429, None, True),
    (502, None, True),
    (503, None, True),
    (504, None, True),
]


@pytest.mark.parametrize(("status", "stop", "failure"), STATUSES,
                         ids=[str(row[0]) for row in STATUSES])
def test_a_bare_status_decides_the_outcome(status: int, stop: StopReason | None,
                                           failure: bool) -> None:
    """Without signals, the default retry_statuses alone say retryable, success or final."""
    outcome = classify(status)
    assert (outcome.status, outcome.error) == (status, None)
    assert outcome.stop is stop
    assert outcome.failure is failure
    assert outcome.success is (stop is StopReason.SUCCESS)
    assert (outcome.floor, outcome.signal, outcome.quiet, outcome.trusted) == (
        None, None, None, False)


@pytest.mark.parametrize(
    ("status", "stop", "failure"),
    [(503, StopReason.NOT_RETRYABLE, True), (429, StopReason.NOT_RETRYABLE, False),
     (409, None, True)],
    ids=["503-unlisted", "429-unlisted", "409-listed"],
)
def test_the_policy_retry_statuses_replace_the_defaults(status: int, stop: StopReason | None,
                                                        failure: bool) -> None:
    """A policy's own retry_statuses decide what is retryable; a 5xx still counts as failure."""
    outcome = classify(status, RetryPolicy(retry_statuses={500, 409}))
    assert outcome.stop is stop
    assert outcome.failure is failure


# -- classify_response: the server's verdict -------------------------------------------------

#: (status, verdict header value, policy, stop, trusted)
VERDICTS: list[Any] = [
    pytest.param(503, "false", DEFAULT, StopReason.SERVER_DECLINED, False, id="503-false"),
    pytest.param(503, " FaLsE\t", DEFAULT, StopReason.SERVER_DECLINED, False,
                 id="503-false-any-case-ows"),
    pytest.param(503, "true", DEFAULT, None, False, id="503-true-untrusted"),
    pytest.param(503, "true", RetryPolicy(trust_should_retry=True), None, True,
                 id="503-true-trusted"),
    pytest.param(500, "true", DEFAULT, None, False, id="500-true-made-retryable"),
    pytest.param(404, "true", DEFAULT, StopReason.NOT_RETRYABLE, False, id="404-true-never"),
    pytest.param(400, "true", DEFAULT, StopReason.NOT_RETRYABLE, False, id="400-true-never"),
    pytest.param(401, "true", DEFAULT, StopReason.NOT_RETRYABLE, False, id="401-true-never"),
    pytest.param(403, "true", DEFAULT, StopReason.NOT_RETRYABLE, False, id="403-true-never"),
    pytest.param(422, "true", DEFAULT, StopReason.NOT_RETRYABLE, False, id="422-true-never"),
    pytest.param(404, "true", RetryPolicy(retry_statuses={404}, trust_should_retry=True), None,
                 True, id="404-listed-true-trusted"),
    pytest.param(409, "true", DEFAULT, None, False, id="409-true-made-retryable"),
    pytest.param(404, "yes", DEFAULT, StopReason.NOT_RETRYABLE, False, id="404-malformed"),
    pytest.param(200, "true", DEFAULT, StopReason.SUCCESS, False, id="200-not-read"),
    pytest.param(503, "false", RetryPolicy(should_retry_header=None), None, False,
                 id="503-false-header-off"),
]


@pytest.mark.parametrize(("status", "value", "policy", "stop", "trusted"), VERDICTS)
def test_the_server_verdict_header(status: int, value: str, policy: RetryPolicy,
                                   stop: StopReason | None, trusted: bool) -> None:
    """x-should-retry, read on statuses >= 400 only, declines or grants a retry."""
    outcome = classify(status, policy, x_should_retry=value)
    assert outcome.stop is stop
    assert outcome.trusted is trusted


def test_a_custom_verdict_header_replaces_x_should_retry() -> None:
    """With should_retry_header renamed, only the new name carries the verdict."""
    policy = RetryPolicy(should_retry_header="X-Retry-Ok")
    assert classify(503, policy, x_retry_ok="false").stop is StopReason.SERVER_DECLINED
    assert classify(503, policy, x_should_retry="false").stop is None


def test_a_granted_4xx_is_retryable_but_no_failure() -> None:
    """A 409 the server says to retry is retryable, yet says nothing bad of the server."""
    outcome = classify(409, x_should_retry="true")
    assert outcome.stop is None
    assert outcome.failure is False


# -- classify_response: the server's time ----------------------------------------------------

#: (status, headers, policy, cooling, (stop, floor, signal, quiet))
TIMES: list[Any] = [
    pytest.param(503, {"Retry-After": "5"}, DEFAULT, True,
                 (None, 5.0, "retry-after", 5.0), id="503-retry-after-cools"),
    pytest.param(503, {"Retry-After": "5"}, DEFAULT, False,
                 (None, 5.0, "retry-after", None), id="503-no-cooldowns-kept"),
    pytest.param(502, {"Retry-After": "5"}, DEFAULT, True,
                 (None, 5.0, "retry-after", None), id="502-floor-without-cooldown"),
    pytest.param(503, {"Retry-After": "120"}, DEFAULT, True,
                 (None, 120.0, "retry-after", None), id="503-too-long-no-cooldown"),
    pytest.param(503, {"Retry-After": "60"}, DEFAULT, True,
                 (None, 60.0, "retry-after", 60.0), id="503-at-the-limit-cools"),
    pytest.param(503, {"retry-after-ms": "1500"}, DEFAULT, True,
                 (None, 1.5, "retry-after-ms", 1.5), id="retry-after-ms"),
    pytest.param(503, {"retry-after-ms": "1500", "Retry-After": "9"}, DEFAULT, True,
                 (None, 1.5, "retry-after-ms", 1.5), id="ms-wins-over-retry-after"),
    pytest.param(503, {"retry-after-ms": "soon", "Retry-After": "9"}, DEFAULT, True,
                 (None, 9.0, "retry-after", 9.0), id="malformed-ms-falls-back"),
    pytest.param(503, {"Retry-After": "Sun, 06 Nov 1994 08:50:07 GMT",
                       "Date": "Sun, 06 Nov 1994 08:49:37 GMT"}, DEFAULT, True,
                 (None, 30.0, "retry-after", 30.0), id="http-date-against-date-header"),
    pytest.param(503, {"Retry-After": "5"}, RetryPolicy(respect_retry_after=False), True,
                 (None, None, None, None), id="retry-after-not-respected"),
    pytest.param(503, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "7"}, DEFAULT, True,
                 (None, 7.0, "x-ratelimit-reset", 7.0), id="exhausted-quota"),
    pytest.param(503, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "7"},
                 RetryPolicy(respect_rate_limits=False), True,
                 (None, None, None, None), id="rate-limits-not-respected"),
    pytest.param(503, {"Retry-After": "5", "x-ratelimit-remaining": "0",
                       "x-ratelimit-reset": "30"}, DEFAULT, True,
                 (None, 5.0, "retry-after", 5.0), id="retry-after-wins-over-quota"),
    pytest.param(200, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "7"}, DEFAULT, True,
                 (StopReason.SUCCESS, None, "x-ratelimit-reset", 7.0),
                 id="success-with-exhausted-quota-cools"),
    pytest.param(429, {"Retry-After": "5"}, RetryPolicy(retry_statuses={503}), True,
                 (StopReason.NOT_RETRYABLE, None, "retry-after", 5.0),
                 id="unlisted-429-still-cools"),
    pytest.param(503, {"Retry-After": "5", "x-should-retry": "false"}, DEFAULT, True,
                 (StopReason.SERVER_DECLINED, 5.0, "retry-after", 5.0),
                 id="declined-keeps-floor-and-cooldown"),
]


@pytest.mark.parametrize(("status", "headers", "policy", "cooling", "expected"), TIMES)
def test_the_server_time(status: int, headers: dict[str, str], policy: RetryPolicy,
                         cooling: bool, expected: tuple[Any, ...]) -> None:
    """retry-after-ms over Retry-After over a quota reset sets the floor and the cooldown."""
    outcome = classify_response(httpx.Response(status, headers=headers), status, policy,
                                wallclock, cooling)
    assert (outcome.stop, outcome.floor, outcome.signal, outcome.quiet) == expected


@pytest.mark.parametrize("value", ["soon", "1.5", "\u00b2"],
                         ids=["word", "fraction", "superscript-digit"])
def test_a_malformed_retry_after_is_ignored_and_reported(value: str) -> None:
    """A Retry-After that is no wait leaves no floor, and is kept for a DEBUG line."""
    outcome = classify_response(
        httpx.Response(503, headers=[(b"Retry-After", value.encode("latin-1"))]), 503, DEFAULT,
        wallclock, True)
    assert (outcome.stop, outcome.floor, outcome.quiet) == (None, None, None)
    assert outcome.ignored == value


def test_a_well_formed_retry_after_is_not_reported() -> None:
    """Only a malformed Retry-After is marked ignored."""
    assert classify(503, retry_after="5").ignored is None


# -- final_at_once: the quick path ------------------------------------------------------------

#: (status, headers, policy, pacing, final at once)
QUICK: list[Any] = [
    pytest.param(404, {"Content-Type": "text/plain"}, DEFAULT, True, True, id="404-plain"),
    pytest.param(503, {}, DEFAULT, False, False, id="503-retryable"),
    pytest.param(404, {"x-should-retry": "true"}, DEFAULT, False, False, id="404-verdict"),
    pytest.param(404, {"x-should-retry": "true"}, RetryPolicy(should_retry_header=None),
                 False, True, id="404-verdict-off"),
    pytest.param(200, {"x-ratelimit-remaining": "0"}, DEFAULT, True, False,
                 id="200-quota-pacing"),
    pytest.param(200, {"Retry-After": "5"}, DEFAULT, True, True, id="200-retry-after-skipped"),
    pytest.param(404, {"Retry-After": "5"}, DEFAULT, True, True, id="404-retry-after-skipped"),
    pytest.param(404, {"RateLimit": '"default";r=0;t=9'}, DEFAULT, True, False,
                 id="404-ratelimit-field-pacing"),
]


@pytest.mark.parametrize(("status", "headers", "policy", "pacing", "final"), QUICK)
def test_the_quick_path(status: int, headers: dict[str, str], policy: RetryPolicy,
                        pacing: bool, final: bool) -> None:
    """A first answer is final at once only when no header could change the verdict."""
    answer = httpx.Response(status, headers=headers)
    assert final_at_once(answer, status, policy, pacing) is final
    if final:  # the quick path never skips what the full look would act on
        outcome = classify_response(answer, status, policy, wallclock, pacing)
        assert outcome.stop is not None and outcome.quiet is None


# -- classify_error ---------------------------------------------------------------------------


def raised(exc: BaseException, module: str | None = None) -> BaseException:
    """``exc`` after being raised (with a traceback), from code whose module is ``module``."""
    try:
        if module is None:
            raise exc
        exec(compile("raise exc", "<mock>", "exec"), {"__name__": module, "exc": exc})
    except BaseException as caught:
        return caught
    raise AssertionError("not raised")


def chained(depth: int, tail: BaseException) -> httpx.ConnectError:
    """A ConnectError whose ``depth``-th cause (1 for its own cause) is ``tail``."""
    chain: BaseException = tail
    for _ in range(depth - 1):
        outer = OSError("wrapped")
        outer.__cause__ = chain
        chain = outer
    exc = httpx.ConnectError("connect failed")
    exc.__cause__ = chain
    return exc


CERT = ssl.SSLCertVerificationError("certificate verify failed")

#: (exception, retryable, timeout, never_sent, verdict): ``verdict`` is the health verdict
#: (``Outcome.failure``): True for a transient error, None for an error that says nothing of
#: the server (one no retry can fix, or the client's own pool being full).
ERRORS: list[Any] = [
    pytest.param(httpx.ConnectError("x"), True, False, True, True, id="ConnectError"),
    pytest.param(httpx.ConnectTimeout("x"), True, True, True, True, id="ConnectTimeout"),
    pytest.param(httpx.PoolTimeout("x"), True, True, True, None, id="PoolTimeout"),
    pytest.param(httpx.ReadTimeout("x"), True, True, False, True, id="ReadTimeout"),
    pytest.param(httpx.RemoteProtocolError("x"), True, False, False, True,
                 id="RemoteProtocolError"),
    pytest.param(httpx.LocalProtocolError("x"), False, False, False, None,
                 id="LocalProtocolError"),
    pytest.param(httpx.ProxyError("x"), False, False, False, None, id="ProxyError"),
    pytest.param(ValueError("x"), False, False, False, None, id="ValueError"),
    pytest.param(chained(1, CERT), False, False, False, None, id="cert-failure-cause"),
    pytest.param(chained(7, CERT), False, False, False, None,
                 id="cert-failure-deepest-searched"),
    pytest.param(chained(8, CERT), True, False, True, True, id="cert-failure-too-deep"),
    pytest.param(raised(httpx.TimeoutException("x"), "pytest_httpx._httpx_mock"),
                 False, False, False, None, id="pytest-httpx-unmatched"),
    pytest.param(raised(httpx.TimeoutException("x")), True, True, False, True,
                 id="plain-timeout-elsewhere"),
    pytest.param(raised(httpx.ReadTimeout("x"), "pytest_httpx.mock"), True, True, False, True,
                 id="real-timeout-in-mock-module"),
    # Raw errors that escape the library's own mapping: read errors of no known phase.
    pytest.param(ssl.SSLError(1, "bad record mac"), True, False, False, True, id="SSLError"),
    pytest.param(ssl.SSLEOFError(8, "eof"), True, False, False, True, id="SSLEOFError"),
    pytest.param(anyio.EndOfStream(), True, False, False, True, id="EndOfStream"),
    pytest.param(anyio.BrokenResourceError(), True, False, False, True,
                 id="BrokenResourceError"),
    pytest.param(CERT, False, False, False, None, id="raw-cert-failure"),
    pytest.param(anyio.ClosedResourceError(), False, False, False, None,
                 id="ClosedResourceError"),
    pytest.param(OSError("x"), False, False, False, None, id="OSError"),
]


@pytest.mark.parametrize(("exc", "retryable", "timeout", "never_sent", "verdict"), ERRORS)
def test_what_an_error_means(exc: Exception, retryable: bool, timeout: bool,
                             never_sent: bool, verdict: bool | None) -> None:
    """Transient httpx errors are retryable (and flagged timeout / never sent); others end.
    Only what the server did is a verdict on its health."""
    outcome = classify_error(exc, HTTPX)
    assert (outcome.status, outcome.error) == (None, type(exc).__name__)
    assert outcome.stop is (None if retryable else StopReason.NOT_RETRYABLE)
    assert outcome.failure is verdict
    assert (outcome.timeout, outcome.never_sent) == (timeout, never_sent)
    assert outcome.floor is None and outcome.quiet is None


def test_a_cert_failure_as_context_is_permanent() -> None:
    """A certificate failure met while handling (``__context__``) is permanent too."""
    exc = httpx.ConnectError("x")
    exc.__context__ = CERT
    assert classify_error(exc, HTTPX).stop is StopReason.NOT_RETRYABLE


# -- may_retry --------------------------------------------------------------------------------


def retryable(floor: float | None = None, *, never_sent: bool = False,
              trusted: bool = False) -> Outcome:
    """A retryable outcome, as classify_response or classify_error give one."""
    return Outcome(503, None, True, floor=floor, never_sent=never_sent, trusted=trusted)


def decide(method: str = "GET", *, outcome: Outcome | None = None,
           policy: RetryPolicy = DEFAULT, enabled: bool = True, attempt: int = 1,
           headers: dict[str, str] | None = None, **body: Any) -> StopReason | None:
    """may_retry for a real request of ``method`` with ``headers`` and ``body`` keywords."""
    request = httpx.Request(method, URL, headers=headers, **body)
    return may_retry(outcome or retryable(), policy, enabled, request.method,
                     request.headers, request.stream, HTTPX, attempt)


UNSAFE = StopReason.UNSAFE_METHOD
KEY_POLICY = RetryPolicy(idempotency_header="X-Idem")
POST_ONLY = RetryPolicy(retry_methods={"post"})

#: (method, headers, policy, reason)
METHODS: list[Any] = [
    *(pytest.param(m, {}, DEFAULT, None, id=m)
      for m in ("GET", "PUT", "DELETE")),
    *(pytest.param(m, {}, DEFAULT, UNSAFE, id=m) for m in ("POST", "PATCH")),
    pytest.param("POST", {"Idempotency-Key": "k1"}, DEFAULT, None, id="POST-key"),
    pytest.param("PATCH", {"idempotency-key": "k1"}, DEFAULT, None, id="PATCH-key-lower"),
    pytest.param("POST", {"Idempotency-Key": " \t"}, DEFAULT, UNSAFE, id="POST-blank-key"),
    pytest.param("POST", {"Idempotency-Key": "k1"}, RetryPolicy(idempotency_header=None),
                 UNSAFE, id="POST-key-opt-in-off"),
    pytest.param("POST", {"X-Idem": "k1"}, KEY_POLICY, None, id="POST-custom-key"),
    pytest.param("POST", {"Idempotency-Key": "k1"}, KEY_POLICY, UNSAFE,
                 id="POST-default-key-renamed"),
    pytest.param("POST", {}, POST_ONLY, None, id="POST-listed"),
    pytest.param("GET", {}, POST_ONLY, UNSAFE, id="GET-unlisted"),
]


@pytest.mark.parametrize(("method", "headers", "policy", "reason"), METHODS)
def test_methods_and_idempotency_keys(method: str, headers: dict[str, str],
                                      policy: RetryPolicy, reason: StopReason | None) -> None:
    """retry_methods are retried; another method only with a non-empty idempotency key."""
    assert decide(method, headers=headers, policy=policy) is reason


def one_shot() -> Iterator[bytes]:
    """A body that can be read once."""
    yield b"chunk"


async def one_shot_async() -> AsyncIterator[bytes]:
    """An async body that can be read once."""
    yield b"chunk"


class OneWayFile:
    """A file that cannot go back to its start."""

    def read(self, size: int = -1) -> bytes:
        return b""

    def seekable(self) -> bool:
        return False


class StuckFile(OneWayFile):
    """A file that says it is seekable, but whose rewind does not reach the start."""

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return 3

    def tell(self) -> int:
        return 3


BODY = StopReason.BODY_NOT_REPLAYABLE

#: (method, body keywords, outcome, reason)
BODIES: list[Any] = [
    pytest.param("PUT", {"content": b"data"}, None, None, id="bytes"),
    pytest.param("PUT", {"data": {"a": "1"}}, None, None, id="form"),
    pytest.param("PUT", {"files": {"f": io.BytesIO(b"x")}}, None, None, id="multipart-seekable"),
    pytest.param("PUT", {"content": one_shot()}, None, BODY, id="iterator"),
    pytest.param("PUT", {"content": one_shot_async()}, None, BODY, id="async-iterator"),
    pytest.param("PUT", {"files": {"f": OneWayFile()}}, None, BODY, id="multipart-one-way"),
    pytest.param("PUT", {"files": {"f": StuckFile()}}, None, BODY, id="multipart-no-rewind"),
    pytest.param("PUT", {"content": one_shot()}, retryable(never_sent=True), None,
                 id="iterator-never-sent"),
    pytest.param("POST", {"content": b"x"}, retryable(trusted=True), None, id="POST-trusted"),
    pytest.param("POST", {"content": one_shot()}, retryable(trusted=True), BODY,
                 id="POST-trusted-one-shot"),
]


@pytest.mark.parametrize(("method", "body", "outcome", "reason"), BODIES)
def test_bodies_and_what_was_never_sent(method: str, body: dict[str, Any],
                                        outcome: Outcome | None,
                                        reason: StopReason | None) -> None:
    """A one-shot body stops a retry, unless the failure proves nothing was sent."""
    assert decide(method, outcome=outcome, **body) is reason


#: (method, enabled, body, attempt, floor, never_sent, reason): the first rule that applies.
ORDERED: list[Any] = [
    pytest.param("POST", False, one_shot, 3, 120.0, False, StopReason.DISABLED, id="disabled"),
    pytest.param("GET", False, None, 1, None, True, StopReason.DISABLED,
                 id="disabled-even-if-never-sent"),
    pytest.param("POST", True, one_shot, 3, 120.0, False, UNSAFE, id="unsafe"),
    pytest.param("PUT", True, one_shot, 3, 120.0, False, BODY, id="body"),
    pytest.param("POST", True, one_shot, 3, 120.0, True, StopReason.MAX_ATTEMPTS,
                 id="never-sent-skips-to-max-attempts"),
    pytest.param("PUT", True, None, 3, 120.0, False, StopReason.MAX_ATTEMPTS,
                 id="max-attempts"),
    pytest.param("PUT", True, None, 2, 120.0, False, StopReason.RETRY_AFTER_TOO_LONG,
                 id="too-long"),
    pytest.param("PUT", True, None, 2, 60.001, False, StopReason.RETRY_AFTER_TOO_LONG,
                 id="just-over-the-limit"),
    pytest.param("PUT", True, None, 2, 60.0, False, None, id="at-the-limit"),
]


@pytest.mark.parametrize(("method", "enabled", "body", "attempt", "floor", "never_sent",
                          "reason"), ORDERED)
def test_the_first_rule_that_applies_wins(method: str, enabled: bool, body: Any, attempt: int,
                                          floor: float | None, never_sent: bool,
                                          reason: StopReason | None) -> None:
    """Disabled, unsafe method, body, max_attempts, then too long, as RULES orders them."""
    content = b"x" if body is None else body()
    outcome = retryable(floor, never_sent=never_sent)
    assert decide(method, outcome=outcome, enabled=enabled, attempt=attempt,
                  content=content) is reason


@pytest.mark.parametrize(("max_attempts", "attempt", "reason"),
                         [(1, 1, StopReason.MAX_ATTEMPTS), (5, 4, None)],
                         ids=["one-attempt", "below"])
def test_max_attempts_counts_the_first_attempt(max_attempts: int, attempt: int,
                                               reason: StopReason | None) -> None:
    """Attempt number ``max_attempts`` is the last one: its failure is not retried."""
    assert decide(policy=RetryPolicy(max_attempts=max_attempts), attempt=attempt) is reason


# -- the two together ----------------------------------------------------------------------------

#: (method, status, response headers, policy, reason)
PIPELINE: list[Any] = [
    pytest.param("POST", 503, {}, DEFAULT, UNSAFE, id="POST-503"),
    pytest.param("POST", 503, {"x-should-retry": "true"}, RetryPolicy(trust_should_retry=True),
                 None, id="POST-granted-trusted"),
    pytest.param("GET", 429, {"Retry-After": "5"}, DEFAULT, None, id="GET-429-short-wait"),
    pytest.param("GET", 503, {"Retry-After": "120"}, DEFAULT, StopReason.RETRY_AFTER_TOO_LONG,
                 id="GET-503-long-wait"),
]


@pytest.mark.parametrize(("method", "status", "headers", "policy", "reason"), PIPELINE)
def test_a_response_through_both_rules(method: str, status: int, headers: dict[str, str],
                                       policy: RetryPolicy, reason: StopReason | None) -> None:
    """classify_response's outcome, fed to may_retry, gives the decision the core makes."""
    outcome = classify_response(httpx.Response(status, headers=headers), status, policy,
                                wallclock, True)
    assert outcome.stop is None
    assert decide(method, outcome=outcome, policy=policy) is reason

