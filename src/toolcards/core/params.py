"""Per-capability configuration carried by cards."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolcards.core.channels import Channels
from toolcards.core.json_fields import check_json_fields


class BaseToolParam(BaseModel):
    """Configuration of one capability of a card.

    A card field typed ``bool | SomeParam`` turns the capability off (``False``), on with the
    defaults (``True``) or on with this configuration (an instance). Subclasses add fields that
    change the capability's runtime behaviour; arguments the model chooses belong on the tool
    function's signature, not here.
    """

    model_config = ConfigDict(extra="forbid")

    supported_channels: ClassVar[frozenset[Channels] | None] = None
    """The channels the capability supports (set from the card's capability table)."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL, Channels.COMMAND})
    """The channels this capability appears on."""
    instructions: str | None = None
    """Text appended to the tool description the model reads."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        check_json_fields(cls)  # a param is data, as its card is

    @field_validator("expose")
    @classmethod
    def _supported(cls, value: set[Channels]) -> set[Channels]:
        supported = cls.supported_channels
        if supported is not None and not value <= supported:
            names = ", ".join(sorted(value - supported))
            raise ValueError(
                f"{cls.__name__} cannot be exposed on {names}; "
                f"it supports: {', '.join(sorted(supported)) or 'none'}"
            )
        return value
