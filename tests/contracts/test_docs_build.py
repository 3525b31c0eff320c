"""The documentation builds from a checkout as the README says: its command is the one CI
runs (warnings are errors), and the ``docs`` extra alone brings every module the API page's
autodoc imports, so that ``pip install -e '.[docs]'`` then that command gives a whole API page
and no traceback. (The build itself runs in CI, ``.ci/run``, after the ``dev`` extra too.)"""

from __future__ import annotations

import re
import sys

import pytest

from tests.checkout import ROOT, import_errors, installs, requirements

#: The directives by which a page has autodoc import a module (or a module's member).
DIRECTIVE = re.compile(
    r"^\.\. (automodule|module|autoclass|autoexception|autofunction|autodata)::\s+([\w.]+)",
    re.MULTILINE,
)

def documented() -> set[str]:
    """The modules the docs pages have autodoc import."""
    modules = set()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for kind, name in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            modules.add(name if kind in ("automodule", "module") else name.rpartition(".")[0])
    return modules


def test_the_api_page_documents_every_public_module() -> None:
    assert {
        "retry_transport", "retry_transport.httpx2", "retry_transport.asgi",
        "retry_transport.wsgi", "retry_transport.testing", "retry_transport.otel",
    } <= documented()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the docs build needs httpx2: 3.11+")
def test_what_autodoc_imports_comes_with_the_docs_extra() -> None:
    """Each documented module imports where only what ``pip install -e '.[docs]'`` brings is
    installed (retry_transport.httpx2 and retry_transport.otel raised ImportError with the
    extra alone, and their sections of the API page were empty)."""
    brought = installs(r.name for r in requirements() + requirements("docs"))
    assert import_errors(sorted(documented()), brought) == {}


def test_the_readmes_docs_command_is_the_one_ci_runs() -> None:
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.startswith("python -m sphinx")]
    assert len(ci) == 1 and " -W " in ci[0]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"`pip install -e '.[docs]' && {ci[0]}`" in readme
