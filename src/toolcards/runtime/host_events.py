"""Events for a host observer: the owner a card was bound to when it is not a team member.

``ToolFactory(cards, observer=host)`` with a ``host`` that is a plain
:class:`~toolcards.core.observer.ToolObserver` (not a team's observer) leaves its cards to the
process's implicit team. Their calls reach the team's actors through a :class:`HostObserved`
observer, whose handles mark each call with the host's :class:`EventListener`; the mark travels
with the call to the actor's thread (and on to the actors that call makes in turn, Pykka
backend), and every event the call records there is handed to ``host.notify_event`` once it
is committed: on the thread that produced it (the tool actor's), before the tool returns.

An observer that raises is logged, never passed on: the tool call goes on. A ``notify_event``
runs on a tool actor's thread, so it must be quick and must not call a tool of the same team
(that call would wait for the actor it runs on).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

    from toolcards.core.actors import ActorHandle
    from toolcards.core.events import ToolStateEvent
    from toolcards.core.observer import ActorToolObserver

logger = logging.getLogger(__name__)

A = TypeVar("A")
P = ParamSpec("P")
R = TypeVar("R")


class EventListener:
    """Hands events to one host observer (held weakly, like the cards hold it)."""

    __slots__ = ("__weakref__", "_ref")

    def __init__(self, observer: object) -> None:
        try:
            self._ref: Callable[[], Any] = weakref.ref(observer)
        except TypeError:  # objects without __weakref__ are kept as the cards keep them
            self._ref = lambda: observer

    def __call__(self, event: ToolStateEvent) -> None:
        observer = self._ref()
        notify = getattr(observer, "notify_event", None)
        if not callable(notify):
            return
        try:
            notify(event)
        except Exception:
            logger.exception(
                "observer %s failed on event %s #%d; the call goes on",
                type(observer).__name__,
                event.tool_id,
                event.seq,
            )


_listener: ContextVar[EventListener | None] = ContextVar("toolcards_event_listener", default=None)


def current_listener() -> EventListener | None:
    """The listener of the call running on this thread, if a host observer made it."""
    return _listener.get()


@contextmanager
def listening(listener: EventListener | None) -> Iterator[None]:
    """Mark the calls made inside the block as ``listener``'s (None: leave them unmarked)."""
    if listener is None:
        yield
        return
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)


class ListeningHandle:
    """An :class:`~toolcards.core.actors.ActorHandle` whose calls carry a listener."""

    __slots__ = ("_inner", "_listener")

    def __init__(self, inner: ActorHandle[Any], listener: EventListener) -> None:
        self._inner = inner
        self._listener = listener

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def timeout(self) -> float:
        return self._inner.timeout

    def ask(self, method: Callable[Concatenate[Any, P], R], /, *args: P.args, **kw: P.kwargs) -> R:
        with listening(self._listener):
            return self._inner.ask(method, *args, **kw)

    def ask_once(
        self, method: Callable[Concatenate[Any, P], R], /, *args: P.args, **kw: P.kwargs
    ) -> R:
        with listening(self._listener):
            return self._inner.ask_once(method, *args, **kw)

    def tell(
        self, method: Callable[Concatenate[Any, P], Any], /, *args: P.args, **kw: P.kwargs
    ) -> None:
        with listening(self._listener):
            self._inner.tell(method, *args, **kw)

    def within(self, timeout: float) -> ListeningHandle:
        return ListeningHandle(self._inner.within(timeout), self._listener)

    def is_alive(self) -> bool:
        return self._inner.is_alive()

    def __repr__(self) -> str:
        return f"<ActorHandle {self.name} (events to a host observer)>"


class HostObserved:
    """A team's observer as the cards of a host observer use it: the same team and address,
    with every actor handle marked by the host's listener."""

    def __init__(self, team_observer: ActorToolObserver, host: object) -> None:
        self._team_observer = team_observer
        self.listener = EventListener(host)

    @property
    def address(self) -> str:
        return self._team_observer.address

    @property
    def team_id(self) -> str:
        return self._team_observer.team_id

    def notify_event(self, event: ToolStateEvent | Any) -> None:
        """Record ``event`` through the team's observer (the host hears it from the log)."""
        with listening(self.listener):
            self._team_observer.notify_event(event)

    def tool_actor(
        self, name: str, actor_cls: type[A], config: BaseModel | None = None
    ) -> ActorHandle[A]:
        handle = self._team_observer.tool_actor(name, actor_cls, config)
        return ListeningHandle(handle, self.listener)

    def actor(self, name: str) -> ActorHandle[Any] | None:
        handle = self._team_observer.actor(name)
        return None if handle is None else ListeningHandle(handle, self.listener)

    def __repr__(self) -> str:
        return f"<HostObserved {self.address} team={self.team_id}>"
