"""Hostile tool calls made by a member's model through the real agent path."""

from __future__ import annotations

from typing import Any

import pytest

from support.scripted import ScriptedMember, SequenceScript
from toolcards import NotificationTool, TeamTool
from toolcards.core.channels import Channels
from toolcards.governance import Policy
from toolcards.runtime import RoleProfile, Team
from toolcards.tools.notification.models import ACTOR_NAME
from toolcards.tools.team.params import FireMember, HireMember

BOSS_POLICY = Policy.from_dict(
    {
        "default_effect": "deny",
        "rules": [
            {
                "description": "nobody fires the boss",
                "callers": ["*"],
                "targets": ["fire_member"],
                "effect": "deny",
                "conditions": {"arguments": {"name": {"eq": "@boss-1"}}},
            },
            {
                "description": "nobody hires a boss",
                "callers": ["*"],
                "targets": ["hire_member"],
                "effect": "deny",
                "conditions": {"arguments": {"role": {"eq": "boss"}}},
            },
            {"callers": ["*"], "targets": ["*"], "effect": "allow"},
        ],
    }
)


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


@pytest.mark.parametrize(
    ("tool", "args", "refusal"),
    [
        ("fire_member", {"name": "boss-1"}, "denied: fire_member is not permitted"),
        ("fire_member", {"name": "boss-1\u3000"}, "invalid arguments for fire_member"),
        ("fire_member", {"name": " @boss-1\n"}, "invalid arguments for fire_member"),
        ("hire_member", {"role": " boss\u2003"}, "invalid arguments for hire_member"),
    ],
)
def test_a_policy_rule_on_a_name_or_role_holds_for_every_spelling(
    tool: str, args: dict[str, Any], refusal: str
) -> None:
    """The tools stripped names and roles (Unicode spaces too) and found @x from x after the
    policy had decided on the spelling sent: each of these fired or hired a boss."""
    script = SequenceScript([(tool, args)])
    card = TeamTool(
        hire_member=HireMember(expose={Channels.TOOL_CALL}),
        fire_member=FireMember(expose={Channels.TOOL_CALL}),
    )
    quiet = ScriptedMember()
    profiles = [
        RoleProfile(role="lead", model=script.model, cards=[card]),
        RoleProfile(role="boss", model=quiet.model),
    ]
    with Team("spellings", policy=BOSS_POLICY, profiles=profiles) as team:
        team.hire("boss")
        reply = team.send(team.hire("lead"), "go", timeout=30)
        assert refusal in reply
        assert sorted(m.name for m in team.members()) == ["@boss-1", "@lead-1"]


def test_a_model_cannot_name_its_hire_and_so_its_policy_identity() -> None:
    """``hire_member(role="helper", name="lead-7")`` made a helper ``agent.@lead-7``, which a
    caller rule kept for ``agent.@lead-*`` let purge records."""
    script = SequenceScript([("hire_member", {"role": "helper", "name": "lead-7"})])
    card = TeamTool(hire_member=HireMember(expose={Channels.TOOL_CALL}))
    quiet = ScriptedMember()
    profiles = [
        RoleProfile(role="worker", model=script.model, cards=[card]),
        RoleProfile(role="helper", model=quiet.model),
    ]
    with Team("named-hire", profiles=profiles) as team:
        team.send(team.hire("worker"), "go", timeout=30)
        [hire] = [d for d in script.seen_defs[0] if d.name == "hire_member"]
        assert list(hire.parameters_json_schema["properties"]) == ["role"]
        assert not team.is_member("@lead-7")
