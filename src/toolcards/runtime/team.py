"""Team: the owner of tool actors, members, the event log and the state store of one team."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from pydantic import BaseModel

from toolcards.core.actors import ActorHandle, ActorUnavailable
from toolcards.core.card import ToolCard
from toolcards.core.errors import ToolcardsError
from toolcards.core.events import ToolStateEvent
from toolcards.core.factory import ToolFactory
from toolcards.core.trust import HostTrust
from toolcards.runtime import process
from toolcards.runtime.cluster_member import ClusterMember, ClusterMemberFactory
from toolcards.runtime.events import EventCallback, EventLog, Subscription
from toolcards.runtime.members import DEFAULT_MAX_MEMBERS, DEFAULT_SEND_TIMEOUT, MemberRoster
from toolcards.runtime.messaging import USER, MemberActivity, MemberInfo, MemberMessage
from toolcards.runtime.observer import TeamObserver
from toolcards.runtime.system import ActorSystem
from toolcards.runtime.tool_actors import ToolActors, is_remote
from toolcards.runtime.worker import Lifecycle
from toolcards.stores.base import BudgetStore, StateNamespace
from toolcards.stores.memory import MemoryBudgets

if TYPE_CHECKING:
    from toolcards.governance.approvals.broker import Approver
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.policy.policy import Policy
    from toolcards.runtime.profiles import RoleProfile

__all__ = ["StopReport", "Team", "TeamStopped"]

A = TypeVar("A")
logger = logging.getLogger(__name__)


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


class Team:
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
    ``max_members`` caps the members on the roster at once (those a member's model hires too)
    and the members a resume restores.
    :meth:`spawn` starts any named actor (names without ``#`` are members, stopped in the first
    teardown phase) and :meth:`stop_actor` stops one.

    What a resumed team reads back from its store (a tool actor's recorded config, a member's
    stored profile) is data: a field of it that reaches the host (a URL that receives the
    host's key, a program) counts only as far as ``trust`` (the host's :class:`HostTrust`,
    none by default) allows; otherwise that actor or member waits for the host's code to bind
    its card (or pass its profile) again.
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
        trust: HostTrust | None = None,
        max_members: int = DEFAULT_MAX_MEMBERS,
        _resume: bool = False,
        _read_only: bool = False,
    ) -> None:
        if not team_id:
            raise ValueError("team_id must be a non-empty string")
        if max_members < 1:
            raise ValueError(f"max_members must be at least 1, got {max_members}")
        self.team_id = team_id
        self.trust = HostTrust.of(trust)
        """What the host lets the rows this team reads back from its store choose."""
        self.profiles: list[RoleProfile] = []
        if profiles:  # a team without members does without the profiles' models
            # lazy: agent members only (pydantic models, ~1x python -c pass)
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
        self.max_members = max_members
        self._lock = threading.RLock()
        self._observers: dict[str, TeamObserver] = {}
        self._subscriptions: list[Subscription] = []
        self._stop_report: StopReport | None = None
        self.read_only = _read_only
        """Opened by :meth:`open_read_only`: nothing starts, nothing is written."""
        self._store = process.open_store(os.fspath(store), durable, read_only=_read_only)
        try:
            if (_resume or _read_only) and not self._store.team_exists(team_id):
                raise LookupError(f"store {self._store.location} holds no team {team_id!r}")
            process.claim(self, shared_store=not self._store.in_memory)
            self.log = EventLog(self._store, team_id)
            for_team = getattr(system, "for_team", None)
            if callable(for_team):  # Ray left on its default namespace: the team's own
                system = for_team(team_id)
            self.actors = ToolActors(team_id, self._store, self.log, self, system, self.trust)
            """The team's actor systems and its tool actors."""
            connect = getattr(self.system, "connect", None)
            if callable(connect):  # a cluster that cannot be reached fails here, once
                connect()
            if not _read_only:
                self._store.open_team(team_id)
                self.log.lifecycle("team_started", resumed=_resume)
        except BaseException:
            process.unclaim(self)
            process.release_store(self._store)
            raise
        self._roster = MemberRoster(self, max_members)
        if _resume:
            self.actors.restore()
            self._roster.restore()

    @classmethod
    def resume(cls, team_id: str, store: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Reopen a stopped (or killed) team: its recorded tool actors restart with their state.

        Actors whose tag is not known yet, or whose recorded config chooses what reaches the
        host beyond ``trust=``, come back when a card asks for them again.
        """
        return cls(team_id, store, _resume=True, **kwargs)

    @classmethod
    def open_read_only(cls, team_id: str, store: str | os.PathLike[str]) -> Self:
        """A stored team opened to be looked at (a dashboard of its store): its state, roster
        and event log are read as they are; no actor or member starts and nothing is written,
        not even the team's start and stop. Starting anything raises :class:`TeamStopped`."""
        return cls(team_id, store, _read_only=True)

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

    # ---- actors ------------------------------------------------------------------------------

    @property
    def system(self) -> ActorSystem:
        """Where tool actors run: this process (Pykka) or a cluster (Ray)."""
        return self.actors.system

    @property
    def running(self) -> bool:
        return self._stop_report is None

    def check_running(self) -> None:
        """Raise :class:`TeamStopped` once the team is stopped."""
        if self._stop_report is not None:
            raise TeamStopped(f"team {self.team_id} is stopped")
        if self.read_only:
            raise TeamStopped(f"team {self.team_id} is open read-only: it starts nothing")

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
        self.check_running()
        return self.actors.get(name, actor_cls, config, by=by)

    def spawn(self, name: str, factory: Callable[[], Any]) -> ActorHandle[Any]:
        """Start an actor of this process (a member, a helper) under a unique ``name``, with
        lifecycle events. Names without ``#`` are stopped in the first teardown phase."""
        self.check_running()
        # a member's start binds its cards, which may start tool actors on the team's system:
        # it waits at least as long as that system waits for one of its own to start
        bound = max(30.0, float(getattr(self.system, "start_timeout", 0.0)))
        handle = self.actors.local.spawn(
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
        system = self.actors.system_of(name)
        return not system.stop([name], bound) and system.lookup(name) is None

    def stop_later(self, name: str) -> None:
        """Stop the actor ``name`` once its queued messages are handled; returns at once."""
        self.actors.system_of(name).stop_later(name)

    def actor(self, name: str) -> ActorHandle[Any] | None:
        """The running actor called ``name``, or None."""
        handle = self.actors.system_of(name).lookup(name)
        return handle if handle is not None and handle.is_alive() else None

    def actor_names(self) -> list[str]:
        """Names of the running actors of this team (this process's, and cluster-wide tool
        actors on a distributed system); of a team opened read-only, its recorded tool actors."""
        if self.read_only:
            return [name for name, _, _ in self._store.recorded_actors(self.team_id)]
        return self.actors.names()

    def state_of(self, name: str) -> StateNamespace:
        """The durable key/value state of the actor ``name`` (readable even when it is down)."""
        return StateNamespace(self._store, self.team_id, name)

    def checkpoint(self) -> None:
        """Fold the store's write-ahead log into its file (after a bulk load, before a copy)."""
        self._store.checkpoint()

    # ---- members -------------------------------------------------------------------------------

    def hire(self, role: str, name: str | None = None) -> str:
        """Hire a member for ``role``; returns its unique name (``@<role>-<n>`` by default).

        An unknown role, a taken or malformed ``name``, or a full role is an error (nothing
        is started). The member's cards are bound for it; its tools are governed when the
        team has a policy. A role with ``placement="cluster"`` runs the member as an actor of
        the team's distributed system (Ray), in a worker process of the cluster.
        """
        return self._roster.hire(role, name)

    def adopt(self, role: str, name: str) -> str:
        """Hold the recorded member ``name`` of ``role`` in this process (the worker of a
        member placed on the cluster does this): its conversation continues from the store
        and messages queued for it meanwhile are delivered."""
        return self._roster.hire(role, name, adopting=True)

    def start_cluster_member(self, name: str, profile: RoleProfile) -> None:
        """Start the member ``name`` as an actor of this team's distributed actor system."""
        system = self.system
        if not is_remote(system):
            raise ValueError(
                f"role {profile.role!r} has placement='cluster', which needs a distributed "
                "actor system: Team(..., system='ray')"
            )
        factory = ClusterMemberFactory(
            type(self),
            self.team_id,
            self._store.secret_location(),
            name,
            profile,
            system,
            policy=self.policy,
            audit=self.audit,
            approver=self.approver,
            budgets=None if isinstance(self.budgets, MemoryBudgets) else self.budgets,
            max_members=self.max_members,
            stop_timeout=self.stop_timeout,
        )
        factory.check_portable()
        system.spawn(name, factory)

    def stop_cluster_member(self, name: str, timeout: float | None = None) -> bool | None:
        """Fire the cluster-placed member ``name`` in its worker and stop its actor; None when
        no such actor runs."""
        if not is_remote(self.system):
            return None
        handle = self.system.lookup(name)
        if handle is None:
            return None
        bound = self.stop_timeout if timeout is None else timeout
        try:
            clean = bool(handle.within(bound + 5.0).ask(ClusterMember.fire, bound))
        except (TimeoutError, ActorUnavailable):
            clean = False
        self.system.stop([name], bound)
        return clean

    def fire(self, name: str, timeout: float | None = None) -> bool:
        """Stop the member ``name`` (bounded by ``timeout``, default the team's stop timeout)
        and remove it from the roster with its conversation. Returns True when it stopped in
        time. An unknown or already fired name is a ``LookupError``."""
        return self._roster.fire(name, timeout)

    def send(
        self,
        to: str,
        content: str,
        *,
        sender: str = USER,
        timeout: float = DEFAULT_SEND_TIMEOUT,
        command: bool = False,
    ) -> str:
        """Send ``content`` to the member ``to`` and wait at most ``timeout`` seconds for its
        answer. Text is never a command unless the host's own code passes ``command=True``:
        then a slash command (``/name args``) from a sender outside the team runs the member's
        command, not its model, except while a governed call or a member's turn runs (a tool
        may hand its model's words on, so there it is a model turn)."""
        return self._roster.send(to, content, sender, timeout, from_host=True, command=command)

    def post(
        self,
        to: str,
        content: str,
        *,
        sender: str = USER,
        from_host: bool = True,
        command: bool = False,
    ) -> MemberMessage:
        """Queue ``content`` in the mailbox of ``to`` and return at once. When ``sender`` is a
        member, the answer is posted back to the sender's mailbox. ``command=True``: a slash
        command, as for :meth:`send`. ``from_host=False``: a member's or a tool's message,
        under its sender's name and never a slash command."""
        return self._roster.post(to, content, sender, from_host=from_host, command=command)

    def members(self) -> list[MemberInfo]:
        """The roster: name, role, busy and hire time of every member, in hire order."""
        return self._roster.members()

    def is_member(self, name: str) -> bool:
        """True when ``name`` is on the roster (exact name, with its ``@``)."""
        return self._roster.is_member(name)

    def profile(self, role: str) -> RoleProfile:
        """The profile of ``role``; a ``LookupError`` lists the known roles."""
        return self._roster.profile(role)

    def activity(
        self, *, max_task_chars: int = 200, stale_after: float | None = None
    ) -> dict[str, MemberActivity]:
        """Who is busy on what, per member on the roster, derived from the event log's last
        :data:`~toolcards.runtime.events.RECENT_EVENTS` events."""
        return self._roster.activity(max_task_chars=max_task_chars, stale_after=stale_after)

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
        if self._stop_report is not None:  # reading: a team opened read-only may
            raise TeamStopped(f"team {self.team_id} is stopped")
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
        bound = self.stop_timeout if timeout is None else timeout
        with self._lock:
            done = self._stop_report
            if done is not None:
                return done
            self._stop_report = report = StopReport()
        self._roster.retire_all()
        report.stopped, report.abandoned = self.actors.stop_all(bound, everywhere)
        if report.abandoned:
            logger.warning("team %s abandoned busy actors: %s", self.team_id, report.abandoned)
        if not self.read_only:  # a team opened to be looked at leaves no trace
            self.log.lifecycle("team_stopped", stopped=report.stopped, abandoned=report.abandoned)
            self._store.mark_stopped(self.team_id)
        self.log.close()
        deadline = time.monotonic() + bound
        for sub in self._subscriptions:
            sub.drain(timeout=max(deadline - time.monotonic(), 0.0))
        self._observers.clear()
        self.actors.shutdown()
        process.unclaim(self)
        process.release_store(self._store)
        return report

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = "memory" if self._store.in_memory else self._store.location
        return f"<Team {self.team_id} store={where} running={self.running}>"
