"""Members on every backend: a notification scheduled before a stop reaches its member after
the team resumes (on Ray it fires in the actor's worker process and is relayed to the member
through the event log)."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from members.support import message_events
from runtime.conftest import TeamMaker
from support.scripted import Script, call_tool, user_prompts, wait_until
from toolcards import NotificationTool
from toolcards.runtime import RoleProfile


def _profile() -> RoleProfile:
    schedule = call_tool("register_notification", {"content": "check", "delay_seconds": 2})

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if "remind me" in user_prompts(messages)[-1]:
            return schedule(messages, info)
        return ModelResponse(parts=[TextPart("noted")])

    return RoleProfile(
        role="worker", model=Script(respond).model, cards=[NotificationTool()], messaging=False
    )


def test_a_notification_reaches_its_member_after_a_restart(make_team: TeamMaker) -> None:
    team = make_team("notes", profiles=[_profile()])
    name = team.hire("worker", "ann")
    assert "scheduled" in team.send(name, "remind me", timeout=60)
    team.stop(everywhere=True)  # before the notification is due
    resumed = make_team.resume("notes", profiles=[_profile()])
    assert resumed.is_member("@ann")

    def delivered() -> bool:
        return any(
            e.get("recipient") == "@ann" and e.get("text") == "[notification #1] check"
            for e in message_events(resumed, "received")
        )

    assert wait_until(delivered, timeout=45)
