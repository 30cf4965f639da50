"""What the panels read from a team (no server, no browser)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dashboard.support import one_call_model
from toolcards import KnowledgeGraphTool
from toolcards.governance import AuditLog, AuditRecord
from toolcards.runtime import RoleProfile, Team
from toolcards.surfaces.dashboard import views
from toolcards.surfaces.dashboard.filters import clock, stamp
from toolcards.tools.knowledge_graph import views as graph_views
from toolcards.tools.planning import views as plan_views


def test_a_member_whose_model_is_not_here_is_listed_as_stopped(tmp_path: Path) -> None:
    profile = RoleProfile(
        role="scribe", model=one_call_model(lambda p: ("x", {})), cards=[], messaging=False
    )
    with Team("t", store=tmp_path / "team.db", profiles=[profile]) as team:
        name = team.hire("scribe")
    with Team.resume("t", tmp_path / "team.db") as team:  # no profiles: the member stays down
        members = views.team_view(team)["members"]
    assert [(m["name"], m["role"], m["state"]) for m in members] == [(name, "scribe", "stopped")]


def test_the_graph_draws_at_most_its_cap_and_always_the_search_hits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graph_views, "MAX_NODES", 5)
    with Team("g", store=tmp_path / "team.db") as team:
        factory = team.bind([KnowledgeGraphTool(vector_store=False)])
        tools = {t.__name__: t for t in factory.get_tools()}
        entities = [{"name": f"n{i:02d}", "entity_type": "t"} for i in range(12)]
        entities.append({"name": "zz needle", "entity_type": "t", "description": "haystack"})
        tools["update_graph"](create_entities=entities)
        view = graph_views.network(team, {}, "needle")
    names = {n["name"] for n in view["nodes"]}
    assert view["total_entities"] == 13
    assert len(names) == 6 and "zz needle" in names
    assert [h["name"] for h in view["search"]["entities"]] == ["zz needle"]


class _Counted:
    """An actor's state that counts the rows a view reads from it."""

    def __init__(self, state: Any) -> None:
        self.state, self.rows = state, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.state, name)

    def get(self, key: str) -> Any:
        found = self.state.get(key)
        self.rows += found is not None
        return found

    def iter_items(self, prefix: str = "", batch: int = 1000) -> Iterator[tuple[str, Any]]:
        for row in self.state.iter_items(prefix, batch):
            self.rows += 1
            yield row


