"""A plain ``toolcards list`` or ``toolcards call`` runs without typer (the entry point's
short path), and prints, exits and audits exactly as the full typer command line does on
the same command line (both entry points in process, each on its own fresh copy of
examples/team; what the short path imports, in a real process)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from support.cli import EXAMPLE_STATE, InProcessCli
from surfaces.surface_support import SURFACE_ENV, TOOLCARDS
from toolcards.surfaces.commands import main as full_cli
from toolcards.surfaces.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "team"
AUDITED = (
    "principal, principal_type, roles, surface, tool, args_digest, args, decision, reason, "
    "outcome, error, team_id"
)
CREATE = json.dumps({"create": [{"description": "Same either way"}]})

COMMAND_LINES = {
    "list": ["list"],
    "list-all-json": ["--json", "list", "--all"],
    "call-created": ["call", "update_planning", "--args", CREATE],
    "call-json-output": ["--json", "call", "update_planning", "--json", CREATE],
    "call-pairs": ["call", "search_planning", "status=pending"],
    "call-invalid": ["call", "update_planning", "--args", '{"create": [{"x": 1}]}'],
    "call-unknown": ["call", "no_such_tool"],
    "call-denied-or-not": ["call", "workspace_delete", "path=nothing.txt"],
    "call-bad-json": ["call", "update_planning", "--args", "{not json"],
    "call-both-forms": ["call", "search_planning", "status=pending", "--args", "{}"],
    "missing-config": ["list", "-c", "missing.yaml"],
}


def _run(
    cli: InProcessCli, base: Path, args: list[str], entry: Callable[[list[str]], object] = main
) -> tuple[int, str, str, list[tuple[str, ...]]]:
    team = base / "team"
    shutil.copytree(EXAMPLE, team, ignore=EXAMPLE_STATE)
    done = cli(*args, cwd=team, entry=entry)
    rows: list[tuple[str, ...]] = []
    if (team / "audit.db").exists():  # every column but the times and the call id
        with sqlite3.connect(team / "audit.db") as db:
            tables = {r[0] for r in db.execute("select name from sqlite_master")}
            if "audit" in tables:
                rows = db.execute(f"select {AUDITED} from audit order by id").fetchall()
    return done.returncode, done.stdout, done.stderr, rows


@pytest.mark.parametrize("args", list(COMMAND_LINES.values()), ids=list(COMMAND_LINES))
def test_the_short_path_answers_as_the_full_command_line(
    args: list[str], tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    short = _run(toolcards_cli, tmp_path / "short", args)
    full = _run(toolcards_cli, tmp_path / "full", args, entry=full_cli)
    assert short == full


def test_the_short_path_does_not_import_typer(tmp_path: Path) -> None:
    team = tmp_path / "team"
    shutil.copytree(EXAMPLE, team, ignore=EXAMPLE_STATE)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", str(TOOLCARDS), *COMMAND_LINES["call-created"]],
        cwd=team,
        env=SURFACE_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "typer" not in modules and "toolcards.surfaces.commands" not in modules
