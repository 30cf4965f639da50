"""Hiring and firing through TeamTool bound to a real team member."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from support.scripted import ScriptedMember
from team_tool.conftest import tools_of
from toolcards import TeamTool, ToolFactory
from toolcards.core.channels import Channels
from toolcards.core.errors import RetriableError
from toolcards.runtime import RoleProfile, Team
from toolcards.tools.team.params import HireMember


def lead_tools(team: Team, **fields: Any) -> dict[str, Any]:
    lead = team.hire("lead")
    return tools_of(team.bind([TeamTool(**fields)], member=lead))


def lead_commands(team: Team, **fields: Any) -> Any:
    lead = team.hire("lead")
    return team.bind([TeamTool(**fields)], member=lead).get_commands()


def test_tools_and_commands_on_their_channels() -> None:
    factory = ToolFactory([TeamTool()])
    assert sorted(fn.__name__ for fn in factory.get_tools()) == [
        "fire_members",
        "hire_members",
        "team_activity",
    ]
    assert factory.get_commands().names() == [
        "fire_member",
        "hire_member",
        "team_activity",
        "team_members",
        "team_roles",
    ]


def test_hire_members_hires_one_member_per_role(team: Team) -> None:
    text = lead_tools(team)["hire_members"](["worker", "worker"])
    assert text == "hired 2 of 2:\n- worker: hired @worker-1\n- worker: hired @worker-2"
    assert {m.name for m in team.members()} == {"@lead-1", "@worker-1", "@worker-2"}


def test_an_unknown_role_is_reported_beside_the_hires(team: Team) -> None:
    text = lead_tools(team)["hire_members"](["worker", "astronaut"])
    assert text.startswith("hired 1 of 2:\n- worker: hired @worker-1\n- astronaut: not hired:")
    assert "no role 'astronaut'" in text


def test_hires_beyond_the_teams_max_members_are_reported_to_the_model(
    worker: ScriptedMember,
) -> None:
    """Five roles per call, but calls without end: a lead's model hired 500 workers."""
    profiles = [
        RoleProfile(role="lead", model=worker.model),
        RoleProfile(role="worker", model=worker.model),
    ]
    with Team("capped", profiles=profiles, max_members=3) as team:
        text = lead_tools(team)["hire_members"](["worker"] * 3)
        refusal = "not hired: team capped is limited to 3 members; fire one first"
        assert text == (
            "hired 2 of 3:\n- worker: hired @worker-1\n- worker: hired @worker-2\n"
            f"- worker: {refusal}"
        )
        assert len(team.members()) == 3


def test_too_many_roles_in_one_call_is_retriable(team: Team) -> None:
    tools = lead_tools(team, hire_members={"max_per_call": 2})
    with pytest.raises(RetriableError, match="at most 2"):
        tools["hire_members"](["worker"] * 3)
    assert len(team.members()) == 1


def test_an_empty_role_list_is_retriable(team: Team) -> None:
    with pytest.raises(RetriableError, match="non-empty list"):
        lead_tools(team)["hire_members"]([])


def test_hire_member_command_takes_a_chosen_name(team: Team) -> None:
    commands = lead_commands(team)
    assert commands.dispatch("/hire_member worker alice") == "hired @alice"
    assert team.is_member("@alice")


def test_the_model_facing_hire_member_takes_no_name(team: Team) -> None:
    """A model that named its hire chose its policy identity: a helper hired as @lead-7 was
    ``agent.@lead-7`` and passed a caller rule kept for ``agent.@lead-*``."""
    hire_member = lead_tools(team, hire_member=HireMember(expose={Channels.TOOL_CALL}))
    tool = hire_member["hire_member"]
    assert list(inspect.signature(tool).parameters) == ["role"]
    with pytest.raises(TypeError):
        tool("worker", name="lead-7")
    assert tool("worker") == "hired @worker-1"
    assert not team.is_member("@lead-7")


def test_a_taken_name_is_not_hired_twice(team: Team) -> None:
    commands = lead_commands(team)
    commands.dispatch("/hire_member worker alice")
    answer = commands.dispatch("/hire_member boss alice")
    assert "not hired" in answer and "already taken" in answer
    assert [m.role for m in team.members() if m.name == "@alice"] == ["worker"]


