"""Team: the owner of tool actors, members, the event log and the state store of one team."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from pydantic import BaseModel

from toolcards.core.actors import ActorHandle
from toolcards.core.card import ToolCard
from toolcards.core.errors import ToolcardsError
from toolcards.core.events import ToolStateEvent
from toolcards.core.factory import ToolFactory
from toolcards.runtime import process
from toolcards.runtime.actor_specs import conflict_line, in_code_values, merge_in_code, with_values
from toolcards.runtime.events import EventCallback, EventLog, Subscription
from toolcards.runtime.members import MemberRoster
from toolcards.runtime.observer import TeamObserver
from toolcards.runtime.system import ActorSystem
from toolcards.runtime.team_members import TeamMembers
from toolcards.runtime.team_stop import StopReport, stop_team
from toolcards.runtime.team_systems import actor_system, is_remote
from toolcards.runtime.tool_actor import ACTOR_TYPES, ToolActor
from toolcards.runtime.worker import TRANSIENT_PREFIX, Lifecycle, ToolActorFactory, config_of
from toolcards.stores.base import BudgetStore, StateNamespace
from toolcards.stores.memory import MemoryBudgets

if TYPE_CHECKING:
    from toolcards.governance.approvals.broker import Approver
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.policy.policy import Policy
    from toolcards.runtime.profiles import RoleProfile

__all__ = ["StopReport", "Team", "TeamStopped"]

A = TypeVar("A")


class TeamStopped(ToolcardsError):
    """The team was stopped; it no longer creates or serves actors."""


@dataclass(frozen=True)
class _Spec:
    actor_tag: str
    config: str | None


def _spec(actor_cls: type[ToolActor], config: BaseModel | None) -> _Spec:
    return _Spec(actor_cls.actor_tag, None if config is None else config.model_dump_json())


class Team(TeamMembers):
    """A team: tool actors (team singletons named ``#<Name>``), members, an event log and a
    state store.

    ``store`` is a SQLite file (state survives a restart; see :meth:`resume`) or ``":memory:"``.
    Opening a file that already holds ``team_id`` continues its state; :meth:`resume` also
    restarts every recorded tool actor and member. Use it as a context manager, or call
    :meth:`stop`.

    Agent members: ``profiles`` are the :class:`RoleProfile` s that :meth:`hire` draws from;
    with a ``policy``, every member's tools are governed, their decisions written to ``audit``
    and approval-required calls put to ``approver`` (an async ``(ApprovalRequest) -> bool``;
    without one they are refused); the policy's budgets are counted in ``budgets``.
    :meth:`spawn` starts any named actor (names without ``#`` are members, stopped in the first
    teardown phase) and :meth:`stop_actor` stops one.
    """

    _implicit: ClassVar[Team | None] = None
    _implicit_pid: ClassVar[int] = 0

    def __init__(
        self,
        team_id: str,
        store: str | os.PathLike[str] = ":memory:",
        *,
        profiles: Sequence[RoleProfile | dict[str, Any]] | None = None,
        policy: Policy | None = None,
        audit: AuditLog | None = None,
        approver: Approver | None = None,
        budgets: BudgetStore | None = None,
        system: ActorSystem | str | None = None,
        durable: bool = False,
        stop_timeout: float = 5.0,
        _resume: bool = False,
    ) -> None:
        if not team_id:
            raise ValueError("team_id must be a non-empty string")
        self.team_id = team_id
        self.profiles: list[RoleProfile] = []
        if profiles:  # a team without members does without the profiles' models
            from toolcards.runtime.profiles import normalize_profiles

            self.profiles = normalize_profiles(profiles)
        self.policy = policy
        self.audit = audit
        self.approver = approver
        self.budgets: BudgetStore = budgets if budgets is not None else MemoryBudgets(team_id)
        """Where the members' budgets are counted (see ``policy``'s ``budgets:``): this
        process's memory by default; a store every process of the team opens
        (``toolcards.stores.open.open_budgets``) to share them."""
        self.stop_timeout = stop_timeout
        self._lock = threading.RLock()
        self._specs: dict[str, _Spec] = {}
        self._in_code: dict[str, dict[str, Any]] = {}
        """The values given in code (never recorded) that each tool actor was started with."""
        self._bound_by: dict[str, str] = {}
        self._name_locks: dict[str, threading.Lock] = {}
        self._observers: dict[str, TeamObserver] = {}
        self._subscriptions: list[Subscription] = []
        self._stop_report: StopReport | None = None
        self._store = process.open_store(os.fspath(store), durable)
        try:
            if _resume and not self._store.team_exists(team_id):
                raise LookupError(f"store {self._store.location} holds no team {team_id!r}")
            process.claim(self, shared_store=not self._store.in_memory)
            self.log = EventLog(self._store, team_id)
            from toolcards.runtime.pykka_system import PykkaActorSystem

            self._local: ActorSystem = PykkaActorSystem()
            """Members and short-lived helpers: always in this process."""
            self._owns_system = system is None or isinstance(system, str)
            self.system: ActorSystem = actor_system(system, self._local, team_id, self._store)
            """Tool actors: in this process (Pykka) or cluster-wide (Ray)."""
            connect = getattr(self.system, "connect", None)
            if callable(connect):  # a cluster that cannot be reached fails here, once
                connect()
            self._store.open_team(team_id)
            self.log.lifecycle("team_started", resumed=_resume)
        except BaseException:
            process.unclaim(self)
            process.release_store(self._store)
            raise
        self._roster = MemberRoster(self)
        if _resume:
            self._restore()
            self._roster.restore()

    @classmethod
    def resume(cls, team_id: str, store: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Reopen a stopped (or killed) team: its recorded tool actors restart with their state.

        Actors whose tag is not known yet come back when a card asks for them again.
        """
        return cls(team_id, store, _resume=True, **kwargs)

    @classmethod
    def implicit(cls) -> Team:
        """The per-process in-memory team that cards use when no team observer is attached
        (``ToolFactory(cards)`` without a team). Created on first use; a new one after it was
        stopped or in a forked child."""
        with process.lock():
            found = Team._implicit
            if found is None or not found.running or Team._implicit_pid != os.getpid():
                found = Team._implicit = Team(f"local-{os.getpid()}", ":memory:")
                Team._implicit_pid = os.getpid()
            return found

    @property
    def shared(self) -> bool:
        """True when other processes may hold this team at once (a PostgreSQL store)."""
        return self._store.shared

    @property
    def store_location(self) -> str:
        """Where the team's state lives (a file path, or ``:memory:``)."""
        return self._store.location

    def _restore(self) -> None:
        for name, tag, config in self._store.recorded_actors(self.team_id):
            try:
                cls = ACTOR_TYPES.resolve(tag)
                cfg = config_of(cls, config)
            except Exception as exc:  # unknown tag, or a config that no longer validates
                with self._lock:
                    self._specs[name] = _Spec(tag, config)
                self.log.lifecycle("actor_restore_deferred", name=name, reason=str(exc))
                continue
            try:
                self.tool_actor(name, cls, cfg)
            except Exception as exc:
                warnings.warn(f"tool actor {name} failed to restart: {exc}", stacklevel=3)
                self.log.lifecycle("actor_restore_failed", name=name, reason=str(exc))

    # ---- actors ------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._stop_report is None

    def check_running(self) -> None:
        """Raise :class:`TeamStopped` once the team is stopped."""
        if self._stop_report is not None:
            raise TeamStopped(f"team {self.team_id} is stopped")

    def tool_actor(
        self,
        name: str,
        actor_cls: type[A],
        config: BaseModel | None = None,
        *,
        by: str | None = None,
    ) -> ActorHandle[A]:
        """Get or create the team singleton ``name`` (``#<Name>``), atomically.

        The same class and an equal config return the running actor; a different class or
        config for the same name is a ``ValueError`` naming both settings and who bound each
        (``by``: the member binding now). A new actor loads its state in ``on_start``.

        Values given in code that the config's JSON leaves out (``exclude=True`` fields such as
        an API key, private attributes) reach the actor in memory, never the store; a running
        actor that lacks one given now is rebuilt with it from the store, behind its handle.
        """
        if not (isinstance(actor_cls, type) and issubclass(actor_cls, ToolActor)):
            raise TypeError(f"tool actors subclass ToolActor, got {actor_cls!r}")
        if not name.startswith("#"):
            raise ValueError(f"tool actor names start with '#': {name!r}")
        spec = _spec(actor_cls, config)
        if name.startswith(TRANSIENT_PREFIX):  # unique, short-lived: no roster, no resume
            self.check_running()
            return self._start_tool_actor(name, actor_cls, spec, self._local, config)
        with self._lock:
            self.check_running()
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
                handle = self._start_tool_actor(name, actor_cls, spec, self.system, live)
                self._store.record_actor(self.team_id, name, spec.actor_tag, spec.config)
                self._in_code[name] = values
            if by is not None:
                self._bound_by.setdefault(name, by)
            self._specs[name] = spec
            return handle

    def _recorded_spec(self, name: str) -> _Spec | None:
        if not self._store.shared:  # only this process records actors: _specs knows them
            return None
        for recorded, tag, config in self._store.recorded_actors(self.team_id):
            if recorded == name:
                return _Spec(tag, config)
        return None

    def _start_tool_actor(
        self,
        name: str,
        actor_cls: type[ToolActor],
        spec: _Spec,
        system: ActorSystem,
        live: BaseModel | None = None,
    ) -> ActorHandle[Any]:
        local = system is self._local or not is_remote(system)
        factory = ToolActorFactory(
            self.team_id,
            self._store.secret_location(),
            name,
            actor_cls,
            spec.config,
            live=live,
            host=self if local else None,
            store=self._store if local else None,
            system=None if local else system,
        )
        handle = system.spawn(name, factory)
        if getattr(handle, "started_here", True):  # a Ray actor another process started: joined
            self.log.lifecycle("actor_started", name=name)
        return handle

    def spawn(self, name: str, factory: Callable[[], Any]) -> ActorHandle[Any]:
        """Start an actor of this process (a member, a helper) under a unique ``name``, with
        lifecycle events. Names without ``#`` are stopped in the first teardown phase."""
        self.check_running()
        # a member's start binds its cards, which may start tool actors on the team's system:
        # it waits at least as long as that system waits for one of its own to start
        bound = max(30.0, float(getattr(self.system, "start_timeout", 0.0)))
        handle = self._local.spawn(
            name, lambda: Lifecycle(factory(), self.log, name), start_timeout=bound
        )
        self.log.lifecycle("actor_started", name=name)
        return handle

    def stop_actor(self, name: str, timeout: float | None = None) -> bool:
        """Stop one actor (a fired member, a retired tool actor) and drop its observer.

        Returns True when it stopped within ``timeout`` (default: the team's stop timeout);
        a tool actor stopped this way comes back, with its state, on the next ``tool_actor``.
        """
        bound = self.stop_timeout if timeout is None else timeout
        with self._lock:
            self._observers.pop(name, None)
        system = self._system_of(name)
        return not system.stop([name], bound) and system.lookup(name) is None

    def _system_of(self, name: str) -> ActorSystem:
        if name.startswith("#") and not name.startswith(TRANSIENT_PREFIX):
            return self.system
        return self._local

    def stop_later(self, name: str) -> None:
        """Stop the actor ``name`` once its queued messages are handled; returns at once."""
        self._system_of(name).stop_later(name)

    def actor(self, name: str) -> ActorHandle[Any] | None:
        """The running actor called ``name``, or None."""
        handle = self._system_of(name).lookup(name)
        return handle if handle is not None and handle.is_alive() else None

    def actor_names(self) -> list[str]:
        """Names of the running actors of this team (this process's, and cluster-wide tool
        actors on a distributed system)."""
        names = self._local.names()
        if self.system is not self._local:
            names += [n for n in self.system.names() if n not in names]
        return names

    def state_of(self, name: str) -> StateNamespace:
        """The durable key/value state of the actor ``name`` (readable even when it is down)."""
        return StateNamespace(self._store, self.team_id, name)

    def checkpoint(self) -> None:
        """Fold the store's write-ahead log into its file (after a bulk load, before a copy)."""
        self._store.checkpoint()

    # ---- binding cards -----------------------------------------------------------------------

    def observer_for(self, member: str) -> TeamObserver:
        """The observer of ``member`` (one per member name, kept until the team stops)."""
        with self._lock:
            found = self._observers.get(member)
            if found is None:
                found = self._observers[member] = TeamObserver(self, member)
            return found

    def bind(
        self,
        cards: Iterable[ToolCard],
        member: str = "local",
        retry_exception: type[Exception] | None = None,
    ) -> ToolFactory:
        """Bind ``cards`` for ``member``: they share this team's tool actors and event log."""
        self.check_running()
        return ToolFactory(cards, self.observer_for(member), retry_exception=retry_exception)

    # ---- events ------------------------------------------------------------------------------

    def events(self, since: int = 0) -> list[ToolStateEvent]:
        """The recorded events after the first ``since``, in order (lifecycle ones included)."""
        return self.log.events(since)

    def subscribe(self, callback: EventCallback, since: int = 0) -> Subscription:
        """Replay the events after ``since`` to ``callback``, then deliver live ones in order."""
        self.check_running()
        sub = self.log.subscribe(callback, since)
        with self._lock:
            self._subscriptions.append(sub)
        return sub

    # ---- teardown ----------------------------------------------------------------------------

    def stop(self, timeout: float | None = None, *, everywhere: bool = False) -> StopReport:
        """Stop members, then ``#`` tool actors, each phase bounded by ``timeout`` seconds.

        Never hangs: actors still busy after their phase's bound are abandoned (their daemon
        threads finish on their own) and named in the report. Idempotent. Tool actors of a
        distributed system (Ray) serve every process of the team, and members placed on the
        cluster belong to no one process: both keep running unless ``everywhere=True``.
        """
        return stop_team(self, self.stop_timeout if timeout is None else timeout, everywhere)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = "memory" if self._store.in_memory else self._store.location
        return f"<Team {self.team_id} store={where} running={self.running}>"
