"""Containment holds while another process swaps a directory for a link to the outside."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool

from .conftest import Tools, tools_of
from .race import prepare, run_race


@pytest.mark.timeout(180)
@pytest.mark.parametrize("engine", ["python", "auto"])
def test_no_escape_while_a_directory_is_swapped_for_an_outside_link(
    ws: Path, outside: Path, engine: str
) -> None:
    prepare(ws, outside)
    tools = tools_of(WorkspaceTool(workspace_grep=GrepParam(engine=engine)))  # type: ignore[arg-type]
    attempts = {"read": 2000, "write": 2000, "grep": 200, "list": 200, "glob": 200, "edit": 200,
                "mkdir": 200, "delete": 200}  # fmt: skip
    escapes, _ = run_race(tools, ws, outside, attempts)
    assert dict(escapes) == {}


def test_link_to_a_directory_inside_is_followed(tools: Tools, ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "a.txt").write_text("through the link\n")
    (ws / "alias").symlink_to("real", target_is_directory=True)
    assert "through the link" in tools["workspace_read"]("alias/a.txt")
    tools["workspace_write"]("alias/b.txt", "written\n")
    assert (ws / "real" / "b.txt").read_text() == "written\n"
    assert "a.txt" in tools["workspace_list"]("alias")


def test_link_with_parent_steps_that_stay_inside_is_followed(tools: Tools, ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "docs").mkdir()
    (ws / "docs" / "guide.md").write_text("guide\n")
    (ws / "src" / "pkg" / "guide.md").symlink_to("../../docs/guide.md")
    assert "guide" in tools["workspace_read"]("src/pkg/guide.md")


def test_absolute_link_into_the_workspace_is_followed(tools: Tools, ws: Path) -> None:
    (ws / "notes.txt").write_text("absolute\n")
    (ws / "abs.txt").symlink_to(ws.resolve() / "notes.txt")
    assert "absolute" in tools["workspace_read"]("abs.txt")


def test_link_climbing_out_through_parent_steps_is_refused(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "up.txt").symlink_to("../../../outside/secret.txt")
    with pytest.raises(RetriableError, match="outside"):
        tools["workspace_read"]("sub/up.txt")


def test_link_loop_is_refused(tools: Tools, ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    with pytest.raises(RetriableError, match="symbolic links"):
        tools["workspace_read"]("a")


def test_write_through_an_inside_link_replaces_the_target(tools: Tools, ws: Path) -> None:
    (ws / "target.txt").write_text("old\n")
    (ws / "link.txt").symlink_to("target.txt")
    tools["workspace_write"]("link.txt", "new\n")
    assert (ws / "link.txt").is_symlink()
    assert (ws / "target.txt").read_text() == "new\n"
