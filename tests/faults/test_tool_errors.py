"""Faults reach the model as retries, never as raw errors: a tool actor that is not running,
and a NUL character the store cannot keep (on PostgreSQL)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic_ai import ModelRetry

from toolcards import KnowledgeGraphTool, PlanningTool
from toolcards.governance import Identity, Policy
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import Executor, Outcome
from toolcards.runtime import Team
from toolcards.tools.planning.actor import ACTOR_NAME

ALICE = Identity("alice")


def test_a_stopped_tool_actor_is_a_retry_for_the_model() -> None:
    with Team("t", store=":memory:") as team:
        factory = team.bind([PlanningTool(vector_store=False)], "ann")
        executor = Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all())
        first = asyncio.run(executor.call("search_planning", {}, ALICE))
        assert first.outcome is Outcome.OK
        assert team.system.stop([ACTOR_NAME], 5.0) == []
        result = asyncio.run(executor.call("search_planning", {}, ALICE))
    assert result.outcome is Outcome.RETRY, result.message
    assert ACTOR_NAME in result.message


def _entity(name: str) -> dict[str, str]:
    return {"name": name, "entity_type": "person", "description": "someone"}


def test_a_nul_in_an_entity_name_on_postgres_is_a_retry_naming_it(postgres_url: str) -> None:
    """PostgreSQL text holds no NUL; a name is one line of visible text, so the name is
    refused before the store is asked (and the batch leaves nothing)."""
    with Team("t", store=postgres_url) as team:
        factory = team.bind([KnowledgeGraphTool(vector_store=False)], "ann", ModelRetry)
        tools = {t.__name__: t for t in factory.get_tools()}
        with pytest.raises(ModelRetry, match=r"name: .*must be one line of visible text"):
            tools["update_graph"](create_entities=[_entity("fine"), _entity("bad\x00name")])
        found = tools["search_graph"](query="fine bad name someone")
        assert "bad" not in found and "fine" not in found  # the batch left nothing behind
        assert "created" in tools["update_graph"](create_entities=[_entity("fine")])
