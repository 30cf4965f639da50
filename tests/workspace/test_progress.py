"""Long workspace tools tell a listening caller how far they are (MCP progress)."""

from __future__ import annotations

from pathlib import Path

from toolcards.core.progress import progress_reporter

from .conftest import Tools, grep_tool


def test_grep_over_many_files_reports_files_searched(ws: Path) -> None:
    for i in range(250):
        (ws / f"note{i:03d}.txt").write_text("nothing here\n")
    heard: list[tuple[float, float | None, str | None]] = []
    grep = grep_tool("python")
    with progress_reporter(lambda *update: heard.append(update)):
        assert "No matches" in grep("needle")
    assert [p for p, _, _ in heard] == [100.0, 200.0]
    assert heard[-1][2] == "searched 200 files"


def test_grep_without_a_listener_reports_nothing_and_still_works(ws: Path) -> None:
    (ws / "a.txt").write_text("needle\n")
    assert "a.txt" in grep_tool("python")("needle")


def test_a_patch_reports_each_file(ws: Path, tools: Tools) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+uno\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-two\n+dos\n"
    )
    heard: list[tuple[float, float | None, str | None]] = []
    with progress_reporter(lambda *update: heard.append(update)):
        tools["workspace_patch"](patch)
    assert [(p, t) for p, t, _ in heard] == [(1.0, 2.0), (2.0, 2.0)]
    assert (ws / "a.txt").read_text() == "uno\n"


def test_grep_with_ripgrep_reports_files_searched(ws: Path) -> None:
    for i in range(250):
        (ws / f"note{i:03d}.txt").write_text("nothing here\n")
    heard: list[tuple[float, float | None, str | None]] = []
    grep = grep_tool("rg")
    with progress_reporter(lambda *update: heard.append(update)):
        assert "No matches" in grep("needle")
    assert [p for p, _, _ in heard] == [100.0, 200.0]
    assert heard[-1][2] == "searched 200 files"
