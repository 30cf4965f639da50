"""Validation errors of a config (or a card in it) as one line each, with a did-you-mean for
a misspelled key, found among the fields of the model at that place."""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions and lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _fields_at(model: type[BaseModel], path: tuple[int | str, ...]) -> list[str]:
    """The field names of the model reached by ``path`` (list indexes are stepped over)."""
    current: list[type[BaseModel]] = [model]
    for part in path:
        if isinstance(part, int):
            continue
        nested: list[type[BaseModel]] = []
        for m in current:
            field = m.model_fields.get(part)
            if field is not None:
                nested += _models_in(field.annotation)
        current = nested
    names: list[str] = []
    for m in current:
        names += [n for n, f in m.model_fields.items() if not f.exclude]
    return names


def did_you_mean(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """``" (did you mean X?)"`` for an unknown key at ``loc`` close to a known one, else ``""``."""
    if not loc or not isinstance(loc[-1], str):
        return ""
    close = difflib.get_close_matches(loc[-1], _fields_at(model, loc[:-1]), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def problems(exc: ValidationError, model: type[BaseModel], limit: int = 8) -> str:
    """The errors of ``exc`` on one line: ``field: message`` each, unknown keys with a
    did-you-mean among the fields of ``model``."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:limit]:
        loc = tuple(err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parts.append(f"{location(loc)}: unknown key{did_you_mean(model, loc)}")
        elif not loc:  # the model's own check: its message names the field
            parts.append(message)
        else:
            parts.append(f"{location(loc)}: {message}")
    return "; ".join(parts)


__all__ = ["did_you_mean", "problems"]
