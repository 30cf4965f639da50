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

from support.scripted import SequenceScript as Script
from toolcards.governance import GovernedToolset, Identity, Policy, provider_safe_name
from toolcards.governance.capability import surface_context

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
    toolset = GovernedToolset(_inner("a", "b"), policy=policy, identity=lambda ctx: who["id"])
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


async def test_an_identity_function_must_return_an_identity() -> None:
    toolset = GovernedToolset(
        _inner("a"),
        policy=Policy.allow_all(),
        identity=lambda ctx: "alice",  # type: ignore[arg-type,return-value]
    )
    with pytest.raises(TypeError):
        await toolset.get_tools(surface_context())


def _run_ctx(run_id: str, step: int = 1) -> Any:
    from dataclasses import replace

    return replace(surface_context(), run_id=run_id, run_step=step)


def _counting(inner: FunctionToolset[Any]) -> list[str]:
    """Counts how often each tool of ``inner`` is built for a listing."""
    built: list[str] = []
    build = inner.tool_for_tool_def

    def counted(tool_def: Any, *, ctx: Any, original_name: str | None = None) -> Any:
        built.append(tool_def.name)
        return build(tool_def, ctx=ctx, original_name=original_name)

    inner.tool_for_tool_def = counted  # type: ignore[method-assign]
    return built


async def test_listing_is_kept_across_runs_while_the_tools_stay_the_same() -> None:
    inner = _inner("a", "b")
    built = _counting(inner)
    toolset = GovernedToolset(inner, policy=Policy.allow_all(), identity=ALICE)
    first = await toolset.get_tools(_run_ctx("run-1"))
    second = await toolset.get_tools(_run_ctx("run-2"))
    assert second is first
    assert sorted(built) == ["a", "b"]


async def test_adding_a_tool_is_seen_by_the_next_listing() -> None:
    inner = _inner("a")
    toolset = GovernedToolset(inner, policy=Policy.allow_all(), identity=ALICE)
    assert set(await toolset.get_tools(_run_ctx("run-1"))) == {"a"}

    def b(x: int = 0) -> int:
        """Another tool."""
        return x

    inner.add_function(b)
    assert set(await toolset.get_tools(_run_ctx("run-2"))) == {"a", "b"}


async def test_replacing_a_tool_is_seen_by_the_next_listing() -> None:
    inner = _inner("a")
    toolset = GovernedToolset(inner, policy=Policy.allow_all(), identity=ALICE)
    before = (await toolset.get_tools(_run_ctx("run-1")))["a"].tool_def.description
    del inner.tools["a"]

    def a(x: int = 0) -> int:
        """The new a."""
        return x

    inner.add_function(a)
    after = (await toolset.get_tools(_run_ctx("run-2")))["a"].tool_def.description
    assert (before, after) == ("A tool.", "The new a.")


async def test_a_tool_with_a_prepare_function_is_listed_again_each_run() -> None:
    prepared: list[str | None] = []
    inner: FunctionToolset[Any] = FunctionToolset()

    async def prepare(ctx: Any, tool_def: Any) -> Any:
        prepared.append(ctx.run_id)
        return tool_def

    @inner.tool_plain(prepare=prepare)
    def shifty(x: int = 0) -> int:
        """Listed per run."""
        return x

    toolset = GovernedToolset(inner, policy=Policy.allow_all(), identity=ALICE)
    await toolset.get_tools(_run_ctx("run-1"))
    await toolset.get_tools(_run_ctx("run-1", step=2))
    await toolset.get_tools(_run_ctx("run-2"))
    assert prepared == ["run-1", "run-2"]


def test_agent_runs_reuse_one_listing_of_a_combined_card_toolset() -> None:
    from pydantic_ai.toolsets import CombinedToolset

    inner, extra = _inner("a"), _inner("b")
    built = _counting(inner)
    toolset = GovernedToolset(
        CombinedToolset([inner, extra]), policy=Policy.allow_all(), identity=ALICE
    )
    for _ in range(3):
        script = Script([("a", {"x": 2})])
        assert Agent(script.model, toolsets=[toolset]).run_sync("go").output == "a: success: 2"
    assert built == []  # a combined toolset lists its parts itself, once for all three runs


async def test_hidden_and_missing_tools_read_alike_through_the_toolset() -> None:
    policy = Policy.from_dict(
        {"default_effect": "allow", "rules": [{"targets": ["secret_*"], "effect": "deny"}]}
    )
    toolset = GovernedToolset(_inner("secret_plans", "public_notes"), policy=policy, identity=ALICE)
    ctx = surface_context()
    tools = await toolset.get_tools(ctx)
    messages = []
    for name in ("secret_plans", "secret_plan", "public_note"):
        with pytest.raises(ModelRetry) as caught:
            await toolset.call_tool(name, {}, ctx, tools["public_notes"])
        messages.append(caught.value.message)
    assert messages == [
        "unknown tool: secret_plans",
        "unknown tool: secret_plan",
        "unknown tool: public_note; did you mean public_notes?",
    ]
