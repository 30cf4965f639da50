"""One way in to the file system: outside the workspace package, no module that deals with
workspace roots opens, reads, writes or walks files itself.

The rule, read from the source (AST, like ``test_architecture.py``):

1. A *file call* is a call of builtin ``open``, ``io.open``, ``os.open``, ``os.fdopen``,
   ``codecs.open``, ``os.scandir``, ``os.listdir``, ``os.walk``, ``os.fwalk``, ``glob.glob`` or
   ``glob.iglob``, or of a method named ``read_bytes``, ``read_text``, ``write_bytes``,
   ``write_text``, ``rglob``, ``glob``, ``iterdir`` or ``walk`` (``Path``'s), or ``open`` on any
   receiver but those in :data:`NOT_FILES`.
2. Outside ``toolcards.tools.workspace``, only the modules of :data:`FILE_IO` make file calls;
   each is listed with what it opens. A new file call elsewhere fails this test.
3. No module of :data:`FILE_IO` deals with workspace roots: it imports neither the workspace
   package nor ``toolcards.tools._common.workspace_dir``, and calls no ``.workspaces()``.
   Such a module reads workspace files through ``toolcards.tools.workspace.access``.
"""

from __future__ import annotations

import ast

import pytest

from support.package import package_modules

CONTAINMENT = "toolcards.tools.workspace"
WORKSPACE_ROOTS = ("toolcards.tools.workspace", "toolcards.tools._common.workspace_dir")

MODULE_CALLS = {
    ("io", "open"), ("os", "open"), ("os", "fdopen"), ("codecs", "open"), ("os", "scandir"),
    ("os", "listdir"), ("os", "walk"), ("os", "fwalk"), ("glob", "glob"), ("glob", "iglob"),
}  # fmt: skip
PATH_METHODS = {"read_bytes", "read_text", "write_bytes", "write_text", "rglob", "glob",
                "iterdir", "walk"}  # fmt: skip
NOT_FILES = {
    "webbrowser": "opens a URL in the browser (OAuth sign-in)",
    "self": "a class's own open() (a database connection, a dashboard session)",
    "self._db": "the PostgreSQL connection factory",
    "self._running": "the executor's book of calls in flight",
    "self.book": "the executor's book of calls in flight (a call enters it)",
    "self.sessions": "the dashboard's login sessions",
    "SurfaceRuntime": "the surface runtime's constructor from a config file",
}
"""Receivers whose ``open`` method is no file: ``<receiver>.open(...)`` is not a file call."""

FILE_IO = {
    "toolcards.demo.next_steps": "writes the demo's policy and config files to its state dir",
    "toolcards.demo.state": "the demo's state marker and lock files in its state dir",
    "toolcards.demo.team_job": "reads the demo store's lock file in its state dir",
    "toolcards.governance.audit.spill": "the audit rows kept in its own spill directory",
    "toolcards.governance.policy.table": "reads a policy decision table (YAML)",
    "toolcards.stores.sqlite.connect": "creates a governance file 0600 for SQLite",
    "toolcards.stores.grants": "maps the grant stamp beside an approvals SQLite file",
    "toolcards.runtime.ray_address": "reads the Ray token file Ray itself would send from",
    "toolcards.stores.sqlite.file": "holds the SQLite store's lock file open",
    "toolcards.surfaces.main": "the CLI's startup cache file",
    "toolcards.surfaces.cli.listing": (
        "the CLI's listing cache entry, and the config and policy files it was made from"
    ),
    "toolcards.surfaces.cli.run": "points stdout at /dev/null when its reader went away",
    "toolcards.surfaces.cli.init": "writes the toolcards.yaml and policy.yaml of `toolcards init`",
    "toolcards.core.host_files": "reads the config and policy files the host names (bounded)",
    "toolcards.surfaces.cli.control": "the control socket's record file and its config",
    "toolcards.surfaces.cli.endpoint": "writes the control socket's record file",
    "toolcards.tools.exec.backends.etc_view": "stages the sandbox's /etc view from host /etc",
    "toolcards.tools.exec.cgroups": "cgroup and /proc files of the exec sandbox",
    "toolcards.tools.exec.limits": "the cgroup procs file a sandboxed child joins",
    "toolcards.tools.exec.reaper": "/proc task children of this process",
    "toolcards.tools.exec.watch": (
        "sums sizes in the exec workspace: each directory opened O_NOFOLLOW from its "
        "parent's descriptor and listed through it, entries by lstat (never opens a file); "
        "a card folder cannot import the workspace package"
    ),
    "toolcards.tools.knowledge_graph.views": "the graph panel's template and script (package data)",
    "toolcards.tools.planning.views": "the plan panel's template (package data)",
    "toolcards.tools.vector_store.embeddings": "the embedding model's vocabulary file",
    "toolcards.tools.vector_store.hnsw_index": "the vector index's own label files",
}
"""Modules outside the workspace package allowed file calls, with what they open."""


