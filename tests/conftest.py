import atexit
import shutil
import tempfile
from collections.abc import Iterator

import hypothesis.configuration
import pytest

from tests import flavour as _flavour
from tests.harness import Harness

# Hypothesis keeps what it learns (its examples, the constants it found in the code) in a
# folder of the working directory, even with no database: the suite writes nothing into the
# checkout, so this process's go to a folder of its own, removed at its end.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="retry-transport-hypothesis-")
hypothesis.configuration.set_hypothesis_home_dir(_HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run every async test on asyncio and on trio."""
    return str(request.param)


@pytest.fixture
def flavour(request: pytest.FixtureRequest) -> Iterator[str]:
    """The HTTP library under test (``httpx`` or ``httpx2``): ``tests.flavour.httpx`` and
    ``tests.flavour.rt`` stand for its modules while the test runs."""
    with _flavour.use(getattr(request, "param", "httpx")) as name:
        yield name


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses the ``flavour`` fixture runs once per installed flavour.

    Such a test's module must take ``httpx`` and ``rt`` from ``tests.flavour``: the real
    modules would make the httpx2 runs quietly test httpx again. A test marked
    ``flavour_free`` (in such a module, but sending nothing through either library) runs
    once.
    """
    if "flavour" in metafunc.fixturenames:
        if metafunc.definition.get_closest_marker("flavour_free") is not None:
            return
        import httpx

        import retry_transport

        module = metafunc.module
        for name in ("httpx", "rt"):
            if getattr(module, name, None) in (httpx, retry_transport):
                raise pytest.UsageError(
                    f"{module.__name__} runs per flavour but imports the real {name}: "
                    "use 'from tests.flavour import httpx, rt'"
                )
        metafunc.parametrize("flavour", _flavour.FLAVOURS, indirect=True)


@pytest.fixture
def mock_router(flavour: str, request: pytest.FixtureRequest) -> object:
    """The flavour's pytest mock: pytest-httpx's ``httpx_mock``, or ``httpx2_mock``."""
    return request.getfixturevalue("httpx_mock" if flavour == "httpx" else "httpx2_mock")


@pytest.fixture(params=["sync", "asyncio", "trio"])
def harness(request: pytest.FixtureRequest) -> "Harness":
    """Each transport test runs three ways: the sync driver, and the async one on both loops."""
    return Harness(str(request.param))
