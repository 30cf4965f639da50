"""GovernedToolset listing: names, metadata, caching, reload, wrapped card toolsets."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.toolsets import FunctionToolset

from toolcards.governance import GovernedToolset, Identity, Policy, provider_safe_name
from toolcards.governance.capability import surface_context

from .conftest import Script

pytestmark = pytest.mark.anyio
ALICE = Identity("alice", roles=["admin"])
SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _inner(*names: str) -> FunctionToolset[Any]:
    toolset: FunctionToolset[Any] = FunctionToolset()
    for name in names:

        def tool(x: int = 0) -> int:
            """A tool."""
            return x

        toolset.add_function(tool, name=name)
    return toolset


def test_valid_names_are_kept_and_others_made_provider_safe() -> None:
    assert provider_safe_name("crm_read") == "crm_read"
    for odd in ("crm.read", "a" * 80, "päy/ment", "x y"):
        assert SAFE.match(provider_safe_name(odd))
    assert provider_safe_name("crm.read") != provider_safe_name("crm_read")


async def test_names_stay_stable_when_tools_are_added() -> None:
    ctx = surface_context()
    small = GovernedToolset(_inner("crm.read"), policy=Policy.allow_all(), identity=ALICE)
    large = GovernedToolset(
        _inner("crm.read", "crm-read", "crm_read", "crm.read.v2"),
        policy=Policy.allow_all(),
        identity=ALICE,
    )
    small_names = set(await small.get_tools(ctx))
    large_tools = await large.get_tools(ctx)
    assert small_names <= set(large_tools)
    assert all(SAFE.match(name) for name in large_tools)
    originals = {t.tool_def.metadata["tool_id"] for t in large_tools.values()}  # type: ignore[index]
    assert originals == {"crm.read", "crm-read", "crm_read", "crm.read.v2"}


def test_dotted_tool_is_callable_under_its_safe_name() -> None:
    toolset = GovernedToolset(_inner("crm.read"), policy=Policy.allow_all(), identity=ALICE)
    safe = provider_safe_name("crm.read")
    script = Script([(safe, {"x": 5})])
    result = Agent(script.model, toolsets=[toolset]).run_sync("go")
    assert result.output == f"{safe}: success: 5"


async def test_listing_is_cached_per_principal() -> None:
    policy = Policy.from_dict(
        {"rules": [{"targets": ["*"], "effect": "allow", "conditions": {"roles": ["admin"]}}]}
    )
    who = {"id": ALICE}
    toolset = GovernedToolset(
        _inner("a", "b"), policy=policy, identity_resolver=lambda ctx: who["id"]
    )
    ctx = surface_context()
    first = await toolset.get_tools(ctx)
    assert await toolset.get_tools(ctx) is first
    who["id"] = Identity("bob")
    assert await toolset.get_tools(ctx) == {}
    who["id"] = ALICE
    assert await toolset.get_tools(ctx) is first


async def test_listing_follows_a_policy_file_change(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("default_effect: allow\n")
    policy = Policy.from_yaml(path, reload_interval=0.0)
    toolset = GovernedToolset(_inner("a", "b"), policy=policy, identity=ALICE)
    ctx = surface_context()
    assert set(await toolset.get_tools(ctx)) == {"a", "b"}
    path.write_text("default_effect: allow\nrules:\n  - {targets: [b], effect: deny}\n")
    os.utime(path, ns=(1, 10**18))
    assert set(await toolset.get_tools(ctx)) == {"a"}


async def test_hide_denied_false_lists_everything_selected() -> None:
    toolset = GovernedToolset(
        _inner("a", "b"), policy=Policy.from_dict({}), identity=ALICE, hide_denied=False
    )
    assert set(await toolset.get_tools(surface_context())) == {"a", "b"}


async def test_excluded_tool_cannot_be_called_even_by_name() -> None:
    toolset = GovernedToolset(
        _inner("a", "b"), policy=Policy.allow_all(), identity=ALICE, exclude=["b"]
    )
    ctx = surface_context()
    tools = await toolset.get_tools(ctx)
    assert set(tools) == {"a"}
    with pytest.raises(ModelRetry, match=r"^unknown tool: b$"):
        await toolset.call_tool("b", {"x": 1}, ctx, tools["a"])


def test_card_factory_toolset_is_governed() -> None:
    from toolcards import ToolFactory
    from toolcards.tools.skills.card import Skill, SkillTool

    card = SkillTool(skills=[Skill(name="deploy", summary="how to deploy", content="step 1")])
    policy = Policy.from_dict({"rules": [{"targets": ["use_skill"], "effect": "allow"}]})
    toolset = GovernedToolset(ToolFactory([card]).toolset(), policy=policy, identity=ALICE)
    script = Script([("use_skill", {"name": "deploy"})])
    result = Agent(script.model, toolsets=[toolset]).run_sync("go")
    assert "step 1" in result.output
    defs = {d.name: d for d in script.seen_defs[0]}
    assert defs["use_skill"].metadata is not None and defs["use_skill"].metadata["readonly"]


async def test_identity_resolver_must_return_an_identity() -> None:
    toolset = GovernedToolset(
        _inner("a"),
        policy=Policy.allow_all(),
        identity_resolver=lambda ctx: "alice",  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(TypeError):
        await toolset.get_tools(surface_context())
