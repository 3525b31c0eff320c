"""The pytest plugin installed with retry-transport: the ``retry_testing`` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .testing import TestingLog, retry_testing as _retry_testing

__all__ = ["retry_testing"]


@pytest.fixture
def retry_testing() -> Iterator[TestingLog]:
    """Retry transports record their waits instead of sleeping, with seeded jitter.

    Use ``retry_transport.testing.retry_testing(attempts=...)`` inside the test to also
    change the number of attempts.
    """
    with _retry_testing() as log:
        yield log
