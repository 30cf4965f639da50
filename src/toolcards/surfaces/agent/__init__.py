"""The pydantic-ai agent surface: cards as a capability (``Agent(capabilities=[...])``) and
as ``toolcards`` in agent specs (``Agent.from_spec(..., custom_capability_types=[ToolCards])``)."""

from toolcards.surfaces.agent.capability import SPEC_NAME, ToolCards

__all__ = ["SPEC_NAME", "ToolCards"]
