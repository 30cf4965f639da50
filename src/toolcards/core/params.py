"""Per-capability configuration carried by cards."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from toolcards.core.channels import Channels


class BaseToolParam(BaseModel):
    """Configuration of one capability of a card.

    A card field typed ``bool | SomeParam`` turns the capability off (``False``), on with the
    defaults (``True``) or on with this configuration (an instance). Subclasses add fields that
    change the capability's runtime behaviour; arguments the model chooses belong on the tool
    function's signature, not here.
    """

    model_config = ConfigDict(extra="forbid")

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL, Channels.COMMAND})
    """The channels this capability appears on."""
    instructions: str | None = None
    """Text appended to the tool description the model reads."""
