"""The `toolcards` entry point: `--help` from its cache is the CLI's own help, and every
other command line runs the full CLI, which loads the module of the command that runs (the
help lists the commands from the command table without loading any)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from support.cli import InProcessCli
from toolcards.surfaces.commands import COMMANDS, CommandTable, app
from toolcards.surfaces.main import main
from toolcards.surfaces.outcomes import ExitCode


def width(columns: int, cache: Path) -> dict[str, str | None]:
    """The environment of a terminal ``columns`` wide, the help cached in ``cache``."""
    return {"COLUMNS": str(columns), "XDG_CACHE_HOME": str(cache)}


def app_command() -> typer.core.TyperGroup:
    group = typer.main.get_command(app)
    assert isinstance(group, CommandTable)
    return group


def test_help_is_the_cli_help_and_is_cached(tmp_path: Path, toolcards_cli: InProcessCli) -> None:
    first = toolcards_cli("--help", env=width(100, tmp_path))
    cached = list((tmp_path / "toolcards").glob("help-*.txt"))
    second = toolcards_cli("--help", env=width(100, tmp_path))
    assert first.returncode == second.returncode == 0
    assert "Usage: toolcards" in first.stdout and "call" in first.stdout
    assert len(cached) == 1 and cached[0].read_text(encoding="utf-8") == first.stdout
    assert second.stdout == first.stdout


def test_a_stale_cache_entry_is_not_used_for_another_width(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    toolcards_cli("--help", env=width(100, tmp_path))
    done = toolcards_cli("--help", env=width(60, tmp_path))
    assert done.returncode == 0
    assert len(list((tmp_path / "toolcards").glob("help-*.txt"))) == 2


def test_other_command_lines_run_the_full_cli(toolcards_cli: InProcessCli) -> None:
    done = toolcards_cli("hash-token", "secret")
    assert done.returncode == 0
    assert done.stdout.strip().startswith("token_sha256: sha256:")


_COMMAND_MODULES = {
    "toolcards.surfaces.cli.app",
    "toolcards.surfaces.cli.approvals",
    "toolcards.surfaces.cli.audit",
    "toolcards.surfaces.cli.budgets",
    "toolcards.surfaces.cli.grants",
    "toolcards.surfaces.cli.init",
    "toolcards.surfaces.cli.team",
    "toolcards.surfaces.dashboard.cli",
    "toolcards.surfaces.serving",
}
_LOADED = (
    "import sys\nfrom toolcards.surfaces.commands import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    "print(' '.join(sorted(m for m in sys.modules if m.startswith('toolcards.surfaces'))))"
)


def _loaded_modules(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, *args], capture_output=True, text=True, timeout=60
    )
    return set(done.stdout.split("\n")[-2].split())


def test_the_full_help_lists_every_command_without_loading_their_modules() -> None:
    assert _loaded_modules("--help") & _COMMAND_MODULES == set()


def test_a_command_loads_its_own_module_and_no_other_command_module() -> None:
    assert _loaded_modules("hash-token", "secret") & _COMMAND_MODULES == {
        "toolcards.surfaces.cli.app"
    }
    assert _loaded_modules("audit", "--help") & _COMMAND_MODULES == {"toolcards.surfaces.cli.audit"}


def test_the_table_lists_each_command_with_the_first_paragraph_of_its_help() -> None:
    for name, entry in COMMANDS.items():
        group = app_command()
        command = group.get_command(typer.Context(group), name)
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert " ".join(entry.summary.split()) == first, name


def test_help_lists_every_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each code a command can end with is named in ``toolcards --help`` (9 was missing)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    main(["--help"])
    epilog = " ".join(capsys.readouterr().out.split()).split("Exit codes:", 1)[1]
    named = [int(code) for code in re.findall(r"\b(\d+) [a-z]", epilog)]
    assert named == [int(code) for code in ExitCode], epilog
