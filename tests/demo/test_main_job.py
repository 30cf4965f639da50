"""The main job end to end: a first run, then a resume from the same SQLite store."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from support.launch import PYTHON
from toolcards.demo.report import render, workspace_files
from toolcards.demo.state import CONFIG
from toolcards.demo.team_job import run_job
from toolcards.surfaces.commands import app
from toolcards.tools.knowledge_graph.models import Entity
from toolcards.tools.planning.models import Task


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    return tmp_path / "state"


def test_first_run_plans_writes_remembers_and_is_governed(state: Path) -> None:
    summary = run_job(state)
    assert not summary["resumed"]
    tasks = {t.id: t for t in summary["tasks"]}
    assert tasks[1].status == "completed" and tasks[1].output == "Published release/NOTES.md"
    assert tasks[2].status == "pending"
    assert {"toolcards 0.1", "governed executor", "team state"} <= {
        e.name for e in summary["entities"] + summary["neighbors"]
    }
    assert "release/NOTES.md" in summary["files"]
    assert "deploy/prod.env" not in summary["files"]
    decisions = [(r.tool, r.decision, r.outcome, r.args.get("path")) for r in summary["audit"]]
    assert ("workspace_write", "deny", "denied", "deploy/prod.env") in decisions
    assert ("workspace_write", "approve", "ok", "release/NOTES.md") in decisions
    assert summary["approvals"] == [
        "approved: workspace_write(release/NOTES.md) for agent.@engineer-1"
    ]
    if shutil.which("bwrap"):
        assert any(r.tool == "exec_command" and r.outcome == "ok" for r in summary["audit"])
    notes = (state.parent / "workspaces" / "release-team" / "notes" / "RELEASE.md").read_text()
    assert notes.startswith("# Release notes (Final)")
    tail = ["--json", "--config", str(state / CONFIG), "audit", "tail", "-n", "1000"]
    shown = json.loads(CliRunner().invoke(app, tail).stdout)  # the printed next step's view
    assert {row["id"] for row in shown} >= {row.id for row in summary["audit"]}


def test_second_run_resumes_state_and_delivers_the_reminder(state: Path) -> None:
    first = run_job(state)
    second = run_job(state)
    assert second["resumed"]
    assert [(t.id, t.status) for t in second["tasks"]] == [(t.id, t.status) for t in first["tasks"]]
    assert second["files"] == first["files"]
    assert len(second["audit"]) >= len(first["audit"])
    said = dict(first["log"] + second["log"])
    # Delivered in the first run if it was slow, otherwise on the first tick after resume.
    assert "Check that the release notes are published" in said["#NotificationTool -> @lead-1"]
    assert "2 tasks total" in dict(second["log"])["@lead-1 -> user"]


def test_make_run_entry_point_shows_each_member_turn_then_the_summary(tmp_path: Path) -> None:
    """``python -m toolcards.demo`` as ``make run`` and the first hour's docs start it: each
    member's turn is shown as it happens, before the report's sections."""
    env_root = tmp_path / "ws"
    result = subprocess.run(
        [PYTHON, "-m", "toolcards.demo", "--state", str(tmp_path / "s")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        env={"TOOLCARDS_WORKSPACES_ROOT": str(env_root), "PATH": "/usr/bin:/bin", "COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stdout
    text = result.stdout
    report = text.index("What happened")
    for step in ("hired @lead-1", "@lead-1 answered", "@engineer-1 answered"):
        assert -1 < text.find(step) < report, text[:report]
    for heading in ("Planning board", "Knowledge graph", "Workspace files", "Audit trail"):
        assert heading in text


LINK = "[link=https://evil.example/]the notes[/link]"


def test_the_report_shows_what_the_model_wrote_as_text_never_as_markup(tmp_path: Path) -> None:
    """Tasks, entities, files and audit cells are a model's: a file it made at ``[/x]`` ended
    every later run's report in a MarkupError; a task's text drew a working hyperlink."""
    (tmp_path / "[").mkdir()
    (tmp_path / "[" / "x]").write_text("x")
    task = Task(id=1, description=f"see {LINK}", creator="@lead-1", output="one\ntwo\x1b[2J")
    row = SimpleNamespace(
        principal="agent.[blink]mallory", tool="[red on red]hidden[/]", decision="deny",
        outcome="denied", args={"path": "[/x]"},
    )  # fmt: skip
    summary = {
        "resumed": True, "with_exec": True, "members": ["@lead-1"], "tasks": [task],
        "entities": [Entity(name="[/x]", entity_type="[bold]", description=LINK)],
        "neighbors": [], "relations": [], "files": workspace_files(tmp_path), "audit": [row],
        "log": [("@lead-1 -> user", "[/x] done")], "approvals": [], "notes": [], "events": 1,
    }  # fmt: skip
    out = io.StringIO()
    render(summary, Console(file=out, force_terminal=True, width=300, color_system="truecolor"))
    text = out.getvalue()
    assert "\x1b]8;" not in text and "\x1b[2J" not in text  # no link, no cleared screen
    assert text.count(f"see {LINK}") == 1 and text.count(LINK) == 2
    assert "  [/x]\n" in text  # the file
    for shown in ("[/x] done", "[blink]mallory", "[red on red]hidden[/]", "path=[/x]", "[bold]"):
        assert shown in text
    assert "two\\u001b[2J" in text and "one\\n" not in text  # escaped, lines kept
