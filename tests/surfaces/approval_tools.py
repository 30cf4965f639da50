"""A tool with a visible side effect that a human must approve (``approval_tools:TOOLS``):
each run appends one line to ``$NOTES_FILE``, so a test counts how often it really ran."""

from __future__ import annotations

import os
from pathlib import Path

from toolcards.core.spec import annotate


def send_note(to: str, body: str) -> str:
    """Sends a note (a human approves each call)."""
    with Path(os.environ["NOTES_FILE"]).open("a", encoding="utf-8") as notes:
        notes.write(f"{to}: {body}\n")
    return f"sent to {to}"


TOOLS = [annotate(send_note, requires_approval=True)]
