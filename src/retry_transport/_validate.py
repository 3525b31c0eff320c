"""The checks every constructor shares: one statement of "a number of seconds", of "a count",
of "a callable", of "hooks".

Each check returns the value as it is kept, or raises ``ValueError`` naming the argument, so
that a bad configuration fails where it is written, never on the first request.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

__all__ = [
    "MAX_SECONDS",
    "check_callable",
    "check_count",
    "check_flag",
    "check_hooks",
    "check_number",
    "check_seconds",
    "is_async_function",
]

#: The longest time any option may name, in seconds (about 31 years): far beyond any sane
#: wait, and well within what ``time.sleep`` and the event loops accept.
MAX_SECONDS: Final = 1e9

_F = TypeVar("_F", bound=Callable[..., Any])


def _is_number(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float))
        and math.isfinite(value)
    )


def check_seconds(
    name: str, value: object, *, zero: bool = False, high: float = MAX_SECONDS,
    or_none: bool = False,
) -> float:
    """A finite number of seconds, > 0 (``>= 0`` with ``zero``) and at most ``high``.

    ``or_none``: the caller takes ``None`` too (and checks it first), so the message says so.
    """
    if not _is_number(value) or not (
        (0 <= value if zero else 0 < value) and value <= high  # type: ignore[operator]
    ):
        low = ">= 0" if zero else "> 0"
        alternative = ", or None" if or_none else ""
        raise ValueError(
            f"{name} must be a number of seconds {low} and <= {high:g}{alternative}, "
            f"got {value!r}"
        )
    return float(value)  # type: ignore[arg-type]


def check_number(
    name: str, value: object, *, low: float, high: float = math.inf, open_low: bool = False
) -> float:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``open_low``)."""
    if not _is_number(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    number = float(value)  # type: ignore[arg-type]
    if number < low or number > high or (open_low and number == low):
        bound = f"> {low:g}" if open_low else f">= {low:g}"
        upper = "" if high == math.inf else f" and <= {high:g}"
        raise ValueError(f"{name} must be {bound}{upper}, got {value!r}")
    return number


def check_count(name: str, value: object, *, low: int = 1) -> int:
    """An integer (not a bool) ``>= low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def check_flag(name: str, value: object) -> bool:
    """``True`` or ``False`` (not merely truthy)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return value


def check_callable(name: str, value: _F | None) -> _F | None:
    """A function, or ``None``."""
    if value is not None and not callable(value):
        raise ValueError(f"{name} must be a function, got {value!r}")
    return value


def is_async_function(function: object) -> bool:
    """A coroutine function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(function) or (
        callable(function) and inspect.iscoroutinefunction(type(function).__call__)
    )


def check_hooks(value: Iterable[Callable[..., object]] | Callable[..., object] | None,
                ) -> tuple[Callable[..., object], ...]:
    """Hooks as a tuple: a callable or an iterable of them; never a coroutine function (a
    hook is called, never awaited)."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise ValueError(
            f"hooks must be a callable or a list of callables, got the string {value!r}"
        )
    if callable(value):
        value = [value]
    try:
        hooks = tuple(value)
    except TypeError:
        raise ValueError(f"hooks must be a callable or a list of them, got {value!r}") from None
    for hook in hooks:
        if not callable(hook):
            raise ValueError(f"hooks must be callables, got {hook!r}")
        if is_async_function(hook):
            raise ValueError(
                f"hooks must be plain functions, got the coroutine function {hook!r}: "
                "a hook is called, never awaited (hand the event to a queue or task instead)"
            )
    return hooks
