"""The planning and knowledge-graph cards emit their registered payload models: team.events()
gives them back typed, with the member who caused them as the sender."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.card import KnowledgeGraphTool
from toolcards.tools.knowledge_graph.models import EntityChange, GraphDelta, RelationName
from toolcards.tools.planning.card import PlanningTool
from toolcards.tools.planning.models import PlanningDelta, Task


def _tools(team: Team, member: str, card: Any) -> dict[str, Any]:
    return {fn.__name__: fn for fn in team.bind([card], member=member).get_tools()}


def test_planning_events_are_planning_deltas_sent_by_the_member(tmp_path: Path) -> None:
    with Team("plan-typed", store=str(tmp_path / "team.db")) as team:
        plan = _tools(team, "alice", PlanningTool(vector_store=False))
        plan["update_planning"](create=[{"description": "Draft the notes"}])
        (event,) = [e for e in team.events() if e.tool_id == "#PlanningTool"]
        assert isinstance(event.payload, PlanningDelta)
        assert isinstance(event.payload.created[0], Task)
        assert event.payload.created[0].description == "Draft the notes"
        assert event.sender == "alice"


def test_graph_events_are_graph_deltas_sent_by_the_member(tmp_path: Path) -> None:
    with Team("graph-typed", store=str(tmp_path / "team.db")) as team:
        graph = _tools(team, "bob", KnowledgeGraphTool(vector_store=False))
        graph["update_graph"](
            create_entities=[{"name": "ledger", "entity_type": "system", "description": "x"}]
        )
        (event,) = [e for e in team.events() if e.tool_id == "#KnowledgeGraphTool"]
        assert isinstance(event.payload, GraphDelta)
        assert event.payload.entities_added == [EntityChange(name="ledger", entity_type="system")]
        assert event.sender == "bob"


def test_a_graph_event_stored_with_whole_entities_reads_back_as_their_names() -> None:
    entity = {"name": "a", "entity_type": "t", "description": "d", "observations": ["o"]}
    relation = {"from_entity": "a", "to_entity": "b", "relation_type": "r", "description": "d"}
    old = {"entities_modified": [entity], "relations_removed": [relation]}
    delta = GraphDelta.model_validate(old)
    assert delta.entities_modified == [EntityChange(name="a", entity_type="t")]
    assert delta.relations_removed == [
        RelationName(from_entity="a", to_entity="b", relation_type="r")
    ]


READER = """
import json, sys
from toolcards.runtime.events import EventLog
from toolcards.stores.open import open_team_store

before = "toolcards.tools.planning.models" in sys.modules
log = EventLog(open_team_store(sys.argv[1]), sys.argv[2])
kinds = [type(e.payload).__name__ for e in log.events() if e.tool_id.startswith("#")]
print(json.dumps({"imported_before": before, "kinds": kinds}))
"""


def test_a_process_that_never_bound_the_cards_reads_their_events_typed(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    with Team("read-typed", store=str(db)) as team:
        _tools(team, "alice", PlanningTool(vector_store=False))["update_planning"](
            create=[{"description": "a"}]
        )
        _tools(team, "alice", KnowledgeGraphTool(vector_store=False))["update_graph"](
            create_entities=[{"name": "n", "entity_type": "t", "description": "d"}]
        )
    done = subprocess.run(
        [sys.executable, "-c", READER, str(db), "read-typed"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"imported_before": False, "kinds": ["PlanningDelta", "GraphDelta"]}
