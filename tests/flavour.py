"""The HTTP library under test: httpx or httpx2, chosen per test by the ``flavour`` fixture.

Behaviour tests import ``httpx`` and ``rt`` from here instead of the real modules::

    from tests.flavour import httpx, rt

    pytestmark = pytest.mark.usefixtures("flavour")

``httpx`` then stands for the module of the flavour under test (``httpx`` or ``httpx2``) and
``rt`` for its retry-transport module (``retry_transport`` or ``retry_transport.httpx2``):
every attribute is looked up when it is used, so a test builds its clients, responses,
mock transports and errors from the flavour it runs under. The ``flavour`` fixture
(``tests/conftest.py``) runs each such test once per installed flavour.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import httpx as _httpx

import retry_transport as _rt

MODULES: dict[str, tuple[ModuleType, ModuleType]] = {"httpx": (_httpx, _rt)}
try:
    import httpx2 as _httpx2

    import retry_transport.httpx2 as _rt2
except ImportError:  # Python 3.10: httpx2 needs 3.11
    pass
else:
    MODULES["httpx2"] = (_httpx2, _rt2)

#: The flavours installed here, in the order the tests run them.
FLAVOURS = list(MODULES)

_current = "httpx"


def current() -> str:
    """The name of the flavour under test."""
    return _current


@contextmanager
def use(name: str) -> Iterator[str]:
    """Make ``httpx`` and ``rt`` stand for flavour ``name`` until the block ends."""
    global _current
    previous, _current = _current, name
    try:
        yield name
    finally:
        _current = previous


class _Current:
    """Stands for one module of the flavour under test; attributes resolve at use."""

    def __init__(self, index: int, label: str) -> None:
        self._index = index
        self._label = label

    def __getattr__(self, name: str) -> Any:
        return getattr(MODULES[_current][self._index], name)

    def __repr__(self) -> str:
        return f"<{self._label} of the flavour under test ({_current})>"


httpx: Any = _Current(0, "the HTTP library")
rt: Any = _Current(1, "the retry-transport module")
