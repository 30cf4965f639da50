"""Team runtime: team-singleton tool actors, durable state, the event log, deferred results.

```python
from toolcards.runtime import Team, ToolActor, team_for

class Counter(ToolActor):                      # one per team, methods run one at a time
    def on_start(self) -> None:
        self.total = self.ctx.state.get("total") or 0

    def add(self, n: int) -> int:
        with self.ctx.state.batch():             # state rows and event commit together
            self.total += n
            self.ctx.state.put("total", self.total)
            self.ctx.emit({"added": n})         # per-tool seq 1, 2, ...; none if empty
        return self.total

# in a card's tool:  team_for(self).tool_actor("#Counter", Counter).ask("add", 1)
with Team("t1", store="team.db") as team:
    counter = team.tool_actor("#Counter", Counter)   # atomic get-or-create
    counter.ask("add", 2, timeout=5.0)
    sub = team.subscribe(print, since=0)             # replay, then live events
team = Team.resume("t1", store="team.db")            # #Counter restarts with total == 2
```

Slow work never runs on a tool actor: see :mod:`toolcards.runtime.deferred`. Agent members
(``RoleProfile``, ``team.hire`` / ``send`` / ``post`` / ``fire``): see
:mod:`toolcards.runtime.members`.
"""

from typing import TYPE_CHECKING, Any

from toolcards.runtime.deferred import (
    DeferredConfig,
    DeferredFailed,
    DeferredResultActor,
    DeferredWorker,
    fetch_deferred,
    poll_deferred,
)
from toolcards.runtime.events import LIFECYCLE, EventLog, Subscription, is_empty_delta
from toolcards.runtime.members import DEFAULT_SEND_TIMEOUT, MemberInfo, MemberRoster
from toolcards.runtime.messaging import MESSAGES, MemberActivity, MemberMessage, member_activity
from toolcards.runtime.observer import TeamObserver
from toolcards.runtime.profiles import RoleProfile
from toolcards.runtime.store import StateNamespace, StoreClosedError, StoreLockedError, TeamStore
from toolcards.runtime.system import (
    DEFAULT_ASK_TIMEOUT,
    ActorHandle,
    ActorSystem,
    ActorUnavailable,
)
from toolcards.runtime.team import StopReport, Team, TeamStopped, implicit_team, team_for
from toolcards.runtime.tool_actor import ToolActor, ToolActorContext

if TYPE_CHECKING:
    from toolcards.runtime.pykka_system import PykkaActorSystem

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_SEND_TIMEOUT",
    "LIFECYCLE",
    "MESSAGES",
    "ActorHandle",
    "ActorSystem",
    "ActorUnavailable",
    "DeferredConfig",
    "DeferredFailed",
    "DeferredResultActor",
    "DeferredWorker",
    "EventLog",
    "MemberActivity",
    "MemberInfo",
    "MemberMessage",
    "MemberRoster",
    "PykkaActorSystem",
    "RoleProfile",
    "StateNamespace",
    "StopReport",
    "StoreClosedError",
    "StoreLockedError",
    "Subscription",
    "Team",
    "TeamObserver",
    "TeamStopped",
    "TeamStore",
    "ToolActor",
    "ToolActorContext",
    "fetch_deferred",
    "implicit_team",
    "is_empty_delta",
    "member_activity",
    "poll_deferred",
    "team_for",
]


def __getattr__(name: str) -> Any:
    if name == "PykkaActorSystem":  # the backend loads with the first Team
        from toolcards.runtime.pykka_system import PykkaActorSystem

        return PykkaActorSystem
    raise AttributeError(f"module 'toolcards.runtime' has no attribute {name!r}")