MODULES = package_modules()


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def file_calls(source: str) -> list[tuple[int, str]]:
    """(line, call) of every file call in ``source`` (rule 1)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append((node.lineno, "open()"))
        elif isinstance(func, ast.Attribute):
            receiver = _dotted(func.value)
            if (receiver, func.attr) in MODULE_CALLS:
                found.append((node.lineno, f"{receiver}.{func.attr}()"))
            elif func.attr in PATH_METHODS:
                found.append((node.lineno, f".{func.attr}()"))
            elif func.attr == "open" and receiver not in NOT_FILES:
                found.append((node.lineno, f"{receiver or '<expr>'}.open()"))
    return found


def touches_workspace_roots(source: str) -> bool:
    """Rule 3: imports the workspace package or workspace_dir, or calls ``.workspaces()``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "workspaces"
        ):
            return True
        else:
            continue
        if any(name.startswith(WORKSPACE_ROOTS) for name in names):
            return True
    return False


def _outside_containment() -> list[str]:
    return sorted(m for m in MODULES if m != CONTAINMENT and not m.startswith(CONTAINMENT + "."))


@pytest.mark.parametrize("module", _outside_containment())
def test_only_listed_modules_make_file_calls(module: str) -> None:
    calls = file_calls(MODULES[module].read_text())
    if module not in FILE_IO:
        assert calls == [], (
            f"{module} calls {calls}: read workspace files through "
            "toolcards.tools.workspace.access, or list the module in FILE_IO with what it opens"
        )


@pytest.mark.parametrize("module", sorted(FILE_IO))
def test_no_module_with_file_calls_deals_with_workspace_roots(module: str) -> None:
    source = MODULES[module].read_text()
    assert file_calls(source), f"{module} makes no file call: drop it from FILE_IO"
    assert not touches_workspace_roots(source), f"{module} has file calls and workspace roots"


def test_the_resource_surface_reads_files_only_through_the_containment_api() -> None:
    source = MODULES["toolcards.surfaces.mcp_server.resource_sources"].read_text()
    assert touches_workspace_roots(source)
    assert file_calls(source) == []


OLD_RESOURCE_READER = """
def _files(root):
    for path in sorted(root.rglob("*")):
        yield path

def read_file(root, rel):
    target = (root / rel).resolve()
    with target.open("rb") as fh:
        return fh.read(1_000_001)

def workspace_resources(runtime):
    for wid, root in runtime.workspaces().items():
        yield from _files(root)
"""
"""The shape of the resource reader before the containment API (``Path.resolve()``,
``open()``, ``rglob``): the rule must catch it."""


def test_the_rule_catches_a_reader_that_opens_workspace_paths_itself() -> None:
    assert [call for _, call in file_calls(OLD_RESOURCE_READER)] == [".rglob()", "target.open()"]
    assert touches_workspace_roots(OLD_RESOURCE_READER)


@pytest.mark.parametrize(
    "call",
    ["open(p)", "io.open(p)", "os.open(p, 0)", "p.read_text()", "p.write_bytes(b'')",
     "os.scandir(p)", "p.iterdir()", "Path(p).open('rb')"],
)  # fmt: skip
def test_every_kind_of_file_call_is_seen(call: str) -> None:
    assert len(file_calls(call)) == 1
