"""A capability built without pydantic-ai (governance.plain_tools) is the one pydantic-ai's
function schema gives: same description, annotations, timeout, JSON schema, and the same
accepted arguments and errors, for every tool of the built-in cards."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from pydantic_ai import RunContext

from toolcards import (
    KnowledgeGraphTool,
    NotificationTool,
    PlanningTool,
    TeamTool,
    ToolFactory,
    WorkspaceTool,
)
from toolcards.governance.capability import CapabilityRegistry, ToolCapability, plain_capability


def _card_tools() -> list[Any]:
    cards = [
        WorkspaceTool(),
        PlanningTool(vector_store=False),
        KnowledgeGraphTool(vector_store=False),
        TeamTool(),
        NotificationTool(),
    ]
    return ToolFactory(cards).get_tools()


TOOLS = _card_tools()


def _reference(fn: Any) -> ToolCapability:
    from toolcards.core.toolset import build_function_toolset

    registry = CapabilityRegistry.from_function_toolset(build_function_toolset([fn]))
    return registry[fn.__name__]


def _inputs(schema: dict[str, Any]) -> list[dict[str, Any]]:
    props = list(schema.get("properties", {}))
    values: list[Any] = ["x", 1, 1.5, True, None, [], {}, [1], ["a"], [{}], {"a": 1}]
    values.append([{"description": "d"}])
    found: list[dict[str, Any]] = [{}, {"not_a_parameter": 1}]
    found += [{p: v for p in props} for v in values]
    found += [{p: v} for p in props for v in values]
    return found


def _outcome(cap: ToolCapability, args: dict[str, Any]) -> tuple[str, Any]:
    try:
        return "ok", cap.validate(args)
    except ValidationError as exc:
        return "invalid", exc.errors(include_url=False)


@pytest.mark.parametrize("fn", TOOLS, ids=[fn.__name__ for fn in TOOLS])
def test_plain_capability_matches_the_pydantic_ai_one(fn: Any) -> None:
    ref = _reference(fn)
    cap = plain_capability(fn, lambda: ref.json_schema)
    assert cap is not None
    assert (cap.id, cap.description, cap.annotations) == (ref.id, ref.description, ref.annotations)
    assert (cap.timeout, cap.sensitive, cap.abandon_threads) == (
        ref.timeout,
        ref.sensitive,
        ref.abandon_threads,
    )
    assert cap.json_schema == ref.json_schema
    for args in _inputs(ref.json_schema):
        assert _outcome(cap, args) == _outcome(ref, args), args


def _without_prose(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: _without_prose(v) for k, v in schema.items() if k not in ("description", "title")
        }
    if isinstance(schema, list):
        return [_without_prose(v) for v in schema]
    return schema


@pytest.mark.parametrize("fn", TOOLS, ids=[fn.__name__ for fn in TOOLS])
def test_the_argument_schema_before_the_json_schema_has_its_types(fn: Any) -> None:
    ref = _reference(fn)
    made: list[bool] = []

    def json_schema() -> dict[str, Any]:
        made.append(True)
        return ref.json_schema

    cap = plain_capability(fn, json_schema)
    assert cap is not None
    early = cap.argument_schema()
    assert made == []  # the argument types did not make the JSON schema
    assert _without_prose(early) == _without_prose(ref.json_schema)
    assert cap.json_schema == ref.json_schema
    assert cap.argument_schema() == ref.json_schema  # once made, the JSON schema itself


class _Point(BaseModel):
    x: int


def _takes_context(ctx: RunContext[None], n: int) -> int:
    return n


def _takes_model(point: _Point) -> int:
    return point.x


def _positional_only(n: int, /) -> int:
    return n


@pytest.mark.parametrize("fn", [_takes_context, _takes_model, _positional_only])
def test_signatures_pydantic_ai_shapes_itself_are_left_to_it(fn: Any) -> None:
    assert plain_capability(fn, dict) is None
    registry = CapabilityRegistry.from_tools([fn])
    assert registry.get(fn.__name__) is not None  # built the pydantic-ai way


@pytest.mark.anyio
async def test_a_registry_call_runs_the_plain_capability_of_that_tool() -> None:
    def add(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    def other(text: str) -> str:
        return text

    registry = CapabilityRegistry.from_tools([add, other])
    cap = registry["add"]
    assert cap.invoke is not None
    assert await cap.invoke(cap.validate({"a": "1"})) == 3
    assert registry.ids() == ["add", "other"]
    assert [c.id for c in registry] == ["add", "other"]
    assert registry["add"] is cap  # one capability object per id after the whole build
