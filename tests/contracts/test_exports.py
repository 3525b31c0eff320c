"""The public API is what __all__ says, nothing more, nothing less."""

from __future__ import annotations

import retry_transport as rt


def test_all_is_pinned() -> None:
    """Adding or removing a public name is a deliberate change: update this list."""
    assert rt.__all__ == [
        "DEFAULT_RETRY_METHODS",
        "DEFAULT_RETRY_STATUSES",
        "AdaptiveThrottle",
        "AsyncRetryTransport",
        "Attempt",
        "CircuitBreaker",
        "CircuitOpenError",
        "CooldownError",
        "DeadlineExceeded",
        "EventPredicate",
        "Hedging",
        "Jitter",
        "LatencySummary",
        "LayeredRetriesWarning",
        "MemoryStore",
        "RedisStore",
        "Resume",
        "RetryBudget",
        "RetryEvent",
        "RetryHook",
        "RetryInfo",
        "RetryPolicy",
        "RetryPredicate",
        "RetryStats",
        "RetryTransport",
        "ServerSentEvent",
        "StopReason",
        "StreamIdleTimeout",
        "ThrottledError",
        "deadline",
        "parse_http_date",
        "parse_retry_after",
        "retry_info",
        "time_left",
    ]


def test_all_names_exist_and_public_names_are_listed() -> None:
    """Every listed name exists, and every public module attribute is listed."""
    for name in rt.__all__:
        assert hasattr(rt, name), name
    public = {
        name for name, value in vars(rt).items()
        if not name.startswith("_") and not isinstance(value, type(rt))
    }
    assert public == set(rt.__all__)


def test_version() -> None:
    """The version matches the installed distribution's."""
    from importlib.metadata import version

    assert rt.__version__ == version("retry-transport")


def test_transport_options_cover_every_keyword() -> None:
    """The typed keywords are exactly the policy fields and the inner transport's keywords."""
    from retry_transport._call.options import TRANSPORT_KEYWORDS, TransportOptions
    from retry_transport._policy.policy import FIELDS

    assert set(TransportOptions.__annotations__) == FIELDS | TRANSPORT_KEYWORDS


def test_the_httpx2_flavour_exports_the_same_names() -> None:
    """retry_transport.httpx2 offers the same API; the flavour-neutral names are the very
    objects of retry_transport, the flavour-bound ones subclass httpx2's own classes."""
    import pytest

    httpx2 = pytest.importorskip("httpx2")
    import retry_transport.httpx2 as rt2

    assert rt2.__all__ == rt.__all__
    public = {
        name for name, value in vars(rt2).items()
        if not name.startswith("_") and not isinstance(value, type(rt2))
    }
    assert public == set(rt2.__all__)
    bound = {"RetryTransport", "AsyncRetryTransport", "CooldownError", "CircuitOpenError",
             "DeadlineExceeded", "ThrottledError", "StreamIdleTimeout"}
    for name in set(rt.__all__) - bound:
        assert getattr(rt2, name) is getattr(rt, name), name
    assert issubclass(rt2.RetryTransport, httpx2.BaseTransport)
    assert issubclass(rt2.AsyncRetryTransport, httpx2.AsyncBaseTransport)
    assert issubclass(rt2.CooldownError, httpx2.TransportError)
    assert issubclass(rt2.DeadlineExceeded, httpx2.TimeoutException)
    assert issubclass(rt2.ThrottledError, httpx2.TransportError)
    assert issubclass(rt.DeadlineExceeded, __import__("httpx").TimeoutException)
    assert issubclass(rt2.CircuitOpenError, httpx2.TransportError)
    assert issubclass(rt2.StreamIdleTimeout, httpx2.ReadTimeout)
    assert issubclass(rt.StreamIdleTimeout, __import__("httpx").ReadTimeout)
    import httpx

    for name in bound:
        assert getattr(rt2, name) is not getattr(rt, name)
        assert not issubclass(getattr(rt2, name), (httpx.BaseTransport, httpx.AsyncBaseTransport,
                                                   httpx.TransportError))


def test_importing_the_package_imports_no_httpx2() -> None:
    """httpx2 is optional: ``import retry_transport`` must not load it."""
    import subprocess
    import sys

    code = "import sys, retry_transport; print('httpx2' in sys.modules, 'httpcore2' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.split() == ["False", "False"]


#: The module that binds the core to httpx: its transports and its error classes.
HTTPX_BINDING = {"_io/transports.py"}


def test_the_core_and_the_drivers_import_no_http_library() -> None:
    """The decisions and the driver loops are flavour-neutral: in the package's folders only
    the httpx binding names httpx (``retry_transport.httpx2`` binds httpx2)."""
    import ast
    from pathlib import Path

    package = Path(rt.__file__).parent
    modules = [path for path in sorted(package.glob("_*/*.py"))
               if path.relative_to(package).as_posix() not in HTTPX_BINDING]
    assert len(modules) > 30
    for path in [*modules, package / "testing.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in {"httpx", "httpx2", "httpcore", "httpcore2"}, (
                    path, name)
