"""Argument models the model fills in."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EditItem(BaseModel):
    """One find-and-replace inside ``workspace_multi_edit``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace.")
    old_string: str = Field(description="Exact text to replace (copy it from workspace_read).")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")
