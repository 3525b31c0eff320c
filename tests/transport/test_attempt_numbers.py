"""Code below the retry layer can tell a retry from a first try: the ``retry_attempt``
extension on each retry, and the opt-in ``attempt_header`` on every attempt."""

from __future__ import annotations

from typing import Any

import pytest

from tests.flavour import httpx, rt
from tests.harness import Harness
from tests.tables import table

pytestmark = pytest.mark.usefixtures("flavour")


def recorder(*statuses: int) -> tuple[Any, list[tuple[Any, str | None, Any]]]:
    """Answers the statuses in turn; records each attempt's retry_attempt, header, timeout."""
    seen: list[tuple[Any, str | None, Any]] = []

    def handler(request: Any) -> Any:
        seen.append((request.extensions.get("retry_attempt"), request.headers.get("x-attempt"),
                     request.extensions.get("timeout")))
        return httpx.Response(statuses[min(len(seen), len(statuses)) - 1])

    return handler, seen


def test_each_retry_carries_its_attempt_number(harness: Harness) -> None:
    """A first try carries nothing; the retries carry 2 and 3; afterwards it is gone."""
    handler, seen = recorder(503, 503, 200)
    response = harness.send(harness.transport(handler))
    assert response.status_code == 200
    assert [attempt for attempt, _, _ in seen] == [None, 2, 3]
    assert "retry_attempt" not in response.request.extensions


def test_a_request_that_succeeds_at_once_carries_nothing(harness: Harness) -> None:
    handler, seen = recorder(200)
    harness.send(harness.transport(handler))
    assert seen == [(None, None, seen[0][2])]


def test_the_attempt_number_and_a_deadline_travel_together(harness: Harness) -> None:
    """With a deadline, a retry carries both its clipped timeouts and its number, and the
    caller's own extensions come back afterwards."""
    handler, seen = recorder(503, 200)
    request_timeout = {"connect": 5.0, "read": 30.0, "write": 5.0, "pool": 5.0}
    response = harness.send(harness.transport(handler, deadline=10.0, jitter="none"),
                            extensions={"timeout": request_timeout})
    assert [attempt for attempt, _, _ in seen] == [None, 2]
    assert all(timeout["read"] <= 10.0 for _, _, timeout in seen)
    assert response.request.extensions["timeout"] == request_timeout
    assert "retry_attempt" not in response.request.extensions


def test_attempt_header_numbers_every_attempt(harness: Harness) -> None:
    """attempt_header: 1, 2, 3 on the wire; the request handed back shows the last one."""
    handler, seen = recorder(503, 503, 200)
    response = harness.send(harness.transport(handler, attempt_header="X-Attempt"))
    assert [header for _, header, _ in seen] == ["1", "2", "3"]
    assert response.request.headers["x-attempt"] == "3"


def test_no_attempt_header_by_default(harness: Harness) -> None:
    handler, seen = recorder(503, 200)
    harness.send(harness.transport(handler))
    assert [header for _, header, _ in seen] == [None, None]


@table(("bad", "error"), [("", ValueError), ("two words", ValueError), (3, TypeError),
                         (b"x-attempt", TypeError)], over="transport",
       modes=["RetryTransport", "AsyncRetryTransport"])
def test_a_bad_attempt_header_is_refused(transport: str, bad: object,
                                         error: type[Exception]) -> None:
    with pytest.raises(error, match="attempt_header"):
        getattr(rt, transport)(attempt_header=bad)
