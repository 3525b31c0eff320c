"""The sync driver's loop is generated from the async one: the committed twin is current, and
the check that CI runs (``python scripts/unasync.py --check``) notices a stale one."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "unasync.py"

Check = Callable[..., str]


@pytest.fixture(scope="module")
def unasync() -> dict[str, Any]:
    """The script's globals, run as a module (not as ``__main__``): nothing is written."""
    return runpy.run_path(str(SCRIPT), run_name="unasync")


def test_the_sync_loop_is_current(unasync: dict[str, Any]) -> None:
    check = cast(Check, unasync["check"])
    assert check() == "", "the sync loop is stale: run `python scripts/unasync.py`"


def test_a_stale_sync_loop_fails_the_check(unasync: dict[str, Any], tmp_path: Path) -> None:
    """A hand edit of the generated file (here: an ``await`` put back) is a difference."""
    check = cast(Check, unasync["check"])
    source, target = cast(Path, unasync["SOURCE"]), cast(Path, unasync["TARGET"])
    text = target.read_text(encoding="utf-8")
    edited = text.replace("self._pause(wait, closes)", "await self._pause(wait, closes)")
    assert edited != text
    stale = tmp_path / target.name
    stale.write_text(edited, encoding="utf-8")
    diff = check(source, stale)
    line = next(line for line in text.splitlines() if "self._pause(wait, closes)" in line)
    indent = line[: len(line) - len(line.lstrip())]
    assert f"-{indent}await self._pause(wait, closes)" in diff
    assert f"+{indent}self._pause(wait, closes)" in diff
    assert check(source, tmp_path / "missing.py") != ""  # no file at all is stale too
