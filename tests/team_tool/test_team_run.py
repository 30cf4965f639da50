"""End to end: a lead member hires a helper through TeamTool, the helper schedules a
notification, the team stops and resumes from its SQLite file, and the helper receives it."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from support.scripted import ScriptedMember, wait_until
from toolcards import NotificationTool, TeamTool
from toolcards.runtime import RoleProfile, Team
from toolcards.tools.notification.models import ACTOR_NAME

REMINDER = "Check the nightly build"


def lead_plan(prompt: str) -> tuple[str, dict[str, Any]] | None:
    return ("hire_members", {"roles": ["helper"]}) if "hire a helper" in prompt else None


def helper_plan(delay: int) -> Callable[[str], tuple[str, dict[str, Any]] | None]:
    """A helper that schedules the reminder in ``delay`` seconds when asked."""

    def plan(prompt: str) -> tuple[str, dict[str, Any]] | None:
        if "remind me" in prompt:
            return ("register_notification", {"content": REMINDER, "delay_seconds": delay})
        return None

    return plan


def stored_contents(store: Path) -> list[str]:
    """The pending entries in the stopped team's file, read with plain sqlite3."""
    with closing(sqlite3.connect(store)) as conn:
        rows = conn.execute(
            "SELECT value FROM state WHERE actor=? AND key LIKE 'entry:%'", (ACTOR_NAME,)
        ).fetchall()
    return [json.loads(value)["content"] for (value,) in rows]


def profiles(lead: ScriptedMember, helper: ScriptedMember) -> list[RoleProfile]:
    return [
        RoleProfile(role="lead", model=lead.model, cards=[TeamTool()]),
        RoleProfile(
            role="helper", description="Runs checks", model=helper.model, cards=[NotificationTool()]
        ),
    ]


def test_a_notification_scheduled_before_a_stop_reaches_the_member_after_resume(
    tmp_path: Path,
) -> None:
    # 3 s: long enough that the team surely stops before it is due, even on a loaded machine
    lead, helper = ScriptedMember(lead_plan), ScriptedMember(helper_plan(3))
    store = tmp_path / "team.db"
    team = Team("acceptance", store, profiles=profiles(lead, helper))
    try:
        boss = team.hire("lead")
        assert team.send(boss, "Please hire a helper.", timeout=30).startswith("done: hired 1 of 1")
        assert [m.name for m in team.members() if m.role == "helper"] == ["@helper-1"]
        answer = team.send("@helper-1", "Please remind me about the build.", timeout=30)
        assert answer == "done: notification #1 scheduled in 3s"
    finally:
        team.stop()
    assert not helper.saw("[notification #1]")  # still pending when the team stopped
    assert stored_contents(store) == [REMINDER]

    resumed = Team.resume("acceptance", store, profiles=profiles(lead, helper))
    try:
        assert wait_until(lambda: helper.saw(f"[notification #1] {REMINDER}"), timeout=15)
        assert not lead.saw(REMINDER)
        assert wait_until(lambda: not list(resumed.state_of(ACTOR_NAME).items("entry:")))
    finally:
        resumed.stop()


def test_a_notification_is_delivered_while_the_team_runs(tmp_path: Path) -> None:
    lead, helper = ScriptedMember(lead_plan), ScriptedMember(helper_plan(1))  # the shortest delay
    with Team("live", tmp_path / "team.db", profiles=profiles(lead, helper)) as team:
        name = team.hire("helper")
        team.send(name, "remind me", timeout=30)
        assert wait_until(lambda: helper.saw(REMINDER), timeout=15)
        fired = [e.payload for e in team.events() if e.tool_id == ACTOR_NAME]
        assert fired[-1] == {"fired": {"id": 1, "owner": name}}
