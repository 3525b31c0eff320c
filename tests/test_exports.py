"""The public API is what __all__ says, nothing more, nothing less."""

from __future__ import annotations

import retry_transport as rt


def test_all_is_pinned() -> None:
    """Adding or removing a public name is a deliberate change: update this list."""
    assert rt.__all__ == [
        "DEFAULT_RETRY_METHODS",
        "DEFAULT_RETRY_STATUSES",
        "AsyncRetryTransport",
        "Attempt",
        "CooldownError",
        "Jitter",
        "RetryBudget",
        "RetryEvent",
        "RetryHook",
        "RetryInfo",
        "RetryPolicy",
        "RetryStats",
        "RetryTransport",
        "StopReason",
        "parse_http_date",
        "parse_retry_after",
        "retry_info",
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
    from retry_transport._drivers import TRANSPORT_KEYWORDS, TransportOptions
    from retry_transport._policy import FIELDS

    assert set(TransportOptions.__annotations__) == FIELDS | TRANSPORT_KEYWORDS
