"""A team's tool actors: team singletons named ``#<Name>``, each created once per name with one
class and one config, on the actor system the team runs them on (this process's Pykka, or a
cluster's Ray), and restarted from the store when the team resumes.

:class:`ToolActors` owns the two actor systems of a team (``local``: members and short-lived
helpers, always in this process; ``system``: tool actors, here or cluster-wide) and what it
knows of each tool actor: its class tag and recorded config, the values given in code that
never reach the store, and who bound it first."""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from toolcards.core.actors import ActorHandle
from toolcards.core.trust import NOTHING, HostTrust, UntrustedField, check_card
from toolcards.runtime.actor_specs import conflict_line, in_code_values, merge_in_code, with_values
from toolcards.runtime.events import EventLog
from toolcards.runtime.host import ActorHost
from toolcards.runtime.pykka_system import PykkaActorSystem
from toolcards.runtime.system import ActorSystem
from toolcards.runtime.team_key import claim_cluster, team_key
from toolcards.runtime.tool_actor import ACTOR_TYPES, ToolActor
from toolcards.runtime.worker import TRANSIENT_PREFIX, Lifecycle, ToolActorFactory, config_of
from toolcards.stores.base import Store

__all__ = ["ToolActors", "is_remote"]

A = TypeVar("A")


@dataclass(frozen=True)
class ActorSpec:
    """What a tool actor was created as: its class tag and recorded config (JSON)."""

    actor_tag: str
    config: str | None

    @classmethod
    def of(cls, actor_cls: type[ToolActor], config: BaseModel | None) -> ActorSpec:
        return cls(actor_cls.actor_tag, None if config is None else config.model_dump_json())


def is_remote(system: ActorSystem) -> bool:
    """True for an actor system whose actors run in other processes."""
    return not isinstance(system, PykkaActorSystem)


