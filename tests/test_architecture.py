"""The package's import structure: no circles, and layers import only downward.

Every ``import`` of the package is read from the source (module level, inside functions and
under ``TYPE_CHECKING`` alike, and the ``module:attribute`` entries of a table that imports
them on first use), so a circle cannot hide behind a lazy import.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from support.package import PACKAGE, package_modules

LAYERS = {
    "core": 0,
    "stores": 1,
    "governance": 2,
    "runtime": 3,
    "tools": 4,
    "surfaces": 5,
    "bridges": 6,
    "demo": 7,
}
"""A module may import its own layer and the layers below it (a lower number)."""


MODULES = package_modules()


def _target(name: str) -> str | None:
    """The module of ours that ``name`` designates (a module, or the package defining it)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
        elif _is_import_module(node):
            names = [node.args[0].value]  # type: ignore[attr-defined]
        elif _is_table_entry(node):
            names = [node.value.partition(":")[0]]  # type: ignore[attr-defined]
        else:
            continue
        for name in names:
            target = _target(name)
            if target is not None and target != module:
                found.add(target)
    return found


def _is_table_entry(node: ast.AST) -> bool:
    """A ``"toolcards.x.y:attribute"`` string: a table that imports its entries on first use
    (the command line's commands) imports them all the same."""
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("toolcards.")
        and node.value.count(":") == 1
        and node.value.partition(":")[2].isidentifier()
    )


def _is_import_module(node: ast.AST) -> bool:
    """``importlib.import_module("toolcards...")`` with a literal name."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's imports of the package (read once, when a test asks: the tests of this
    module share one worker, so collecting them costs no parse)."""
    return {module: _imports(module, path) for module, path in MODULES.items()}


pytestmark = pytest.mark.xdist_group("import-graph")


def _layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph().get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph()):
        if module not in index:
            visit(module)
    return found


def test_the_walk_sees_the_whole_package() -> None:
    assert len(MODULES) > 100
    assert "toolcards.runtime.team" in graph()["toolcards.runtime"]


def test_no_import_circles() -> None:
    assert _cycles() == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) is not None))
def test_layers_import_only_downward(module: str) -> None:
    own = _layer(module)
    assert own is not None
    upward = sorted(t for t in graph()[module] if (_layer(t) or 0) > own)
    assert upward == [], f"{module} imports a higher layer"


def test_card_folders_never_import_each_other() -> None:
    for module, targets in graph().items():
        parts = module.split(".")
        if len(parts) < 3 or parts[1] != "tools":
            continue
        own = parts[2]
        for target in targets:
            other = target.split(".")
            if len(other) > 2 and other[1] == "tools":
                assert other[2] in (own, "_common"), f"{module} imports {target}"


def test_the_docs_draw_the_layers_this_test_enforces() -> None:
    """docs/index.md's picture lists the layers top (highest) to bottom, as LAYERS orders them."""
    text = (PACKAGE.parents[1] / "docs" / "index.md").read_text(encoding="utf-8")
    block = text.split("## The layers", 1)[1].split("```")[1]
    drawn = [line.split("/")[0] for line in block.splitlines() if line[:1].isalpha()]
    assert drawn == sorted(LAYERS, key=LAYERS.__getitem__, reverse=True)


WINGS = ("agent", "cli", "dashboard", "mcp_server")
"""The surfaces' wings: each serves people or clients one way and never imports another."""
SHARED_FOLDERS = ("config", "http")
"""Surfaces folders that several wings share (like the shared modules at the root, they
import no wing and no composition module)."""
ROOT_MODULES = 12
"""At most this many modules at the surfaces root: what several wings share and the composers
(a module one wing uses goes into that wing, a family of shared modules into a folder)."""
COMPOSITION = {"toolcards.surfaces", "toolcards.surfaces.api", "toolcards.surfaces.combined",
               "toolcards.surfaces.commands", "toolcards.surfaces.main",
               "toolcards.surfaces.serving"}  # fmt: skip
"""Surfaces modules that put wings together (imported by no wing and no shared module)."""


