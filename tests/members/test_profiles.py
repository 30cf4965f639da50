"""Role profiles: validation and serialization."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from support.scripted import Script
from toolcards import PlanningTool
from toolcards.runtime import RoleProfile, Team


def test_profile_with_a_spec_string_round_trips_through_json_with_its_cards() -> None:
    profile = RoleProfile(
        role="planner",
        description="Keeps the plan",
        model="openai:gpt-5",
        cards=[PlanningTool(vector_store=False)],
        roles=["planner"],
    )
    back = RoleProfile.model_validate_json(profile.model_dump_json())
    assert back == profile
    assert isinstance(back.cards[0], PlanningTool)
    assert profile.model_dump(mode="json")["cards"][0]["type"] == "PlanningTool"


def test_profile_with_a_model_object_refuses_to_serialize_and_names_the_role() -> None:
    profile = RoleProfile(role="researcher", model=Script().model)
    assert not profile.serializable
    with pytest.raises(PydanticSerializationError, match="'researcher' holds a FunctionModel"):
        profile.model_dump_json()


def test_profile_model_must_be_a_spec_string_or_a_model() -> None:
    with pytest.raises(ValidationError, match="got int"):
        RoleProfile(role="researcher", model=3)
    with pytest.raises(ValidationError, match="non-empty"):
        RoleProfile(role="researcher", model="  ")


@pytest.mark.parametrize("role", ["", "1st", "a b", "@lead", "x" * 60, "lead\n"])
def test_profile_role_must_be_a_plain_name(role: str) -> None:
    with pytest.raises(ValidationError, match="must start with a letter"):
        RoleProfile(role=role, model="test")


def test_profile_refuses_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="extra"):
        RoleProfile.model_validate({"role": "r", "model": "test", "identity": "agent.root"})


def test_team_refuses_two_profiles_for_one_role() -> None:
    profiles: list[RoleProfile | dict[str, Any]] = [
        RoleProfile(role="r", model="test"),
        {"role": "r", "model": "test"},
    ]
    with pytest.raises(ValueError, match="two profiles define the role 'r'"):
        Team("dupes", profiles=profiles)


def test_team_accepts_profiles_as_mappings() -> None:
    with Team("mappings", profiles=[{"role": "r", "model": "test", "cards": []}]) as team:
        assert team.profile("r").model == "test"


def test_fresh_cards_are_new_instances_that_keep_secrets_set_in_code() -> None:
    from pydantic import SecretStr

    from toolcards import SearchTool

    card = SearchTool(api_key=SecretStr("sk-test"))
    profile = RoleProfile(role="scout", model="test", cards=[card])
    fresh = profile.fresh_cards()[0]
    assert isinstance(fresh, SearchTool) and fresh is not card
    assert fresh.api_key is not None and fresh.api_key.get_secret_value() == "sk-test"
    assert fresh.observer_or_none() is None
    assert fresh == card


def test_fresh_cards_keep_the_host_grant_and_start_the_run_state_over() -> None:
    from toolcards import HostTrust
    from toolcards.core.trust import TRUST
    from toolcards.tools.mcp import MCPTool

    url = "https://crm.example/tenant-a"
    data = {"type": "MCPTool", "name": "crm", "transport": "streamable-http", "url": url}
    context = {TRUST: HostTrust(urls=[url])}
    profile = RoleProfile.model_validate(
        {"role": "r", "model": "test", "cards": [data]}, context=context
    )
    card = profile.cards[0]
    assert isinstance(card, MCPTool)
    card.use_workspaces_root("/srv/workspaces")
    card.get_toolsets()  # run state: the connection, built once per card
    fresh = profile.fresh_cards()[0]
    assert isinstance(fresh, MCPTool) and fresh is not card
    assert fresh._granted_url == url
    assert fresh._workspaces_root == "/srv/workspaces"
    assert fresh._toolset is None and fresh.get_toolsets()[0] is not card.get_toolsets()[0]


def test_fresh_cards_never_share_a_cards_own_objects() -> None:
    from members.support import NotesCard

    profile = RoleProfile(role="r", model="test", cards=[NotesCard()])
    first, second = profile.fresh_cards()[0], profile.fresh_cards()[0]
    assert isinstance(first, NotesCard) and isinstance(second, NotesCard)
    first._notes.append("mine")
    assert second._notes == []
