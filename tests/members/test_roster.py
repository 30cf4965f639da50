"""Hiring and firing members, names, the roster and the member observer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from members.support import NotesCard, lifecycle, message_events
from support.scripted import Script, SequenceScript, wait_until
from toolcards.core import TeamManagementToolObserver, ToolCard
from toolcards.runtime import RoleProfile, Team
from toolcards.runtime.member_actor import HISTORY_KEY


def _team(team_id: str, script: Script | None = None, **profile: object) -> Team:
    model = (script or Script()).model
    fields: dict[str, object] = {"role": "researcher", "model": model, **profile}
    return Team(team_id, profiles=[RoleProfile.model_validate(fields)])


def test_hire_names_members_after_their_role_uniquely() -> None:
    with _team("names") as team:
        assert team.hire("researcher") == "@researcher-1"
        assert team.hire("researcher") == "@researcher-2"
        assert [m.name for m in team.members()] == ["@researcher-1", "@researcher-2"]


def test_hire_with_an_explicit_name_prefixes_the_at_sign() -> None:
    with _team("explicit") as team:
        assert team.hire("researcher", name="alice") == "@alice"
        assert team.is_member("@alice")


def test_hire_with_a_taken_name_is_refused() -> None:
    with _team("taken") as team:
        team.hire("researcher", name="@alice")
        with pytest.raises(ValueError, match="already taken"):
            team.hire("researcher", name="alice")
        assert [m.name for m in team.members()] == ["@alice"]


@pytest.mark.parametrize("name", ["", "a b", "#PlanningTool", "@", "x" * 80, "@a\nb"])
def test_hire_with_a_malformed_name_is_refused(name: str) -> None:
    with _team("malformed") as team:
        with pytest.raises(ValueError, match="member name"):
            team.hire("researcher", name=name)
        assert team.members() == []


def test_hire_of_an_unknown_role_lists_the_known_roles() -> None:
    with (
        _team("unknown-role") as team,
        pytest.raises(LookupError, match="no role 'writer'; roles: researcher"),
    ):
        team.hire("writer")


def test_hire_beyond_max_members_is_refused() -> None:
    with _team("capped", max_members=1) as team:
        team.hire("researcher")
        with pytest.raises(ValueError, match="limited to 1"):
            team.hire("researcher")


def test_hires_at_once_stay_within_max_members() -> None:
    """The cap counted only members already started: hires made at once (a model's parallel
    ``hire_members`` calls) all passed it while the others were starting (10 of a cap of 2)."""
    with _team("capped-race", max_members=2) as team:
        hired, refused = _hire_at_once(team, "researcher", 10)
        assert len(hired) == 2 and len(refused) == 8
        assert all("limited to 2" in why for why in refused)
        assert sorted(m.name for m in team.members()) == sorted(hired)


def _hire_at_once(team: Team, role: str, n: int) -> tuple[list[str], list[str]]:
    """``n`` hires of ``role`` started together: the names hired, and the refusals."""
    start = threading.Barrier(n)
    hired: list[str] = []
    refused: list[str] = []

    def hire() -> None:
        start.wait()
        try:
            hired.append(team.hire(role))
        except ValueError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=hire) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return hired, refused


def test_a_team_holds_at_most_its_max_members_by_default() -> None:
    """No role had a cap by default and the team none at all: a member's model hiring in a
    loop started 501 members (501 threads, roster rows and lifecycle events)."""
    from toolcards.runtime.members import DEFAULT_MAX_MEMBERS

    with _team("team-cap") as team:
        for _ in range(DEFAULT_MAX_MEMBERS):
            team.hire("researcher")
        with pytest.raises(ValueError) as refused:
            team.hire("researcher")
        assert str(refused.value) == (
            f"team team-cap is limited to {DEFAULT_MAX_MEMBERS} members; fire one first"
        )
        assert len(team.members()) == DEFAULT_MAX_MEMBERS
        team.fire("@researcher-1")
        assert team.hire("researcher") == f"@researcher-{DEFAULT_MAX_MEMBERS + 1}"


def test_hires_at_once_stay_within_the_teams_max_members() -> None:
    """Names being claimed count against the team's cap as the members started do."""
    profiles = [RoleProfile(role="r", model=Script().model)]
    with Team("team-cap-race", profiles=profiles, max_members=3) as team:
        _, refused = _hire_at_once(team, "r", 10)
        assert len(team.members()) == 3 and len(refused) == 7
        assert all("limited to 3 members" in why for why in refused)


