"""The `toolcards` entry point: `--help` from its cache is the CLI's own help, and every
other command line runs the full CLI."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from surfaces.surface_support import SURFACE_ENV, TOOLCARDS
from toolcards.surfaces.main import main
from toolcards.surfaces.outcomes import ExitCode


def toolcards(*args: str, cache: Path, width: int = 100) -> subprocess.CompletedProcess[str]:
    env = {**SURFACE_ENV, "XDG_CACHE_HOME": str(cache), "COLUMNS": str(width)}
    return subprocess.run(
        [str(TOOLCARDS), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_help_is_the_cli_help_and_is_cached(tmp_path: Path) -> None:
    first = toolcards("--help", cache=tmp_path)
    cached = list((tmp_path / "toolcards").glob("help-*.txt"))
    second = toolcards("--help", cache=tmp_path)
    assert first.returncode == second.returncode == 0
    assert "Usage: toolcards" in first.stdout and "call" in first.stdout
    assert len(cached) == 1 and cached[0].read_text(encoding="utf-8") == first.stdout
    assert second.stdout == first.stdout


def test_a_stale_cache_entry_is_not_used_for_another_width(tmp_path: Path) -> None:
    toolcards("--help", cache=tmp_path)
    done = toolcards("--help", cache=tmp_path, width=60)
    assert done.returncode == 0
    assert len(list((tmp_path / "toolcards").glob("help-*.txt"))) == 2


def test_other_command_lines_run_the_full_cli(tmp_path: Path) -> None:
    done = toolcards("hash-token", "secret", cache=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip().startswith("token_sha256: sha256:")


def test_help_lists_every_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each code a command can end with is named in ``toolcards --help`` (9 was missing)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    main(["--help"])
    epilog = " ".join(capsys.readouterr().out.split()).split("Exit codes:", 1)[1]
    named = [int(code) for code in re.findall(r"\b(\d+) [a-z]", epilog)]
    assert named == [int(code) for code in ExitCode], epilog
