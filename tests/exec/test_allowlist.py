"""ExecTool's default allowlist: named programs by default, any program only when chosen."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from tests.exec.support import RUNNABLE, needs_bwrap, tools_of

from toolcards.core.errors import RetriableError
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.command import DEFAULT_ALLOWED_COMMANDS, parse_command


def _run(card: ExecTool) -> Any:
    return tools_of(card)["exec_command"]


def test_a_program_outside_the_default_list_is_refused(workspaces: Path) -> None:
    run = _run(ExecTool(mode="local", limits=RUNNABLE, workspace_id="w"))
    with pytest.raises(RetriableError, match="'touch' is not allowed"):
        run("touch made")
    assert not (workspaces / "w" / "made").exists()


def test_explicit_any_allows_a_program_outside_the_default_list(workspaces: Path) -> None:
    card = ExecTool(mode="local", limits=RUNNABLE, workspace_id="w", allowed_commands="any")
    assert "exit_code: 0" in _run(card)("touch made")
    assert (workspaces / "w" / "made").exists()


@needs_bwrap
def test_the_default_list_runs_its_programs_in_the_sandbox(workspaces: Path) -> None:
    run = _run(ExecTool(mode="bwrap", limits=RUNNABLE, workspace_id="w"))
    (workspaces / "w").mkdir(exist_ok=True)
    (workspaces / "w" / "notes.txt").write_text("one\ntwo\n")
    out = run("wc -l notes.txt")
    assert "exit_code: 0" in out and "2 notes.txt" in out


def test_default_git_reads_the_repository(workspaces: Path) -> None:
    repo = workspaces / "w"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    out = _run(ExecTool(mode="local", limits=RUNNABLE, workspace_id="w"))("git status --porcelain")
    assert "exit_code: 0" in out and "?? a.txt" in out


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("git push origin main", "git push"),
        ("git config core.pager evil", "git config"),
        ("git -c core.pager=evil log", "git -c"),
        ("git clean -fdx", "git clean"),
        ("git", "git"),
    ],
)
def test_default_git_refuses_writing_and_global_options(command: str, shown: str) -> None:
    with pytest.raises(RetriableError, match=f"'{shown}' is not allowed"):
        parse_command(command, DEFAULT_ALLOWED_COMMANDS)


def test_a_program_and_subcommand_entry_allows_only_that_subcommand() -> None:
    assert parse_command("git add a.txt", ["git add"]) == ["git", "add", "a.txt"]
    with pytest.raises(RetriableError, match="'git commit' is not allowed"):
        parse_command("git commit -m x", ["git add"])


def test_default_list_has_no_shell_and_no_program_launcher() -> None:
    for name in ("sh", "bash", "env", "xargs", "rm", "curl", "git"):
        assert name not in DEFAULT_ALLOWED_COMMANDS


def test_none_is_refused_with_a_pointer_to_any() -> None:
    with pytest.raises(ValidationError, match='"any" for any program'):
        ExecTool(allowed_commands=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad", ["all", "*", ["git log -p"], ["git -c"], ["git  log"], ["sh -"], ["git /x"]]
)
def test_malformed_allowlists_are_refused(bad: object) -> None:
    with pytest.raises(ValidationError):
        ExecTool.model_validate({"allowed_commands": bad})


@pytest.mark.parametrize("chosen", ["any", ["ls", "git log"]])
def test_the_allowlist_round_trips_through_json(chosen: object) -> None:
    card = ExecTool.model_validate({"mode": "local", "allowed_commands": chosen})
    again = ExecTool.model_validate(json.loads(card.model_dump_json()))
    assert again.allowed_commands == chosen


def test_the_default_list_round_trips_and_is_named_in_the_description() -> None:
    card = ExecTool(mode="local", limits=RUNNABLE)
    assert ExecTool.model_validate_json(card.model_dump_json()) == card
    doc = _run(card).__doc__ or ""
    assert "Allowed: ls, cat," in doc and "git status" in doc and "any program" not in doc
