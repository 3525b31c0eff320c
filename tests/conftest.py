import pytest

from tests.harness import Harness


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every async test on asyncio and on trio."""
    return str(request.param)


@pytest.fixture(params=["sync", "asyncio", "trio"])
def harness(request: pytest.FixtureRequest) -> "Harness":
    """Each transport test runs three ways: the sync driver, and the async one on both loops."""
    return Harness(str(request.param))
