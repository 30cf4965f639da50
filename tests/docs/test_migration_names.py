"""Every toolcards name the migration page gives as the equivalent of an original call exists.

The mapping tables of ``docs/migration.md`` end in a toolcards column; each code span there is
resolved against the real package: imports are imported, dotted paths walked, calls checked
against the callable's parameters (or the model's fields), card fields against the card of
the row. Values (quoted strings, ``#Actor`` names, ``...``) are not names and are skipped.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import tomllib
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic import BaseModel

import toolcards
from toolcards.core.actors import ActorHandle
from toolcards.core.observer import TeamManagementToolObserver
from toolcards.runtime import Team, ToolActor
from toolcards.runtime.observer import TeamObserver
from toolcards.runtime.tool_actor import ENTRY_POINT_GROUP as ACTOR_GROUP
from toolcards.tools.exec.backends.registry import ENTRY_POINT_GROUP as BACKEND_GROUP

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "migration.md"
MISSING = object()
PATH = re.compile(r"[A-Za-z_][\w.]*")
NAME_FORM = re.compile(r"[A-Za-z_][\w.]*(\(.*\)|=.*)?")
ENTRY_POINT_GROUPS = {ACTOR_GROUP, BACKEND_GROUP}

HANDLES = {"team": Team, "self": ToolActor, "handle": ActorHandle}
"""What a lower-case first word of a dotted span stands for (an instance of the class)."""

SECTIONS: dict[str, list[Any]] = {
    "Observer protocols and actors": [TeamManagementToolObserver, TeamObserver],
    "Events": [toolcards.ToolStateEvent],
    "From pydantic-ai-apcore": ["toolcards.bridges.apcore"],
}
"""Where a bare name in a section is looked up (besides ``toolcards`` itself)."""


@dataclass
class Row:
    section: str
    theirs: str
    spans: list[str]
    scope: list[Any] = field(default_factory=list)

    def where(self) -> str:
        return f"{self.section} / {self.theirs}"


def rows() -> list[Row]:
    """The mapping rows: the toolcards column (the last) of every table with one."""
    found: list[Row] = []
    section, header = "", False
    for line in PAGE.read_text().splitlines():
        if line.startswith("#"):
            section = line.lstrip("#").strip()
            continue
        if not line.startswith("|"):
            header = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[-1] == "toolcards":
            header = True
            continue
        if not header or set(cells[0]) <= set("-: "):
            continue
        found.append(Row(section, cells[0], re.findall(r"`([^`]+)`", cells[-1])))
    return found


def module_of(path: str) -> tuple[Any, list[str]]:
    """The deepest importable module along ``path`` and the names left after it."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            return importlib.import_module(".".join(parts[:cut])), parts[cut:]
        except ImportError:
            continue
    return MISSING, parts


def known_classes() -> dict[str, Any]:
    """Classes of the loaded toolcards modules by name (for annotations behind TYPE_CHECKING)."""
    classes: dict[str, Any] = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("toolcards") and isinstance(module, types.ModuleType):
            for value in vars(module).values():
                if inspect.isclass(value):
                    classes.setdefault(value.__name__, value)
    return classes


def annotated_type(owner: Any, annotation: Any) -> Any:
    """The class an annotation names (a string annotation is looked up by name)."""
    if isinstance(annotation, str):
        text = annotation.replace(" | None", "").split("[")[0].strip()
        space = {**known_classes(), **vars(sys.modules[owner.__module__])}
        return space.get(text, Any)
    return annotation


def member(owner: Any, name: str) -> Any:
    """``owner.name`` as documentation means it: module attributes, model fields (their
    type), properties (their return type), methods and annotated instance attributes."""
    if isinstance(owner, types.ModuleType):
        return getattr(owner, name, MISSING)
    if not inspect.isclass(owner):
        return MISSING
    fields = getattr(owner, "model_fields", {})
    if name in fields:
        return fields[name].annotation
    found = inspect.getattr_static(owner, name, MISSING)
    if isinstance(found, property) and found.fget is not None:
        return annotated_type(owner, inspect.get_annotations(found.fget).get("return", Any))
    if found is not MISSING:
        return getattr(owner, name)
    for klass in owner.__mro__:
        if name in inspect.get_annotations(klass):
            return annotated_type(klass, inspect.get_annotations(klass)[name])
    return MISSING


def resolve(path: str, scope: list[Any]) -> Any:
    """The object a dotted name means in ``scope`` (MISSING when it names nothing)."""
    first, *rest = path.split(".")
    if first == "toolcards":
        obj, rest = module_of(path)
    elif first in HANDLES:
        obj = HANDLES[first]
    else:
        obj = next((m for s in scope if (m := member(s, first)) is not MISSING), MISSING)
    for name in rest:
        if obj is MISSING:
            break
        obj = member(obj, name)
    return obj


