"""Hostile tool calls made by a member's model through the real agent path."""

from __future__ import annotations

from typing import Any

import pytest

from support.scripted import ScriptedMember
from toolcards import NotificationTool, TeamTool
from toolcards.runtime import RoleProfile, Team
from toolcards.tools.notification.models import ACTOR_NAME


def one_call(tool: str, args: dict[str, Any]) -> ScriptedMember:
    return ScriptedMember(lambda prompt: (tool, args) if "go" in prompt else None)


def run(member: ScriptedMember, cards: list[Any]) -> tuple[Team, str, str]:
    quiet = ScriptedMember()
    team = Team(
        "hostile",
        ":memory:",
        profiles=[
            RoleProfile(role="agent", model=member.model, cards=cards),
            RoleProfile(role="other", model=quiet.model),
        ],
    )
    team.hire("other")
    name = team.hire("agent")
    return team, name, team.send(name, "go", timeout=30)


@pytest.mark.parametrize("delay", [-5, 10**9, "1e9", "1.5", 0])
def test_out_of_range_delays_come_back_as_retries(delay: object) -> None:
    member = one_call("register_notification", {"content": "x", "delay_seconds": delay})
    team, _, answer = run(member, [NotificationTool()])
    try:
        assert list(team.state_of(ACTOR_NAME).items("entry:")) == []
        assert "delay_seconds" in member.tool_results[0] and "scheduled" not in answer
    finally:
        team.stop()


def test_an_owner_smuggled_in_arguments_is_rejected() -> None:
    args = {"content": "x", "delay_seconds": 30, "owner": "@other-1"}
    member = one_call("register_notification", args)
    team, _, answer = run(member, [NotificationTool()])
    try:
        assert "extra_forbidden" in answer
        assert list(team.state_of(ACTOR_NAME).items("entry:")) == []
    finally:
        team.stop()


def test_a_model_cannot_fire_its_caller_through_a_bare_name() -> None:
    member = one_call("fire_members", {"names": ["agent-1"]})
    team, name, answer = run(member, [TeamTool()])
    try:
        assert "refused: you cannot fire yourself" in answer
        assert team.is_member(name)
    finally:
        team.stop()


def test_a_model_cannot_fire_a_tool_actor() -> None:
    member = one_call("fire_members", {"names": [ACTOR_NAME]})
    team, _, answer = run(member, [TeamTool(), NotificationTool()])
    try:
        assert "tool actors, not members" in answer
    finally:
        team.stop()
