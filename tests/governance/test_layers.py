"""The listing layers on their own: each one small wrapper, stacked like pydantic-ai's."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.toolsets import FunctionToolset

from support.scripted import SequenceScript as Script
from toolcards.governance.capability import surface_context
from toolcards.governance.toolset.layers import (
    APPROVAL_NOTE,
    DESTRUCTIVE_WARNING,
    ApprovalMarkedToolset,
    DescribedToolset,
    SafeNamedToolset,
    SelectedToolset,
    listed_tools,
    provider_safe_name,
    source_of,
)

pytestmark = pytest.mark.anyio


def _inner() -> FunctionToolset[Any]:
    inner: FunctionToolset[Any] = FunctionToolset()

    def read(x: int) -> str:
        """Read."""
        return f"read {x}"

    def wipe(x: int) -> str:
        """Wipe."""
        return f"wiped {x}"

    def ship(x: int) -> str:
        """Ship."""
        return f"shipped {x}"

    inner.add_function(read, name="crm.read")
    inner.add_function(wipe, name="wipe", metadata={"destructive": True})
    inner.add_function(ship, name="ship", requires_approval=True)
    return inner


async def test_selected_lists_only_matching_names() -> None:
    tools = await SelectedToolset(_inner(), include=["*"], exclude=["wipe"]).get_tools(
        surface_context()
    )
    assert set(tools) == {"crm.read", "ship"}


async def test_safe_named_renames_and_keeps_the_id() -> None:
    tools = await SafeNamedToolset(_inner()).get_tools(surface_context())
    safe = provider_safe_name("crm.read")
    assert set(tools) == {safe, "wipe", "ship"}
    assert tools[safe].tool_def.metadata == {"tool_id": "crm.read"}


async def test_safe_named_refuses_two_ids_that_share_a_name() -> None:
    inner = _inner()
    inner.add_function(lambda x: x, name=provider_safe_name("crm.read"))
    with pytest.raises(ValueError, match="clash"):
        await SafeNamedToolset(inner).get_tools(surface_context())


async def test_described_makes_annotations_explicit_and_warns_on_destructive() -> None:
    tools = await DescribedToolset(_inner()).get_tools(surface_context())
    wipe = tools["wipe"].tool_def
    assert wipe.sequential and wipe.description == f"Wipe.\n\n{DESTRUCTIVE_WARNING}"
    assert wipe.metadata is not None and wipe.metadata["destructive"] is True
    read = tools["crm.read"].tool_def
    assert read.metadata is not None and read.metadata["readonly"] is False
    assert read.metadata["tool_id"] == "crm.read" and not read.sequential


async def test_approval_marked_turns_a_declared_deferral_into_an_annotation() -> None:
    tools = await ApprovalMarkedToolset(_inner()).get_tools(surface_context())
    ship = tools["ship"].tool_def
    assert ship.kind == "function"
    assert ship.metadata == {"requires_approval": True}
    assert ship.description == f"Ship.\n\n{APPROVAL_NOTE}"
    assert tools["wipe"].tool_def.kind == "function"


def test_a_stack_of_layers_runs_a_renamed_tool_in_an_agent() -> None:
    stack = DescribedToolset(SafeNamedToolset(SelectedToolset(_inner(), exclude=["ship"])))
    safe = provider_safe_name("crm.read")
    script = Script([(safe, {"x": 3}), ("wipe", {"x": 4})])
    result = Agent(script.model, toolsets=[stack]).run_sync("go")
    assert result.output.splitlines() == [f"{safe}: success: read 3", "wipe: success: wiped 4"]


def _varied() -> FunctionToolset[Any]:
    """Tools of every kind the layers change: renamed, destructive, approval by metadata and
    by pydantic-ai's flag (and both with a warning), sequential, deferred, sensitive."""
    inner = _inner()

    def note(text: str) -> str:
        """Note."""
        return text

    inner.add_function(note, name="crm.wipe", metadata={"destructive": True, "sensitive": "k"})
    inner.add_function(note, name="drop", requires_approval=True, metadata={"destructive": 1})
    inner.add_function(note, name="pay", metadata={"requires_approval": True, "readonly": 0})
    inner.add_function(note, name="slow", sequential=True, defer_loading=True)
    inner.add_function(note, name="bare", description=None)
    return inner


@pytest.mark.parametrize(
    ("include", "exclude"), [(None, ()), (["crm.*", "drop", "slow"], ()), (None, ["p*"])]
)
async def test_the_stack_listed_in_one_pass_lists_what_its_layers_list(
    include: list[str] | None, exclude: tuple[str, ...]
) -> None:
    selected = SelectedToolset(_varied(), include=include, exclude=exclude)
    stack = ApprovalMarkedToolset(DescribedToolset(SafeNamedToolset(selected)))
    ctx = surface_context()
    layered = await stack.get_tools(ctx)
    one_pass = await listed_tools(stack, ctx)
    assert list(one_pass) == list(layered)
    for name, (tdef, retries, source) in one_pass.items():
        assert tdef == layered[name].tool_def
        assert list(tdef.metadata or {}) == list(layered[name].tool_def.metadata or {})
        assert retries == layered[name].max_retries
        assert source.tool_def == source_of(layered[name]).tool_def


async def test_the_stack_listed_in_one_pass_refuses_names_that_clash() -> None:
    inner = _inner()
    inner.add_function(lambda x: x, name=provider_safe_name("crm.read"))
    stack = ApprovalMarkedToolset(DescribedToolset(SafeNamedToolset(SelectedToolset(inner))))
    with pytest.raises(ValueError, match="clash as"):
        await listed_tools(stack, surface_context())
