"""Testing code that retries, without waiting: retry_testing and pytest-httpx together.

It needs pytest and pytest-httpx, which the ``dev`` extra brings; from a checkout:

    pip install -e '.[dev]'
    python examples/testing_helpers.py

As a script it runs pytest on itself (without the options the project's own suite adds, such
as its two workers); ``pytest examples/testing_helpers.py`` runs it too.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import httpx
import pytest

import retry_transport as rt
from retry_transport.testing import TestingLog, retry_testing

if TYPE_CHECKING:
    from pytest_httpx import HTTPXMock


def fetch_profile(client: httpx.Client) -> dict[str, str]:
    """The code under test: it relies on the transport to ride out blips."""
    response = client.get("https://api.example.com/profile")
    response.raise_for_status()
    return dict(response.json())


def test_rides_out_a_blip(httpx_mock: HTTPXMock, retry_testing: TestingLog) -> None:
    """The fixture: waits are recorded, not slept (the Retry-After here asks for 30 s)."""
    httpx_mock.add_response(status_code=503, headers={"Retry-After": "30"})
    httpx_mock.add_response(json={"name": "Ada"})
    with httpx.Client(transport=rt.RetryTransport()) as client:
        assert fetch_profile(client) == {"name": "Ada"}
    assert len(retry_testing.waits) == 1 and retry_testing.waits[0] >= 30


def test_gives_up_in_one_attempt(httpx_mock: HTTPXMock) -> None:
    """The context manager can also set the number of attempts: here, no retries at all."""
    httpx_mock.add_response(status_code=503)
    with retry_testing(attempts=1), httpx.Client(transport=rt.RetryTransport()) as client:
        with pytest.raises(httpx.HTTPStatusError):
            fetch_profile(client)


if __name__ == "__main__":
    # A fresh interpreter, so that pytest imports its plugins before anything else does.
    command = [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider",
               "-o", "addopts="]
    sys.exit(subprocess.call(command))
