"""Message telemetry in the event log, and who is busy on what, derived from it."""

from __future__ import annotations

import threading
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from members.support import message_events
from support.scripted import Script, wait_until
from toolcards.core import ToolStateEvent
from toolcards.runtime import MESSAGES, RoleProfile, Team, member_activity


def _team(team_id: str, script: Script) -> Team:
    return Team(team_id, profiles=[RoleProfile(role="researcher", model=script.model)])


def test_a_message_is_recorded_as_sent_received_processed_and_answered() -> None:
    with _team("telemetry", Script()) as team:
        name = team.hire("researcher")
        team.send(name, "status?")
        events = message_events(team)
        assert [e["event"] for e in events] == ["sent", "received", "sent", "processed"]
        asked, received, answer, processed = events
        assert (asked["sender"], asked["recipient"], asked["text"]) == ("user", name, "status?")
        assert received["message_id"] == asked["message_id"] == processed["message_id"]
        assert (answer["sender"], answer["recipient"]) == (name, "user")
        assert answer["text"] == "echo: status?"
        assert answer["reply_to"] == asked["message_id"]
        assert processed["reply_id"] == answer["message_id"]


def test_activity_shows_a_busy_member_and_its_task_until_it_answers() -> None:
    gate = threading.Event()

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        gate.wait(30)
        return ModelResponse(parts=[TextPart("done")])

    with _team("busy", Script(respond)) as team:
        name = team.hire("researcher")
        idle = team.hire("researcher")
        message = team.post(name, "summarise the quarterly report")
        try:
            wait_until(lambda: team.activity()[name].busy)
            activity = team.activity()
            assert activity[name].task == "summarise the quarterly report"
            assert (activity[name].sender, activity[name].message_id) == ("user", message.id)
            assert not activity[idle].busy
            assert [m.busy for m in team.members()] == [True, False]
        finally:
            gate.set()
        wait_until(lambda: not team.activity()[name].busy)
        assert team.activity()[name].handled == 1


def _event(tool_id: str, seq: int, payload: dict[str, Any], at: float = 100.0) -> ToolStateEvent:
    return ToolStateEvent(tool_id=tool_id, seq=seq, payload=payload, team_id="t", timestamp=at)


def _received(seq: int, who: str, message_id: str, text: str = "task") -> ToolStateEvent:
    payload = {"event": "received", "recipient": who, "message_id": message_id, "text": text}
    return _event(MESSAGES, seq, {**payload, "sender": "user"})


def test_two_open_messages_of_one_member_are_reported_as_suspect() -> None:
    hired = _event("team", 1, {"event": "member_hired", "name": "@a", "role": "r"})
    found = member_activity([hired, _received(1, "@a", "m1"), _received(2, "@a", "m2")])
    assert found["@a"].busy and found["@a"].suspect


def test_a_team_restart_closes_messages_left_open() -> None:
    hired = _event("team", 1, {"event": "member_hired", "name": "@a", "role": "r"})
    restart = _event("team", 2, {"event": "team_started", "resumed": True})
    found = member_activity([hired, _received(1, "@a", "m1"), restart])
    assert not found["@a"].busy


def test_fired_members_drop_out_of_the_activity() -> None:
    hired = _event("team", 1, {"event": "member_hired", "name": "@a", "role": "r"})
    fired = _event("team", 2, {"event": "member_fired", "name": "@a", "role": "r"})
    assert member_activity([hired, _received(1, "@a", "m1"), fired]) == {}


def test_messages_open_past_stale_after_are_dropped() -> None:
    hired = _event("team", 1, {"event": "member_hired", "name": "@a", "role": "r"})
    events = [hired, _received(1, "@a", "m1")]
    assert not member_activity(events, stale_after=60, now=1000.0)["@a"].busy
    assert member_activity(events, stale_after=60, now=120.0)["@a"].busy


def test_task_text_is_cut_to_max_task_chars() -> None:
    hired = _event("team", 1, {"event": "member_hired", "name": "@a", "role": "r"})
    found = member_activity([hired, _received(1, "@a", "m1", "y" * 5000)], max_task_chars=100)
    task = found["@a"].task or ""
    assert len(task) <= 100 and task.endswith("more characters cut]")
