"""A resumed team (real SQLite file) re-hires its members, who continue their conversations."""

from __future__ import annotations

from pathlib import Path

import pytest

from members.support import lifecycle
from support.scripted import Script
from toolcards.runtime import RoleProfile, Team


def _profiles(script: Script) -> list[RoleProfile]:
    return [RoleProfile(role="researcher", model=script.model)]


def test_resumed_member_remembers_the_earlier_conversation(tmp_path: Path) -> None:
    store = tmp_path / "team.db"
    script = Script()
    with Team("memory", store=store, profiles=_profiles(script)) as team:
        name = team.hire("researcher")
        team.send(name, "my name is Ada")
    with Team.resume("memory", store=store, profiles=_profiles(script)) as team:
        assert [m.name for m in team.members()] == [name]
        assert team.send(name, "what is my name?") == "echo: what is my name?"
    assert script.prompts() == ["my name is Ada", "what is my name?"]
    history = script.calls[-1][0]
    assert history[1].parts[0].content == "echo: my name is Ada"  # type: ignore[union-attr]


def test_resumed_team_does_not_reuse_default_names(tmp_path: Path) -> None:
    store = tmp_path / "team.db"
    with Team("counter", store=store, profiles=_profiles(Script())) as team:
        team.fire(team.hire("researcher"))
    with Team.resume("counter", store=store, profiles=_profiles(Script())) as team:
        assert team.members() == []
        assert team.hire("researcher") == "@researcher-2"


def test_fired_member_is_not_rehired_on_resume(tmp_path: Path) -> None:
    store = tmp_path / "team.db"
    with Team("fired", store=store, profiles=_profiles(Script())) as team:
        kept, gone = team.hire("researcher"), team.hire("researcher")
        team.fire(gone)
    with Team.resume("fired", store=store, profiles=_profiles(Script())) as team:
        assert [m.name for m in team.members()] == [kept]
        assert lifecycle(team, "member_restored") == [
            {"event": "member_restored", "name": kept, "role": "researcher"}
        ]


def test_profile_with_a_spec_string_is_restored_from_the_store(tmp_path: Path) -> None:
    store = tmp_path / "team.db"
    profile = RoleProfile(role="tester", model="test", instructions="Be brief.")
    with Team("spec", store=store, profiles=[profile]) as team:
        name = team.hire("tester")
    with Team.resume("spec", store=store) as team:
        assert [m.name for m in team.members()] == [name]
        assert team.profile("tester") == profile
        assert team.send(name, "hi")  # TestModel answers without any network


def test_member_whose_model_object_is_not_given_again_waits_for_its_profile(
    tmp_path: Path,
) -> None:
    store = tmp_path / "team.db"
    script = Script()
    with Team("deferred", store=store, profiles=_profiles(script)) as team:
        name = team.hire("researcher")
        team.send(name, "remember me")
    with Team.resume("deferred", store=store) as team:
        assert team.members() == []
        [deferred] = lifecycle(team, "member_restore_deferred")
        assert deferred["name"] == name
    with Team.resume("deferred", store=store, profiles=_profiles(script)) as team:
        team.send(name, "back again")
    assert script.prompts() == ["remember me", "back again"]


def test_member_that_fails_to_restart_is_reported_and_kept_for_a_later_resume(
    tmp_path: Path,
) -> None:
    store = tmp_path / "team.db"
    with Team("restart", store=store, profiles=_profiles(Script())) as team:
        name = team.hire("researcher")
    broken = [RoleProfile(role="researcher", model="no-such-provider:model")]
    with (
        pytest.warns(UserWarning, match=f"member {name} failed to restart"),
        Team.resume("restart", store=store, profiles=broken) as team,
    ):
        assert team.members() == []
        assert lifecycle(team, "member_restore_failed")[0]["name"] == name
    with Team.resume("restart", store=store, profiles=_profiles(Script())) as team:
        assert [m.name for m in team.members()] == [name]
