"""The deployment chooses the message a due notification delivers (a registered type)."""

from __future__ import annotations

from typing import ClassVar

import pytest
from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo

from members.support import message_events
from notification.harness import Harness
from support.scripted import Script, call_tool, user_prompts, wait_until
from toolcards import NotificationTool, load_cards
from toolcards.runtime import RoleProfile, Team
from toolcards.tools.notification.messages import (
    NotificationMessage,
    message_types,
    register_message_type,
)


@register_message_type
class TicketMessage(NotificationMessage):
    kind: ClassVar[str] = "ticket-test"

    def render(self) -> str:
        return f"TICKET {self.id} for {self.owner}: {self.content.upper()}"


def test_an_unknown_message_type_fails_when_the_card_is_loaded() -> None:
    with pytest.raises(ValidationError, match="unknown notification message type 'e2b'"):
        load_cards([{"type": "NotificationTool", "message_type": "e2b"}])


def test_the_error_names_the_known_types() -> None:
    with pytest.raises(ValidationError) as caught:
        NotificationTool(message_type="nope")
    for known in ("notification", "plain", "reminder", "ticket-test"):
        assert known in str(caught.value)
    assert {"notification", "plain", "reminder"} <= set(message_types())


def test_a_dotted_path_is_not_imported_as_a_message_type() -> None:
    with pytest.raises(ValidationError, match="unknown notification message type"):
        NotificationTool(message_type="os:system")


def test_default_delivery_keeps_the_notification_format(harness: Harness) -> None:
    harness.on_team.add("@ann")
    harness.actor.register("@ann", "check the build", 5, 10)
    harness.clock.now += 6
    harness.tick()
    assert harness.delivered == [("@ann", "[notification #1] check the build")]


def test_a_registered_type_renders_the_delivered_text(harness: Harness) -> None:
    harness.on_team.add("@ann")
    harness.actor.register("@ann", "check the build", 5, 10, "ticket-test")
    harness.clock.now += 6
    harness.tick()
    assert harness.delivered == [("@ann", "TICKET 1 for @ann: CHECK THE BUILD")]


def test_the_type_survives_a_reload(harness: Harness) -> None:
    harness.on_team.add("@ann")
    harness.actor.register("@ann", "later", 5, 10, "plain")
    harness.actor = harness.new_actor()
    harness.clock.now += 6
    harness.tick()
    assert harness.delivered == [("@ann", "later")]


def test_a_member_receives_the_configured_message_type() -> None:
    schedule = call_tool("register_notification", {"content": "ping", "delay_seconds": 1})

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if "remind me" in user_prompts(messages)[-1]:
            return schedule(messages, info)
        return ModelResponse(parts=[TextPart("noted")])

    script = Script(respond)
    profile = RoleProfile(
        role="worker",
        model=script.model,
        cards=[NotificationTool(message_type="ticket-test")],
        messaging=False,
    )
    with Team("typed-notes", profiles=[profile]) as team:
        name = team.hire("worker")
        team.send(name, "remind me", timeout=30)

        def delivered() -> bool:
            return any(
                e.get("text") == f"TICKET 1 for {name}: PING"
                for e in message_events(team, "received")
            )

        wait_until(delivered, timeout=20)
