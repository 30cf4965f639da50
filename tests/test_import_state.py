"""Importing toolcards makes no per-process state: no module reads the environment, the
process id, the clock, random ids, the host name, the home or working directory when it is
imported (at module level or in a class body). A process forked after the import (a server
preloaded by a pre-fork host, the suite's fork server) makes such values itself, on first
use, instead of inheriting its parent's (a member relay's holder token was one: two
processes took each other's members for their own)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.package import PACKAGE

PER_PROCESS = {"os.getenv", "os.getpid", "os.getppid", "os.getuid", "os.urandom",
               "os.getcwd", "uuid.uuid1", "uuid.uuid4", "socket.gethostname", "Path.home",
               "Path.cwd", "time.time", "time.monotonic", "time.perf_counter"}  # fmt: skip
"""Values a process makes for itself, by dotted name (``os.getpid``) or by the bare name a
``from`` import gives (``getpid``); any ``secrets.``, ``random.`` or ``.expanduser`` too."""
BARE = {name.rsplit(".", 1)[1] for name in PER_PROCESS} - {"time", "home", "cwd"}
ALLOWED = {
    ("runtime/ray_system.py", "os.environ.setdefault('RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER', '0')"):
    "a default for Ray itself, the same in every process, set before ray is imported",
}  # fmt: skip


def _import_time_code(tree: ast.Module) -> list[ast.AST]:
    """The statements that run when the module is imported: the module's own and those of
    its class bodies (functions' bodies run later; default values run at import)."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ClassDef):
            pending.extend(node.body)
            found.extend(node.decorator_list)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.extend(node.decorator_list)
            found.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            continue
        elif isinstance(node, ast.If | ast.Try | ast.With):
            found.append(node)  # conditions and bodies alike run at import
        else:
            found.append(node)
    return found


def _run_now(node: ast.AST) -> list[ast.AST]:
    """``node`` and what it holds, but not the bodies of lambdas and functions (called later)."""
    found, pending = [], [node]
    while pending:
        part = pending.pop()
        if isinstance(part, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        found.append(part)
        pending.extend(ast.iter_child_nodes(part))
    return found


def _per_process(part: ast.AST) -> bool:
    """A call that makes a per-process value (a reference, as a ``default_factory``, runs
    later), or a read of the environment."""
    if isinstance(part, ast.Attribute):
        return ast.unparse(part) == "os.environ"
    if not isinstance(part, ast.Call):
        return False
    called = ast.unparse(part.func)
    return (
        called in PER_PROCESS
        or called in BARE
        or called.startswith(("secrets.", "random."))
        or called.endswith(".expanduser")
    )


def _offences(path: Path, root: Path = PACKAGE) -> list[str]:
    relative = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(), str(path))
    offences = []
    for node in _import_time_code(tree):
        if (relative, ast.unparse(node)) in ALLOWED:
            continue
        for part in _run_now(node):
            if _per_process(part):
                offences.append(f"{relative}:{getattr(part, 'lineno', '?')}: {ast.unparse(part)}")
    return offences


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.relative_to(PACKAGE).as_posix()
)
def test_importing_the_module_reads_no_per_process_value(path: Path) -> None:
    assert _offences(path) == []


def test_the_rule_finds_values_made_at_import_and_leaves_functions_alone(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        'import os, uuid\nTOKEN = f"{os.getpid()}:{uuid.uuid4().hex}"\n'
        "class Card:\n    seen = os.environ.get('X')\n"
        "def later():\n    return os.getpid()\n"
        "LATER = lambda: os.getpid()\n"
    )
    found = _offences(probe, tmp_path)
    assert any(":2:" in line and "os.getpid()" in line for line in found)
    assert any(":2:" in line and "uuid.uuid4" in line for line in found)
    assert any(":4:" in line and "os.environ" in line for line in found)
    assert not any(":6:" in line or ":7:" in line for line in found), found
