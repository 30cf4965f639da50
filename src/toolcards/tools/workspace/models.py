"""Argument models the model fills in."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

MAX_EDITS = 500
"""Edits one ``workspace_multi_edit`` makes at most, in the schema the model sees: each is
found and spliced in its file's whole text while the workspace lock is held (5,000 one-word
edits held it 58 s); the cost left grows with edits times file size (500 edits of 10,000
places each in a 19 MiB file: about 2 minutes)."""


class EditItem(BaseModel):
    """One find-and-replace inside ``workspace_multi_edit``."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="File path relative to the workspace.")
    old_string: str = Field(description="Exact text to replace (copy it from workspace_read).")
    new_string: str = Field(description="The replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


Edits = Annotated[list[EditItem], Field(max_length=MAX_EDITS)]
"""The ``edits`` argument of ``workspace_multi_edit``."""
