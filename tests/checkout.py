"""The checkout the suite runs from: what a test may not change, and what installing it
brings.

The suite writes nothing there (a file a docs example saves goes to a temporary directory).
:func:`changes` tells what the checkout looks like to git, so a test can compare it before and
after running code that might write: a new file, or a file changed, shows up whatever path it
was written by (relative to the working directory or to the checkout's own).
:func:`requirements` reads what ``pip install -e '.[extra]'`` asks for from pyproject.toml,
:func:`installs` what that brings as installed here, :func:`distribution_of` which
installed distribution a module comes from, and :func:`import_errors` what importing a module
would raise with only some of the installed distributions.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).parents[1]

#: git's view of a checkout: each changed or untracked file (ignored ones left out), with its
#: status and the time it was last written.
Snapshot = frozenset[tuple[str, str, int]]


def changes() -> Snapshot | None:
    """The checkout's changed and untracked files (``git status``), each with its status and
    modification time; ``None`` where the suite does not run from a git checkout."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        return None
    listed = subprocess.run(
        [git, "status", "--porcelain=v1", "-z", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode("utf-8", "surrogateescape")
    found = set()
    for entry in filter(None, listed.split("\0")):
        status, path = entry[:2], entry[3:]
        try:
            written = os.stat(ROOT / path).st_mtime_ns
        except FileNotFoundError:  # deleted
            written = 0
        found.add((path, status, written))
    return frozenset(found)


def written(before: Snapshot | None, after: Snapshot | None) -> list[str]:
    """The files of the checkout written between two :func:`changes` (none outside git)."""
    if before is None or after is None:
        return []
    return sorted({path for path, _, _ in after - before})


# -- what installing the checkout brings ----------------------------------------------------


def _name(name: str) -> str:
    """A distribution's name as the packaging standards compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _project() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(ROOT / "pyproject.toml", "rb") as file:
        project: dict[str, Any] = tomllib.load(file)["project"]
    return project


def extras() -> set[str]:
    """The names of the project's extras (``pip install -e '.[name]'``)."""
    return set(_project()["optional-dependencies"])


def requirements(extra: str | None = None) -> list[Requirement]:
    """What ``pip install -e .`` (``extra=None``) or ``pip install -e '.[extra]'`` asks for on
    this interpreter, from the checkout's pyproject.toml: an extra that names another of the
    project's extras (``retry-transport[sim]``) brings that one's requirements too."""
    project = _project()
    own = _name(project["name"])
    listed = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    found: list[Requirement] = []
    for text in listed:
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        if _name(requirement.name) == own:
            for other in sorted(requirement.extras):
                found += requirements(other)
        else:
            found.append(requirement)
    return found


def installs(names: Iterable[str]) -> set[str]:
    """The distributions ``names`` bring, themselves included, as installed here (each
    one's own requirements, for the interpreter and no extra of theirs)."""
    seen: set[str] = set()
    pending = [_name(name) for name in names]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            required = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in required:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(_name(requirement.name))
    return seen


def distribution_of(module: str) -> str | None:
    """The installed distribution that provides ``module`` (a dotted name), or ``None`` for
    the standard library's and this project's own modules. A top-level name several
    distributions share (``opentelemetry``) is settled by the file the module is in."""
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names or top == "retry_transport":
        return None
    candidates = metadata.packages_distributions().get(top, [])
    if not candidates:  # not from an installed distribution: nothing an extra could bring
        return None
    if len(set(candidates)) == 1:
        return _name(candidates[0])
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:  # a namespace package: its modules tell
        return None
    origin = Path(spec.origin).resolve()
    for candidate in candidates:
        files = metadata.distribution(candidate).files or []
        if any(Path(str(f.locate())).resolve() == origin for f in files):
            return _name(candidate)
    raise LookupError(f"no single installed distribution provides {module!r}: {candidates}")


#: Run by :func:`import_errors` in a fresh interpreter: the installed distributions outside
#: ``argv[1]`` (a JSON list) are hidden from the import system, then each module named
#: after it is imported; prints the errors (module -> message) as JSON.
_ONLY_THESE = r"""
import importlib, importlib.abc, importlib.metadata as metadata, json, re, sys

allowed = set(json.loads(sys.argv[1]))
owners = {}  # a top-level module, or a module one level under it -> its distributions
for dist in metadata.distributions():
    name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
    for file in dist.files or ():
        parts = [part.removesuffix(".py") for part in file.parts[:2]]
        if not parts[0].isidentifier():  # .dist-info, ../../bin, *.pth
            continue
        owners.setdefault(parts[0], set()).add(name)
        if len(parts) > 1 and parts[1].isidentifier():
            owners.setdefault(".".join(parts), set()).add(name)


class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        parts = fullname.split(".")
        if parts[0] != "retry_transport":
            for key in (parts[0], ".".join(parts[:2])):
                if owners.get(key) and not owners[key] & allowed:
                    raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


sys.meta_path.insert(0, Hidden())
errors = {}
for module in sys.argv[2:]:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        errors[module] = f"{type(exc).__name__}: {exc}"
print(json.dumps(errors))
"""


def import_errors(modules: Iterable[str], distributions: Iterable[str]) -> dict[str, str]:
    """What importing ``modules`` raises where only ``distributions`` (and the standard
    library, and this project) are installed: each installed distribution outside them is
    hidden from a fresh interpreter's import system, as if it were not there. Module ->
    the error; empty when each imports. An optional import a library tries and does without
    (``click`` for httpx2's command line) is no error."""
    shown = json.dumps(sorted(_name(name) for name in distributions))
    printed = subprocess.run(
        [sys.executable, "-c", _ONLY_THESE, shown, *modules], capture_output=True, text=True,
        check=True,
    ).stdout
    errors: dict[str, str] = json.loads(printed)
    return errors
