"""One exception tree: every exception class defined in src/toolcards derives from
ToolcardsError, and the tree drawn at the top of toolcards/core/errors.py is the real one."""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
from pathlib import Path

import pytest

import toolcards.core.errors
from toolcards.core.errors import RetriableError, ToolcardsError, TransientError

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "toolcards"
_BUILTIN_EXCEPTIONS = {
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}  # fmt: skip
_LINE = re.compile(
    r"^(?P<prefix>[│├└─ ]*)(?P<name>[A-Z]\w*)(?: \((?P<also>[\w, ]+)\))?\s+(?P<mod>\S+)"
)


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def defined() -> dict[str, type[BaseException]]:
    """Every exception class defined at module level in the package, by name. Candidates are
    found in the source (a base that is a built-in exception, a name ending in Error or
    Exception, or another candidate), then imported to see what they really are."""
    classes: list[tuple[str, str, list[str]]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
                classes.append((_module(path), node.name, bases))
    names: set[str] = set()
    grew = True
    while grew:
        before = len(names)
        names |= {
            name
            for _, name, bases in classes
            if any(b in names or b in _BUILTIN_EXCEPTIONS or b.endswith(("Error", "Exception"))
                   for b in bases)
        }  # fmt: skip
        grew = len(names) > before
    found: dict[str, type[BaseException]] = {}
    for module, name, _ in classes:
        if name in names:
            cls = getattr(importlib.import_module(module), name)
            is_error = isinstance(cls, type) and issubclass(cls, Exception)
            if is_error and not issubclass(cls, Warning):
                assert name not in found, f"two exception classes named {name}"
                found[name] = cls
    return found


def _drawn() -> list[tuple[int, str, list[str], str]]:
    """``(depth, name, other bases, module)`` for each line of the drawn tree."""
    doc = toolcards.core.errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in block.splitlines():
        match = _LINE.match(line.removeprefix("    "))
        assert match is not None, line
        also = [b.strip() for b in (match["also"] or "").split(",") if b.strip()]
        rows.append((len(match["prefix"]) // 4, match["name"], also, match["mod"]))
    return rows


pytestmark = pytest.mark.xdist_group("exception-tree")  # one worker imports the package once


def test_the_scan_finds_the_library_exceptions() -> None:
    assert {"ToolcardsError", "PolicyError", "ConfigError", "StoreUnavailable"} <= set(defined())
    assert len(defined()) >= 39


def test_every_exception_class_derives_from_toolcards_error() -> None:
    outside = sorted(name for name, cls in defined().items() if not issubclass(cls, ToolcardsError))
    assert outside == []


def test_the_drawn_tree_names_every_exception_class_once() -> None:
    drawn = [name for _, name, _, _ in _drawn()]
    assert sorted(drawn) == sorted(defined())


def test_each_drawn_class_is_a_direct_subclass_of_its_drawn_parent() -> None:
    parents: list[str] = []
    for depth, name, also, module in _drawn():
        del parents[depth:]
        cls = defined()[name]
        bases = [b.__name__ for b in cls.__bases__]
        expected = ([parents[-1]] if parents else ["Exception"]) + also
        assert bases == expected, (name, bases, expected)
        assert cls.__module__ == f"toolcards.{module}", name
        parents.append(name)


def test_retry_later_is_not_call_again_with_other_arguments() -> None:
    from toolcards.stores.errors import DatabaseUnavailable, StoreUnavailable

    for down in (DatabaseUnavailable, StoreUnavailable):
        assert issubclass(down, TransientError)
        assert not issubclass(down, RetriableError)
