"""The actor layer behind a small interface (backends: :mod:`toolcards.runtime.pykka_system`,
:mod:`toolcards.runtime.ray_system`).

An actor here is any object whose public methods are called one at a time on the actor's own
thread (or process). ``ActorSystem`` is all the team needs (spawn, lookup by name, stop), and
:class:`HandleBase` gives every backend the same typed ``ask``/``tell`` over its own transport,
so callers never depend on the backend.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar, runtime_checkable

from toolcards.core.actors import (
    DEFAULT_ASK_TIMEOUT,
    ActorHandle,
    ActorTimeout,
    ActorUnavailable,
    ask_timeout,
    call_key,
    calling_call_key,
    method_name,
)
from toolcards.core.errors import ToolcardsError

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "ActorHandle",
    "ActorSystem",
    "ActorSystemUnavailable",
    "ActorTimeout",
    "ActorUnavailable",
    "HandleBase",
    "call_key",
]


class ActorSystemUnavailable(ToolcardsError):
    """The actor system (a Ray cluster) cannot be reached."""


A = TypeVar("A")
P = ParamSpec("P")
R = TypeVar("R")


class HandleBase(Generic[A]):
    """Typed ``ask``/``tell``/``within`` over a backend's untyped transport.

    A backend subclasses it and implements :meth:`_ask`, :meth:`_tell` and :meth:`is_alive`;
    only the method's name crosses to the actor. A backend's ask that gets no answer in time
    raises :class:`ActorTimeout` (:func:`~toolcards.core.actors.no_answer`).
    """

    __slots__ = ("_name", "_timeout")

    def __init__(self, name: str, timeout: float | None = None) -> None:
        self._name = name
        self._timeout = timeout

    @property
    def name(self) -> str:
        return self._name

    @property
    def timeout(self) -> float:
        """Seconds an ask waits: the bound given to :meth:`within`; without one, until the
        calling governed call's deadline (and a second: the call's own deadline answers
        first), else :data:`DEFAULT_ASK_TIMEOUT`."""
        return ask_timeout(self._timeout)

    def ask(self, method: Callable[Concatenate[A, P], R], /, *args: P.args, **kw: P.kwargs) -> R:
        """Call ``method`` on the actor; wait at most :attr:`timeout` seconds for the result."""
        result: R = self._ask(method_name(method), args, kw, self.timeout)
        return result

    def ask_once(
        self, method: Callable[Concatenate[A, P], R], /, *args: P.args, **kw: P.kwargs
    ) -> R:
        """:meth:`ask` under the calling governed call's idempotency key (the tool actor's
        ``call_once`` receives it; see :meth:`ActorHandle.ask_once`)."""
        key = calling_call_key.get()
        if key is None:
            return self.ask(method, *args, **kw)
        result: R = self._ask("call_once", (key, method_name(method), args, kw), {}, self.timeout)
        return result

    def tell(
        self, method: Callable[Concatenate[A, P], Any], /, *args: P.args, **kw: P.kwargs
    ) -> None:
        """Queue a call of ``method`` without waiting (result and errors dropped)."""
        self._tell(method_name(method), args, kw)

    def within(self, timeout: float) -> Self:
        """This handle with another ask timeout."""
        other = copy.copy(self)
        other._timeout = float(timeout)  # noqa: SLF001 - a copy of this very handle
        return other

    def _ask(self, method: str, args: tuple[Any, ...], kw: dict[str, Any], timeout: float) -> Any:
        raise NotImplementedError

    def _tell(self, method: str, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        raise NotImplementedError

    def is_alive(self) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<ActorHandle {self._name}>"


@runtime_checkable
class ActorSystem(Protocol):
    """Spawns and addresses named actors."""

    def spawn(
        self, name: str, factory: Callable[[], Any], *, start_timeout: float = 30.0
    ) -> ActorHandle[Any]:
        """Start an actor running ``factory()``'s object under the unique ``name``.

        ``factory`` runs where the actor lives (its thread, or its process: then it must be
        picklable), then the object's ``on_start()``; a failure of either is raised here. A name
        already in use is a ``ValueError``.
        """

    def lookup(self, name: str) -> ActorHandle[Any] | None:
        """The running actor called ``name``, or None."""

    def names(self) -> list[str]:
        """Names of the running actors, in start order."""

    def stop(self, names: Sequence[str], timeout: float) -> list[str]:
        """Stop the named actors in parallel; returns those that did not stop in ``timeout``."""

    def stop_later(self, name: str) -> None:
        """Ask ``name`` to stop once its queued messages are handled; returns at once (an actor
        may call it on itself)."""

    def shutdown(self) -> None:
        """Release what the system holds (connections, worker processes it started)."""
