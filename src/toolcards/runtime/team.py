"""Team: the owner of tool actors, the event log and the state store of one team."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import BaseModel

from toolcards.core.card import ToolCard
from toolcards.core.errors import ToolcardsError, ToolObserverGone
from toolcards.core.events import ToolStateEvent
from toolcards.core.factory import ToolFactory
from toolcards.runtime.events import EventCallback, EventLog, Subscription
from toolcards.runtime.members import TeamMembers, roster_of
from toolcards.runtime.observer import TeamObserver
from toolcards.runtime.profiles import RoleProfile, normalize_profiles
from toolcards.runtime.store import StateNamespace, StoreClosedError, TeamStore
from toolcards.runtime.system import ActorHandle, ActorSystem
from toolcards.runtime.tool_actor import ToolActor, ToolActorContext

logger = logging.getLogger(__name__)

TRANSIENT_PREFIX = "#defer-"
"""Tool actors with this prefix (deferred workers) are not recorded for resume."""


class TeamStopped(ToolcardsError):
    """The team was stopped; it no longer creates or serves actors."""


@dataclass
class StopReport:
    """What ``Team.stop()`` did: actors stopped cleanly and actors abandoned (still busy)."""

    stopped: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.abandoned


@dataclass(frozen=True)
class _Spec:
    actor_cls: str
    config_cls: str | None
    config: str | None


def _path_of(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _import(path: str) -> Any:
    module, _, qualname = path.partition(":")
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _spec(actor_cls: type, config: BaseModel | None) -> _Spec:
    if config is None:
        return _Spec(_path_of(actor_cls), None, None)
    return _Spec(_path_of(actor_cls), _path_of(type(config)), config.model_dump_json())


# ---- process-wide bookkeeping ----------------------------------------------------------------

_registry_lock = threading.RLock()
_stores: dict[str, tuple[TeamStore, int]] = {}
_live: dict[str, Team] = {}


def _open_store(location: str, durable: bool) -> TeamStore:
    """A store per file per process (shared by the teams of this process), or a new memory one."""
    if location == ":memory:":
        return TeamStore(location, durable=durable)
    key = os.path.realpath(location)
    with _registry_lock:
        found = _stores.get(key)
        if found is not None:
            _stores[key] = (found[0], found[1] + 1)
            return found[0]
        store = TeamStore(key, durable=durable)
        _stores[key] = (store, 1)
        return store


def _release_store(store: TeamStore) -> None:
    with _registry_lock:
        found = _stores.get(store.location)
        if found is not None and found[0] is store:
            if found[1] > 1:
                _stores[store.location] = (store, found[1] - 1)
                return
            del _stores[store.location]
    store.close()


class Team(TeamMembers):
    """A team: tool actors (team singletons named ``#<Name>``), an event log and a state store.

    ``store`` is a SQLite file (state survives a restart; see :meth:`resume`) or ``":memory:"``.
    Opening a file that already holds ``team_id`` continues its state; :meth:`resume` also
    restarts every recorded tool actor. Use it as a context manager, or call :meth:`stop`.

    Agent members (see :mod:`toolcards.runtime.members`): ``profiles`` are the
    :class:`RoleProfile` s that :meth:`hire` draws from; with a ``policy``, every member's tools
    are governed, their decisions written to ``audit`` (an ``AuditLog``) and approval-required
    calls put to ``approver`` (an async ``(ApprovalRequest) -> bool``; without one they are
    refused). :meth:`spawn` starts any named actor (names without ``#`` are members, stopped
    in the first teardown phase) and :meth:`stop_actor` stops one.
    """

    def __init__(
        self,
        team_id: str,
        store: str | os.PathLike[str] = ":memory:",
        *,
        profiles: Sequence[RoleProfile | dict[str, Any]] | None = None,
        policy: Any | None = None,
        audit: Any | None = None,
        approver: Any | None = None,
        system: ActorSystem | None = None,
        durable: bool = False,
        stop_timeout: float = 5.0,
        _resume: bool = False,
    ) -> None:
        if not team_id:
            raise ValueError("team_id must be a non-empty string")
        self.team_id = team_id
        self.profiles: list[RoleProfile] = normalize_profiles(profiles)
        self.policy = policy
        self.audit = audit
        self.approver = approver
        self.stop_timeout = stop_timeout
        self._lock = threading.RLock()
        self._specs: dict[str, _Spec] = {}
        self._name_locks: dict[str, threading.Lock] = {}
        self._observers: dict[str, TeamObserver] = {}
        self._subscriptions: list[Subscription] = []
        self._stop_report: StopReport | None = None
        self._store = _open_store(os.fspath(store), durable)
        try:
            self._claim(_resume)
            self.log = EventLog(self._store, team_id)
            if system is None:
                from toolcards.runtime.pykka_system import PykkaActorSystem

                system = PykkaActorSystem()
            self.system: ActorSystem = system
            self._store.open_team(team_id)
            self.log.lifecycle("team_started", resumed=_resume)
        except BaseException:
            with _registry_lock:
                _live.pop(self._key, None)
            _release_store(self._store)
            raise
        if _resume:
            self._restore()
            roster_of(self).restore()

    @property
    def _key(self) -> str:
        return f"{self.team_id}@{id(self)}"

    def _claim(self, resume: bool) -> None:
        key = (self._store.location, self.team_id)
        with _registry_lock:
            for other in _live.values():
                if (other._store.location, other.team_id) == key and not self._store.in_memory:
                    raise ValueError(f"team {self.team_id} is already running on this store")
            if resume and not self._store.team_exists(self.team_id):
                raise LookupError(f"store {self._store.location} holds no team {self.team_id!r}")
            _live[self._key] = self

    @classmethod
    def resume(cls, team_id: str, store: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Reopen a stopped (or killed) team: its recorded tool actors restart with their state.

        Actors whose class cannot be imported come back when a card asks for them again.
        """
        return cls(team_id, store, _resume=True, **kwargs)

    def _restore(self) -> None:
        for name, actor_cls, config_cls, config in self._store.recorded_actors(self.team_id):
            spec = _Spec(actor_cls, config_cls, config)
            try:
                cls = _import(actor_cls)
                cfg = (
                    None if config_cls is None else _import(config_cls).model_validate_json(config)
                )
            except Exception as exc:  # not importable, or its config no longer validates
                with self._lock:
                    self._specs[name] = spec
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

    def _check_running(self) -> None:
        if self._stop_report is not None:
            raise TeamStopped(f"team {self.team_id} is stopped")

    def tool_actor(
        self, name: str, actor_cls: type[ToolActor], config: BaseModel | None = None
    ) -> ActorHandle:
        """Get or create the team singleton ``name`` (``#<Name>``), atomically.

        The same class and an equal config return the running actor; a different class or
        config for the same name is a ``ValueError``. A new actor loads its state in ``on_start``.
        """
        if not name.startswith("#"):
            raise ValueError(f"tool actor names start with '#': {name!r}")
        if name.startswith(TRANSIENT_PREFIX):  # unique, short-lived: no roster, no resume
            self._check_running()
            return self._start_tool_actor(name, actor_cls, config)
        spec = _spec(actor_cls, config)
        with self._lock:
            self._check_running()
            name_lock = self._name_locks.setdefault(name, threading.Lock())
        with name_lock:  # per name: an actor may create other actors from its on_start
            known = self._specs.get(name)
            if known is not None and known != spec:
                raise ValueError(
                    f"tool actor {name} already exists in team {self.team_id} with "
                    f"{known.actor_cls} config {known.config}; refusing {spec.actor_cls} "
                    f"config {spec.config}"
                )
            handle = self.system.lookup(name)
            if handle is not None and handle.is_alive():
                return handle
            handle = self._start_tool_actor(name, actor_cls, config)
            self._specs[name] = spec
            self._store.record_actor(
                self.team_id, name, spec.actor_cls, spec.config_cls, spec.config
            )
            return handle

    def _start_tool_actor(
        self, name: str, actor_cls: type[ToolActor], config: BaseModel | None
    ) -> ActorHandle:
        ctx = ToolActorContext(name, self, self.state_of(name), self.log)
        handle = self.spawn(name, lambda: actor_cls(ctx, config))
        return handle

    def spawn(self, name: str, factory: Callable[[], Any]) -> ActorHandle:
        """Start any actor (tool actor or member) under a unique ``name``, with lifecycle events.

        Names starting with ``#`` are stopped in the second teardown phase, all others first.
        """
        self._check_running()
        handle = self.system.spawn(name, lambda: _Lifecycle(factory(), self, name))
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
        return not self.system.stop([name], bound) and self.system.lookup(name) is None

    def actor(self, name: str) -> ActorHandle | None:
        """The running actor called ``name``, or None."""
        handle = self.system.lookup(name)
        return handle if handle is not None and handle.is_alive() else None

    def actor_names(self) -> list[str]:
        return self.system.names()

    def state_of(self, name: str) -> StateNamespace:
        """The durable key/value state of the actor ``name`` (readable even when it is down)."""
        return StateNamespace(self._store, self.team_id, name)

    def checkpoint(self) -> None:
        """Fold the store's write-ahead log into its file (after a bulk load, before a copy)."""
        self._store.checkpoint()

    # ---- members -----------------------------------------------------------------------------

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
        self._check_running()
        return ToolFactory(cards, self.observer_for(member), retry_exception=retry_exception)

    # ---- events ------------------------------------------------------------------------------

    def events(self, since: int = 0) -> list[ToolStateEvent]:
        """The recorded events after the first ``since``, in order (lifecycle ones included)."""
        return self.log.events(since)

    def subscribe(self, callback: EventCallback, since: int = 0) -> Subscription:
        """Replay the events after ``since`` to ``callback``, then deliver live ones in order."""
        self._check_running()
        sub = self.log.subscribe(callback, since)
        with self._lock:
            self._subscriptions.append(sub)
        return sub

    # ---- teardown ----------------------------------------------------------------------------

    def stop(self, timeout: float | None = None) -> StopReport:
        """Stop members, then ``#`` tool actors, each phase bounded by ``timeout`` seconds.

        Never hangs: actors still busy after their phase's bound are abandoned (their daemon
        threads finish on their own) and named in the report. Idempotent.
        """
        bound = self.stop_timeout if timeout is None else timeout
        with self._lock:
            if self._stop_report is not None:
                return self._stop_report
            self._stop_report = report = StopReport()
        roster_of(self).retire_all()
        names = self.system.names()
        for phase in (
            [n for n in names if not n.startswith("#")],
            [n for n in names if n[:1] == "#"],
        ):
            abandoned = self.system.stop(phase, bound)
            report.abandoned.extend(abandoned)
            report.stopped.extend(n for n in phase if n not in abandoned)
        late = self.system.names()  # spawned while the phases ran (a cache's last worker)
        if late:
            abandoned = self.system.stop(late, min(bound, 0.5))
            report.abandoned.extend(abandoned)
            report.stopped.extend(n for n in late if n not in abandoned)
        self.log.lifecycle("team_stopped", stopped=report.stopped, abandoned=report.abandoned)
        if report.abandoned:
            logger.warning("team %s abandoned busy actors: %s", self.team_id, report.abandoned)
        self._store.mark_stopped(self.team_id)
        self.log.close()
        deadline = time.monotonic() + bound
        for sub in self._subscriptions:
            sub.drain(timeout=max(deadline - time.monotonic(), 0.0))
        self._observers.clear()
        with _registry_lock:
            _live.pop(self._key, None)
        _release_store(self._store)
        return report

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = "memory" if self._store.in_memory else self._store.location
        return f"<Team {self.team_id} store={where} running={self.running}>"


class _Lifecycle:
    """Wraps an actor's target so its stop is recorded as a lifecycle event."""

    def __init__(self, target: Any, team: Team, name: str) -> None:
        self._target = target
        self._team = team
        self._name = name

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
                self._team.log.lifecycle("actor_stopped", name=self._name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


# ---- the implicit team and card resolution ---------------------------------------------------

_implicit: Team | None = None
_implicit_pid = 0


def implicit_team() -> Team:
    """The per-process in-memory team of standalone cards (created on first use)."""
    global _implicit, _implicit_pid
    with _registry_lock:
        if _implicit is None or not _implicit.running or _implicit_pid != os.getpid():
            _implicit = Team(f"local-{os.getpid()}", ":memory:")
            _implicit_pid = os.getpid()
        return _implicit


def team_for(card: ToolCard) -> Team:
    """The team of a bound card: its observer's team, else the implicit per-process team.

    A card whose observer was attached but is gone raises ``ToolObserverGone`` (falling back
    to another team would silently split its state).
    """
    observer = card.observer_or_none()
    if observer is None:
        if getattr(card, "_observer_ref", None) is not None:
            raise ToolObserverGone(f"the owner of {type(card).__name__} is gone")
        return implicit_team()
    team = getattr(observer, "team", None)
    if isinstance(team, Team):
        if not team.running:
            raise TeamStopped(f"team {team.team_id} of {type(card).__name__} is stopped")
        return team
    team_id = getattr(observer, "team_id", None)
    if isinstance(team_id, str):
        with _registry_lock:
            for live in _live.values():
                if live.team_id == team_id and live.running:
                    return live
    return implicit_team()


def _stop_all_at_exit() -> None:
    with _registry_lock:
        teams = list(_live.values())
    for team in teams:
        try:
            team.stop(timeout=min(team.stop_timeout, 2.0))
        except Exception:  # best effort at interpreter exit
            logger.debug("stopping team %s at exit failed", team.team_id, exc_info=True)


atexit.register(_stop_all_at_exit)
