"""The package imports only public modules of other distributions: no dotted component of an
imported name outside ``toolcards`` starts with an underscore (``regex._regex_core``,
``pydantic_ai._utils``, ``from mcp.shared import _httpx_utils``), whether by ``import``,
``from ... import`` or ``importlib.import_module("...")``. Dunder names (``__future__``,
``__version__``) are public. A private module of the standard library counts too (``_socket``
under ``socket``); :data:`ACCEPTED` would name an exception with its reason."""

from __future__ import annotations

import ast

import pytest

from support.package import package_modules

OURS = "toolcards"
ACCEPTED: dict[str, str] = {}
"""Private modules accepted, each with its reason (none: the standard library's public
modules serve everywhere)."""


def _private(name: str) -> bool:
    parts = name.split(".")
    return parts[0] not in (OURS, *ACCEPTED) and any(
        part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
        for part in parts
    )


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import in ``tree``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def private_imports(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: name`` for each private name of another distribution ``source`` imports."""
    tree = ast.parse(source, filename)
    return [f"{filename}:{line}: {name}" for line, name in _imported(tree) if _private(name)]


def test_no_module_imports_a_private_module_of_another_distribution() -> None:
    found = [
        hit
        for path in package_modules().values()
        for hit in private_imports(path.read_text(encoding="utf-8"), str(path))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "import regex._regex_core",
        "from pydantic_ai._utils import now_utc",
        "from mcp.shared import _httpx_utils",
        "import importlib\nimportlib.import_module('regex._regex_core')",
        "def f():\n    from starlette._utils import is_async_callable",
    ],
)
def test_the_check_sees_each_spelling_of_a_private_import(source: str) -> None:
    assert private_imports(source)


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations",
        "from toolcards._lazy import lazy",
        "from .tools._common import fusion",
        "import pydantic_ai.toolsets",
    ],
)
def test_public_ours_and_relative_imports_pass_the_check(source: str) -> None:
    assert private_imports(source) == []


def private_names(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: name`` for each private name (``_x``) ``source`` imports from a module of
    the package: a module's private names are its own; a private *module* (``_lazy``,
    ``tools/_common``) is the package's shared helper and may be imported."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith(OURS)
        ):
            found += [
                f"{filename}:{node.lineno}: {alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def test_no_module_imports_another_modules_private_name() -> None:
    found = [
        hit
        for path in package_modules().values()
        for hit in private_names(path.read_text(encoding="utf-8"), str(path))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    ["from toolcards.stores.postgres.governance import _create", "from .calls import _sensitive"],
)
def test_the_check_sees_a_private_name_imported(source: str) -> None:
    assert private_names(source)
