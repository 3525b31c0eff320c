"""The layout the package keeps: imports point one way, the rules and the options are
stated once and every document that repeats them agrees, public names say where they live."""

from __future__ import annotations

import ast
import inspect
import pickle
import re
from pathlib import Path

import pytest

import retry_transport as rt
from retry_transport._call import options as _options
from retry_transport._call.core import __doc__ as CORE_DOC
from retry_transport._io import drivers as _drivers
from retry_transport._policy import rules as _rules

PACKAGE = Path(rt.__file__).parent
# The documentation page that states the rules and the options in full (the README links to it).
POLICY_PAGE = (PACKAGE.parent.parent / "docs" / "policy.md").read_text(encoding="utf-8")
REASONS = [reason.value for reason in _rules.ORDER]


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name relative to it (``_core``, ``sim._dist``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        name = ".".join(part for part in parts if part != "__init__") or "__init__"
        found[name] = path
    return found


def _imports(name: str, path: Path) -> set[str]:
    """The package modules ``name`` imports, anywhere in it (``TYPE_CHECKING`` blocks and
    function bodies included)."""
    modules = _modules()
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    if name == "__init__":
        package = []
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                stem = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "retry_transport":
                stem = node.module.split(".")[1:]
            else:
                continue
            names = [".".join([*stem, alias.name]) for alias in node.names]
            if node.module is None:  # from . import testing: the modules named
                targets = names
            else:
                targets = [".".join(stem), *names]
        elif isinstance(node, ast.Import):
            targets = [".".join(alias.name.split(".")[1:]) for alias in node.names
                       if alias.name.split(".")[0] == "retry_transport"]
        for target in targets:
            target = target or "__init__"
            if target in modules and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) for name, path in _modules().items()}


def test_no_import_cycle() -> None:
    """No module reaches itself through imports, counting ``TYPE_CHECKING`` ones."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(name):], name]))
        if name in done:
            return
        for target in sorted(GRAPH[name]):
            visit(target, [*path, name])
        done.add(name)

    for name in GRAPH:
        visit(name, [])


#: The package's folders, lowest first. A module in one imports only its own folder's modules
#: and those of the folders below it; the public modules (the top level) import from any.
TIERS = ("_base", "_wire", "_stores", "_policy", "_guards", "_call", "_io")


def test_every_private_module_is_in_a_tier() -> None:
    """A private module lives in one of the tier folders; the top level holds public ones."""
    for name in GRAPH:
        top = name.split(".")[0]
        assert top in TIERS or not top.startswith("_") or top == "__init__", name


@pytest.mark.parametrize("folder", TIERS)
def test_a_folders_docstring_names_each_of_its_modules(folder: str) -> None:
    """A reader opening a tier's folder finds each module named, as ``module``, in the
    folder's docstring: a module added without a word there fails here."""
    doc = (PACKAGE / folder / "__init__.py").read_text(encoding="utf-8")
    modules = sorted(path.stem for path in (PACKAGE / folder).glob("*.py")
                     if path.stem != "__init__")
    assert modules
    missing = [name for name in modules if f"``{name}``" not in doc]
    assert not missing, f"{folder}/__init__.py does not name {missing}"


@pytest.mark.parametrize("folder", TIERS)
def test_a_folder_imports_only_folders_below_it(folder: str) -> None:
    """No import points up a tier, nor to a public module (``TYPE_CHECKING`` ones included)."""
    below = set(TIERS[: TIERS.index(folder) + 1])
    modules = [name for name in GRAPH if name.split(".")[0] == folder]
    assert modules
    for name in modules:
        upward = {target for target in GRAPH[name] if target.split(".")[0] not in below}
        assert not upward, f"{name} imports {sorted(upward)}"


@pytest.mark.parametrize("module", ["_call.core", "_call.quick", "_call.hedged_call"])
def test_a_request_knows_the_guards_through_the_seam_alone(module: str) -> None:
    """The core, the quick path and the hedged call name no guard component."""
    guards = {target for target in GRAPH[module] if target.split(".")[0] == "_guards"}
    assert guards <= {"_guards", "_guards.seam"}, guards


def test_the_simulator_uses_the_public_api_only() -> None:
    public = {"__init__", "testing", "httpx2"}
    for name, targets in GRAPH.items():
        if name.startswith("sim"):
            assert {t for t in targets if not t.startswith("sim")} <= public, (name, targets)


# -- the rules, stated once ------------------------------------------------------------------


def _order_in(text: str) -> list[str]:
    """The stop reasons in the order ``text`` first names them."""
    positions = {}
    for reason in REASONS:
        match = re.search(rf"`{reason}`|\b{reason}\b", text)
        assert match is not None, f"{reason} is not named"
        positions[reason] = match.start()
    return sorted(positions, key=positions.__getitem__)


def test_the_enum_lists_the_reasons_in_the_rule_order() -> None:
    assert [reason.value for reason in rt.StopReason] == REASONS


