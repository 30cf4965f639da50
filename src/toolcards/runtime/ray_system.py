"""The distributed actor backend: tool actors as Ray named actors, one per team cluster-wide.

Actors live in a per-team namespace (``toolcards-<team id>`` unless given), are created
get-if-exists (so concurrent binders from many processes end up with one actor), detached
(they outlive the process that created them) and restarted by Ray when their worker dies:
the restarted actor runs its factory again and reloads its state from the store. A call in
flight when the worker died fails with :class:`ActorUnavailable` (retry it); calls made
after the restart are served. Needs the ``ray`` extra.

A namespace is not a boundary: any driver of the cluster can look up any named actor. A team's
actors are therefore :class:`~toolcards.runtime.ray_host.RayHost` actors made with the team's
key (a secret kept in its store): a team proves every actor before it sends it anything, and
every call carries a ticket of the key, never the key. A Ray cluster is still one trust
domain (code run on it can reach every actor's process): see ``docs/distributed.md`` for the
setup that keeps other teams' drivers on clusters of their own.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from toolcards._lazy import optional_module
from toolcards.core.actors import ActorUnavailable, no_answer
from toolcards.core.threads import background_thread
from toolcards.runtime.ray_address import check_admitted, check_reachable, check_same_cluster
from toolcards.runtime.ray_host import NONCE, HostKey, RayHost, host_class_problem
from toolcards.runtime.system import ActorSystemUnavailable, HandleBase
from toolcards.runtime.team_key import team_key as stored_team_key
from toolcards.stores.base import Store

_OWN_OPTIONS = frozenset(
    ("name", "namespace", "get_if_exists", "lifetime", "max_restarts", "max_task_retries",
     "max_concurrency")
)  # fmt: skip

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep addresses on loopback


def _ray() -> Any:
    return optional_module("ray", "ray", "the Ray actor system")


def _settled(ray: Any, refs: Iterable[Any], deadline: float) -> set[Any]:
    """Those of ``refs`` whose result is ready by ``deadline`` (a ``time.monotonic()``)."""
    pending = list(refs)
    ready: set[Any] = set()
    while pending and time.monotonic() < deadline:
        done, pending = ray.wait(pending, timeout=max(deadline - time.monotonic(), 0.0))
        ready.update(done)
    return ready


class RayHandle(HandleBase[Any]):
    """An :class:`ActorHandle` over a Ray actor handle.

    Before it sends the actor anything it checks that the actor is the team's tool host: its
    class (Ray's method table) and its answer to a random challenge, which only a host made
    with the team's key gives (a PermissionError otherwise); every call then carries a
    ticket of that key, never the key.
    """

    __slots__ = ("_actor", "_key", "_namespace", "_proven", "_vouched", "started_here")

    def __init__(
        self, name: str, actor: Any, key: HostKey, namespace: str, vouched: set[Any]
    ) -> None:
        super().__init__(name)
        self._actor = actor
        self._key = key
        self._namespace = namespace
        self._proven = False
        self._vouched = vouched
        self.started_here = True
        """False when the spawn found the actor already running (another process started it)."""

    def challenge(self) -> tuple[bytes, Any]:
        """Send the actor a random challenge after checking its class: the challenge and the
        reference of the answer (PermissionError when it is not a tool host)."""
        problem = host_class_problem(set(dir(self._actor)))
        if problem is not None:
            raise PermissionError(
                f"actor {self._name} in namespace {self._namespace} is not a toolcards tool "
                f"host ({problem}): nothing was sent to it; stop it or give the team another "
                "namespace"
            )
        challenge = secrets.token_bytes(NONCE)
        return challenge, self._actor.hello.remote(challenge)

    def accept(self, challenge: bytes, answer: object) -> None:
        """Take ``answer`` to ``challenge`` as the proof that the actor is the team's host;
        PermissionError when it is not."""
        if not self._key.proves(challenge, answer):
            raise PermissionError(
                f"actor {self._name} in namespace {self._namespace} was not started by this "
                "team (it does not prove the team's key): it was sent a random challenge and "
                "nothing else; stop it or give the team another namespace"
            )
        self._proven = True
        self._vouched.add(self._actor)

    @property
    def vouched(self) -> bool:
        """Whether this very actor proved the team's key to this system before: Ray never
        gives a new actor the id of an old one, and a restart keeps it."""
        return self._actor in self._vouched

    def prove(self, timeout: float, *, again: bool = False) -> None:
        """Make sure the actor is the team's tool host (once, or ``again``), waiting at most
        ``timeout`` seconds for its answer."""
        if self._proven and not again:
            return
        challenge, ref = self.challenge()
        self.accept(challenge, _ray().get(ref, timeout=timeout))

    def _ask(self, method: str, args: tuple[Any, ...], kw: dict[str, Any], timeout: float) -> Any:
        ray = _ray()
        deadline = time.monotonic() + timeout
        try:
            self.prove(timeout)
            ref = self._actor.call.remote(self._key.ticket("call", method), method, args, kw)
            return ray.get(ref, timeout=max(deadline - time.monotonic(), 0.0))
        except ray.exceptions.GetTimeoutError:
            raise no_answer(self._name, method, timeout) from None
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
            raise ActorUnavailable(
                f"actor {self._name} was not available for {method} (it may be restarting; "
                "retry the call)"
            ) from None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise

    def _tell(self, method: str, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        ray = _ray()
        try:
            self.prove(self.timeout)
            self._actor.call.remote(self._key.ticket("call", method), method, args, kw)
        except (ray.exceptions.RayError, TimeoutError):
            raise ActorUnavailable(f"actor {self._name} is not running") from None

    def is_alive(self) -> bool:
        try:
            self.prove(self.timeout, again=True)
        except Exception:
            return False
        return True

    def stop_ref(self) -> Any:
        """Ask the (proven) actor to stop; the reference of its answer."""
        return self._actor.stop.remote(self._key.ticket("stop"))

    def stop_when_proven(self) -> None:
        """Prove the actor, then ask it to stop (errors dropped: it may be gone)."""
        with contextlib.suppress(Exception):
            self.prove(self.timeout)
            self.stop_ref()

    @property
    def actor(self) -> Any:
        """The underlying Ray actor handle."""
        return self._actor


class RayActorSystem:
    """An :class:`~toolcards.runtime.ActorSystem` on a Ray cluster.

    ``address`` is a Ray cluster address (``127.0.0.1:6379``, ``ray://host:10001``); by
    default ``RAY_ADDRESS``, else an already initialised Ray, else a new local one.
    ``namespace`` keeps one team's actors apart from another's: without one, a team given
    this system puts them in its own, ``toolcards-<team id>`` (:meth:`for_team`), as
    ``system="ray"`` does; used without a team, ``toolcards``. Factories handed to
    :meth:`spawn` run in Ray worker processes, so they must be picklable.
    ``actor_options`` are further Ray actor options for every actor it spawns (``resources``,
    ``scheduling_strategy``, ``num_cpus``...), e.g. ``{"resources": {"tools": 0.01}}`` to keep
    a team's actors on the nodes that offer a ``tools`` resource.
    """

    def __init__(
        self,
        address: str | None = None,
        namespace: str | None = None,
        *,
        connect_timeout: float = 10.0,
        start_timeout: float = 60.0,
        max_restarts: int = -1,
        init_options: dict[str, Any] | None = None,
        team_key: str | None = None,
        actor_options: dict[str, Any] | None = None,
    ) -> None:
        taken = sorted(_OWN_OPTIONS & set(actor_options or {}))
        if taken:
            raise TypeError(f"RayActorSystem sets {', '.join(taken)} itself: not actor_options")
        self.actor_options = dict(actor_options or {})
        self.address = address
        self.start_timeout = start_timeout
        """How long :meth:`spawn` waits for a new actor to start (a worker process that must
        start and import first: a loaded cluster takes longer)."""
        self.team_key = team_key
        """The team's secret (a Team sets it from its store): actors spawned with it hold a
        verifier derived from it and admit only calls carrying a ticket of it. It never
        leaves this process (a copy sent to a worker reads it from the store there)."""
        self.key_in_store = False
        """True in a copy sent here without its team key (:meth:`keyed_from` reads it)."""
        self.namespace = "toolcards" if namespace is None else namespace
        self.namespace_given = namespace is not None
        self.connect_timeout = connect_timeout
        self.max_restarts = max_restarts
        self._init_options = dict(init_options or {})
        self._started_ray = False
        self._connected = False
        self._vouched: set[Any] = set()
        """The actors that proved the team's key to this system (what :meth:`stop` may kill)."""

    def __repr__(self) -> str:
        return f"<RayActorSystem {self.address or 'local'} namespace={self.namespace}>"

    def for_team(self, team_id: str) -> RayActorSystem:
        """The system for team ``team_id``: itself when given a namespace, else a copy on the
        team's own (two teams left on one default namespace would share their actors' names)."""
        return self if self.namespace_given else self.for_namespace(f"toolcards-{team_id}")

    def for_namespace(self, namespace: str) -> RayActorSystem:
        """The same cluster with another namespace."""
        return self._copy(namespace, self.team_key)

    def with_team_key(self, key: str) -> RayActorSystem:
        """The same cluster and namespace, calling (and spawning) with a team's key."""
        return self._copy(self.namespace, key)

    def _copy(self, namespace: str, key: str | None) -> RayActorSystem:
        other = RayActorSystem(
            self.address,
            namespace,
            connect_timeout=self.connect_timeout,
            start_timeout=self.start_timeout,
            max_restarts=self.max_restarts,
            init_options=self._init_options,
            team_key=key,
            actor_options=self.actor_options,
        )
        other._connected = self._connected
        other.key_in_store = self.key_in_store
        return other

    # ---- connection --------------------------------------------------------------------------

    def starts_private_cluster(self) -> bool:
        """Whether connecting would start a new Ray in this process: no address, no
        ``RAY_ADDRESS``, no Ray initialised here (and the ray extra installed). Such a cluster
        is this process's alone; ``address="local"`` asks for one explicitly."""
        if self._connected:
            return self._started_ray
        if self.address or os.environ.get("RAY_ADDRESS"):
            return False
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            return False
        return importlib.util.find_spec("ray") is not None

    def connect(self) -> Any:
        """Connect to (or start) Ray once; the ``ray`` module."""
        ray = _ray()
        if self._connected:
            return ray
        if ray.is_initialized():
            check_same_cluster(ray, self.address)
            self._connected = True
            return ray
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        if address and address != "auto":
            check_reachable(address, self.connect_timeout)
            check_admitted(address, self.connect_timeout)
        options = {"include_dashboard": False, "log_to_driver": False, **self._init_options}
        try:
            ray.init(address=address, ignore_reinit_error=True, **options)
        except ConnectionError as exc:
            raise ActorSystemUnavailable(
                f"cannot connect to the Ray cluster at {address}: {exc} (is it running there? "
                "`ray start --head` prints the address to give)"
            ) from None
        self._started_ray = address is None
        self._connected = True
        return ray

    def cluster(self) -> str:
        """The cluster this system is connected to, as the cluster names itself (its GCS
        address), whichever spelling of the address reached it."""
        ray = self.connect()
        try:
            return str(ray.get_runtime_context().gcs_address)
        except Exception:  # a Ray client connection does not see the GCS: the given address
            return str(self.address or os.environ.get("RAY_ADDRESS") or "local")

    @staticmethod
    def reachable(cluster: str, timeout: float = 2.0) -> bool:
        """Whether something answers at ``cluster`` (a ``host:port``) within ``timeout``."""
        try:
            check_reachable(cluster, timeout)
        except ActorSystemUnavailable:
            return False
        return True

    # ---- the ActorSystem interface -----------------------------------------------------------

    def spawn(
        self, name: str, factory: Callable[[], Any], *, start_timeout: float | None = None
    ) -> RayHandle:
        if start_timeout is None:
            start_timeout = self.start_timeout
        ray = self.connect()
        remote = ray.remote(RayHost).options(
            name=name,
            namespace=self.namespace,
            get_if_exists=True,
            lifetime="detached",
            max_restarts=self.max_restarts,
            max_task_retries=0,
            max_concurrency=1,
            **{"num_cpus": 0, **self.actor_options},
        )
        key = self._host_key(name)
        # an actor already running under the name is returned as it is: it gets none of these
        actor = remote.remote(factory, key.verifier, name)
        handle = RayHandle(name, actor, key, self.namespace, self._vouched)
        try:
            handle.prove(start_timeout)  # waits for a new actor to start
            error, first = ray.get(actor.join.remote(key.ticket("join")), timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"actor {name} did not start within {start_timeout:g}s") from None
        except ray.exceptions.RayActorError as exc:
            raise ActorUnavailable(f"actor {name} failed to start: {exc}") from None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise
        if isinstance(error, BaseException):
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            raise error
        handle.started_here = bool(first)
        return handle

    def _host_key(self, name: str) -> HostKey:
        return HostKey.derive(self.team_key, self.namespace, name)

    def lookup(self, name: str) -> RayHandle | None:
        ray = self.connect()
        try:
            actor = ray.get_actor(name, namespace=self.namespace)
        except ValueError:
            return None
        return RayHandle(name, actor, self._host_key(name), self.namespace, self._vouched)

    def names(self) -> list[str]:
        ray = self.connect()
        found = ray.util.list_named_actors(all_namespaces=True)
        return sorted(a["name"] for a in found if a.get("namespace") == self.namespace)

    def stop(self, names: Sequence[str], timeout: float) -> list[str]:
        """Stop the team's actors among ``names``; returns those that did not stop cleanly.

        Each is challenged first. One that proves the team's key is asked to stop, and killed
        when it does not in time; one that does not answer in time (busy) or died meanwhile
        is killed only when it proved itself to this system before (Ray never gives a new
        actor an old one's id). Any other is left alone: in a namespace shared by mistake it
        is another team's."""
        if not names:  # nothing to stop: never (re)connect for it
            return []
        ray = self.connect()
        deadline = time.monotonic() + max(timeout, 0.0)
        asked: dict[Any, tuple[RayHandle, bytes]] = {}
        left: list[str] = []
        for handle in filter(None, map(self.lookup, names)):
            try:
                challenge, ref = handle.challenge()
            except PermissionError:  # not a tool host: not the team's
                left.append(handle.name)
                continue
            asked[ref] = (handle, challenge)
        answered = _settled(ray, asked, deadline)
        stopping: dict[Any, RayHandle] = {}
        silent, gone = [], []
        for ref, (handle, challenge) in asked.items():
            if ref not in answered:
                silent.append(handle)
                continue
            try:
                handle.accept(challenge, ray.get(ref, timeout=0))
            except PermissionError:
                left.append(handle.name)
                continue
            except ray.exceptions.RayError:
                gone.append(handle)
                continue
            stopping[handle.stop_ref()] = handle
        stopped = _settled(ray, stopping, deadline)
        left += [h.name for ref, h in stopping.items() if ref not in stopped]
        left += [h.name for h in silent] + [h.name for h in gone if not h.vouched]
        for handle in [*stopping.values(), *(h for h in (*silent, *gone) if h.vouched)]:
            with contextlib.suppress(Exception):  # exit_actor may leave it restartable
                ray.kill(handle.actor, no_restart=True)
        return left

    def stop_later(self, name: str) -> None:
        handle = self.lookup(name)
        if handle is not None:  # proving waits for the actor, which may be the caller
            background_thread(handle.stop_when_proven, name=f"stop {name}").start()

    def __getstate__(self) -> dict[str, Any]:
        """A copy sent to another process (a worker) leaves the team key behind: it reads the
        key from the team's store there (:meth:`keyed_from`)."""
        state = dict(self.__dict__)
        state["key_in_store"] = self.key_in_store or self.team_key is not None
        state["team_key"] = None
        state["_vouched"] = set()  # what proved itself here is this process's knowledge
        return state

    def keyed_from(self, store: Store, team_id: str) -> RayActorSystem:
        """This system with the team's key read from ``store``, when it was sent here
        without it (:meth:`__getstate__`); itself otherwise."""
        if not self.key_in_store or self.team_key is not None:
            return self
        return self.with_team_key(stored_team_key(store, team_id))

    def shutdown(self) -> None:
        """Disconnect from Ray (stopping it when this object started a local one)."""
        if self._started_ray:
            ray = _ray()
            with contextlib.suppress(Exception):
                ray.shutdown()
            self._started_ray = False
        self._connected = False
