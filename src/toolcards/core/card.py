"""ToolCard: a tool's serializable configuration, and the capability table that turns it into
tools, prompts, per-turn context and commands."""

from __future__ import annotations

import copy
import types
import typing
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from toolcards._lazy import renamed_names
from toolcards.core.channels import Channels
from toolcards.core.errors import ToolObserverGone
from toolcards.core.json_fields import check_json_fields
from toolcards.core.params import BaseToolParam
from toolcards.core.retry import ToolFunc
from toolcards.core.spec import set_instructions
from toolcards.core.trust import FROM_DATA, TRUST, HostTrust, check_card
from toolcards.core.views import TeamView

if TYPE_CHECKING:
    from toolcards.core.context import ContextState

__all__ = ["CardCapability", "ToolCard", "ToolFunc"]
__getattr__ = renamed_names(__name__, {"Capability": "CardCapability"})

Builder = Callable[[Any, Any], Callable[..., Any] | Sequence[Callable[..., Any]]]
"""``(card, param) -> callable``: how one capability becomes a callable on one channel (or
several: a capability may offer a small family of tools)."""
ViewBuilder = Callable[[Any, Any], "TeamView | Sequence[TeamView]"]
"""``(card, param) -> view``: the view(s) of team state a capability offers (RESOURCE)."""


@dataclass(frozen=True, slots=True)
class CardCapability:
    """How the capability field of a card becomes callables, one builder per channel.

    A builder is a function of the card class, ``(self, param) -> callable``; the channels
    with a builder are the ones the capability supports (``expose`` may not name others).
    ``tool`` builds a TOOL_CALL tool and ``command`` a ``/slash`` command (the param's
    ``instructions`` are added to their descriptions), ``system_prompt`` a ``() -> str``
    provider, ``context`` a ``() -> ContextState`` provider, ``resource`` a
    :class:`~toolcards.core.views.TeamView` (or several) that surfaces offer people and clients.
    """

    tool: Builder | None = None
    command: Builder | None = None
    system_prompt: Builder | None = None
    context: Builder | None = None
    resource: ViewBuilder | None = None

    def builder(self, channel: Channels) -> Builder | ViewBuilder | None:
        """The builder for ``channel``, or None when the capability does not support it."""
        return {
            Channels.TOOL_CALL: self.tool,
            Channels.COMMAND: self.command,
            Channels.SYSTEM_PROMPT: self.system_prompt,
            Channels.LLM_CONTEXT: self.context,
            Channels.RESOURCE: self.resource,
        }[channel]

    @property
    def channels(self) -> frozenset[Channels]:
        """The channels this capability supports."""
        return frozenset(c for c in Channels if self.builder(c) is not None)


_DEFINED: dict[str, type[ToolCard]] = {}
"""Every card class defined in this process, by type tag (the newest definition wins)."""


