"""The per-tool params of WorkspaceTool: one class per tool with options of its own."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from toolcards.core.params import BaseToolParam


class WorkspaceParam(BaseToolParam):
    """A workspace tool with no options beyond its channels and instructions."""


class ReadParam(BaseToolParam):
    max_line_chars: int = Field(default=2000, ge=80)
    """Longer lines are cut, with a marker."""
    max_lines: int = Field(default=2000, ge=1)
    """Most lines one call returns, whatever ``limit`` the model asks for."""
    max_chars: int = Field(default=200_000, ge=1000)
    """Most characters one call returns; the rest is offered with a continue marker."""


class ListParam(BaseToolParam):
    max_entries: int = Field(default=500, ge=10)


class GlobParam(BaseToolParam):
    max_results: int = Field(default=100, ge=1)


class GrepParam(BaseToolParam):
    max_matches: int = Field(default=200, ge=1)
    engine: Literal["auto", "rg", "python"] = "auto"
    """``auto`` uses ripgrep when installed, else the built-in search (same output)."""
    timeout_s: float = Field(default=20.0, gt=0, le=600)
    """A search still running after this many seconds is stopped (a retryable error)."""


class ViewParam(BaseToolParam):
    max_dimension: int = Field(default=1568, ge=64)
    """Images are scaled down to fit this many pixels (needs ``toolcards[vision]``)."""
