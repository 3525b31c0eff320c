"""The code's sizes stay readable: no private module longer than a reader holds in mind
(600 lines, the simulator's scenarios apart), and no long function without a docstring that
says what it does before the reader has to work it out."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "retry_transport"
MODULE_LINES = 600
FUNCTION_LINES = 80


def _private_modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py")
                  if any(part.startswith("_") and part != "__init__.py"
                         for part in path.relative_to(PACKAGE).parts)
                  and "sim" not in path.relative_to(PACKAGE).parts)


@pytest.mark.parametrize("path", _private_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_module_is_longer_than_600_lines(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MODULE_LINES, f"{path.relative_to(PACKAGE)} has {lines} lines"


def test_every_long_function_has_a_docstring() -> None:
    undocumented = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES and ast.get_docstring(node) is None:
                    undocumented.append(f"{path.relative_to(PACKAGE)}:{node.name} ({length})")
    assert undocumented == []