def clerks(quiet: ScriptedMember) -> list[RoleProfile]:
    return [
        RoleProfile(role="intern", model=quiet.model),
        RoleProfile(role="admin", model=quiet.model, roles=["data_admin", "staff"]),
        RoleProfile(role="helper", model=quiet.model, roles=["staff"]),
    ]


def test_a_member_hires_no_role_with_policy_roles_its_own_lacks(worker: ScriptedMember) -> None:
    """An intern without ``data_admin`` hired an admin and had it run the tool the policy
    kept for data admins (the policy cannot narrow the list ``roles``)."""
    with Team("escalation", profiles=clerks(worker)) as team:
        intern = team.hire("intern")
        tools = tools_of(team.bind([TeamTool()], member=intern))
        assert tools["hire_members"](["admin", "helper", "intern"]).splitlines() == [
            "hired 1 of 3:",
            "- admin: not hired: role 'admin' is not hireable here",
            "- helper: not hired: role 'helper' is not hireable here",
            "- intern: hired @intern-2",
        ]
        admin = team.hire("admin")
        tools = tools_of(team.bind([TeamTool()], member=admin))
        text = tools["hire_members"](["admin", "helper"])
        assert text == "hired 2 of 2:\n- admin: hired @admin-2\n- helper: hired @helper-1"


def test_hireable_globs_replace_the_default(worker: ScriptedMember) -> None:
    with Team("hireable", profiles=clerks(worker)) as team:
        admin = team.hire("admin")
        tools = tools_of(team.bind([TeamTool(hireable=["help*"])], member=admin))
        assert tools["hire_members"](["intern", "helper"]).splitlines() == [
            "hired 1 of 2:",
            "- intern: not hired: role 'intern' is not hireable here",
            "- helper: hired @helper-1",
        ]


def test_fire_members_reports_each_name(team: Team) -> None:
    team.hire("worker")
    team.hire("boss")
    tools = lead_tools(team, protected=["@boss-*"])
    text = tools["fire_members"](
        ["@worker-1", "@lead-1", "#NotificationTool", "@boss-1", "@ghost-7", "@worker-1"]
    )
    assert text.splitlines() == [
        "fired 1 of 6:",
        "- @worker-1: fired",
        "- @lead-1: refused: you cannot fire yourself",
        "- #NotificationTool: refused: names starting with '#' are tool actors, not members",
        "- @boss-1: refused: this member is protected",
        "- @ghost-7: not fired: no such member on the team (unknown or already fired)",
        "- @worker-1: not fired: no such member on the team (unknown or already fired)",
    ]


def test_a_fired_member_leaves_the_roster(team: Team) -> None:
    worker = team.hire("worker")
    lead_tools(team)["fire_members"]([worker])
    assert not team.is_member(worker)
    assert team.actor(worker) is None


def test_refused_members_stay_on_the_team(team: Team) -> None:
    boss = team.hire("boss")
    lead_tools(team, protected=["boss-1"])["fire_members"]([boss, "@lead-1"])
    assert team.is_member(boss) and team.is_member("@lead-1")


def test_fire_member_command_applies_the_same_guards(team: Team) -> None:
    commands = lead_commands(team)
    assert commands.dispatch("/fire_member @lead-1") == "@lead-1: refused: you cannot fire yourself"


def test_firing_twice_with_the_command_reports_the_second(team: Team) -> None:
    worker = team.hire("worker")
    commands = lead_commands(team)
    assert commands.dispatch(f"/fire_member {worker}") == f"{worker}: fired"
    assert "not fired" in commands.dispatch(f"/fire_member {worker}")


def test_team_members_command_lists_roles_and_marks_the_caller(team: Team) -> None:
    team.hire("worker")
    text = lead_commands(team).dispatch("/team_members")
    assert "- @worker-1 (worker) idle" in text
    assert "- @lead-1 (lead) idle - you" in text


def test_team_roles_command_lists_profiles(team: Team) -> None:
    text = lead_commands(team).dispatch("/team_roles")
    assert "- worker: Does the work" in text and "- boss: Owns the budget" in text


def test_management_without_a_team_member_is_retriable() -> None:
    tools = tools_of(ToolFactory([TeamTool()]))
    with pytest.raises(RetriableError, match="bound to a team member"):
        tools["hire_members"](["worker"])
