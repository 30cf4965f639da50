"""Two members binding the plan or the graph with different ``vector_store`` settings: the
second bind is refused in one line naming both settings and who bound each."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from toolcards.core.card import ToolCard
from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.card import KnowledgeGraphTool
from toolcards.tools.planning.card import PlanningTool

CARDS = [PlanningTool, KnowledgeGraphTool]


@pytest.mark.parametrize("card", CARDS, ids=lambda c: c.__name__)
def test_another_vector_store_setting_is_refused_at_bind(
    tmp_path: Path, card: type[ToolCard]
) -> None:
    with Team("setting-clash", store=tmp_path / "team.db") as team:
        team.bind([card()], member="alice")
        with pytest.raises(ValueError) as caught:
            team.bind([card(vector_store="Docs")], member="bob")  # type: ignore[call-arg]
    line = str(caught.value)
    assert "\n" not in line and f"#{card.__name__}" in line
    assert "vector_store='#VectorStore' (bound by 'alice')" in line
    assert "'bob' binds vector_store='#Docs'" in line


def test_a_refused_bind_leaves_the_running_plan_alone(tmp_path: Path) -> None:
    with Team("setting-kept", store=tmp_path / "team.db") as team:
        alice = {t.__name__: t for t in team.bind([PlanningTool()], member="alice").get_tools()}
        with pytest.raises(ValueError):
            team.bind([PlanningTool(vector_store=False)], member="bob")
        alice["update_planning"](create=[{"description": "Draft the release notes"}])
        bob = {t.__name__: t for t in team.bind([PlanningTool()], member="bob").get_tools()}
        assert "Draft the release notes" in bob["get_planning_task"](1)


def test_a_setting_recorded_in_the_store_is_named_after_a_resume(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    with Team("setting-resume", store=db) as team:
        team.bind([PlanningTool(vector_store="Docs")], member="alice")
    with Team.resume("setting-resume", store=db) as team, pytest.raises(ValueError) as caught:
        team.bind([PlanningTool()], member="bob")
    line = str(caught.value)
    assert "vector_store='#Docs' (recorded in the team's store)" in line
    assert "'bob' binds vector_store='#VectorStore'" in line


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("quoted", ["false", "True", " FALSE "])
def test_a_quoted_true_or_false_is_refused_not_taken_as_a_store_name(
    card: type[ToolCard], quoted: str
) -> None:
    """``vector_store: "false"`` in YAML is a string: the card was bound to a store named
    ``false``, recorded so, and the fixed config was refused from then on."""
    with pytest.raises(ValidationError) as caught:
        card.model_validate({"vector_store": quoted})
    assert f"give true or false without quotes, or a store's name, not {quoted!r}" in str(
        caught.value
    )
    named = card.model_validate({"vector_store": "Falsehoods"})
    assert named.model_dump()["vector_store"] == "Falsehoods"
