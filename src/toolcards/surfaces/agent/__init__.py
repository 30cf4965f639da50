"""The pydantic-ai agent surface: cards as a capability (``Agent(capabilities=[...])``) and
as ``toolcards`` in agent specs (``Agent.from_spec(..., custom_capability_types=[GovernedCards])``);
the capability parts its cards' state reaches the model as (``TeamStatePart``, or
``TrustedTeamStatePart`` at the authority the host gave it)."""

from toolcards._lazy import renamed_names
from toolcards.core.card_state import TeamStatePart, TrustedTeamStatePart
from toolcards.surfaces.agent.capability import SPEC_NAME, GovernedCards

__all__ = ["SPEC_NAME", "GovernedCards", "TeamStatePart", "TrustedTeamStatePart"]
__getattr__ = renamed_names(__name__, {"ToolCards": "GovernedCards"})
