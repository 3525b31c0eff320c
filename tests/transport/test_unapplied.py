"""Statuses that prove a request was not carried out, and the statuses a server's
``x-should-retry: true`` can never make retryable."""

from __future__ import annotations

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.transport.test_transport import script, stop_reason, streaming_body

pytestmark = pytest.mark.usefixtures("flavour")

RATE_LIMITED = {"retry-after-ms": "10"}


def test_an_unapplied_status_retries_an_unkeyed_post(harness: Harness) -> None:
    """A 429 the policy calls unapplied is retried for a POST without an idempotency key."""
    handler, seen = script(httpx.Response(429, headers=RATE_LIMITED), 200)
    transport = harness.transport(handler, unapplied_statuses={429})
    response = harness.send(transport, "POST", content=b"{}")
    assert response.status_code == 200
    assert len(seen) == 2


def test_without_it_an_unkeyed_post_is_not_retried(harness: Harness) -> None:
    """The default policy hands the same 429 back after one attempt (``unsafe_method``)."""
    handler, seen = script(httpx.Response(429, headers=RATE_LIMITED), 200)
    response = harness.send(harness.transport(handler), "POST", content=b"{}")
    assert response.status_code == 429
    assert len(seen) == 1
    assert stop_reason(response) == "unsafe_method"


def test_an_unapplied_status_never_resends_a_one_shot_body(harness: Harness) -> None:
    """A generator body is still sent once: the server's refusal does not make it replayable."""
    handler, seen = script(429, 200)
    transport = harness.transport(handler, unapplied_statuses={429})
    response = harness.send(transport, "POST", content=streaming_body(harness))
    assert response.status_code == 429
    assert len(seen) == 1
    assert stop_reason(response) == "body_not_replayable"


def test_an_unapplied_status_outside_retry_statuses_is_not_retried(harness: Harness) -> None:
    """Unapplied lifts the method rule only: a status that is not retryable stays final."""
    handler, seen = script(529, 200)
    transport = harness.transport(handler, unapplied_statuses={529})
    response = harness.send(transport, "POST", content=b"{}")
    assert response.status_code == 529
    assert len(seen) == 1
    assert stop_reason(response) == "not_retryable"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_should_retry_true_never_retries_the_five(status: int) -> None:
    """``x-should-retry: true`` does not make 400, 401, 403, 404 or 422 retryable."""
    handler, seen = script(httpx.Response(status, headers={"x-should-retry": "true"}), 200)
    transport = rt.RetryTransport(httpx.MockTransport(handler), sleep=lambda seconds: None)
    with httpx.Client(transport=transport) as client:
        response = client.get("https://api.example.com/")
    assert response.status_code == status
    assert len(seen) == 1


def test_should_retry_true_retries_a_500_get(harness: Harness) -> None:
    """A 500 the server says to retry is retried for a GET."""
    handler, seen = script(httpx.Response(500, headers={"x-should-retry": "true"}), 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 200
    assert len(seen) == 2


def test_a_listed_status_still_trusts_the_server(harness: Harness) -> None:
    """With trust_should_retry, ``true`` stands in for a key on a 404 the user listed."""
    handler, seen = script(httpx.Response(404, headers={"x-should-retry": "true"}), 200)
    transport = harness.transport(handler, retry_statuses={404}, trust_should_retry=True)
    response = harness.send(transport, "POST", content=b"{}")
    assert response.status_code == 200
    assert len(seen) == 2


@pytest.mark.parametrize(("value", "error"), [
    ({99}, ValueError), ({600}, ValueError), ("429", TypeError), ({True}, TypeError),
])
def test_unapplied_statuses_are_validated(value: object, error: type[Exception]) -> None:
    """An unapplied status outside 100..599, or not an int, names the field."""
    with pytest.raises(error, match="unapplied_statuses"):
        rt.RetryPolicy(unapplied_statuses=value)  # type: ignore[arg-type]
