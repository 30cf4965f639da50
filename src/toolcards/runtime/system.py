"""The actor layer behind a small interface (backends: :mod:`toolcards.runtime.pykka_system`).

An actor here is any object whose public methods are called one at a time on the actor's own
thread. ``ActorSystem`` is all the team needs (spawn, ask, tell, stop, lookup by name), so a
backend for multi-machine teams can replace the embedded Pykka one without touching callers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from toolcards.core.errors import ToolcardsError

DEFAULT_ASK_TIMEOUT = 10.0


class ActorUnavailable(ToolcardsError):
    """The actor is not running (never started, stopped, or failed to start)."""


@runtime_checkable
class ActorHandle(Protocol):
    """A reference to one running actor. Cheap to keep; safe to share between threads."""

    @property
    def name(self) -> str:
        """The actor's unique name within its system (``#PlanningTool``)."""

    def ask(self, method: str, *args: Any, timeout: float = DEFAULT_ASK_TIMEOUT, **kw: Any) -> Any:
        """Call ``method`` on the actor and wait at most ``timeout`` seconds for the result.

        An exception raised by the method is raised here; no answer in time is a
        ``TimeoutError``; a stopped actor is :class:`ActorUnavailable`.
        """

    def tell(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Queue a call of ``method`` without waiting (its result and errors are dropped)."""

    def is_alive(self) -> bool:
        """True while the actor accepts messages."""


@runtime_checkable
class ActorSystem(Protocol):
    """Spawns and addresses named actors."""

    def spawn(
        self, name: str, factory: Callable[[], Any], *, start_timeout: float = 30.0
    ) -> ActorHandle:
        """Start an actor running ``factory()``'s object under the unique ``name``.

        ``factory`` runs on the actor's thread, then the object's ``on_start()``; a failure of
        either is raised here. A name already in use is a ``ValueError``.
        """

    def lookup(self, name: str) -> ActorHandle | None:
        """The running actor called ``name``, or None."""

    def names(self) -> list[str]:
        """Names of the running actors, in start order."""

    def ask(self, name: str, method: str, *args: Any, timeout: float = ..., **kw: Any) -> Any:
        """``lookup(name).ask(...)``; an unknown name is :class:`ActorUnavailable`."""

    def tell(self, name: str, method: str, *args: Any, **kwargs: Any) -> None:
        """``lookup(name).tell(...)``; an unknown name is :class:`ActorUnavailable`."""

    def stop(self, names: Sequence[str], timeout: float) -> list[str]:
        """Stop the named actors in parallel; returns those that did not stop in ``timeout``."""

    def stop_later(self, name: str) -> None:
        """Ask ``name`` to stop once its queued messages are handled; returns at once (an actor
        may call it on itself)."""
