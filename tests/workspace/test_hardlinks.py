"""A hard link planted in the workspace is not a way to read the file's outside name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import WorkspaceTool

from .conftest import Tools, grep_tool, tools_of


@pytest.fixture
def planted(ws: Path, outside: Path) -> Path:
    """``ws/planted.txt``: a second name of ``outside/secret.txt``."""
    path = ws / "planted.txt"
    os.link(outside / "secret.txt", path)
    return path


def test_read_of_a_hard_linked_file_is_refused(tools: Tools, planted: Path) -> None:
    with pytest.raises(RetriableError, match="hard links") as info:
        tools["workspace_read"]("planted.txt")
    assert "SECRET" not in str(info.value)


def test_edit_and_patch_of_a_hard_linked_file_are_refused(
    tools: Tools, planted: Path, outside: Path
) -> None:
    with pytest.raises(RetriableError, match="hard links"):
        tools["workspace_edit"]("planted.txt", "TOP", "NO")
    with pytest.raises(RetriableError, match="hard links"):
        tools["workspace_patch"]("--- a/planted.txt\n+++ b/planted.txt\n@@ -1 +1 @@\n-x\n+y\n")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_grep_skips_hard_linked_files_and_says_so(ws: Path, planted: Path, engine: str) -> None:
    (ws / "plain.txt").write_text("SECRET? not here\n")
    grep = grep_tool(engine)
    out = grep("SECRET")
    assert "TOP SECRET" not in out
    assert out.splitlines() == [
        "plain.txt:1:SECRET? not here",
        "[1 file not searched: over the size cap or hard-linked]",
    ]
    with pytest.raises(RetriableError, match="hard links"):
        grep("SECRET", "planted.txt")


def test_write_replaces_the_name_and_leaves_the_outside_file_alone(
    tools: Tools, ws: Path, planted: Path, outside: Path
) -> None:
    tools["workspace_write"]("planted.txt", "mine now\n")
    assert (ws / "planted.txt").read_text() == "mine now\n"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_card_can_allow_hard_links(ws: Path, planted: Path) -> None:
    tools = tools_of(WorkspaceTool(allow_hardlinks=True))
    assert "TOP SECRET" in tools["workspace_read"]("planted.txt")


def test_view_of_a_hard_linked_image_is_refused(tools: Tools, ws: Path, outside: Path) -> None:
    (outside / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\nprivate")
    os.link(outside / "photo.png", ws / "photo.png")
    with pytest.raises(RetriableError, match="hard links"):
        tools["workspace_view"]("photo.png")
