"""Structured tool output (MCP ``outputSchema`` / ``structuredContent``).

A tool whose declared return type is a pydantic model, a ``TypedDict`` or a dataclass (other
than content types: MCP content blocks, pydantic-ai ``BinaryContent``/``FileUrl``) gets
that type's JSON schema (serialization mode, dialect 2020-12) as its ``outputSchema``; each
result is validated as that type and dumped by it (JSON mode, by alias), so the
``structuredContent`` a call returns always validates against the schema it declared. The
text content is the same JSON. A value that is not of the declared type is not sent as
structured content at all (the call becomes an error result). Tools returning anything else
(a string, a list, ``Any``) declare no output schema and keep their text content.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

from toolcards.surfaces.mcp_server.content import is_content_type

log = logging.getLogger(__name__)

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _is_structured(tp: Any) -> bool:
    if not isinstance(tp, type) or is_content_type(tp):
        return False
    return issubclass(tp, BaseModel) or is_typeddict(tp) or dataclasses.is_dataclass(tp)


def declared_return(fn: Callable[..., Any]) -> Any | None:
    """``fn``'s declared return type when it is a model, a TypedDict or a dataclass (an
    ``Annotated`` one unwrapped); None otherwise, or when its hints do not resolve."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # a hint naming what its module cannot resolve: no schema, not a crash
        return None
    returned = hints.get("return")
    return returned if _is_structured(returned) else None


@dataclasses.dataclass(frozen=True)
class StructuredOutput:
    """The output schema of one return type and the dumper that keeps values to it."""

    adapter: TypeAdapter[Any]
    schema: dict[str, Any]

    @classmethod
    def of(cls, returned: Any) -> StructuredOutput | None:
        """None when the type has no object schema (MCP requires ``"type": "object"``)."""
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(returned)
            schema = adapter.json_schema(mode="serialization")
        except Exception:  # a type pydantic cannot describe: text content only
            log.warning("no output schema for return type %r", returned)
            return None
        if schema.get("type") != "object":
            return None
        return cls(adapter, {"$schema": JSON_SCHEMA_DIALECT, **schema})

    def dump(self, value: Any) -> dict[str, Any] | None:
        """``value`` as JSON-ready data of the declared type; None when it is not one."""
        try:
            typed = self.adapter.validate_python(value)
            plain = self.adapter.dump_python(typed, mode="json", by_alias=True, warnings="error")
        except Exception:
            return None
        return plain if isinstance(plain, dict) else None


def output_schemas(functions: dict[str, Callable[..., Any]]) -> dict[str, StructuredOutput]:
    """The structured outputs of the tools (by id) whose return type declares one."""
    found = {}
    for tool_id, fn in functions.items():
        returned = declared_return(fn)
        output = None if returned is None else StructuredOutput.of(returned)
        if output is not None:
            found[tool_id] = output
    return found


def structured_text(plain: dict[str, Any]) -> str:
    """The text block beside structured content: the same JSON."""
    return json.dumps(plain, ensure_ascii=False, indent=2)
