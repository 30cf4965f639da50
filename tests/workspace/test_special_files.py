"""FIFOs and other special files are refused at once, never opened for blocking I/O."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError

from .conftest import Tools, grep_tool

pytestmark = pytest.mark.timeout(60)  # a call blocked on a pipe fails here, however loaded
BOUND = 45.0
"""How long a call that does not block may take on a loaded machine."""


@pytest.fixture
def fifo(ws: Path) -> Path:
    path = ws / "notes.md"
    os.mkfifo(path)
    return path


def test_read_of_a_fifo_is_refused_without_blocking(tools: Tools, fifo: Path) -> None:
    with pytest.raises(RetriableError, match="named pipe"):
        tools["workspace_read"]("notes.md")


def test_read_through_a_link_to_a_fifo_is_refused(tools: Tools, ws: Path, fifo: Path) -> None:
    (ws / "alias.md").symlink_to("notes.md")
    with pytest.raises(RetriableError, match="named pipe"):
        tools["workspace_read"]("alias.md")


def test_write_over_a_fifo_is_refused_and_the_workspace_stays_usable(
    tools: Tools, ws: Path, fifo: Path
) -> None:
    with pytest.raises(RetriableError, match="named pipe"):
        tools["workspace_write"]("notes.md", "text")
    assert fifo.exists() and not fifo.is_file()
    done = threading.Event()
    worker = threading.Thread(
        target=lambda: (tools["workspace_write"]("other.txt", "ok\n"), done.set()), daemon=True
    )
    worker.start()
    assert done.wait(BOUND), "a write after the refused one did not return"
    assert (ws / "other.txt").read_text() == "ok\n"


def test_edit_and_patch_of_a_fifo_are_refused(tools: Tools, fifo: Path) -> None:
    with pytest.raises(RetriableError, match="named pipe"):
        tools["workspace_edit"]("notes.md", "a", "b")
    with pytest.raises(RetriableError, match="named pipe"):
        tools["workspace_patch"]("--- a/notes.md\n+++ b/notes.md\n@@ -1 +1 @@\n-a\n+b\n")


def test_view_of_a_fifo_is_refused(tools: Tools, ws: Path) -> None:
    os.mkfifo(ws / "shot.png")
    with pytest.raises(RetriableError, match="named pipe"):
        tools["workspace_view"]("shot.png")


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_grep_skips_fifos_in_a_directory(ws: Path, fifo: Path, engine: str) -> None:
    (ws / "a.txt").write_text("needle\n")
    grep = grep_tool(engine)
    assert grep("needle") == "a.txt:1:needle"


@pytest.mark.parametrize("engine", ["python", "rg"])
def test_grep_of_a_named_fifo_is_refused(ws: Path, fifo: Path, engine: str) -> None:
    grep = grep_tool(engine)
    with pytest.raises(RetriableError, match="named pipe"):
        grep("needle", "notes.md")


def test_list_marks_special_files(tools: Tools, fifo: Path) -> None:
    assert "notes.md (special file, not readable)" in tools["workspace_list"]("")


def test_delete_removes_a_fifo(tools: Tools, fifo: Path) -> None:
    tools["workspace_delete"]("notes.md")
    assert not fifo.exists()