def split_args(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def check_call(target: Any, args: str, span: str) -> list[str]:
    """The documented arguments ``target`` does not take."""
    wrong: list[str] = []
    if args.strip() == "...":
        return wrong
    model = inspect.isclass(target) and issubclass(target, BaseModel)
    params = (
        {name: None for name in target.model_fields}
        if model
        else dict(inspect.signature(target).parameters)
    )
    kinds = {p.kind for p in params.values() if p is not None}
    positional = 0
    for arg in split_args(args):
        name = arg.split("=", 1)[0].strip()
        if arg.startswith("**"):
            ok = inspect.Parameter.VAR_KEYWORD in kinds
        elif arg.startswith("*"):
            ok = inspect.Parameter.VAR_POSITIONAL in kinds
        elif "=" in arg or model:
            ok = name in params
        else:
            positional += 1
            ok = inspect.Parameter.VAR_POSITIONAL in kinds or positional <= len(
                [p for p in params.values() if p is not None and p.kind <= p.POSITIONAL_OR_KEYWORD]
            )
        if not ok:
            wrong.append(f"{span!r}: {arg!r} is not an argument of {target!r}")
    return wrong


def literal_values(card: Any) -> set[str]:
    values: set[str] = set()
    for info in getattr(card, "model_fields", {}).values():
        for part in (info.annotation, *get_args(info.annotation)):
            if get_origin(part) is Literal:
                values.update(str(v) for v in get_args(part))
    return values


def check_span(span: str, row: Row) -> list[str]:
    """What in one code span names nothing (empty when all of it exists)."""
    text = span.removeprefix("with ").removesuffix(":").strip()
    if text.startswith("from "):
        module_name, _, names = text[5:].partition(" import ")
        module = importlib.import_module(module_name)
        return [f"{span!r}: {n}" for n in names.split(", ") if not hasattr(module, n.strip())]
    if not NAME_FORM.fullmatch(text) or text in ENTRY_POINT_GROUPS:
        return []  # a value ("stdio", #Actor, python:3.12-slim), not a name
    lhs, eq, rhs = text.partition("=")
    if eq and "(" not in lhs:
        wrong = [] if resolve(lhs, row.scope) is not MISSING else [f"{span!r}: {lhs}"]
        if PATH.fullmatch(rhs.split("(")[0]) and "(" in rhs:
            wrong += check_span(rhs, row)
        return wrong
    head, paren, args = text.partition("(")
    target = resolve(head, row.scope)
    if target is MISSING:
        if row.section == "Imports" and "extras" in row.theirs:
            return [] if head in extras() else [f"{span!r}: no such extra"]
        if head.startswith("TOOLCARDS_"):
            return [] if env_var_read(head) else [f"{span!r}: no such environment variable"]
        if head in literal_values(row.scope[0]):
            return []  # a documented value of one of the card's fields
        return [f"{span!r}: {head} does not exist"]
    if paren:
        return check_call(target, args.rsplit(")", 1)[0], span)
    return []


def extras() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return set(project["optional-dependencies"])


def env_var_read(name: str) -> bool:
    return any(f'"{name}"' in p.read_text() for p in (REPO / "src" / "toolcards").rglob("*.py"))


def scope_of(row: Row) -> list[Any]:
    """Where the row's bare names live: a card row's card and its package, the section's
    objects, the modules the row names, then ``toolcards``."""
    scope: list[Any] = []
    card = getattr(toolcards, row.theirs.strip("`"), None) if row.section == "Card fields" else None
    if card is not None:
        scope += [
            card,
            sys.modules[card.__module__],
            module_of(card.__module__.rsplit(".", 1)[0])[0],
        ]
    for item in SECTIONS.get(row.section, []):
        scope.append(importlib.import_module(item) if isinstance(item, str) else item)
    for span in row.spans:
        if span.startswith("toolcards.") and PATH.fullmatch(span):
            module = module_of(span)[0]
            if module is not MISSING:
                scope.append(module)
    return [*scope, toolcards]


ROWS = rows()


def _checked(section: str, theirs: str, span: str) -> list[str]:
    row = Row(section, theirs, [span])
    row.scope = scope_of(row)
    return check_span(span, row)


@pytest.mark.parametrize(
    ("section", "theirs", "span"),
    [
        ("Observer protocols and actors", "x", "proxy_ask(actor, method)"),
        ("Events", "x", "team.events(until=n)"),
        ("Events", "x", "ToolStateEvent(tool_id, sequence)"),
        ("Card fields", "`PlanningTool`", "search_planning=SearchPlanning(top=10)"),
        ("Card fields", "`VectorStoreTool`", "embedding_model"),
        ("Imports", "x", "from toolcards import ToolCard, ToolCardz"),
    ],
)
def test_a_name_or_argument_that_does_not_exist_is_reported(
    section: str, theirs: str, span: str
) -> None:
    assert _checked(section, theirs, span) != []


def test_the_page_has_mapping_rows() -> None:
    assert len(ROWS) > 40
    assert {r.section for r in ROWS} >= {"Imports", "Events", "Card fields"}


@pytest.mark.parametrize("row", ROWS, ids=[r.where() for r in ROWS])
def test_every_toolcards_name_in_the_mapping_exists(row: Row) -> None:
    row.scope = scope_of(row)
    wrong = [w for span in row.spans for w in check_span(span, row)]
    assert wrong == [], wrong
