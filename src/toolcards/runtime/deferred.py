"""Deferred results: slow work (HTTP, embeddings, conversions) without blocking a tool actor.

Three parts, all required:

- :class:`DeferredResultActor`, a cache tool actor that never does slow work: O(1) lookups,
  an LRU cap, negative entries with a TTL, and at most one in-flight worker per key;
- :class:`DeferredWorker`, a short-lived actor (named ``#defer-...``) per key that runs the slow
  call with its timeout handed to the I/O client, delivers the outcome, and stops itself;
- :func:`poll_deferred`, the caller's bounded wait, which always ends with an answer (the value
  or the caller's degraded default).

```python
cache = team.tool_actor("#Summaries", SummaryCache, DeferredConfig(worker_timeout=8))
summary = fetch_deferred(cache, message_id, text, attempts=5, delay=0.4)
if summary is None:
    summary = text[:200] + "..."          # degraded answer, always available
```
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, Field

from toolcards.core.actors import ActorHandle, ActorUnavailable
from toolcards.core.errors import ToolcardsError
from toolcards.runtime.tool_actor import ToolActor, ToolActorContext

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Status = Literal["ready", "pending", "failed", "missing"]


class DeferredFailed(ToolcardsError):
    """The production of a deferred value failed (and is cached negatively for a while)."""


class DeferredConfig(BaseModel):
    """Limits of a deferred-result cache."""

    max_entries: int = Field(default=1024, ge=1)
    """LRU cap on cached values (failures are capped the same way)."""
    negative_ttl: float = Field(default=30.0, ge=0)
    """Seconds a failure is remembered; a request for the key in that time spawns nothing."""
    worker_timeout: float = Field(default=10.0, gt=0)
    """The budget each worker hands to its I/O client."""
    inflight_grace: float = Field(default=5.0, ge=0)
    """Beyond ``worker_timeout``, how long to wait for a silent worker before retrying the key."""


class DeferredWorker(ToolActor, Generic[K, V]):
    """Produces one value, delivers it to its cache, then stops. Never reused.

    Subclasses implement :meth:`produce` and must pass ``timeout`` to their client (HTTP
    timeout, subprocess timeout, ...): a Python thread cannot be cancelled, so a timeout that
    does not reach the client does not bound anything.
    """

    config_type = DeferredConfig

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        cfg = config if isinstance(config, DeferredConfig) else DeferredConfig()
        self.timeout = cfg.worker_timeout

    def produce(self, payload: Any, timeout: float) -> V:
        """Do the slow work for ``payload`` within ``timeout`` seconds; raise on failure."""
        raise NotImplementedError

    def run(self, cache: str, key: K, payload: Any) -> None:
        """Produce, report to ``cache`` (``deliver`` or ``fail``), and stop."""
        try:
            value = self.produce(payload, self.timeout)
        except Exception as exc:
            failure: str | None = f"{type(exc).__name__}: {exc}"
        else:
            failure = None
        try:
            handle = self.ctx.team.actor(cache)
            if handle is None:  # the cache stopped meanwhile: nobody is waiting
                return
            if failure is None:
                handle.tell(DeferredResultActor.deliver, key, value)
            else:
                handle.tell(DeferredResultActor.fail, key, failure)
        except ActorUnavailable:
            pass
        finally:
            self.ctx.stop_self()


class DeferredResultActor(ToolActor, Generic[K, V]):
    """A cache of values produced by :class:`DeferredWorker` actors.

    Every method is O(1) on the actor thread; the slow call happens on the worker's thread.
    Set :attr:`worker` (or override :meth:`worker_class`) to the worker type.
    """

    config_type = DeferredConfig
    worker: ClassVar[type[DeferredWorker[Any, Any]] | None] = None
    _numbers = itertools.count(1)

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        self.limits = config if isinstance(config, DeferredConfig) else DeferredConfig()
        self._values: OrderedDict[K, V] = OrderedDict()
        self._failures: OrderedDict[K, tuple[str, float]] = OrderedDict()
        self._inflight: dict[K, tuple[str, float]] = {}
        self.spawned = 0

    def clock(self) -> float:
        """Monotonic seconds (TTLs and in-flight deadlines); override to control time in tests."""
        return time.monotonic()

    def worker_class(self) -> type[DeferredWorker[Any, Any]]:
        if self.worker is None:
            raise TypeError(f"{type(self).__name__} sets no worker class")
        return self.worker

    # ---- reads -------------------------------------------------------------------------------

    def get(self, key: K) -> V | None:
        """The cached value of ``key``, or None (pending, failed or never requested)."""
        if key in self._values:
            self._values.move_to_end(key)
            return self._values[key]
        return None

    def poll(self, key: K) -> V | None:
        """Like :meth:`get`, but a remembered failure raises :class:`DeferredFailed`."""
        value = self.get(key)
        if value is None:
            error = self.error(key)
            if error is not None:
                raise DeferredFailed(error)
        return value

    def error(self, key: K) -> str | None:
        """The remembered failure of ``key`` (None once its TTL has passed)."""
        found = self._failures.get(key)
        if found is None:
            return None
        if found[1] <= self.clock():
            del self._failures[key]
            return None
        return found[0]

    def status(self, key: K) -> Status:
        if key in self._values:
            return "ready"
        if self._live_inflight(key):
            return "pending"
        return "failed" if self.error(key) is not None else "missing"

    def stats(self) -> dict[str, int]:
        return {
            "values": len(self._values),
            "failures": len(self._failures),
            "inflight": len(self._inflight),
            "spawned": self.spawned,
        }

    # ---- production --------------------------------------------------------------------------

    def request(self, key: K, payload: Any = None) -> Status:
        """Make sure ``key`` is produced: spawns a worker only when the key is neither cached,
        in flight, nor a remembered failure. Returns the key's status after the call."""
        status = self.status(key)
        if status != "missing":
            return status
        number = next(self._numbers)
        name = f"#defer-{self.name.lstrip('#')}-{number}"
        handle = self.ctx.team.tool_actor(name, self.worker_class(), self.limits)
        self.spawned += 1
        deadline = self.clock() + self.limits.worker_timeout + self.limits.inflight_grace
        self._inflight[key] = (name, deadline)
        handle.tell(DeferredWorker.run, self.name, key, payload)
        return "pending"

    def deliver(self, key: K, value: V) -> None:
        """A worker's result (told by the worker)."""
        self._inflight.pop(key, None)
        self._failures.pop(key, None)
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self.limits.max_entries:
            self._values.popitem(last=False)

    def fail(self, key: K, error: str) -> None:
        """A worker's failure (told by the worker): remembered for ``negative_ttl`` seconds."""
        self._inflight.pop(key, None)
        self._failures[key] = (error, self.clock() + self.limits.negative_ttl)
        self._failures.move_to_end(key)
        while len(self._failures) > self.limits.max_entries:
            self._failures.popitem(last=False)

    def invalidate(self, key: K) -> None:
        """Forget ``key`` (value and failure); the next request produces it again."""
        self._values.pop(key, None)
        self._failures.pop(key, None)

    def _live_inflight(self, key: K) -> bool:
        found = self._inflight.get(key)
        if found is None:
            return False
        if found[1] <= self.clock():  # the worker never answered: allow a new one
            del self._inflight[key]
            return False
        return True


