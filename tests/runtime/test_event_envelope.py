"""The event envelope: an id, the sender and a display type, stored and read back; rows
stored before the envelope existed still load."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from runtime.conftest import TeamMaker
from toolcards.core import ToolStateEvent
from toolcards.runtime import LIFECYCLE, Team, ToolActor


class Noter(ToolActor):
    def note(self, text: str, sender: str | None = None) -> ToolStateEvent | None:
        return self.emit({"note": text}, sender=sender)


def _notes(team: Team) -> list[ToolStateEvent]:
    return [e for e in team.events() if e.tool_id == "#Noter"]


def test_an_event_keeps_its_id_sender_and_display_type_on_every_read(
    make_local_team: TeamMaker,
) -> None:
    with make_local_team("envelope") as team:
        live = team.tool_actor("#Noter", Noter).ask(Noter.note, "hi", "alice")
        assert live is not None
        (stored,) = _notes(team)
        assert (stored.id, stored.sender, stored.display_type) == (
            live.id,
            "alice",
            "tool_state",
        )
        assert len(live.id) == 32 and _notes(team)[0].id == live.id


def test_two_events_never_share_an_id(make_local_team: TeamMaker) -> None:
    with make_local_team("ids") as team:
        noter = team.tool_actor("#Noter", Noter)
        noter.ask(Noter.note, "a")
        noter.ask(Noter.note, "b")
        ids = [e.id for e in team.events()]
        assert len(ids) == len(set(ids))


def test_lifecycle_events_display_as_lifecycle(make_local_team: TeamMaker) -> None:
    with make_local_team("kinds") as team:
        kinds = {e.display_type for e in team.events() if e.tool_id == LIFECYCLE}
        assert kinds == {"lifecycle"}


def test_an_event_given_to_a_member_observer_keeps_its_id_and_names_the_member(
    make_local_team: TeamMaker,
) -> None:
    with make_local_team("given") as team:
        given = ToolStateEvent(tool_id="#Ext", seq=1, payload={"x": 1}, display_type="metric")
        team.observer_for("erin").notify_event(given)
        (stored,) = [e for e in team.events() if e.tool_id == "#Ext"]
        assert (stored.id, stored.sender, stored.display_type) == (given.id, "erin", "metric")


def _strip_envelope(db: Path) -> None:
    """Make ``db`` look written before events carried an envelope (those columns gone)."""
    conn = sqlite3.connect(db)
    try:
        for column in ("event_id", "sender", "display_type"):
            conn.execute(f"ALTER TABLE events DROP COLUMN {column}")
        conn.commit()
    finally:
        conn.close()


def _columns(db: Path) -> set[Any]:
    conn = sqlite3.connect(db)
    try:
        return {row[1] for row in conn.execute("PRAGMA table_info(events)")}
    finally:
        conn.close()


def test_rows_stored_before_the_envelope_load_with_a_stable_id(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Team("old", store=str(db)) as team:
        team.tool_actor("#Noter", Noter).ask(Noter.note, "from before", "alice")
    _strip_envelope(db)
    assert "sender" not in _columns(db)
    with Team.resume("old", str(db)) as team:
        (old,) = _notes(team)
        assert old.payload == {"note": "from before"}
        assert (old.sender, old.display_type) == (None, "tool_state")
        assert _notes(team)[0].id == old.id  # derived from its place in the log: stable
        team.tool_actor("#Noter", Noter).ask(Noter.note, "after", "bob")
        assert [(e.payload["note"], e.sender) for e in _notes(team)] == [
            ("from before", None),
            ("after", "bob"),
        ]
    assert {"event_id", "sender", "display_type"} <= _columns(db)
