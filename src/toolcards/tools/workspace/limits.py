"""The workspace tools' bounds: what they agree to open (:class:`Limits`) and what
workspace_read shows (:class:`ReadCaps`). Apart from :mod:`.ops`, so the card defines its
fields without loading the tools' implementation."""

from __future__ import annotations

from dataclasses import dataclass

from toolcards.tools.workspace.textfile import MAX_TEXT_BYTES

__all__ = ["DOCUMENT_TIMEOUT_S", "MAX_DOCUMENT_BYTES", "MAX_IMAGE_FILE_BYTES", "Limits", "ReadCaps"]


@dataclass(frozen=True, slots=True)
class ReadCaps:
    """Output bounds of workspace_read."""

    max_line_chars: int = 2000
    max_lines: int = 2000
    max_chars: int = 200_000


MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
MAX_IMAGE_FILE_BYTES = 20 * 1024 * 1024
DOCUMENT_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Limits:
    """What the tools agree to open: sizes per kind of file, hard links, conversion time."""

    allow_hardlinks: bool = False
    max_text_bytes: int = MAX_TEXT_BYTES
    max_document_bytes: int = MAX_DOCUMENT_BYTES
    max_image_bytes: int = MAX_IMAGE_FILE_BYTES
    document_timeout_s: float = DOCUMENT_TIMEOUT_S
