"""Capabilities of plain tool callables built without pydantic-ai.

A governed call needs a tool's validator and a way to run it, not pydantic-ai: the validator
here is pydantic's, for a typed dict of the function's parameters (required ones without a
default, the others with theirs, extra arguments refused), which accepts and rejects what
pydantic-ai's function schema does with the same errors. The JSON schema (with the
docstring's argument descriptions) is still pydantic-ai's, made the first time something
reads it (a listing of schemas, ``describe``), so importing pydantic-ai (about a second) is
paid only by what shows schemas. What reads only the arguments' types (the command line typing
``key=value`` pairs) gets pydantic's schema of the same typed dict, which differs from it only
in descriptions and titles.

Signatures this does not cover (a ``RunContext``, positional-only or variadic parameters, a
single model-like argument that pydantic-ai unwraps, a ``Field`` as a default) get None: the
registry builds those through pydantic-ai, as before.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from types import GenericAlias
from typing import Annotated, Any

import typing_extensions as te
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.fields import FieldInfo
from typing_extensions import is_typeddict

__all__ = ["plain_adapter"]

_PLAIN_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def plain_adapter(fn: Callable[..., Any]) -> TypeAdapter[Any] | None:
    """pydantic's adapter of ``fn``'s keyword arguments (its validator and their schema), or
    None (see the module)."""
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        return None
    try:
        params = list(inspect.signature(fn).parameters.values())
        hints = te.get_type_hints(fn, include_extras=True)
    except Exception:  # whatever pydantic-ai makes of it, it makes on its own path
        return None
    if any(p.kind not in _PLAIN_KINDS or isinstance(p.default, FieldInfo) for p in params):
        return None
    if any("RunContext" in repr(hint) for hint in hints.values()):
        return None
    if len(params) == 1 and _model_like(hints.get(params[0].name)):
        return None
    fields: dict[str, Any] = {}
    for p in params:
        hint = hints.get(p.name, Any)
        if p.default is inspect.Parameter.empty:
            fields[p.name] = te.Required[hint]
        else:
            fields[p.name] = te.NotRequired[Annotated[hint, Field(default=p.default)]]
    try:
        typed_dict: Any = te.TypedDict  # called with a name known at run time
        shape = typed_dict(fn.__name__, fields)
        shape.__pydantic_config__ = ConfigDict(title=fn.__name__, extra="forbid")
        adapter: TypeAdapter[Any] = TypeAdapter(shape)
        return adapter
    except Exception:
        return None


def _model_like(hint: Any) -> bool:
    """A pydantic model, dataclass or typed dict: pydantic-ai takes such a lone argument's
    fields at the top level."""
    return (
        isinstance(hint, type)
        and not isinstance(hint, GenericAlias)
        and (
            issubclass(hint, BaseModel)
            or dataclasses.is_dataclass(hint)
            or is_typeddict(hint)
            or bool(getattr(hint, "__is_model_like__", False))
        )
    )
