"""One default team: a trail written from Python without a team is the team a config without
``team_id:`` reads, and a reader that finds rows of other teams and none of its own says so in
one line, naming them and how to select one."""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from toolcards.governance import AuditLog, AuditRecord
from toolcards.stores.base import DEFAULT_TEAM
from toolcards.surfaces.commands import app
from toolcards.surfaces.config import SurfaceConfig


def _row(audit: AuditLog, call_id: str) -> None:
    audit.record(
        AuditRecord(time.time(), "alice", "user", (), "python", "pay", call_id, {},
                    decision="allow", outcome="ok")
    )  # fmt: skip


def _config(tmp_path: Path) -> Path:
    """A config that leaves ``team_id:`` out, reading ``audit.db`` beside it."""
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
    path = tmp_path / "toolcards.yaml"
    path.write_text(yaml.safe_dump({"policy": "policy.yaml", "store": ":memory:"}), "utf-8")
    return path


def test_python_writers_and_config_readers_share_one_default_team(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        _row(audit, "from-python")
        team = audit.team_id
    assert team == DEFAULT_TEAM == SurfaceConfig(policy="p.yaml").team_id == "toolcards"
    shown = CliRunner().invoke(app, ["--json", "--config", str(_config(tmp_path)), "audit", "tail"])
    assert shown.exit_code == 0, shown.output
    assert '"call_id":"from-python"' in shown.stdout.replace(" ", "")


def test_a_reader_finding_only_other_teams_rows_names_them_in_one_line(tmp_path: Path) -> None:
    for team in ("default", "release-team"):
        with AuditLog(tmp_path / "audit.db", durability="sync", team_id=team) as audit:
            _row(audit, f"of-{team}")
    config = str(_config(tmp_path))
    runner = CliRunner()
    tail = runner.invoke(app, ["--config", config, "audit", "tail"])
    query = runner.invoke(app, ["--config", config, "audit", "query", "--tool", "pay"])
    chosen = runner.invoke(
        app, ["--json", "--config", config, "audit", "tail", "--team", "default"]
    )
    line = (
        f"{tmp_path / 'audit.db'} has no audit rows of team 'toolcards'; it has rows of team "
        "'default', 'release-team': select one with --team default (or team_id: default in the "
        "config)"
    )
    assert tail.exit_code == 0 and tail.stderr == line + "\n"
    assert query.stderr == line + "\n"
    assert chosen.exit_code == 0 and '"call_id":"of-default"' in chosen.stdout.replace(" ", "")
    assert "release-team" not in chosen.stdout


def test_a_python_reader_finds_the_teams_that_have_rows(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db", durability="sync", team_id="default") as audit:
        _row(audit, "c1")
    with AuditLog(tmp_path / "audit.db", team_id="crm") as audit:
        assert audit.tail() == [] and audit.elsewhere() == ["default"]
        _row(audit, "c2")
        assert audit.elsewhere() == []  # its own rows are there now
