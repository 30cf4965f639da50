"""Tool actors: the one-per-team home of a stateful tool's state, and their registry by tag.

The store records which actor class runs under which name by the class's :attr:`actor_tag`,
never by a path to import: on resume a tag resolves through the classes defined in this
process, the built-in table below, or the ``toolcards.actors`` entry-point group. An unknown
tag is reported, never imported.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, cast

from pydantic import BaseModel

from toolcards._lazy import entry_point_classes
from toolcards.core.errors import RetriableError, ToolcardsError
from toolcards.core.events import ToolStateEvent
from toolcards.stores.applied_calls import call_digest
from toolcards.stores.base import dumps

if TYPE_CHECKING:
    from toolcards.runtime.events import EventLog
    from toolcards.runtime.host import ActorHost
    from toolcards.stores.base import StateNamespace, Store

ENTRY_POINT_GROUP = "toolcards.actors"

_BUILTIN_MODULES = (
    "toolcards.tools.planning.actor",
    "toolcards.tools.knowledge_graph.actor",
    "toolcards.tools.vector_store.actor",
    "toolcards.tools.notification.actor",
    "toolcards.tools.team.activity",
)
"""Modules of the built-in actors: imported (from this fixed list) to resolve their tags."""


class UnknownActorTag(ToolcardsError, LookupError):
    """A stored actor tag names no class known to this process."""


class ToolActorContext:
    """What a tool actor gets from its team: its name, durable state, the event log and the
    team itself (through the :class:`~toolcards.runtime.host.ActorHost` protocol)."""

    def __init__(self, name: str, team: ActorHost, state: StateNamespace, log: EventLog) -> None:
        self.name = name
        self.team = team
        self.team_id = team.team_id
        self.state = state
        self._log = log

    def emit(
        self, payload: Any, *, sender: str | None = None, display_type: str | None = None
    ) -> ToolStateEvent | None:
        """Append a delta of this actor's state to the team log, before the call returns.

        ``seq`` counts per actor from 1 without gaps; an empty payload records nothing and
        returns None. Inside ``with state.batch():`` the event commits with the state change.
        ``sender`` names the member or principal whose call caused the change.
        """
        return self._log.append(self.name, payload, sender=sender, display_type=display_type)

    def stop_self(self) -> None:
        """Stop this actor once the current call returns (short-lived actors end this way)."""
        self.team.stop_later(self.name)

    def __repr__(self) -> str:
        return f"<ToolActorContext {self.name} team={self.team_id}>"


class ToolActor:
    """Base class of a stateful team-singleton tool actor.

    Its public methods run one at a time on the actor's own thread, so they read, modify and
    write state without locks. Callers reach them with typed asks
    (``handle.ask(MyActor.method, ...)``). Never do slow I/O (HTTP, embeddings, subprocesses)
    here: it would block every member queued behind it; use :mod:`toolcards.runtime.deferred`.

    ``config_type`` is the pydantic model of the actor's configuration (None: it takes none);
    ``actor_tag`` names the class in the store (default ``module:QualName``).
    """

    actor_tag: ClassVar[str] = ""
    config_type: ClassVar[type[BaseModel] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("actor_tag"):
            cls.actor_tag = f"{cls.__module__}:{cls.__qualname__}"
        ACTOR_TYPES.defined(cls)

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        self.ctx = ctx
        self.config = config

    @property
    def name(self) -> str:
        return self.ctx.name

    @property
    def state(self) -> StateNamespace:
        return self.ctx.state

    def emit(
        self, payload: Any, *, sender: str | None = None, display_type: str | None = None
    ) -> ToolStateEvent | None:
        """Shortcut for ``self.ctx.emit(payload, ...)``."""
        return self.ctx.emit(payload, sender=sender, display_type=display_type)

    def pid(self) -> int:
        """The id of the process this actor runs in (it moves when a worker restarts it)."""
        return os.getpid()

    def on_start(self) -> None:
        """Load state from ``self.ctx.state`` (runs on the actor's thread before any call)."""

    def on_stop(self) -> None:
        """Release resources (runs on the actor's thread after the last call)."""


class Recovering:
    """A tool actor whose memory never answers ahead of its store.

    Actors change their memory and then write it (``with state.batch():``). Where the store
    gives each thread its own transaction (PostgreSQL), every call runs inside one, opened
    before the actor is touched, and the call's batches join it: a store that cannot begin
    it (stopped, refusing connections) fails the call before the actor changed anything, and
    a store that is down answers nothing, not even a read from memory. When the write does
    not commit (the connection was lost, the commit failed, its outcome is unknown), the
    store counts a lost write on the calling thread (:meth:`Store.lost_writes`); a call that
    moved the count marks the actor stale, and the next call first rebuilds it from the
    store (a fresh object, its ``on_start``). A rebuild that fails (the store is still down)
    raises that retryable error and the actor stays stale: no answer comes from memory the
    store does not hold. On a store whose one connection serves the whole process (SQLite),
    the transaction begins in the actor's batch instead (held across a call, it would hold
    up every other actor), and one that cannot begin counts as a lost write too. Every tool
    actor runs inside one (Pykka threads and Ray workers; :class:`Coherent` for copies).

    :meth:`call_once` runs a mutation under an idempotency key (``ask_once``): the key and
    the call's result commit in the transaction of its writes, and a later call under the
    key with the same method and arguments is answered from that record.
    """

    def __init__(
        self, build: Callable[[], Any], store: Store, team_id: str = "", name: str = ""
    ) -> None:
        self._build = build
        self._store = store
        self._team_id = team_id
        self._name = name
        self._target: Any = None
        self._stale = False

    def on_start(self) -> None:
        self._target = self._started()

    def on_stop(self) -> None:
        hook = getattr(self._target, "on_stop", None)
        if hook is not None:
            hook()

    def _started(self) -> Any:
        target = self._build()
        hook = getattr(target, "on_start", None)
        if hook is not None:
            hook()
        return target

    def reload(self) -> None:
        """Replace the actor by a fresh one loaded from the store (the old one stops after)."""
        fresh = self._started()
        old, self._target = self._target, fresh
        self._stale = False
        hook = getattr(old, "on_stop", None)
        if hook is not None:
            with contextlib.suppress(Exception):
                hook()

    def _call(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        lost = self._store.lost_writes()
        try:
            with self._serving():
                return getattr(self._target, name)(*args, **kwargs)
        finally:
            if self._store.lost_writes() != lost:
                self._stale = True

    @contextlib.contextmanager
    def _serving(self) -> Iterator[None]:
        """Around one call: the transaction it runs in (where the store gives each thread its
        own), begun before the actor is touched, then the reload of a stale actor."""
        store = self._store
        with store.transaction() if store.transaction_per_thread else contextlib.nullcontext():
            if self._stale:
                self.reload()
            yield

    def _lock(self) -> None:
        """Inside the call's transaction: take the actor's cross-process lock."""
        self._store.lock_actor(self._team_id, self._name)

    def call_once(self, key: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``name(*args, **kwargs)`` once per ``key``: in one transaction with its writes,
        the key and the result (its JSON, or the RetriableError it raised after writing) are
        recorded. A key already recorded for the same method and arguments returns the
        recorded result (or raises the recorded RetriableError) and writes nothing; a key
        recorded for another call runs this one (and records it in its place). A call that
        writes nothing records nothing."""
        if name.startswith("_"):
            raise AttributeError(f"actor does not expose {name!r}")
        store, team, actor = self._store, self._team_id, self._name
        digest = call_digest(name, args, kwargs)
        refusal: RetriableError | None = None
        lost = store.lost_writes()
        try:
            with store.transaction():
                self._lock()  # a retry racing its first attempt waits for it
                earlier = store.applied_call(team, key)
                if earlier is not None and earlier.digest == digest and earlier.actor == actor:
                    return _replayed(earlier.result)
                try:
                    result = self._call(name, *args, **kwargs)
                except RetriableError as exc:  # it wrote what it could, then refused the rest
                    if not store.writes_pending(team, actor):
                        raise
                    refusal = exc
                    recorded = dumps({"retry": str(exc)})
                else:
                    if not store.writes_pending(team, actor):
                        return result
                    recorded = dumps({"value": result})
                store.record_applied(team, key, actor, digest, recorded)
        finally:
            if store.lost_writes() != lost:
                self._stale = True  # its commit failed, or its outcome is unknown: reload
        if refusal is not None:
            raise refusal
        return json.loads(recorded)["value"]

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)
        if name.startswith("_") or not callable(method):
            return method
        return functools.partial(self._call, name)


def _replayed(recorded: str) -> Any:
    """The result a recorded call returns again (its recorded refusal is raised again)."""
    data = json.loads(recorded)
    if "retry" in data:
        raise RetriableError(str(data["retry"]))
    return data["value"]


class ActorTypes:
    """Tool actor classes by tag."""

    def __init__(self) -> None:
        self._classes: dict[str, type[ToolActor]] = {}
        self._builtins_loaded = False
        self._entry_points_loaded = False
        self._lock = threading.Lock()

    def defined(self, cls: type[ToolActor]) -> None:
        """Record a class as it is defined (the newest definition of a tag wins)."""
        self._classes[cls.actor_tag] = cls

    def register(self, cls: type[ToolActor], tag: str | None = None) -> None:
        """Make ``cls`` resolvable under ``tag`` too (default: its ``actor_tag``)."""
        self._classes[tag or cls.actor_tag] = cls

    def forget(self, tag: str) -> None:
        """Drop ``tag`` (a later definition or registration brings it back)."""
        self._classes.pop(tag, None)

    def resolve(self, tag: str) -> type[ToolActor]:
        """The class for ``tag``; :class:`UnknownActorTag` (never an import of ``tag``)."""
        found = self._classes.get(tag)
        if found is None and tag.split(":", 1)[0] in _BUILTIN_MODULES:
            self._load_builtins()
            found = self._classes.get(tag)
        if found is None:
            self._load_entry_points()
            found = self._classes.get(tag)
        if found is None:
            raise UnknownActorTag(
                f"no tool actor class is registered under {tag!r}; import the module that "
                f"defines it, or register it (ACTOR_TYPES.register or the {ENTRY_POINT_GROUP} "
                "entry-point group)"
            )
        return found

    def _load_builtins(self) -> None:
        if not self._builtins_loaded:
            for module in _BUILTIN_MODULES:
                importlib.import_module(module)
            self._builtins_loaded = True

    def _load_entry_points(self) -> None:
        with self._lock:
            if self._entry_points_loaded:
                return
            self._entry_points_loaded = True
        for name, cls in entry_point_classes(ENTRY_POINT_GROUP, ToolActor):
            actor = cast(type[ToolActor], cls)
            self._classes.setdefault(name, actor)
            self._classes.setdefault(actor.actor_tag, actor)


ACTOR_TYPES = ActorTypes()
"""The process-wide registry of tool actor classes."""
