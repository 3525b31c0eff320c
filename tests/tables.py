"""Value tables run through the transports: the first row in every mode, the others once.

The rule a table checks (which statuses are retried, which header values are malformed, what
a breaker counts) is decided by the shared core, the same whichever way the transport is
driven: running every row in every mode adds items, not proof. ``table`` runs the first row
in every mode, which proves that each mode wires the rule up, and each other row in the
first mode only, with the same assertions::

    @table("status", [408, 429, 502, 503, 504])
    def test_retryable_statuses_are_retried(harness: Harness, status: int) -> None: ...

runs 408 sync, on asyncio and on trio, and 429 to 504 sync. ``over`` names the modes: the
``harness`` fixture's (the default), the loops of ``anyio_backend``, or a plain argument
such as a transport class's name (``modes`` then lists its values). The flavour (httpx,
httpx2) still crosses every row: the ``flavour`` fixture applies to a whole module.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from tests.harness import MODES

__all__ = ["table"]

#: What ``pytest.param`` returns.
_Param = type(pytest.param(None))
#: The modes of the fixtures a table may run over, where ``modes`` does not name them.
_FIXTURE_MODES: dict[str, list[str]] = {"harness": MODES, "anyio_backend": ["asyncio", "trio"]}
#: The fixtures given the mode to build what the test gets (``harness``: a ``Harness``); any
#: other name, ``anyio_backend`` too, gets the mode itself.
_INDIRECT = {"harness"}


def table(
    argnames: str | Sequence[str], rows: Iterable[Any], *, ids: Sequence[str] | None = None,
    over: str = "harness", modes: Sequence[str] | None = None,
) -> pytest.MarkDecorator:
    """``pytest.mark.parametrize(argnames, rows, ids=ids)`` with ``over`` parametrized too:
    the first row in each of ``over``'s modes, every other row in the first mode only."""
    names = ([name.strip() for name in argnames.split(",")] if isinstance(argnames, str)
             else list(argnames))
    every = list(_FIXTURE_MODES[over] if modes is None else modes)
    params = []
    for index, row in enumerate(rows):
        if isinstance(row, _Param):
            values, marks, name = tuple(row.values), row.marks, row.id
        else:
            values, marks, name = (tuple(row) if len(names) > 1 else (row,)), (), None
        if ids is not None:
            name = ids[index]
        if name is None:
            name = "-".join(_id(value, arg, index)
                            for value, arg in zip(values, names, strict=True))
        for mode in every if index == 0 else every[:1]:
            params.append(pytest.param(mode, *values, marks=marks, id=f"{mode}-{name}"))
    return pytest.mark.parametrize(
        [over, *names], params, indirect=[over] if over in _INDIRECT else False
    )


def _id(value: object, argname: str, index: int) -> str:
    """The id pytest gives ``value`` in row ``index``, so that a row keeps its id (pytest
    escapes what is not printable ASCII in an id, as in a value)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if value is None or isinstance(value, (bool, int, float, complex, enum.Enum)):
        return str(value)
    name = getattr(value, "__name__", None)
    return name if isinstance(name, str) else f"{argname}{index}"