def test_the_board_and_the_network_read_only_the_rows_they_return(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read of the board parsed every task to return 500 (1.8 s at 60,000 tasks), each
    draw of the network read every relation (0.7 s at 60,000)."""
    from toolcards import PlanningTool

    monkeypatch.setattr(plan_views, "MAX_TASKS", 5)
    monkeypatch.setattr(graph_views, "MAX_EDGES", 4)
    with Team("v", store=tmp_path / "team.db") as team:
        cards = [PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)]
        tools = {t.__name__: t for t in team.bind(cards).get_tools()}
        tools["update_planning"](create=[{"description": f"t{i}"} for i in range(12)])
        tools["update_graph"](
            create_entities=[{"name": n, "entity_type": "t"} for n in "ab"],
            create_relations=[{"from_entity": "a", "to_entity": "b", "relation_type": f"r{i}"}
                              for i in range(10)],
        )  # fmt: skip
        state_of, counted = team.state_of, dict[str, _Counted]()

        def counting(name: str) -> _Counted:
            return counted.setdefault(name, _Counted(state_of(name)))

        monkeypatch.setattr(team, "state_of", counting)
        board = plan_views.board(team, {}, "")
        network = graph_views.network(team, {}, "")
        reads = {name: state.rows for name, state in counted.items()}
        state_of("#PlanningTool").put("meta:other", 1)  # a write around the actor: no summary
        counted.clear()
        unsummarized = plan_views.board(team, {}, "")
    assert reads == {"#PlanningTool": 5 + 2, "#KnowledgeGraphTool": 2 + 4}  # 2 summary rows
    assert counted["#PlanningTool"].rows == 5 + 2
    assert [t["id"] for t in board["tasks"]] == [1, 2, 3, 4, 5] and board["total"] == 12
    assert [t["id"] for t in unsummarized["tasks"]] == [1, 2, 10, 11, 12]  # in key order
    assert [e["type"] for e in network["edges"]] == ["r0", "r1", "r2", "r3"]
    assert (network["more_edges"], network["total_relations"]) == (6, 10)


def test_panels_without_a_team_say_so() -> None:
    assert views.team_view(None) == {"available": False}
    assert views.events_view(None)["available"] is False


def test_card_panels_of_a_team_without_their_actors_say_so(tmp_path: Path) -> None:
    with Team("empty", store=tmp_path / "team.db") as team:
        assert plan_views.board(team, {}, "")["available"] is False
        assert graph_views.network(team, {}, "") == {"available": False}


def test_huge_approval_arguments_are_never_cut_for_an_approver() -> None:
    """The inbox reads no text too long to show whole (it shows none of it, grants nothing
    beside it); the request's own page shows it whole."""
    from toolcards.governance import ApprovalBroker, Identity
    from toolcards.governance.approvals.view import INLINE_LIMIT

    broker = ApprovalBroker()
    args = {f"part{i}": "x" * 1_500 for i in range(40)}  # about 60,000 characters in all
    request = broker.request(
        tool_id="write", args=args, identity=Identity("agent.a", "agent"), reason="r"
    )
    [item] = views.approvals_view(broker, exact=True)["pending"]
    assert item["args"].text == "" and not item["whole"]
    assert item["args"].size == len(request.args_json) > INLINE_LIMIT and not item["args"].fits
    page = views.one_approval_view(broker, request.approval_id, exact=True)
    assert page is not None and page["item"]["whole"]
    assert json.loads(page["item"]["args"].text) == args


@pytest.mark.parametrize("stored", [1e300, -1e300, float("nan"), float("inf"), "noon", True])
def test_a_stored_time_no_clock_can_show_reads_as_a_dash(stored: object) -> None:
    """An event or audit row's time is whatever its writer stored: time.localtime raised on
    these, and the page that showed one answered 500."""
    assert clock(stored) == stamp(stored) == "-"
    assert clock(0.5) != "-" and stamp(1_700_000_000) != "-"


def _rows(audit: AuditLog, count: int) -> None:
    for n in range(count):
        audit.record(
            AuditRecord(1.0 + n, "alice", "user", (), "python", "pay", f"c{n}", {"n": n},
                        decision="allow", outcome="ok")
        )  # fmt: skip


def test_the_audit_panel_shows_the_chains_state_and_a_break(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    with AuditLog(path, durability="sync", team_id="crm") as audit:
        _rows(audit, 3)
        held = views.audit_view(audit, views.AuditFilters())["chain"]
        with sqlite3.connect(path) as db:
            db.execute("UPDATE audit SET tool = 'refund' WHERE call_id = 'c1'")
        cached = views.chain_state(audit)
        broken = views.chain_state(audit, now=time.monotonic() + views.CHAIN_CHECK_EVERY + 1)
    assert held.ok and held.rows == 3 and held.message.startswith("audit chain of team 'crm' holds")
    assert cached is held  # a check reads every row: at most one per CHAIN_CHECK_EVERY
    assert not broken.ok and broken.message.endswith("(#2, call c1) was changed")


def test_an_audit_panel_of_a_team_without_rows_names_the_teams_that_have_some(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    with AuditLog(path, durability="sync", team_id="default") as written:
        _rows(written, 2)
    with AuditLog(path, durability="sync", team_id="toolcards") as audit:
        shown = views.audit_view(audit, views.AuditFilters())
        filtered = views.audit_view(audit, views.AuditFilters(tool="pay"))
    assert shown["rows"] == []
    assert shown["elsewhere"].endswith(
        "has no audit rows of team 'toolcards'; it has rows of team 'default': "
        "select one with --team default"
    )
    assert filtered["elsewhere"] == ""  # a filter that finds nothing is not a team question


def test_the_live_panel_finds_the_teams_work_among_its_starts_and_stops(tmp_path: Path) -> None:
    """Each CLI call of a file store starts and stops the team and its actors: six lifecycle
    events around one change. The panel shows the latest changes, and those lifecycle events
    of the same span marked to be hidden (before: the latest 5 events, all starts and stops)."""
    from toolcards import PlanningTool

    store = tmp_path / "team.db"
    for i in range(8):
        with Team("t", store=store) as team:
            bound = team.bind([PlanningTool(vector_store=False)])
            tools = {t.__name__: t for t in bound.get_tools()}
            tools["update_planning"](create=[{"description": f"task {i}"}])
    with Team.open_read_only("t", store) as team:
        view = views.events_view(team, n=5)
    work = [json.loads(e["text"])["created"][0]["description"] for e in view["events"]
            if not e["lifecycle"]]  # fmt: skip
    assert work == [f"task {i}" for i in (7, 6, 5, 4, 3)]
    starts = [e for e in view["events"] if e["lifecycle"]]
    assert 0 < len(starts) == view["lifecycle"] <= 5
    assert all(e["tool_id"] == "team" for e in starts)
    assert [e["seq"] for e in view["events"] if e["tool_id"] == "team"] == sorted(
        (e["seq"] for e in starts), reverse=True
    )


UNREADABLE_TIMES = {"a word": "yesterday", "a boolean": True, "NaN": float("nan"),
                    "an int no float holds": 10**400, "a list": [1]}  # fmt: skip


@pytest.mark.parametrize("hired_at", UNREADABLE_TIMES.values(), ids=list(UNREADABLE_TIMES))
def test_a_roster_row_without_a_readable_hiring_time_lists_its_member(
    tmp_path: Path, hired_at: object
) -> None:
    """A roster row left by another writer (before: ``float('yesterday')`` raised, and the
    page holding the approvals inbox answered 500)."""
    from toolcards.runtime.member_restore import ROSTER

    with Team("t", store=tmp_path / "team.db") as team:
        team.state_of(ROSTER).put("member:ghost", {"role": "x", "hired_at": hired_at})
        members = views.team_view(team)["members"]
    assert [(m["name"], m["state"], m["last_at"]) for m in members] == [("ghost", "stopped", 0.0)]
