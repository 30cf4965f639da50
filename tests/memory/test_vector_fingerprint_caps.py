"""The graph and the board read at most their own cap of vector fingerprint rows at a start
(a million planted ``vh:`` rows were all read at every start: 13-18 s and +440 MiB)."""

from __future__ import annotations

from typing import Any

import pytest

from toolcards import VectorStoreTool
from toolcards.runtime import Team
from toolcards.tools._common.fusion import text_hash
from toolcards.tools.knowledge_graph import graph as graph_engine
from toolcards.tools.knowledge_graph.card import KnowledgeGraphTool
from toolcards.tools.planning import actor as planning_actor
from toolcards.tools.planning.card import PlanningTool
from toolcards.tools.vector_store.actor import VectorStoreActor


def plant(team: Team, actor: str, rows: int) -> None:
    """``rows`` fingerprints of documents the tool does not hold, written around it."""
    state = team.state_of(actor)
    with state.batch():
        for i in range(rows):
            state.put(f"vh:planted{i:03d}", text_hash(str(i)))


def bind(team: Team) -> dict[str, Any]:
    cards = [KnowledgeGraphTool(), PlanningTool(), VectorStoreTool(provider="hash")]
    return {fn.__name__: fn for fn in team.bind(cards, member="alice").get_tools()}


def settle(team: Team) -> None:
    store = team.actor("#VectorStore")
    assert store is not None
    store.ask(VectorStoreActor.flush).result(timeout=30)


def test_the_graph_reads_and_removes_at_most_its_caps_of_fingerprint_rows_at_a_start(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graph_engine, "MAX_ENTITIES", 20)
    monkeypatch.setattr(graph_engine, "MAX_RELATIONS", 10)
    plant(team, "#KnowledgeGraphTool", 100)
    bind(team)
    settle(team)
    assert team.state_of("#KnowledgeGraphTool").count("vh:") == 100 - 30


def test_the_board_reads_and_removes_at_most_its_cap_of_fingerprint_rows_at_a_load(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planning_actor, "MAX_BOARD_TASKS", 10)
    plant(team, "#PlanningTool", 50)
    bind(team)["search_planning"](query="anything")  # the board loads on first use
    settle(team)
    assert team.state_of("#PlanningTool").count("vh:") == 50 - 10
