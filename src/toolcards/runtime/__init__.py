"""Team runtime: team-singleton tool actors, durable state, the event log, deferred results.

```python
from toolcards.runtime import Team, ToolActor

class Counter(ToolActor):                      # one per team, methods run one at a time
    def on_start(self) -> None:
        self.total = self.ctx.state.get("total") or 0

    def add(self, n: int) -> int:
        with self.ctx.state.batch():             # state rows and event commit together
            self.total += n
            self.ctx.state.put("total", self.total)
            self.ctx.emit({"added": n})         # per-tool seq 1, 2, ...; none if empty
        return self.total

# in a card's tool:  team_observer(self).tool_actor("#Counter", Counter).ask(Counter.add, 1)
with Team("t1", store="team.db") as team:
    counter = team.tool_actor("#Counter", Counter)   # atomic get-or-create, typed handle
    counter.within(5.0).ask(Counter.add, 2)          # mypy checks the arguments and result
    sub = team.subscribe(print, since=0)             # replay, then live events
team = Team.resume("t1", store="team.db")            # #Counter restarts with total == 2
```

Slow work never runs on a tool actor: see :mod:`toolcards.runtime.deferred`. Agent members
(``RoleProfile``, ``team.hire`` / ``send`` / ``post`` / ``fire``): see
:mod:`toolcards.runtime.members`.
"""

from __future__ import annotations

from toolcards._lazy import TYPE_CHECKING, lazy_names

if TYPE_CHECKING:
    from toolcards.runtime.deferred import (
        DeferredConfig,
        DeferredFailed,
        DeferredResultActor,
        DeferredWorker,
        fetch_deferred,
        poll_deferred,
    )
    from toolcards.runtime.events import LIFECYCLE, EventLog, Subscription, is_empty_delta
    from toolcards.runtime.host import ActorHost, TeamHost
    from toolcards.runtime.members import DEFAULT_SEND_TIMEOUT, MemberRoster
    from toolcards.runtime.messaging import (
        MESSAGES,
        MemberActivity,
        MemberInfo,
        MemberMessage,
        member_activity,
    )
    from toolcards.runtime.observer import TeamObserver
    from toolcards.runtime.process import open_location as open_store
    from toolcards.runtime.profiles import ModelUnavailable, RoleProfile, check_model
    from toolcards.runtime.pykka_system import PykkaActorSystem
    from toolcards.runtime.ray_system import RayActorSystem
    from toolcards.runtime.system import (
        DEFAULT_ASK_TIMEOUT,
        ActorHandle,
        ActorSystem,
        ActorTimeout,
        ActorUnavailable,
        HandleBase,
        call_key,
    )
    from toolcards.runtime.team import StopReport, Team, TeamStopped
    from toolcards.runtime.tool_actor import (
        ACTOR_TYPES,
        ToolActor,
        ToolActorContext,
        UnknownActorTag,
    )
    from toolcards.stores.base import (
        SchemaTooNew,
        StateNamespace,
        Store,
        StoreClosedError,
        StoreError,
        StoreLockedError,
        StoreUnavailable,
    )
    from toolcards.stores.postgres.team import PostgresStore
    from toolcards.stores.sqlite.team import TeamStore

__all__ = [
    "ACTOR_TYPES",
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_SEND_TIMEOUT",
    "LIFECYCLE",
    "MESSAGES",
    "ActorHandle",
    "ActorHost",
    "ActorSystem",
    "ActorTimeout",
    "ActorUnavailable",
    "DeferredConfig",
    "DeferredFailed",
    "DeferredResultActor",
    "DeferredWorker",
    "EventLog",
    "HandleBase",
    "MemberActivity",
    "MemberInfo",
    "MemberMessage",
    "MemberRoster",
    "ModelUnavailable",
    "PostgresStore",
    "PykkaActorSystem",
    "RayActorSystem",
    "RoleProfile",
    "SchemaTooNew",
    "StateNamespace",
    "StopReport",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreLockedError",
    "StoreUnavailable",
    "Subscription",
    "Team",
    "TeamHost",
    "TeamObserver",
    "TeamStopped",
    "TeamStore",
    "ToolActor",
    "ToolActorContext",
    "UnknownActorTag",
    "call_key",
    "check_model",
    "fetch_deferred",
    "is_empty_delta",
    "member_activity",
    "open_store",
    "poll_deferred",
]


# names -> their module, imported on first use: a command that needs only the team and its
# store (``toolcards list``) loads neither the deferred results nor the agent members
_NAMES = {
    **dict.fromkeys(
        (
            "DeferredConfig",
            "DeferredFailed",
            "DeferredResultActor",
            "DeferredWorker",
            "fetch_deferred",
            "poll_deferred",
        ),
        "toolcards.runtime.deferred",
    ),
    **dict.fromkeys(
        ("LIFECYCLE", "EventLog", "Subscription", "is_empty_delta"), "toolcards.runtime.events"
    ),
    **dict.fromkeys(("ActorHost", "TeamHost"), "toolcards.runtime.host"),
    **dict.fromkeys(("DEFAULT_SEND_TIMEOUT", "MemberRoster"), "toolcards.runtime.members"),
    **dict.fromkeys(
        ("MESSAGES", "MemberActivity", "MemberInfo", "MemberMessage", "member_activity"),
        "toolcards.runtime.messaging",
    ),
    **dict.fromkeys(("TeamObserver",), "toolcards.runtime.observer"),
    **dict.fromkeys(
        ("ModelUnavailable", "RoleProfile", "check_model"), "toolcards.runtime.profiles"
    ),
    **dict.fromkeys(
        (
            "DEFAULT_ASK_TIMEOUT",
            "ActorHandle",
            "ActorSystem",
            "ActorTimeout",
            "ActorUnavailable",
            "HandleBase",
            "call_key",
        ),
        "toolcards.runtime.system",
    ),
    **dict.fromkeys(("StopReport", "Team", "TeamStopped"), "toolcards.runtime.team"),
    **dict.fromkeys(
        ("ACTOR_TYPES", "ToolActor", "ToolActorContext", "UnknownActorTag"),
        "toolcards.runtime.tool_actor",
    ),
    **dict.fromkeys(
        (
            "SchemaTooNew",
            "StateNamespace",
            "Store",
            "StoreClosedError",
            "StoreError",
            "StoreLockedError",
            "StoreUnavailable",
        ),
        "toolcards.stores.base",
    ),
    **dict.fromkeys(("TeamStore",), "toolcards.stores.sqlite.team"),
    **dict.fromkeys(("PykkaActorSystem",), "toolcards.runtime.pykka_system"),
    **dict.fromkeys(("RayActorSystem",), "toolcards.runtime.ray_system"),
    **dict.fromkeys(("PostgresStore",), "toolcards.stores.postgres.team"),
    "open_store": "toolcards.runtime.process:open_location",
}

__getattr__, __dir__ = lazy_names(__name__, _NAMES)