class ToolCard(BaseModel):
    """Base class of every card: pure configuration that round-trips through JSON.

    A card declares capability fields typed ``bool | SomeParam`` (off, on with defaults, on
    with this configuration) and a :attr:`capabilities` table saying how each becomes
    callables per channel; the base class builds the tools, prompts, context providers and
    commands from that table. Runtime handles live in private attributes only; the observer is
    held by weak reference.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    card_type: ClassVar[str] = ""
    """The type tag in serialized card lists (defaults to the class name)."""

    capabilities: ClassVar[Mapping[str, CardCapability]] = {}
    """Capability field name -> its builders (a :class:`CardCapability`). Fields are built in
    this order."""

    defer_loading: bool = False
    """Hide this card's tools from the model until a tool search finds them (pydantic-ai's
    ``ToolSearch``): for large catalogs, where sending every definition costs too much."""

    run_state: ClassVar[frozenset[str]] = frozenset({"_observer_ref"})
    """The private attributes a run fills in (owner, actor handles, connections): a
    :meth:`fresh_copy` starts them over, as it does those with a ``default_factory`` (each
    instance's own object, such as a cache). Every other private attribute is the host's
    (trust such as an MCP card's URL grant, a workspaces root) and the copy keeps it."""

    _observer_ref: Any = PrivateAttr(default=None)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        check_json_fields(cls)  # a card is data: a field JSON cannot carry is refused here
        if not cls.__dict__.get("card_type"):
            cls.card_type = cls.__name__
        for field, capability in cls.capabilities.items():
            if field not in cls.model_fields:
                raise TypeError(f"{cls.__name__}.capabilities names {field!r}, not a field")
            _check_default_exposure(cls, field, capability)
        if unknown := cls.run_state - set(cls.__private_attributes__):
            raise TypeError(f"{cls.__name__}.run_state names {sorted(unknown)}, not private")
        _DEFINED[cls.card_type] = cls

    @staticmethod
    def defined_types() -> dict[str, type[ToolCard]]:
        """Card classes defined so far in this process, by type tag."""
        return dict(_DEFINED)

    @model_validator(mode="after")
    def _check_exposure(self) -> Self:
        for field, capability in self.capabilities.items():
            value = getattr(self, field)
            if isinstance(value, BaseToolParam):
                _check_channels(type(self), field, value.expose, capability)
        return self

    @model_validator(mode="after")
    def _check_host_access(self, info: ValidationInfo) -> Self:
        """From data, every field marked ``HostAccess`` needs the host's trust for its value
        (:mod:`toolcards.core.trust`); built in code, the card is trusted."""
        context = info.context if isinstance(info.context, dict) else {}
        if context.get(FROM_DATA):
            check_card(self, HostTrust.of(context.get(TRUST)))
        return self

    def fresh_copy(self) -> Self:
        """A new instance of this card for another owner (a team member). Fields are
        deep-copied rather than re-serialized, so secrets excluded from serialization are kept;
        private attributes are kept too, but for the :attr:`run_state`, so that what the host
        granted the card is never lost while owners never share a bound owner or a cache."""
        fresh = type(self).model_construct(
            self.model_fields_set,
            **{name: copy.deepcopy(getattr(self, name)) for name in type(self).model_fields},
        )
        for name, value in (self.__pydantic_private__ or {}).items():
            own = self.__private_attributes__[name].default_factory is not None
            if not own and name not in self.run_state:
                setattr(fresh, name, value)
        return fresh

    # ---- observer -------------------------------------------------------------------------

    def observer(self, observer: object | None) -> Self:
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

    @property
    def observer_attached(self) -> bool:
        """True once an observer was attached (even if its owner is gone since)."""
        return self._observer_ref is not None

    # ---- hooks ------------------------------------------------------------------------------

    @property
    def depends_on(self) -> list[str]:
        """Card types that must be bound in the same factory, ordered before this one."""
        return []

    @property
    def optional_depends_on(self) -> list[str]:
        """Card types ordered before this one when present; absence is not an error."""
        return []

    def missing_modules(self) -> list[str]:
        """Optional modules this card needs to offer its tools that are not installed here
        (a surface config that names the card then says which extra to install)."""
        return []

    def get_tools(self) -> list[ToolFunc]:
        """Callables the model calls (TOOL_CALL channel)."""
        return [
            set_instructions(fn, param.instructions) for fn, param in self.build(Channels.TOOL_CALL)
        ]

    def get_system_prompts(self) -> list[Callable[[], str]]:
        """Providers of system-prompt text (SYSTEM_PROMPT channel)."""
        return [fn for fn, _ in self.build(Channels.SYSTEM_PROMPT)]

    def get_context_states(self) -> list[Callable[[], ContextState]]:
        """Providers of per-turn context state (LLM_CONTEXT channel)."""
        return [fn for fn, _ in self.build(Channels.LLM_CONTEXT)]

    def get_commands(self) -> list[ToolFunc]:
        """Callables for ``/slash`` commands (COMMAND channel); the name is ``__name__``."""
        return [
            set_instructions(fn, param.instructions) for fn, param in self.build(Channels.COMMAND)
        ]

    def get_views(self) -> list[TeamView]:
        """Views of the team's state for people and clients (RESOURCE channel): read from a
        team, so the card need not be bound to one."""
        return [view for view, _ in self.build(Channels.RESOURCE) if isinstance(view, TeamView)]

    def get_toolsets(self) -> list[Any]:
        """Extra pydantic-ai toolsets this card contributes (for example an MCP server)."""
        return []

    def build(self, channel: Channels) -> list[tuple[Any, BaseToolParam]]:
        """``(callable, param)`` for every capability that is on and exposed on ``channel``,
        in table order."""
        built: list[tuple[Any, BaseToolParam]] = []
        for field, capability in self.capabilities.items():
            builder = capability.builder(channel)
            if builder is None:
                continue
            param = self.exposed(field, channel)
            if param is None:
                continue
            made = builder(self, param)
            if callable(made) or not isinstance(made, Sequence):
                built.append((made, param))
            else:
                built.extend((fn, param) for fn in made)
        return built

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


def _check_channels(
    card: type[ToolCard], field: str, expose: set[Channels], capability: CardCapability
) -> None:
    unsupported = set(expose) - capability.channels
    if unsupported:
        supported = ", ".join(sorted(capability.channels)) or "none"
        raise ValueError(
            f"{card.__name__}.{field} cannot be exposed on {', '.join(sorted(unsupported))}; "
            f"it supports: {supported}"
        )


def _check_default_exposure(card: type[ToolCard], field: str, capability: CardCapability) -> None:
    """A card author's default ``expose`` must name only supported channels."""
    param_cls = _param_class(card, field)
    try:
        default = param_cls()
    except ValidationError:  # no defaults to check: the param needs configuration
        default = None
    if default is not None:
        try:
            _check_channels(card, field, default.expose, capability)
        except ValueError as exc:
            raise TypeError(f"{param_cls.__name__}'s default expose: {exc}") from None
    supported = param_cls.__dict__.get("supported_channels")
    if param_cls is not BaseToolParam:
        param_cls.supported_channels = (
            capability.channels if supported is None else supported | capability.channels
        )
