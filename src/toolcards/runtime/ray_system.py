"""The distributed actor backend: tool actors as Ray named actors, one per team cluster-wide.

Actors live in a per-team namespace (``toolcards-<team id>`` unless given), are created
get-if-exists (so concurrent binders from many processes end up with one actor), detached
(they outlive the process that created them) and restarted by Ray when their worker dies:
the restarted actor runs its factory again and reloads its state from the store. A call in
flight when the worker died fails with :class:`ActorUnavailable` (retry it); calls made
after the restart are served. Needs the ``ray`` extra.

A namespace is not a boundary: any driver of the cluster can look up any named actor. A team's
actors therefore carry the team's key (a secret kept in its store) and refuse every call that
does not present it; see ``docs/distributed.md`` for the cluster setup that keeps foreign
drivers out in the first place (Ray's token authentication, a loopback or private address).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from toolcards._lazy import optional_module
from toolcards.core.actors import ActorUnavailable
from toolcards.runtime.ray_address import check_reachable, check_same_cluster
from toolcards.runtime.ray_fence import NodeFence
from toolcards.runtime.system import ActorSystemUnavailable, HandleBase

_OWN_OPTIONS = frozenset(
    ("name", "namespace", "get_if_exists", "lifetime", "max_restarts", "max_task_retries",
     "max_concurrency")
)  # fmt: skip

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep addresses on loopback


def _ray() -> Any:
    return optional_module("ray", "ray", "the Ray actor system")


def _digest(key: str | None) -> bytes:
    return hashlib.sha256((key or "").encode()).digest()


class _RayHost:
    """The Ray actor class: runs one target object built by a picklable factory.

    With a team key, every method refuses a caller that does not present it: Ray lets any
    driver of the cluster find a named actor in any namespace, so the key (kept in the team's
    store) is what keeps another team's driver out. A :class:`NodeFence` stops the worker
    once its node is lost, so a restarted copy elsewhere is the only one serving.
    """

    def __init__(
        self, factory: Callable[[], Any], key_digest: bytes | None = None, name: str = "?"
    ) -> None:
        self.target: Any = None
        self.start_error: BaseException | None = None
        self._key = key_digest
        self._joined = False
        self._fence = NodeFence(name).watch()
        try:
            self.target = factory()
            hook = getattr(self.target, "on_start", None)
            if hook is not None:
                hook()
        except Exception as exc:
            self.start_error = exc

    def _admit(self, key: str | None) -> None:
        self._fence.check()
        if self._key is not None and not hmac.compare_digest(self._key, _digest(key)):
            raise PermissionError(
                "refused: this actor serves one team, and the call did not carry its team key"
            )

    def started(self, key: str | None = None) -> BaseException | None:
        self._admit(key)
        return self.start_error

    def first_join(self, key: str | None = None) -> bool:
        """True for the first caller only: the spawn that started this actor (later ones
        joined it, from this or another process)."""
        self._admit(key)
        first = not self._joined
        self._joined = True
        return first

    def call(
        self, method: str, args: tuple[Any, ...], kw: dict[str, Any], key: str | None = None
    ) -> Any:
        self._admit(key)
        if method.startswith("_"):
            raise AttributeError(f"actor does not expose {method!r}")
        return getattr(self.target, method)(*args, **kw)

    def ping(self, key: str | None = None) -> bool:
        self._admit(key)
        return True

    def stop(self, key: str | None = None) -> None:
        self._admit(key)
        try:
            hook = getattr(self.target, "on_stop", None)
            if hook is not None and self.start_error is None:
                hook()
        finally:
            self._fence.close()
            _ray().actor.exit_actor()


class RayHandle(HandleBase[Any]):
    """An :class:`ActorHandle` over a Ray actor handle."""

    __slots__ = ("_actor", "_key", "started_here")

    def __init__(self, name: str, actor: Any, key: str | None = None) -> None:
        super().__init__(name)
        self._actor = actor
        self._key = key
        self.started_here = True
        """False when the spawn found the actor already running (another process started it)."""

    def _ask(self, method: str, args: tuple[Any, ...], kw: dict[str, Any], timeout: float) -> Any:
        ray = _ray()
        try:
            ref = self._actor.call.remote(method, args, kw, self._key)
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(
                f"{self._name}.{method} did not answer within {timeout:g}s"
            ) from None
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
            self._actor.call.remote(method, args, kw, self._key)
        except ray.exceptions.RayActorError:
            raise ActorUnavailable(f"actor {self._name} is not running") from None

    def is_alive(self) -> bool:
        ray = _ray()
        try:
            return bool(ray.get(self._actor.ping.remote(self._key), timeout=self.timeout))
        except Exception:
            return False

    @property
    def actor(self) -> Any:
        """The underlying Ray actor handle."""
        return self._actor


class RayActorSystem:
    """An :class:`~toolcards.runtime.ActorSystem` on a Ray cluster.

    ``address`` is a Ray cluster address (``127.0.0.1:6379``, ``ray://host:10001``); by
    default ``RAY_ADDRESS``, else an already initialised Ray, else a new local one.
    ``namespace`` keeps one team's actors apart from another's. Factories handed to
    :meth:`spawn` run in Ray worker processes, so they must be picklable.
    ``actor_options`` are further Ray actor options for every actor it spawns (``resources``,
    ``scheduling_strategy``, ``num_cpus``...), e.g. ``{"resources": {"tools": 0.01}}`` to keep
    a team's actors on the nodes that offer a ``tools`` resource.
    """

    def __init__(
        self,
        address: str | None = None,
        namespace: str = "toolcards",
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
        """The secret every call to this system's actors carries (a Team sets it from its
        store); actors spawned with it refuse calls without it."""
        self.namespace = namespace
        self.connect_timeout = connect_timeout
        self.max_restarts = max_restarts
        self._init_options = dict(init_options or {})
        self._started_ray = False
        self._connected = False

    def __repr__(self) -> str:
        return f"<RayActorSystem {self.address or 'local'} namespace={self.namespace}>"

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
        options = {"include_dashboard": False, "log_to_driver": False, **self._init_options}
        try:
            ray.init(address=address, ignore_reinit_error=True, **options)
        except ConnectionError as exc:
            raise ActorSystemUnavailable(
                f"cannot connect to the Ray cluster at {address}: {exc}; start it "
                "(`ray start --head`) or unset RAY_ADDRESS to run a local one"
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
        remote = ray.remote(_RayHost).options(
            name=name,
            namespace=self.namespace,
            get_if_exists=True,
            lifetime="detached",
            max_restarts=self.max_restarts,
            max_task_retries=0,
            max_concurrency=1,
            **{"num_cpus": 0, **self.actor_options},
        )
        key = self.team_key
        actor = remote.remote(factory, None if key is None else _digest(key), name)
        try:
            error = ray.get(actor.started.remote(key), timeout=start_timeout)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"actor {name} did not start within {start_timeout:g}s") from None
        except ray.exceptions.RayActorError as exc:
            raise ActorUnavailable(f"actor {name} failed to start: {exc}") from None
        except ray.exceptions.RayTaskError as exc:
            if isinstance(getattr(exc, "cause", None), PermissionError):
                raise PermissionError(
                    f"actor {name} exists in namespace {self.namespace} and belongs to another "
                    "team (it refused this team's key)"
                ) from None
            raise
        if isinstance(error, BaseException):
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            raise error
        handle = RayHandle(name, actor, key)
        handle.started_here = ray.get(actor.first_join.remote(key), timeout=start_timeout)
        return handle

    def lookup(self, name: str) -> RayHandle | None:
        ray = self.connect()
        try:
            actor = ray.get_actor(name, namespace=self.namespace)
        except ValueError:
            return None
        return RayHandle(name, actor, self.team_key)

    def names(self) -> list[str]:
        ray = self.connect()
        found = ray.util.list_named_actors(all_namespaces=True)
        return sorted(a["name"] for a in found if a.get("namespace") == self.namespace)

    def stop(self, names: Sequence[str], timeout: float) -> list[str]:
        if not names:  # nothing to stop: never (re)connect for it
            return []
        ray = self.connect()
        pending: dict[Any, tuple[str, Any]] = {}
        for name in names:
            handle = self.lookup(name)
            if handle is not None:
                pending[handle.actor.stop.remote(self.team_key)] = (name, handle.actor)
        deadline = time.monotonic() + max(timeout, 0.0)
        refs = list(pending)
        while refs and time.monotonic() < deadline:
            _, refs = ray.wait(refs, timeout=max(deadline - time.monotonic(), 0.0))
        abandoned = []
        for ref in refs:
            name, actor = pending[ref]
            abandoned.append(name)
        for _, actor in pending.values():  # exit_actor may leave it restartable: make sure
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        return abandoned

    def stop_later(self, name: str) -> None:
        handle = self.lookup(name)
        if handle is not None:
            handle.actor.stop.remote(self.team_key)

    def shutdown(self) -> None:
        """Disconnect from Ray (stopping it when this object started a local one)."""
        if self._started_ray:
            ray = _ray()
            with contextlib.suppress(Exception):
                ray.shutdown()
            self._started_ray = False
        self._connected = False
