"""How a tool actor is built wherever it runs, and kept coherent when several processes run it.

:class:`ToolActorFactory` is picklable: in this process it builds the actor on the team's own
host; in a Ray worker process it opens a :class:`WorkerHost` (the store from its URL, the
event log, the cluster's actors) and builds it there. With a store several processes share
and a local actor system (Pykka), each process runs its own copy of a tool actor;
:class:`Coherent` makes those copies behave as one: every call runs in one store transaction
under a cross-process lock of the tool, after reloading the actor when another process
changed its state since this copy last saw it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel

from toolcards.core.actors import ActorHandle
from toolcards.runtime.actor_specs import secret_fields, with_values
from toolcards.runtime.events import EventLog
from toolcards.runtime.messaging import MESSAGES, USER, MemberMessage
from toolcards.runtime.process import open_location
from toolcards.runtime.pykka_system import PykkaActorSystem
from toolcards.runtime.relay import queued_event
from toolcards.runtime.system import ActorSystem
from toolcards.runtime.tool_actor import Recovering, ToolActor, ToolActorContext
from toolcards.stores.base import StateNamespace, Store, StoreClosedError

if TYPE_CHECKING:
    from toolcards.runtime.host import ActorHost

A = TypeVar("A")

TRANSIENT_PREFIX = "#defer-"
"""Tool actors with this prefix (deferred workers) are short-lived and never recorded."""

ROSTER = "~members"
"""The state namespace of the roster (one ``member:<name>`` row per member): the value of
``member_restore.ROSTER``, not imported from there (that loads ``core.trust``: a Ray worker's
imports do not)."""


def config_of(cls: type[ToolActor], config: str | None) -> BaseModel | None:
    """The stored JSON ``config`` read with ``cls.config_type``."""
    if config is None:
        return None
    if cls.config_type is None:
        raise TypeError(f"{cls.actor_tag} declares no config_type to read its stored config")
    return cls.config_type.model_validate_json(config)


class Lifecycle:
    """Wraps an actor's target so its stop is recorded as a lifecycle event.

    ``reconfigure`` (tool actors) takes values given in code into the config the target is
    built from; :meth:`take_in_code_values` then rebuilds the target from its store.
    """

    def __init__(
        self,
        target: Any,
        log: EventLog,
        name: str,
        reconfigure: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self._target = target
        self._log = log
        self._name = name
        self._reconfigure = reconfigure

    def take_in_code_values(self, values: dict[str, Any]) -> None:
        """Rebuild the tool actor with values given in code that it lacks (an API key): a
        fresh object loaded from the store, behind the same handle."""
        if self._reconfigure is None or not isinstance(self._target, Recovering):
            raise TypeError(f"{self._name} takes no values given in code")
        self._reconfigure(values)
        self._target.reload()

    def on_start(self) -> None:
        hook = getattr(self._target, "on_start", None)
        if hook is not None:
            hook()

    def on_stop(self) -> None:
        try:
            hook = getattr(self._target, "on_stop", None)
            if hook is not None:
                hook()
        finally:
            with contextlib.suppress(StoreClosedError):  # an abandoned actor outlived its team
                self._log.lifecycle("actor_stopped", name=self._name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


class Coherent(Recovering):
    """A tool actor copy that stays in step with the other processes' copies of it.

    Each public call: one store transaction, the tool's cross-process lock, a catch-up of the
    copy when the tool's version moved since this copy last saw it (the changed rows through
    the actor's ``apply_changes``, or a reload: a fresh object, its ``on_start``), then the
    call. A call whose writes did not commit (rolled back, or cut off
    with the connection) leaves the copy stale, and it reloads before the next call (a call
    that raises without writing, such as a refusal, keeps the copy as it is).
    """

    def __init__(self, build: Callable[[], Any], store: Store, team_id: str, name: str) -> None:
        super().__init__(build, store, team_id, name)
        self._seen: int | None = None
        self._held: int | None = None
        """Every change committed at or below this version is in the copy (``_seen`` may be
        one more: the copy's own commit, which moved it by one unless a writer around the
        lock committed too; the version then moves past ``_seen`` and both are fetched)."""

    def on_start(self) -> None:
        self._seen = self._held = self._store.actor_version(self._team_id, self._name)
        super().on_start()

    @contextlib.contextmanager
    def _serving(self) -> Iterator[None]:
        store = self._store
        with store.transaction():
            self._lock()
            version = store.actor_version(self._team_id, self._name)
            if version != self._seen or self._stale:
                self._catch_up()
            self._seen = self._held = version
            yield
            wrote = store.writes_pending(self._team_id, self._name)
        self._seen = version + 1 if wrote else version  # our commit's own bump

    def _lock(self) -> None:
        """The tool's lock, and (in the same round trip, where the store can) the changes
        since the version the copy holds, for a catch-up."""
        self._store.lock_actor(self._team_id, self._name, since=self._held)

    def _catch_up(self) -> None:
        """Bring the copy to the store: apply the rows changed since the version it holds
        whole (``apply_changes(upserts, deleted)`` of an actor that has it, returning True;
        its own last writes come again) or reload it (stale, the store cannot tell, or the
        actor declines)."""
        since, apply = self._held, getattr(self._target, "apply_changes", None)
        if self._stale or since is None or apply is None:
            self.reload()
            return
        changes = self._store.state_changes(self._team_id, self._name, since)
        if changes is None:
            self.reload()
            return
        self._stale = True  # until applied whole: a partial apply is never answered from
        if apply(*changes):
            self._stale = False
            return
        self.reload()


class ToolActorFactory:
    """Builds a tool actor; picklable, so an actor system may build it in another process.

    ``config`` is the recorded JSON; ``live`` the config object given in code, whose values
    the JSON leaves out (an API key, a transport) reach the actor from memory. Pickled, only
    its excluded fields travel (to the worker process, never to the store).
    """

    def __init__(
        self,
        team_id: str,
        store_location: str,
        name: str,
        actor_cls: type[ToolActor],
        config: str | None,
        *,
        live: BaseModel | None = None,
        host: ActorHost | None = None,
        store: Store | None = None,
        system: ActorSystem | None = None,
    ) -> None:
        self.team_id = team_id
        self.store_location = store_location
        self.name = name
        self.actor_cls = actor_cls
        self.config = config
        self.secrets = secret_fields(live)
        self.system = system
        self._live = live
        self._host = host
        self._store = store

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_host"] = state["_store"] = state["_live"] = None  # rebuilt where it runs
        return state

    def __repr__(self) -> str:
        return f"<ToolActorFactory {self.name} of team {self.team_id}>"

    def __call__(self) -> Any:
        if self._host is None or self._store is None:
            if self.system is None:
                raise RuntimeError(f"{self!r} has neither a host nor an actor system")
            worker = WorkerHost.get(self.team_id, self.store_location, self.system)
            host: ActorHost = worker
            store = worker.store
        else:
            host, store = self._host, self._store
        cfg = self._live
        if cfg is None:
            cfg = config_of(self.actor_cls, self.config)
            if cfg is not None and self.secrets:
                cfg = with_values(cfg, self.secrets)

        current = [cfg]
        team_id, name, actor_cls = self.team_id, self.name, self.actor_cls

        def build() -> ToolActor:  # holds no reference to this factory (its store location)
            ctx = ToolActorContext(name, host, StateNamespace(store, team_id, name), host.log)
            return actor_cls(ctx, current[0])

        def reconfigure(values: dict[str, Any]) -> None:
            if current[0] is not None:
                current[0] = with_values(current[0], values)

        local_copy = self._host is not None and store.shared
        target: Recovering = (
            Coherent(build, store, self.team_id, self.name)
            if local_copy
            else Recovering(build, store, self.team_id, self.name)
        )
        return Lifecycle(target, host.log, self.name, reconfigure)


class WorkerHost:
    """The team as a tool actor sees it inside a worker process of a distributed system."""

    _hosts: ClassVar[dict[tuple[str, str], WorkerHost]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, team_id: str, store_location: str, system: ActorSystem) -> None:
        self.team_id = team_id
        self.store = open_location(store_location)
        self.log = EventLog(self.store, team_id)
        keyed_from = getattr(system, "keyed_from", None)  # Ray: sent without the key, read it here
        self.system: ActorSystem = keyed_from(self.store, team_id) if keyed_from else system
        self._local: Any = None

    @classmethod
    def get(cls, team_id: str, store_location: str, system: ActorSystem) -> WorkerHost:
        """One host per team and store in this process."""
        with cls._lock:
            key = (team_id, store_location)
            found = cls._hosts.get(key)
            if found is None or found.store.closed:
                found = cls._hosts[key] = cls(team_id, store_location, system)
            return found

    @property
    def running(self) -> bool:
        return not self.store.closed

    @property
    def shared(self) -> bool:
        return True

    def state_of(self, name: str) -> StateNamespace:
        return StateNamespace(self.store, self.team_id, name)

    def _local_system(self) -> Any:
        if self._local is None:
            self._local = PykkaActorSystem()
        return self._local

    def actor(self, name: str) -> ActorHandle[Any] | None:
        if name.startswith(TRANSIENT_PREFIX) and self._local is not None:
            return self._local.lookup(name)  # type: ignore[no-any-return]
        found = self.system.lookup(name)
        return found if found is None or found.is_alive() else None

    def tool_actor(
        self,
        name: str,
        actor_cls: type[A],
        config: BaseModel | None = None,
        *,
        by: str | None = None,
    ) -> ActorHandle[A]:
        if not (isinstance(actor_cls, type) and issubclass(actor_cls, ToolActor)):
            raise TypeError(f"tool actors subclass ToolActor, got {actor_cls!r}")
        text = None if config is None else config.model_dump_json()
        if name.startswith(TRANSIENT_PREFIX):  # short-lived helpers stay in this process
            factory = ToolActorFactory(
                self.team_id,
                self.store.secret_location(),
                name,
                actor_cls,
                text,
                live=config,
                host=self,
                store=self.store,
                system=self.system,
            )
            return self._local_system().spawn(name, factory)  # type: ignore[no-any-return]
        factory = ToolActorFactory(
            self.team_id,
            self.store.secret_location(),
            name,
            actor_cls,
            text,
            live=config,
            system=self.system,
        )
        handle = self.system.spawn(name, factory)
        self.store.record_actor(self.team_id, name, actor_cls.actor_tag, text)
        return handle

    def stop_later(self, name: str) -> None:
        if name.startswith(TRANSIENT_PREFIX) and self._local is not None:
            self._local.stop_later(name)
        else:
            self.system.stop_later(name)

    def is_member(self, name: str) -> bool:
        return self.state_of(ROSTER).get(f"member:{name}") is not None

    def post(
        self, to: str, content: str, *, sender: str = USER, from_host: bool = False
    ) -> MemberMessage:
        """Leave ``content`` for the member ``to``: the process that runs the member delivers
        it (members of a team are reached through the team's event log)."""
        if not self.is_member(to):
            raise LookupError(f"team {self.team_id} has no member {to!r:.80}")
        message = MemberMessage(sender=sender, recipient=to, content=content, from_host=from_host)
        self.log.append(MESSAGES, queued_event(message))
        return message
