"""What the model sees: tool definitions built from apcore descriptors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from apcore import Context, Executor, ModuleAnnotations, ModuleExample, Registry
from apcore.decorator import module
from pydantic import BaseModel
from pydantic_ai.tools import ToolDefinition

from toolcards.bridges.apcore import MODULE_ID_KEY, ApcoreToolset
from toolcards.bridges.apcore.describe import APPROVAL_LINE, DESTRUCTIVE_LINE


def _defs(toolset: ApcoreToolset[Any]) -> dict[str, ToolDefinition]:
    tools = asyncio.run(toolset.get_tools(None))  # type: ignore[arg-type]
    return {name: tool.tool_def for name, tool in tools.items()}


def _toolset(registry: Registry, **kwargs: Any) -> ApcoreToolset[Any]:
    return ApcoreToolset(registry, Executor(registry), **kwargs)


def _simple(registry: Registry, module_id: str, **kwargs: Any) -> None:
    def run(text: str) -> dict[str, Any]:
        return {"text": text}

    module(run, id=module_id, registry=registry, description=f"Run {module_id}.", **kwargs)


def test_input_schema_passes_through_unchanged() -> None:
    registry = Registry()
    _simple(registry, "text.echo")
    expected = registry.get_definition("text.echo").input_schema
    assert _defs(_toolset(registry))["text_echo"].parameters_json_schema == expected


def test_destructive_module_warns_and_runs_sequentially() -> None:
    registry = Registry()
    _simple(registry, "db.drop", annotations={"destructive": True})
    tool = _defs(_toolset(registry))["db_drop"]
    assert DESTRUCTIVE_LINE in (tool.description or "")
    assert tool.sequential is True


def test_plain_module_is_neither_sequential_nor_warned() -> None:
    registry = Registry()
    _simple(registry, "db.read")
    tool = _defs(_toolset(registry))["db_read"]
    assert tool.sequential is False
    assert "WARNING" not in (tool.description or "")
    assert tool.kind == "function"


def test_requires_approval_defers_and_says_so() -> None:
    registry = Registry()
    _simple(registry, "db.purge", annotations={"requires_approval": True})
    tool = _defs(_toolset(registry))["db_purge"]
    assert tool.kind == "unapproved"
    assert APPROVAL_LINE in (tool.description or "")


def test_annotations_version_and_tags_travel_in_metadata() -> None:
    registry = Registry()
    _simple(
        registry,
        "feed.list",
        annotations={
            "readonly": True,
            "idempotent": True,
            "open_world": False,
            "cacheable": True,
            "paginated": True,
        },
        tags=["feed", "public"],
        version="2.1.0",
    )
    meta = _defs(_toolset(registry))["feed_list"].metadata or {}
    assert meta[MODULE_ID_KEY] == "feed.list"
    flags = ("readonly", "idempotent", "cacheable", "paginated")
    assert all(meta[flag] is True for flag in flags)
    assert meta["open_world"] is False
    assert meta["version"] == "2.1.0"
    assert meta["tags"] == ["feed", "public"]
    assert meta["streaming"] is False


class _Ticker:
    """A streaming module written as a class."""

    class input_schema(BaseModel):
        count: int

    class output_schema(BaseModel):
        tick: int = 0

    description = "Stream ticks."
    annotations = ModuleAnnotations(streaming=True)

    def execute(self, inputs: dict[str, Any], context: Context[Any]) -> dict[str, Any]:
        return {"tick": inputs["count"]}

    async def stream(
        self, inputs: dict[str, Any], context: Context[Any]
    ) -> AsyncIterator[dict[str, Any]]:
        for i in range(inputs["count"]):
            yield {"tick": i}


def test_streaming_flag_travels_in_metadata() -> None:
    registry = Registry()
    registry.register("feed.ticks", _Ticker())
    assert (_defs(_toolset(registry))["feed_ticks"].metadata or {})["streaming"] is True


def test_undiscoverable_modules_are_not_offered() -> None:
    registry = Registry()
    _simple(registry, "ops.visible")
    _simple(registry, "ops.hidden", annotations={"discoverable": False})
    assert set(_defs(_toolset(registry))) == {"ops_visible"}


def test_documentation_three_examples_and_sunset_reach_the_description() -> None:
    registry = Registry()
    examples = [ModuleExample(title=f"case{i}", inputs={"text": f"t{i}"}) for i in range(5)]
    _simple(
        registry,
        "doc.me",
        documentation="Long-form usage notes.",
        examples=examples,
        metadata={"x-deprecation": {"sunset_date": "2027-01-31"}},
    )
    text = _defs(_toolset(registry))["doc_me"].description or ""
    assert "Long-form usage notes." in text
    assert [f"case{i}" in text for i in range(5)] == [True, True, True, False, False]
    assert "DEPRECATED" in text and "2027-01-31" in text


def test_include_and_exclude_globs_with_exclude_winning() -> None:
    registry = Registry()
    for module_id in ("api.users", "api.internal", "api.orders", "admin.reset"):
        _simple(registry, module_id)
    toolset = _toolset(registry, include=["api.*"], exclude=["api.internal"])
    assert sorted(_defs(toolset)) == ["api_orders", "api_users"]


def test_exclude_alone_filters_from_everything() -> None:
    registry = Registry()
    for module_id in ("api.users", "admin.reset"):
        _simple(registry, module_id)
    assert sorted(_defs(_toolset(registry, exclude=["admin.*"]))) == ["api_users"]


def test_colliding_names_are_distinct_and_keep_the_original_id() -> None:
    registry = Registry()
    _simple(registry, "crm.read")
    _simple(registry, "crm_read")
    defs = _defs(_toolset(registry))
    assert len(defs) == 2
    ids = sorted((d.metadata or {})[MODULE_ID_KEY] for d in defs.values())
    assert ids == ["crm.read", "crm_read"]


def test_toolset_id_is_reported() -> None:
    assert _toolset(Registry(), toolset_id="crm").id == "crm"


def test_sanitize_off_offers_module_ids_verbatim() -> None:
    registry = Registry()
    _simple(registry, "text.echo")
    assert list(_defs(_toolset(registry, sanitize_tool_names=False))) == ["text.echo"]


def test_registered_tools_round_trip_as_the_same_tool_shape() -> None:
    from pydantic_ai.toolsets.function import FunctionToolset

    from toolcards.bridges.apcore import register_toolset

    def greet(name: str) -> dict[str, Any]:
        """Greet someone.

        Args:
            name: Who to greet.
        """
        return {"greeting": f"hi {name}"}

    tools: FunctionToolset[None] = FunctionToolset()
    tools.add_function(greet, takes_ctx=False, requires_approval=True)
    registry = Registry()
    register_toolset(tools, registry, prefix="social.")
    tool = _defs(_toolset(registry))["social_greet"]
    assert tool.kind == "unapproved"
    assert tool.parameters_json_schema["properties"]["name"]["description"] == "Who to greet."
