"""Every script in examples/ runs to completion, writes nothing into the checkout, and says
what to install for it."""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.checkout import (
    changes,
    distribution_of,
    extras,
    installs,
    requirements,
    written,
)

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.py"))


@dataclass(frozen=True)
class Run:
    """An example's run: its exit status and output, and the files of the checkout it wrote."""

    returncode: int
    stdout: str
    stderr: str
    wrote: list[str]


@functools.cache
def run(path: Path) -> Run:
    """Run the example once (a second test of the same example reads the same run), as a
    user runs it: in a directory of its own (a temporary one), without the variables pytest
    sets for the suite (an example that runs pytest itself would take them for its own)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    before = changes()
    with tempfile.TemporaryDirectory() as directory:
        result = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, timeout=120,
            check=False, env=env, cwd=directory,
        )
    return Run(result.returncode, result.stdout, result.stderr, written(before, changes()))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    """The example exits 0, prints something, and writes nothing into the checkout."""
    result = run(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert result.wrote == [], "the example wrote into the checkout"


def test_flaky_service_example_shows_retries() -> None:
    """The flaky-service example really retries: three attempts per request."""
    path = next(p for p in EXAMPLES if p.name == "flaky_service.py")
    result = run(path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    results = [line for line in out.splitlines() if line.startswith("200 ")]
    assert len(results) == 3
    assert all("3 attempts" in line for line in results)
    assert "Retrying GET" in out


#: How an example's docstring says what to install: from a checkout (no release is on PyPI
#: yet), the project's extras and any other packages after them.
PIP = re.compile(r"pip install -e '\.\[([\w,-]+)\]'((?: [\w.-]+)*)$", re.MULTILINE)


def imported(path: Path) -> set[str]:
    """The modules an example imports (absolute imports, at any depth of its code)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_says_what_to_install_for_it(path: Path) -> None:
    """An example that needs more than the README's ``pip install -e .`` says so in its
    docstring, in the checkout's form (``pip install -e '.[extra]' package``): what it
    imports comes with that. A module of this package named like one of its extras
    (``retry_transport.otel``) needs that extra."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    named_like = extras()
    base = installs(requirement.name for requirement in requirements())
    needed_extras: set[str] = set()
    needed: set[str] = set()
    for module in imported(path):
        parts = module.split(".")
        if parts[0] == "retry_transport" and len(parts) > 1 and parts[1] in named_like:
            needed_extras.add(parts[1])
        distribution = distribution_of(module)
        if distribution is not None and distribution not in base:
            needed.add(distribution)
    lines = PIP.findall(docstring)
    assert docstring.count("pip install") == len(lines), "not in the checkout's form"
    if not needed and not needed_extras:
        return
    assert lines, f"needs {sorted(needed_extras | needed)}: no 'pip install -e' line says so"
    named = {extra for names, _ in lines for extra in names.split(",")}
    packages = [package for _, rest in lines for package in rest.split()]
    brought = [r.name for extra in sorted(named) for r in requirements(extra)] + packages
    assert needed_extras <= named
    assert needed <= installs(brought), sorted(needed - installs(brought))