def poll_deferred(
    fetch: Callable[[], V | None],
    attempts: int = 5,
    delay: float = 0.2,
    *,
    default: V | None = None,
) -> V | None:
    """Call ``fetch`` up to ``attempts`` times, ``delay`` seconds apart, until it returns a value.

    The budget is bounded (about ``attempts * delay`` plus the fetches' own timeouts). A fetch
    that times out counts as "not yet"; one raising :class:`DeferredFailed` ends the wait early.
    Returns the value, or ``default`` (the caller's degraded answer).
    """
    for attempt in range(max(attempts, 1)):
        try:
            value = fetch()
        except TimeoutError:
            value = None
        except DeferredFailed:
            return default
        if value is not None:
            return value
        if attempt < attempts - 1:
            time.sleep(delay)
    return default


def fetch_deferred(
    cache: ActorHandle[DeferredResultActor[Any, Any]],
    key: Hashable,
    payload: Any = None,
    *,
    attempts: int = 5,
    delay: float = 0.2,
    timeout: float = 2.0,
    default: Any = None,
) -> Any:
    """The whole caller side: cached value, else request and poll (bounded), else ``default``."""
    bounded = cache.within(timeout)
    value = bounded.ask(DeferredResultActor.get, key)
    if value is not None:
        return value
    if bounded.ask(DeferredResultActor.request, key, payload) == "failed":
        return default
    return poll_deferred(
        lambda: bounded.ask(DeferredResultActor.poll, key), attempts, delay, default=default
    )
