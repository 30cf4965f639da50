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

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

from toolcards.core.errors import TransientError
from toolcards.core.identity import joined_key

DEFAULT_ASK_TIMEOUT = 10.0
"""Seconds an ``ask`` waits for its answer unless the handle says otherwise (``within``) or
it runs inside a governed call with a deadline (:data:`calling_deadline`)."""

DEADLINE_GRACE = 1.0
"""Seconds an ask inside a governed call waits past the call's deadline, so that the call's
own deadline answers first ("timed out after N s")."""


calling_call_key: ContextVar[str | None] = ContextVar("toolcards_calling_call_key", default=None)
"""The idempotency key of the call whose tool runs in this context: a governed call's (the
executor sets it: the call id, or the durable key of a run's tool call), a pydantic-ai tool
call's (``<run id>/<tool call id>``: the cards' toolset sets it), or one a caller gave
(:func:`call_key`). :meth:`ActorHandle.ask_once` sends it with a mutation, so a retry under
the same key is answered from the record its first commit left
(:mod:`toolcards.stores.applied_calls`)."""

calling_deadline: ContextVar[float | None] = ContextVar("toolcards_calling_deadline", default=None)
"""When the governed call whose tool runs in this context must answer (``time.monotonic()``;
the executor sets it). An ask without a bound of its own waits until then, and
:data:`DEADLINE_GRACE` more, instead of :data:`DEFAULT_ASK_TIMEOUT`: the call's deadline is
the one that answers."""


@contextlib.contextmanager
def call_key(*parts: str) -> Iterator[str]:
    """Run the tool calls of the block under one idempotency key, made of ``parts`` (your
    own id of the call: keep it for every retry of that call, and only for them).

    A tool actor's mutation (``update_planning``, ``update_graph``, ...) commits the key with
    its rows and its result; the same call again under the key (same tool, same arguments:
    a retry after "outcome unknown" or after an ask that timed out) gets the recorded result
    and writes nothing. Keys given here never match a governed call's. Yields the key."""
    if not parts or not all(isinstance(part, str) and part for part in parts):
        raise ValueError("a call key is made of one or more non-empty strings")
    key = "plain:" + joined_key(*parts)
    token = calling_call_key.set(key)
    try:
        yield key
    finally:
        calling_call_key.reset(token)


def ask_timeout(own: float | None) -> float:
    """Seconds an ask waits: the handle's ``own`` bound; without one, until the calling
    governed call's deadline (and :data:`DEADLINE_GRACE`), else :data:`DEFAULT_ASK_TIMEOUT`."""
    if own is not None:
        return own
    deadline = calling_deadline.get()
    if deadline is None:
        return DEFAULT_ASK_TIMEOUT
    return max(deadline - time.monotonic(), 0.0) + DEADLINE_GRACE


A_co = TypeVar("A_co", covariant=True)
P = ParamSpec("P")
R = TypeVar("R")


class ActorUnavailable(TransientError):
    """The actor is not running (never started, stopped, failed to start, or restarting).

    Retryable: a tool whose actor is unavailable reports a retry to the model, and a later
    call reaches the actor once it runs again.
    """


class ActorTimeout(TransientError, TimeoutError):
    """An ask got no answer in time. The call may still be queued or running, and a change it
    makes may still apply: read before calling again, or call again under the same key
    (:func:`call_key`, a governed call's id), which answers a committed change from its
    record instead of applying it twice."""


def no_answer(actor: str, method: str, timeout: float) -> ActorTimeout:
    """The error of an ask of ``actor.method`` that got no answer within ``timeout``."""
    return ActorTimeout(
        f"{actor}.{method} did not answer within {timeout:g}s; it may still be running and "
        "apply its change: read before you call it again (a retry under the same call id or "
        "call key returns its recorded result)"
    )


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

        An exception raised by the method is raised here; no answer in time is an
        :class:`ActorTimeout` (a ``TimeoutError``: the call may still apply); a stopped actor
        is :class:`ActorUnavailable`.
        """

    def ask_once(
        self, method: Callable[Concatenate[A_co, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """:meth:`ask` for a mutation of a tool actor, under the calling call's key
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
