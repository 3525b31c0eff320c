"""Every script in examples/ runs to completion."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.py"))


@functools.cache
def run(path: Path) -> subprocess.CompletedProcess[str]:
    """Run the example once (a second test of the same example reads the same run), as a
    user runs it: without the variables pytest sets for the suite (an example that runs
    pytest itself would take them for its own)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, check=False,
        env=env,
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    """The example exits 0 and prints something."""
    result = run(path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


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