def test_other_processes_members_count_against_the_teams_max_members(postgres_url: str) -> None:
    """On a shared store the roster rows of other processes are members of the team too."""
    from toolcards.runtime.member_restore import ROSTER

    profiles = [RoleProfile(role="r", model="test")]
    with Team("t", store=postgres_url, profiles=profiles, max_members=2) as team:
        team.hire("r")
        team.state_of(ROSTER).put("member:@far", {"role": "r", "hired_at": 1.0})
        with pytest.raises(ValueError, match="team t is limited to 2 members"):
            team.hire("r")


@pytest.mark.parametrize("cap", [0, -1])
def test_a_team_max_members_below_one_is_refused(cap: int) -> None:
    with pytest.raises(ValueError, match="max_members must be at least 1"):
        Team("bad-cap", max_members=cap)


def test_hire_records_a_lifecycle_event_with_the_role() -> None:
    with _team("hired-event") as team:
        name = team.hire("researcher")
        assert lifecycle(team, "member_hired") == [
            {"event": "member_hired", "name": name, "role": "researcher"}
        ]


def test_fire_stops_the_member_and_removes_it_from_the_roster() -> None:
    with _team("fire") as team:
        name = team.hire("researcher")
        assert team.fire(name) is True
        assert team.members() == []
        assert team.actor(name) is None
        fired = lifecycle(team, "member_fired")
        assert fired == [
            {"event": "member_fired", "name": name, "role": "researcher", "clean": True}
        ]


def test_firing_twice_is_a_clear_error() -> None:
    with _team("fire-twice") as team:
        name = team.hire("researcher")
        team.fire(name)
        with pytest.raises(LookupError, match="was fired"):
            team.fire(name)


def test_firing_an_unknown_name_lists_the_members() -> None:
    with _team("fire-unknown") as team:
        team.hire("researcher")
        with pytest.raises(LookupError, match="no member '@nobody'; members: @researcher-1"):
            team.fire("@nobody")


def test_rehire_after_fire_gets_a_new_name_and_a_fresh_conversation() -> None:
    script = Script()
    with _team("rehire", script) as team:
        first = team.hire("researcher")
        team.send(first, "remember the number 7")
        team.fire(first)
        second = team.hire("researcher")
        assert second == "@researcher-2"
        team.send(second, "hello")
        assert script.prompts() == ["hello"]


def test_rehire_under_the_fired_name_starts_without_its_history() -> None:
    script = Script()
    with _team("rehire-same", script) as team:
        team.hire("researcher", name="alice")
        team.send("@alice", "remember the number 7")
        team.fire("@alice")
        assert team.hire("researcher", name="alice") == "@alice"
        team.send("@alice", "hello")
        assert script.prompts() == ["hello"]


def test_members_of_one_profile_get_their_own_cards() -> None:
    card = NotesCard()
    with _team("own-cards", cards=[card]) as team:
        team.hire("researcher")
        team.send("@researcher-1", "/notes", command=True)
        assert card.observer_or_none() is None  # the profile's card is a template, never bound


def test_member_observer_hires_and_fires_through_the_team() -> None:
    with _team("observer") as team:
        observer = team.observer_for("@lead")
        assert isinstance(observer, TeamManagementToolObserver)
        name = observer.on_hire("researcher")
        assert team.is_member(name)
        observer.on_fire(name)
        assert not team.is_member(name)


def test_a_stopped_team_hires_no_one() -> None:
    team = _team("stopped")
    team.stop()
    from toolcards.runtime import TeamStopped

    with pytest.raises(TeamStopped):
        team.hire("researcher")


