"""The dependencies pyproject.toml declares are the ones the code imports, each with a floor.

`make test-floor` installs every direct dependency at its declared floor (uv's lowest-direct
resolution) and runs the suite: a requirement without a floor would go untested, and a package
the code imports without declaring it would come at whatever version another package allows.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PROVIDED_BY = {
    # imported module's distribution -> the declared dependency that pins it exactly
    "pydantic-core": "pydantic",
    "fastmcp-slim": "fastmcp",
    "httpx2": "mcp",
}


def _requirements() -> list[Requirement]:
    found = [Requirement(text) for text in PROJECT["dependencies"]]
    for texts in PROJECT["optional-dependencies"].values():
        found += [Requirement(text) for text in texts]
    return [req for req in found if canonicalize_name(req.name) != "toolcards"]


def _declared() -> set[str]:
    return {canonicalize_name(req.name) for req in _requirements()}


def _imported_modules() -> set[str]:
    modules: set[str] = set()
    for path in (ROOT / "src" / "toolcards").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.partition(".")[0])
    return {
        name
        for name in modules
        if name not in sys.stdlib_module_names and name not in {"toolcards", "__future__"}
    }


@pytest.mark.parametrize("requirement", sorted(str(req) for req in _requirements()))
def test_every_requirement_declares_a_floor(requirement: str) -> None:
    operators = {spec.operator for spec in Requirement(requirement).specifier}
    assert operators & {">=", "==", "~="}, f"{requirement} has no lower bound"


def test_every_imported_third_party_package_is_declared() -> None:
    declared = _declared()
    owners = packages_distributions()
    undeclared = []
    for module in sorted(_imported_modules()):
        dists = {canonicalize_name(dist) for dist in owners.get(module, [])}
        if not any(PROVIDED_BY.get(dist, dist) in declared for dist in dists):
            undeclared.append(f"{module} ({', '.join(sorted(dists)) or 'not installed'})")
    assert undeclared == []
