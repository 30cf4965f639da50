"""ToolCard: a tool's serializable configuration, and the hooks that turn it into capabilities."""

from __future__ import annotations

import types
import typing
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, PrivateAttr

from toolcards.core.channels import Channels
from toolcards.core.errors import ToolObserverGone
from toolcards.core.params import BaseToolParam

if TYPE_CHECKING:
    from toolcards.core.context import ContextState

ToolFunc = Callable[..., Any]


class ToolCard(BaseModel):
    """Base class of every card: pure configuration that round-trips through JSON.

    Subclasses declare fields (``bool | SomeParam`` per capability) and implement the hooks.
    Runtime handles live in private attributes only; the observer is held by weak reference.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    card_type: ClassVar[str] = ""
    """The type tag in serialized card lists (defaults to the class name)."""

    _observer_ref: Any = PrivateAttr(default=None)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if not cls.__dict__.get("card_type"):
            cls.card_type = cls.__name__
        from toolcards.core.registry import CARD_TYPES

        CARD_TYPES.register(cls)

    # ---- observer -------------------------------------------------------------------------

    def observer(self, observer: Any) -> Self:
        """Attach the owner (an agent, a team member, a team). Held by weak reference."""
        if observer is None:
            self._observer_ref = None
        else:
            try:
                self._observer_ref = weakref.ref(observer)
            except TypeError:  # objects without __weakref__ are kept as they are
                self._observer_ref = lambda: observer
        return self

    def get_observer(self) -> Any:
        """The attached observer; raises ``ToolObserverGone`` when its owner is gone."""
        ref = self._observer_ref
        if ref is None:
            raise ToolObserverGone(f"{type(self).__name__} has no observer attached")
        found = ref()
        if found is None:
            raise ToolObserverGone(f"the owner of {type(self).__name__} is gone")
        return found

    def observer_or_none(self) -> Any | None:
        """The attached observer, or None when none is attached or its owner is gone."""
        ref = self._observer_ref
        return None if ref is None else ref()

    # ---- hooks ------------------------------------------------------------------------------

    @property
    def depends_on(self) -> list[str]:
        """Card types that must be bound in the same factory, ordered before this one."""
        return []

    @property
    def optional_depends_on(self) -> list[str]:
        """Card types ordered before this one when present; absence is not an error."""
        return []

    def get_tools(self) -> list[ToolFunc]:
        """Callables the model calls (TOOL_CALL channel)."""
        return []

    def get_system_prompts(self) -> list[Callable[[], str]]:
        """Providers of system-prompt text (SYSTEM_PROMPT channel)."""
        return []

    def get_context_states(self) -> list[Callable[[], ContextState]]:
        """Providers of per-turn context state (LLM_CONTEXT channel)."""
        return []

    def get_commands(self) -> list[ToolFunc]:
        """Callables for ``/slash`` commands (COMMAND channel); the name is ``__name__``."""
        return []

    def get_toolsets(self) -> list[Any]:
        """Extra pydantic-ai toolsets this card contributes (for example an MCP server)."""
        return []

    # ---- helpers for card authors -------------------------------------------------------------

    def param(self, field: str) -> BaseToolParam | None:
        """The configuration of capability ``field``: None when it is switched off."""
        value = getattr(self, field)
        if value is False or value is None:
            return None
        if isinstance(value, BaseToolParam):
            return value
        if value is True:
            return _param_class(type(self), field)()
        raise TypeError(f"{type(self).__name__}.{field} is not a capability field")

    def exposed(self, field: str, channel: Channels) -> BaseToolParam | None:
        """The configuration of ``field`` if it is on and exposed on ``channel``."""
        found = self.param(field)
        if found is None or channel not in found.expose:
            return None
        return found


_PARAM_CLASSES: dict[tuple[type, str], type[BaseToolParam]] = {}


def _param_class(card: type[ToolCard], field: str) -> type[BaseToolParam]:
    key = (card, field)
    found = _PARAM_CLASSES.get(key)
    if found is not None:
        return found
    annotation = card.model_fields[field].annotation
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    for arg in candidates:
        if isinstance(arg, type) and issubclass(arg, BaseToolParam):
            _PARAM_CLASSES[key] = arg
            return arg
    raise TypeError(f"{card.__name__}.{field} is not typed `bool | SomeParam`")


def _is_union(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    return origin is typing.Union or origin is types.UnionType