def test_hire_whose_agent_cannot_be_built_leaves_no_member_and_frees_the_name() -> None:
    profiles = [RoleProfile(role="broken", model="no-such-provider:model")]
    with Team("broken", profiles=profiles) as team:
        with pytest.raises(Exception, match="no-such-provider"):
            team.hire("broken", name="alice")
        assert team.members() == []
        team.profiles[0] = RoleProfile(role="broken", model="test")
        assert team.hire("broken", name="alice") == "@alice"


def test_member_observer_hires_under_a_chosen_name() -> None:
    with _team("observer-name") as team:
        assert team.observer_for("@lead").on_hire("researcher", "bob") == "@bob"


def test_messages_queued_for_a_fired_member_are_answered_without_a_model_turn() -> None:
    gate = threading.Event()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        gate.wait(30)
        return ModelResponse(parts=[TextPart("done")])

    script = Script(respond)
    with _team("queued", script) as team:
        name = team.hire("researcher")
        team.post(name, "first")
        queued = team.post(name, "second")
        wait_until(lambda: script.count == 1)
        try:
            assert team.fire(name, timeout=0.05) is False  # busy: stopped once its turn ends
        finally:
            gate.set()
        wait_until(lambda: len(message_events(team, "processed")) == 2)
        answer = [e for e in message_events(team, "sent") if e["reply_to"] == queued.id]
        assert answer[0]["text"] == f"{name} has left the team; the message was not handled"
        assert script.count == 1


def _answer_to(team: Team, message_id: str) -> str:
    """The text of the answer to the message ``message_id`` (waited for)."""

    def answers() -> list[str]:
        return [e["text"] for e in message_events(team, "sent") if e["reply_to"] == message_id]

    wait_until(lambda: bool(answers()))
    return answers()[0]


FIRED_MID_TURN = "error: ToolObserverGone: @worker-1 was fired: its tool send_message was not run"


@pytest.mark.parametrize(
    ("rest", "answer"),
    [
        ([], "hold: success: held"),
        ([("send_message", {"to": "@boss", "content": "hi"}), ("hold", {})], FIRED_MID_TURN),
    ],
    ids=["then-answers", "then-calls-tools"],
)
def test_a_member_fired_mid_turn_acts_no_more_and_leaves_its_name_no_history(
    rest: list[tuple[str, dict[str, Any]]], answer: str
) -> None:
    """Fire waits for a busy member a bounded time, then frees its name: the rest of the turn
    went on calling tools (``send_message``, card tools the observer does not see) and wrote
    back the conversation fire deleted, which the next member of that name loaded."""
    entered, gate = threading.Event(), threading.Event()
    runs: list[str] = []

    class HoldCard(ToolCard):
        def get_tools(self) -> list[Callable[..., Any]]:
            def hold() -> str:
                """Work until released."""
                runs.append("hold")
                entered.set()
                gate.wait(30)
                return "held"

            return [hold]

    worker = SequenceScript([("hold", {}), *rest])
    boss, newcomer = Script(), Script()
    profiles = [
        RoleProfile(role="worker", model=worker.model, cards=[HoldCard()]),
        RoleProfile(role="boss", model=boss.model),
        RoleProfile(role="auditor", model=newcomer.model),
    ]
    with Team("fired-mid-turn", profiles=profiles) as team:
        name = team.hire("worker")
        team.hire("boss", name="boss")
        asked = team.post(name, "go")
        assert entered.wait(30)
        try:
            assert team.fire(name, timeout=0.05) is False  # busy: its turn outlives the bound
        finally:
            gate.set()
        assert _answer_to(team, asked.id) == answer
        assert (runs, boss.count) == (["hold"], 0)
        assert team.state_of(name).get(HISTORY_KEY) is None
        wait_until(lambda: team.actor(name) is None)
        assert team.hire("auditor", name=name) == name
        team.send(name, "hello")
        assert newcomer.prompts() == ["hello"]