class ToolActors:
    """The tool actors of team ``team_id`` (see the module doc). ``host`` is what a tool actor
    of this process reaches its team through; ``system`` is ``Team(system=...)``; ``trust``
    what a recorded config read back from the store may choose (``Team(trust=...)``)."""

    def __init__(
        self,
        team_id: str,
        store: Store,
        log: EventLog,
        host: ActorHost,
        system: ActorSystem | str | None,
        trust: HostTrust = NOTHING,
    ) -> None:
        self.team_id = team_id
        self.trust = trust
        self.store = store
        self.log = log
        self.host = host
        self.local: ActorSystem = PykkaActorSystem()
        """Members and short-lived helpers: always in this process."""
        self.owns_system = system is None or isinstance(system, str)
        self.system: ActorSystem = self._chosen(system)
        """Tool actors: in this process (Pykka) or cluster-wide (Ray)."""
        self._lock = threading.Lock()
        self._specs: dict[str, ActorSpec] = {}
        self._in_code: dict[str, dict[str, Any]] = {}
        """The values given in code (never recorded) that each tool actor was started with."""
        self._bound_by: dict[str, str] = {}
        self._name_locks: dict[str, threading.Lock] = {}

    def _chosen(self, system: ActorSystem | str | None) -> ActorSystem:
        """The actor system for tool actors from ``Team(system=...)``."""
        if system is None or system == "pykka":
            return self.local
        if system == "ray":
            from toolcards.runtime.ray_system import RayActorSystem  # lazy: extra ray

            system = RayActorSystem(namespace=f"toolcards-{self.team_id}")
        if isinstance(system, str):
            raise ValueError(f"system must be 'pykka', 'ray' or an ActorSystem, got {system!r}")
        store = self.store
        if not is_remote(system):
            _serve_one_team(system, self.team_id)
        if is_remote(system) and not store.shared:
            raise ValueError(
                f"actors in other processes cannot open the store {store.location}: a "
                "distributed actor system needs a store every process shares (a postgresql:// URL)"
            )
        private = getattr(system, "starts_private_cluster", None)
        if callable(private) and private():
            raise ValueError(
                f"system ray with the shared store {store.location} would start a private Ray "
                "cluster in this process, so every process would run its own copy of the team's "
                "actors: give the cluster's address (RAY_ADDRESS, RayActorSystem(address=...) or "
                "'auto' for the cluster running on this machine; 'local' asks for a private one)"
            )
        keyed = getattr(system, "with_team_key", None)
        if callable(keyed):  # Ray: any driver finds any named actor; the team's key keeps it out
            keyed_system: ActorSystem = keyed(team_key(store, self.team_id))
            cluster, reachable = (
                getattr(system, "cluster", None),
                getattr(system, "reachable", None),
            )
            if callable(cluster) and callable(reachable):  # one cluster per team, never two
                claim_cluster(store, self.team_id, cluster(), reachable)
            return keyed_system
        return system

    # -- one tool actor ----------------------------------------------------------------------

    def get(
        self,
        name: str,
        actor_cls: type[A],
        config: BaseModel | None = None,
        *,
        by: str | None = None,
    ) -> ActorHandle[A]:
        """Get or create the team singleton ``name`` (see :meth:`Team.tool_actor`)."""
        if not (isinstance(actor_cls, type) and issubclass(actor_cls, ToolActor)):
            raise TypeError(f"tool actors subclass ToolActor, got {actor_cls!r}")
        if not name.startswith("#"):
            raise ValueError(f"tool actor names start with '#': {name!r}")
        spec = ActorSpec.of(actor_cls, config)
        if name.startswith(TRANSIENT_PREFIX):  # unique, short-lived: no roster, no resume
            return self._start(name, actor_cls, spec, self.local, config)
        with self._lock:
            name_lock = self._name_locks.setdefault(name, threading.Lock())
        with name_lock:  # per name: an actor may create other actors from its on_start
            known = self._specs.get(name) or self._recorded_spec(name)
            if known is not None and known != spec:
                first = (known.actor_tag, known.config, self._bound_by.get(name))
                raise ValueError(
                    conflict_line(name, self.team_id, first, (spec.actor_tag, spec.config, by))
                )
            running = self._in_code.get(name, {})
            values = merge_in_code(name, running, in_code_values(config))
            handle = self.system.lookup(name)
            alive = handle is not None and handle.is_alive()
            if alive and values != running:  # rebuilt with what it lacks, behind its handle
                assert handle is not None
                handle.ask(Lifecycle.take_in_code_values, values)
                self._in_code[name] = values
            if handle is None or not alive:
                live = config if config is None else with_values(config, values)
                handle = self._start(name, actor_cls, spec, self.system, live)
                self.store.record_actor(self.team_id, name, spec.actor_tag, spec.config)
                self._in_code[name] = values
            if by is not None:
                self._bound_by.setdefault(name, by)
            self._specs[name] = spec
            return handle

    def restore(self) -> None:
        """Restart every recorded tool actor (a resumed team); one whose tag is not known yet,
        or whose recorded config reaches the host beyond the team's trust (a stored row is data:
        an ``openai_base_url`` changed in the store would get the host's key), comes back when a
        card asks for it again (a card with other settings is refused, naming them)."""
        for name, tag, config in self.store.recorded_actors(self.team_id):
            try:
                cls = ACTOR_TYPES.resolve(tag)
                cfg = config_of(cls, config)
                if cfg is not None:
                    check_card(cfg, self.trust)
            except Exception as exc:  # unknown tag, untrusted, or no longer valid
                if isinstance(exc, UntrustedField):
                    warnings.warn(f"tool actor {name} waits for its card: {exc}", stacklevel=3)
                with self._lock:
                    self._specs[name] = ActorSpec(tag, config)
                self.log.lifecycle("actor_restore_deferred", name=name, reason=str(exc))
                continue
            try:
                self.get(name, cls, cfg)
            except Exception as exc:
                warnings.warn(f"tool actor {name} failed to restart: {exc}", stacklevel=3)
                self.log.lifecycle("actor_restore_failed", name=name, reason=str(exc))

    def _recorded_spec(self, name: str) -> ActorSpec | None:
        if not self.store.shared:  # only this process records actors: _specs knows them
            return None
        for recorded, tag, config in self.store.recorded_actors(self.team_id):
            if recorded == name:
                return ActorSpec(tag, config)
        return None

    def _start(
        self,
        name: str,
        actor_cls: type[ToolActor],
        spec: ActorSpec,
        system: ActorSystem,
        live: BaseModel | None = None,
    ) -> ActorHandle[Any]:
        local = system is self.local or not is_remote(system)
        factory = ToolActorFactory(
            self.team_id,
            self.store.secret_location(),
            name,
            actor_cls,
            spec.config,
            live=live,
            host=self.host if local else None,
            store=self.store if local else None,
            system=None if local else system,
        )
        handle = system.spawn(name, factory)
        if getattr(handle, "started_here", True):  # a Ray actor another process started: joined
            self.log.lifecycle("actor_started", name=name)
        return handle

    # -- every actor -------------------------------------------------------------------------

    def system_of(self, name: str) -> ActorSystem:
        """Where the actor ``name`` runs: tool actors on the team's system, the rest here."""
        if name.startswith("#") and not name.startswith(TRANSIENT_PREFIX):
            return self.system
        return self.local

    def names(self) -> list[str]:
        """Names of the running actors (this process's, and cluster-wide tool actors)."""
        names = self.local.names()
        if self.system is not self.local:
            names += [n for n in self.system.names() if n not in names]
        return names

    def stop_all(self, bound: float, everywhere: bool) -> tuple[list[str], list[str]]:
        """Stop members, then tool actors, each phase waiting at most ``bound`` seconds; the
        actors of a distributed system only ``everywhere``. (stopped, abandoned) names."""
        stopped: list[str] = []
        abandoned: list[str] = []

        def stop(system: ActorSystem, names: Sequence[str], bound: float) -> None:
            left = system.stop(names, bound) if names else []
            abandoned.extend(left)
            stopped.extend(n for n in names if n not in left)

        local = self.local.names()
        phases: list[tuple[ActorSystem, Sequence[str]]] = [
            (self.local, [n for n in local if not n.startswith("#")]),
            (self.local, [n for n in local if n[:1] == "#"]),
        ]
        if self.system is not self.local:
            remote = self.system.names() if everywhere else []
            phases.insert(1, (self.system, [n for n in remote if n.startswith("@")]))
            phases.insert(2, (self.system, [n for n in remote if n.startswith("#")]))
        for system, names in phases:
            stop(system, names, bound)
        stop(self.local, self.local.names(), min(bound, 0.5))  # spawned while the phases ran
        return stopped, abandoned

    def shutdown(self) -> None:
        """Release the actor systems (the team's own; one given to the team stays up)."""
        self.local.shutdown()
        if self.owns_system and self.system is not self.local:
            self.system.shutdown()


_TEAM_OF: weakref.WeakKeyDictionary[ActorSystem, str] = weakref.WeakKeyDictionary()
"""The team each in-process actor system given to a team serves, for the system's life (its
tool actors outlive a stopped team: the system is the host's)."""
_TEAMS_LOCK = threading.Lock()


def _serve_one_team(system: ActorSystem, team_id: str) -> None:
    """ValueError when ``system`` serves another team of this process: tool actors are found
    by their bare names (``#PlanningTool``), so a second team would read and write the first
    one's board, in its rows (a distributed system keeps teams apart by namespace and key)."""
    with _TEAMS_LOCK:
        held = _TEAM_OF.get(system)
        if held is not None and held != team_id:
            raise ValueError(
                f"this actor system serves team {held!r}: give team {team_id!r} an actor "
                "system of its own (tool actors are found by name, so two teams would share them)"
            )
        _TEAM_OF[system] = team_id
