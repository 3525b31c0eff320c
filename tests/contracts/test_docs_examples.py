"""Every ```python block of README.md and docs/**/*.md runs, each in a fresh namespace.

A small collector rather than a plugin (pytest-examples, sybil, pytest-markdown-docs): it needs
no new dependency, runs under the existing pytest with its settings (warnings are errors), and
the fixtures the suite already has (pytest-httpx's ``httpx_mock``, httpx2-pytest's
``httpx2_mock``) provide the local fake. A block runs as a module (top-level ``await`` allowed,
run on asyncio) in a temporary working directory, so that a file it saves lands there and
not in the checkout; a block that raises fails its test, named ``path:line``, and so does one
that writes into the checkout whatever the path it writes by.

The HTML comment on the line before a block says how it runs:

- none: as it is, with both fakes installed and answering nothing, so a block that reaches for
  the network fails here instead of calling out;
- ``<!-- example: mock -->``: every httpx and httpx2 request, of any client or transport, is
  answered by the fake with ``200`` and a JSON body an SDK list call parses; the SDKs' API keys
  are set to dummies;
- ``<!-- example: skip-network -->``: not run, for a block that truly needs an outside
  service; the page says why.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.checkout import changes, written

ROOT = Path(__file__).parents[2]
MARKER = re.compile(r"<!--\s*example:\s*([\w-]+)\s*-->")
MODES = {"run", "mock", "skip-network"}
# A body the fake answers with: a list call of either SDK parses it (an empty page).
FAKE_JSON = {"object": "list", "data": [], "has_more": False, "first_id": None, "last_id": None}


@dataclass(frozen=True)
class Block:
    path: str
    line: int
    mode: str
    code: str


def _blocks(path: Path, language: str = "python") -> list[Block]:
    """The fenced blocks of one Markdown file in ``language`` (```python by default), with
    the marker before each. tests/contracts/test_docs_figures.py reads the ```text ones."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```" + language:
            start = i
            previous = next((line for line in reversed(lines[:i]) if line.strip()), "")
            match = MARKER.search(previous)
            mode = match.group(1) if match else "run"
            i += 1
            while lines[i].strip() != "```":
                i += 1
            code = "\n".join(lines[start + 1 : i]) + "\n"
            found.append(Block(str(path.relative_to(ROOT)), start + 1, mode, code))
        i += 1
    return found


DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [block for path in DOCUMENTS for block in _blocks(path)]


def test_the_collector_finds_the_blocks() -> None:
    """The README and the docs hold blocks to run, every marker is one the collector knows,
    and skipped blocks stay rare."""
    assert any(block.path == "README.md" for block in BLOCKS)
    assert any(block.path.startswith("docs/") for block in BLOCKS)
    assert {block.mode for block in BLOCKS} <= MODES
    assert sum(block.mode == "skip-network" for block in BLOCKS) <= 2


def _run(block: Block) -> None:
    code = compile(
        block.code, f"{block.path}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    namespace: dict[str, object] = {"__name__": "docs_example"}
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))  # top-level await: run it on asyncio
    else:
        exec(code, namespace)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.path}:{b.line}")
def test_the_block_runs(
    block: Block, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    if block.mode == "skip-network":
        pytest.skip("needs an outside service (the page says which)")
    mocks = [request.getfixturevalue("httpx_mock")]
    try:
        mocks.append(request.getfixturevalue("httpx2_mock"))
    except pytest.FixtureLookupError:  # pragma: no cover - httpx2 needs Python 3.11+
        if "httpx2" in block.code:
            pytest.skip("httpx2 is not installed")
    if block.mode == "mock":
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        for mock in mocks:
            mock.add_response(json=FAKE_JSON, is_optional=True, is_reusable=True)
    monkeypatch.chdir(tmp_path)
    before = changes()
    _run(block)
    assert written(before, changes()) == [], "the example wrote into the checkout"
