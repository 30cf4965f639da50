"""Typed calls to actors: the handle every actor backend implements.

A call names the method by reference, so mypy checks the arguments and the result type::

    board: ActorHandle[PlanningActor] = observer.tool_actor("#PlanningTool", PlanningActor)
    tasks = board.ask(PlanningActor.tasks)                      # -> list[Task]
    board.within(30.0).ask(PlanningActor.apply, "@alice", [], [], [])
    board.tell(PlanningActor.apply, "@alice", [], [], [])       # no wait, result dropped

Backends send only the method's name across threads, processes or machines and call it there,
so any callable whose ``__name__`` is a public method of the target works, including a
method of a ``Protocol`` that describes an actor of another card.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

from toolcards.core.errors import TransientError

DEFAULT_ASK_TIMEOUT = 10.0
"""Seconds an ``ask`` waits for its answer unless the handle says otherwise (``within``)."""

calling_call_key: ContextVar[str | None] = ContextVar("toolcards_calling_call_key", default=None)
"""The idempotency key of the governed call whose tool runs in this context (the executor
sets it: the call id, or the durable key of a run's tool call). :meth:`ActorHandle.ask_once`
sends it with a mutation, so a retry under the same key is answered from the record its
first commit left (:mod:`toolcards.stores.applied_calls`)."""

A_co = TypeVar("A_co", covariant=True)
P = ParamSpec("P")
R = TypeVar("R")


class ActorUnavailable(TransientError):
    """The actor is not running (never started, stopped, failed to start, or restarting).

    Retryable: a tool whose actor is unavailable reports a retry to the model, and a later
    call reaches the actor once it runs again.
    """


def method_name(method: Callable[..., Any] | str) -> str:
    """The public method name a call carries; ValueError for private or unnamed callables."""
    name = method if isinstance(method, str) else getattr(method, "__name__", None)
    if not isinstance(name, str) or not name or name.startswith("_"):
        raise ValueError(f"actor calls name a public method, got {method!r}")
    return name


@runtime_checkable
class ActorHandle(Protocol[A_co]):
    """A reference to one running actor whose target is an ``A_co``. Cheap to keep and safe
    to share between threads."""

    @property
    def name(self) -> str:
        """The actor's unique name within its system (``#PlanningTool``)."""

    @property
    def timeout(self) -> float:
        """Seconds :meth:`ask` waits for an answer."""

    def ask(
        self, method: Callable[Concatenate[A_co, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Call ``method`` on the actor and wait at most :attr:`timeout` seconds for its result.

        An exception raised by the method is raised here; no answer in time is a
        ``TimeoutError``; a stopped actor is :class:`ActorUnavailable`.
        """

    def ask_once(
        self, method: Callable[Concatenate[A_co, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """:meth:`ask` for a mutation of a tool actor, under the calling governed call's key
        (:data:`calling_call_key`; a plain :meth:`ask` without one). The key commits with
        the writes; a call under a key that committed before, with the same method and
        arguments, gets the recorded result and writes nothing. The result must be JSON data
        (a replay returns it as read back from JSON)."""

    def tell(
        self, method: Callable[Concatenate[A_co, P], Any], /, *args: P.args, **kwargs: P.kwargs
    ) -> None:
        """Queue a call of ``method`` without waiting (its result and errors are dropped)."""

    def within(self, timeout: float) -> ActorHandle[A_co]:
        """This handle with another :attr:`timeout` for :meth:`ask`."""

    def is_alive(self) -> bool:
        """True while the actor accepts messages."""
