"""Every script in examples/ runs to completion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    """The example exits 0 and prints something."""
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def test_flaky_service_example_shows_retries() -> None:
    """The flaky-service example really retries: three attempts per request."""
    path = next(p for p in EXAMPLES if p.name == "flaky_service.py")
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    results = [line for line in out.splitlines() if line.startswith("200 ")]
    assert len(results) == 3
    assert all("3 attempts" in line for line in results)
    assert "Retrying GET" in out
