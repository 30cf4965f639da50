"""A notification actor driven directly on the test thread, with a controllable clock."""

from __future__ import annotations

from typing import Any

from toolcards.runtime import Team, ToolActorContext
from toolcards.tools.notification.actor import NotificationActor
from toolcards.tools.notification.models import ACTOR_NAME


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Harness:
    """One actor instance (no actor thread, no timer thread) over a real team's state."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.clock = FakeClock()
        self.on_team: set[str] = set()
        self.delivered: list[tuple[str, str]] = []
        self.actor = self.new_actor()

    def new_actor(self) -> NotificationActor:
        ctx = ToolActorContext(ACTOR_NAME, self.team, self.team.state_of(ACTOR_NAME), self.team.log)
        actor = NotificationActor(ctx, None)
        actor.clock = self.clock
        actor.present = lambda owner: owner in self.on_team
        actor.deliver = lambda owner, text: self.delivered.append((owner, text))
        actor._load()
        return actor

    def tick(self) -> None:
        """What the timer does when it wakes: pop the due ids and fire them; then flush."""
        self.actor.fire(self.actor.scheduler.pop_due(self.clock.now))
        self.actor.courier.start()
        self.actor.courier.stop(timeout=5.0)
        self.actor.courier = type(self.actor.courier)()

    def events(self) -> list[Any]:
        return [e.payload for e in self.team.events() if e.tool_id == ACTOR_NAME]