@pytest.mark.parametrize("where", ["rules", "core", "StopReason", "docs"])
def test_every_statement_of_the_rules_agrees_with_the_data(where: str) -> None:
    """The rules module's docstring, the core's, ``StopReason``'s and the rules table of
    docs/policy.md name the stop reasons in :data:`_rules.ORDER`."""
    if where == "docs":
        section = POLICY_PAGE.split("## The rules", 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
        text = "\n".join(row.rsplit("|", 2)[1] for row in rows)  # the stop reason column
    else:
        text = {"rules": _rules.__doc__, "core": CORE_DOC,
                "StopReason": rt.StopReason.__doc__}[where] or ""
    assert _order_in(text) == REASONS


def test_rule_groups_never_go_back() -> None:
    groups = [rule.group for rule in _rules.RULES]
    assert groups == sorted(groups)


# -- the options, declared once ------------------------------------------------------------


@pytest.mark.parametrize("driver", [_drivers.SyncRetry, _drivers.AsyncRetry])
def test_the_signatures_are_the_declarations(driver: type) -> None:
    """Each keyword of the drivers' own is declared in ``_options.Settings``, in order, with
    the same default."""
    parameters = list(inspect.signature(driver.__init__).parameters.values())[1:]
    assert parameters[0].name == "transport" and parameters[-1].name == "kwargs"
    own = parameters[1:-1]
    assert [p.name for p in own] == [spec.name for spec in _options.OPTIONS]
    for parameter, spec in zip(own, _options.OPTIONS, strict=True):
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert parameter.default is spec.default, parameter.name


def test_the_docstring_documents_each_option() -> None:
    doc = (_drivers.SyncRetry.__init__.__doc__ or "").split("Args:", 1)[1]
    doc = doc.split("Raises:", 1)[0]
    named = re.findall(r"^ {12}(\w+): ", doc, flags=re.MULTILINE)
    assert named == ["transport", *[spec.name for spec in _options.OPTIONS]]


def test_the_docs_option_table_is_the_declarations() -> None:
    """The table of the transports' own keywords in docs/policy.md: one row per declaration,
    in order, whose meaning is the declaration's doc."""
    section = POLICY_PAGE.split("The transports take these besides", 1)[1].split("\n\n", 2)[1]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    rows = [row for row in rows if not row[0].startswith("| `verify`")]
    names = [row[0].strip("| `") for row in rows]
    assert names == ["transport", *[spec.name for spec in _options.OPTIONS]]
    for row, spec in zip(rows[1:], _options.OPTIONS, strict=True):
        assert row[2].startswith(spec.metadata["doc"]), spec.name


def test_invalid_options_name_themselves() -> None:
    """A value of the wrong kind is a TypeError, a wrong value of the right kind (a string
    that is no header name) a ValueError; each names the option."""
    for name, value in [("cooldown", 1), ("auto_idempotency_key", "yes"), ("breaker", 1),
                        ("throttle", 1), ("hedging", 1), ("resume", 1), ("store", 1),
                        ("budget", 1), ("rng", 1), ("clock", 1), ("wallclock", 1),
                        ("sleep", 1), ("attempt_header", 1), ("deadline_header", 1),
                        ("policy", {}), ("hooks", 1), ("contact", 1)]:
        with pytest.raises(TypeError, match=name):
            rt.RetryTransport(**{name: value})
    for name, value in [("attempt_header", "a b"), ("deadline_header", "a b"),
                        ("contact", "not an address")]:
        with pytest.raises(ValueError, match=name):
            rt.RetryTransport(**{name: value})


# -- public names -------------------------------------------------------------------------------


def test_public_names_say_where_they_live() -> None:
    for name in rt.__all__:
        value = getattr(rt, name)
        if isinstance(value, frozenset):
            continue  # a constant has no __module__
        assert value.__module__ == "retry_transport", name


def test_the_httpx2_names_say_where_they_live() -> None:
    rt2 = pytest.importorskip("retry_transport.httpx2")
    for name in ("RetryTransport", "AsyncRetryTransport", "CooldownError", "CircuitOpenError"):
        assert getattr(rt2, name).__module__ == "retry_transport.httpx2", name


@pytest.mark.parametrize("package", ["retry_transport", "retry_transport.httpx2"])
@pytest.mark.parametrize("error", ["CooldownError", "CircuitOpenError"])
def test_the_errors_pickle_by_their_public_names(package: str, error: str) -> None:
    module = pytest.importorskip(package)
    library = pytest.importorskip("httpx" if package == "retry_transport" else "httpx2")
    request = library.Request("GET", "https://api.example.com/")
    exc = getattr(module, error)("quiet", origin="https://api.example.com:443",
                                 remaining=2.5, request=request)
    exc.extra = "kept"
    data = pickle.dumps(exc)
    assert b"_errors" not in data and b"_rebuild" in data
    back = pickle.loads(data)
    assert type(back) is type(exc)
    assert (str(back), back.origin, back.remaining, back.extra) == (
        "quiet", "https://api.example.com:443", 2.5, "kept")
    assert back.request.url == request.url


def test_httpx_private_attributes_are_named_in_one_module() -> None:
    """Only ``_wire/http.py`` names the private attributes of httpx's objects it reads."""
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        found = [word for word in ("_uri_reference", '"_list"', "._list") if word in text]
        assert name == "_wire.http" or not found, (name, found)
    text = (PACKAGE / "_wire" / "http.py").read_text(encoding="utf-8")
    assert 'URL_PARTS: Final = "_uri_reference"' in text
    assert 'HEADER_LINES: Final = "_list"' in text


def test_each_stop_reason_constant_is_defined_once() -> None:
    """The module constants of the stop reasons live beside ``StopReason`` alone."""
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        found = re.findall(r"^\w+: Final = StopReason\.", text, flags=re.MULTILINE)
        assert name == "_base.models" or not found, (name, found)