def _wing(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "surfaces" and parts[2] in WINGS:
        return parts[2]
    return None


def _shared_folder(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "surfaces" and parts[2] in SHARED_FOLDERS:
        return parts[2]
    return None


def _surface_modules() -> list[str]:
    return sorted(m for m in MODULES if m.startswith("toolcards.surfaces"))


@pytest.mark.parametrize("module", _surface_modules())
def test_no_wing_imports_another_wing(module: str) -> None:
    own = _wing(module)
    if own is None:
        return
    others = sorted(t for t in graph()[module] if _wing(t) not in (None, own))
    assert others == [], f"{module} (wing {own}) imports another wing"


@pytest.mark.parametrize("module", _surface_modules())
def test_shared_surface_modules_import_no_wing_and_no_composition(module: str) -> None:
    if _wing(module) is not None or module in COMPOSITION:
        return
    above = sorted(t for t in graph()[module] if _wing(t) is not None or t in COMPOSITION)
    assert above == [], f"{module} is shared by the wings but imports {above}"


@pytest.mark.parametrize("module", _surface_modules())
def test_shared_folders_import_no_surfaces_module_outside_the_shared_folders(module: str) -> None:
    """A shared folder sits below the root's shared modules (which use it), so neither forms
    a circle with it."""
    if _shared_folder(module) is None:
        return
    outside = sorted(
        t
        for t in graph()[module]
        if t.startswith("toolcards.surfaces") and _shared_folder(t) is None
    )
    assert outside == [], f"{module} is in a shared folder but imports {outside}"


@pytest.mark.parametrize("module", _surface_modules())
def test_wings_import_no_composition_module(module: str) -> None:
    if _wing(module) is None:
        return
    found = sorted(t for t in graph()[module] if t in COMPOSITION)
    assert found == [], f"{module} imports {found}, which composes the wings"


def test_the_wings_are_folders() -> None:
    for wing in WINGS:
        assert (PACKAGE / "surfaces" / wing / "__init__.py").exists()
    flat = [p.name for p in (PACKAGE / "surfaces").glob("*.py")]
    assert not [n for n in flat if n.startswith(("mcp_", "cli_", "http_", "config_"))], flat


def test_every_surfaces_folder_is_a_wing_or_shared() -> None:
    folders = {p.parent.name for p in (PACKAGE / "surfaces").glob("*/__init__.py")}
    assert folders == {*WINGS, *SHARED_FOLDERS}


def test_the_surfaces_root_holds_only_what_wings_share_and_the_composers() -> None:
    flat = sorted(p.name for p in (PACKAGE / "surfaces").glob("*.py"))
    assert len(flat) <= ROOT_MODULES, flat


# -- function-local imports -------------------------------------------------------------------

OWN_LOCAL_IMPORTS_PER_1000_LINES = 3
"""At most this many function-local imports of the package's own modules per 1,000 lines of
the package: a module imports at the top, and the few lazy boundaries (an entry point that
loads a command's module when it is dispatched, an opener that picks a backend of an extra)
are counted here as circles are counted above."""
LAZY = "# lazy:"
"""Every function-local import says why it is not at the top (an extra, or a measured cost)."""


def _local_imports(tree: ast.Module) -> list[tuple[ast.AST, int]]:
    """The imports a function body makes (nested blocks and functions included): import
    statements, and ``importlib.import_module`` of a literal name; each with the first line
    of the run of import statements it belongs to (where its ``# lazy:`` reason may stand)."""
    found: list[tuple[ast.AST, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        inside = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for _, value in ast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            run_start, previous_end = 0, -1
            for child in children:
                if not isinstance(child, ast.AST):
                    continue
                if isinstance(child, ast.Import | ast.ImportFrom):
                    if child.lineno != previous_end + 1:
                        run_start = child.lineno
                    previous_end = child.end_lineno or child.lineno
                    if inside:
                        found.append((child, run_start))
                    continue
                previous_end = -1
                if inside and _is_import_module(child):
                    found.append((child, getattr(child, "lineno", 0)))
                visit(child, inside)

    visit(tree, False)
    return found


def _is_own(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "toolcards"
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "toolcards" for alias in node.names)
    return str(node.args[0].value).split(".")[0] == "toolcards"  # type: ignore[attr-defined]


def _says_why(node: ast.AST, run_start: int, lines: list[str]) -> bool:
    """A ``# lazy:`` comment on the import's own lines, or in the comment lines right above
    it or above the run of import statements it belongs to."""
    first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    if any(LAZY in line for line in lines[first - 1 : last]):
        return True
    at = run_start - 1
    while at >= 1 and lines[at - 1].strip().startswith("#"):
        if lines[at - 1].strip().startswith(LAZY):
            return True
        at -= 1
    return False


def local_imports(path: Path) -> tuple[list[str], list[str]]:
    """``(own, unexplained)``: the function-local imports of our own modules in ``path``,
    and every function-local import without a ``# lazy:`` reason, as ``file:line`` entries."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    name = path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else path.name
    own, unexplained = [], []
    for node, run_start in _local_imports(ast.parse(source, str(path))):
        where = f"{name}:{node.lineno}"  # type: ignore[attr-defined]
        if _is_own(node):
            own.append(where)
        if not _says_why(node, run_start, lines):
            unexplained.append(where)
    return own, unexplained


@functools.cache
def _all_local_imports() -> tuple[list[str], list[str], int]:
    own: list[str] = []
    unexplained: list[str] = []
    total_lines = 0
    for path in sorted(MODULES.values()):
        total_lines += path.read_text(encoding="utf-8").count("\n")
        found, missing = local_imports(path)
        own += found
        unexplained += missing
    return own, unexplained, total_lines


def test_own_modules_are_imported_at_the_top() -> None:
    own, _, total_lines = _all_local_imports()
    budget = OWN_LOCAL_IMPORTS_PER_1000_LINES * total_lines // 1000
    assert len(own) <= budget, f"{len(own)} function-local imports of our modules: {own}"


def test_every_function_local_import_says_why() -> None:
    _, unexplained, _ = _all_local_imports()
    assert unexplained == []


def test_the_local_import_rule_finds_what_it_counts(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json\n"
        "from toolcards.core import errors\n"
        "def f():\n"
        "    from toolcards.core.errors import ToolcardsError\n"
        "    import numpy  # lazy: extra vector\n"
        "    if True:\n"
        "        from . import sibling\n"
        "    # lazy: extra postgres\n"
        "    from toolcards.stores.postgres import team\n"
        "    from toolcards.stores.postgres import governance\n"
        "    return importlib.import_module('toolcards.surfaces.cli.audit')\n"
        "class C:\n"
        "    def m(self):\n"
        "        import yaml\n",
        encoding="utf-8",
    )
    own, unexplained = local_imports(probe)
    assert own == ["probe.py:4", "probe.py:7", "probe.py:9", "probe.py:10", "probe.py:11"]
    assert unexplained == ["probe.py:4", "probe.py:7", "probe.py:11", "probe.py:14"]
