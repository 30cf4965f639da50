"""Cards and params are data: every field must come back from JSON.

:func:`check_json_fields` runs when a card or param class is defined and refuses a field whose
type JSON cannot carry (a callable, a class, an arbitrary object), with a ``TypeError`` naming
the class and the field, instead of a card that fails later, when it is saved or restored.
"""

from __future__ import annotations

from copy import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

_NOT_JSON = frozenset({"callable", "is-instance", "is-subclass"})
"""Core schema nodes that no JSON value validates against."""


def check_json_fields(model: type[BaseModel]) -> None:
    """Raise ``TypeError`` when a field of ``model`` cannot round-trip through JSON.

    The compiled schema is walked as JSON input would be validated (the JSON side of a
    ``json-or-python`` type): a callable, a class (``type[X]``) or an arbitrary object (an
    ``isinstance`` check) can never come back from JSON. A model whose annotations are not
    resolved yet is not checked.
    """
    if not model.__pydantic_complete__ or not _suspect(model.__pydantic_core_schema__):
        return
    field = _offending_field(model)
    where = f"{model.__name__}.{field}" if field else model.__name__
    shown = _type_name(model.model_fields[field].annotation) if field else "a field"
    raise TypeError(
        f"{where}: {shown} cannot round-trip through JSON (a callable, a class or an "
        "arbitrary object); card and param fields are data: keep runtime objects in a "
        "PrivateAttr"
    )


def _suspect(schema: Any) -> bool:
    """True when ``schema`` holds a node JSON cannot validate (``json-or-python``: JSON side)."""
    stack, seen = [schema], set()
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        kind = node.get("type")
        if kind in _NOT_JSON:
            return True
        if kind == "json-or-python":
            stack.append(node["json_schema"])
            continue
        stack.extend(v for k, v in node.items() if k != "metadata" and isinstance(v, dict | list))
    return False


def _offending_field(model: type[BaseModel]) -> str | None:
    """The first field that is suspect on its own (in a model of just that field)."""
    config = ConfigDict(arbitrary_types_allowed=True)
    for name, info in model.model_fields.items():
        field: dict[str, Any] = {name: (info.annotation, copy(info))}
        if _suspect(create_model("Probe", __config__=config, **field).__pydantic_core_schema__):
            return name
    return None


def _type_name(annotation: Any) -> str:
    name = getattr(annotation, "__qualname__", None)
    return f"type {name if isinstance(name, str) else annotation!r}"
