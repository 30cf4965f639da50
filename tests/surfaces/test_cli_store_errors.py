"""A store or audit log that cannot be used is one line from `toolcards` (the path and the
fix), exit code 1, never a traceback (the entry point in process; a read-only mount in a real
process in a sandbox)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.cli import InProcessCli
from support.launch import TOOLCARDS
from support.newcomer import held_store
from toolcards.surfaces.outcomes import ExitCode

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "team"


def config_with(tmp_path: Path, **replace: str) -> Path:
    """The shipped example config with some of its top-level values replaced."""
    shutil.copy(EXAMPLE / "policy.yaml", tmp_path / "policy.yaml")
    lines = []
    for line in (EXAMPLE / "toolcards.yaml").read_text().splitlines():
        key = line.split(":", 1)[0]
        lines.append(f"{key}: {replace[key]}" if key in replace else line)
    path = tmp_path / "toolcards.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command said (exit code 1, no traceback)."""
    assert done.returncode == ExitCode.FAILED, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.timeout(150)
def test_a_directory_as_store(tmp_path: Path, toolcards_cli: InProcessCli) -> None:
    (tmp_path / "state").mkdir()
    line = one_line(toolcards_cli("list", "-c", str(config_with(tmp_path, store="state"))))
    assert f"{tmp_path / 'state'} is a directory" in line and "team.db" in line


@pytest.mark.timeout(150)
def test_a_store_in_a_system_directory(tmp_path: Path, toolcards_cli: InProcessCli) -> None:
    line = one_line(
        toolcards_cli("list", "-c", str(config_with(tmp_path, store="/proc/self/team.db")))
    )
    assert "system directory" in line


@pytest.mark.timeout(150)
def test_a_file_that_is_not_a_store(tmp_path: Path, toolcards_cli: InProcessCli) -> None:
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    line = one_line(toolcards_cli("list", "-c", str(config_with(tmp_path, store="notes.db"))))
    assert "notes.db" in line and "not a toolcards store" in line


@pytest.mark.timeout(150)
def test_an_audit_log_that_is_a_directory(tmp_path: Path, toolcards_cli: InProcessCli) -> None:
    (tmp_path / "trail").mkdir()
    line = one_line(toolcards_cli("list", "-c", str(config_with(tmp_path, audit="trail"))))
    assert f"cannot open the audit log {tmp_path / 'trail'}" in line
    assert "writable folder" in line


@pytest.mark.timeout(150)
@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bwrap for a read-only mount")
def test_a_read_only_location(tmp_path: Path) -> None:
    config = config_with(tmp_path)
    frozen = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(tmp_path), str(tmp_path)]
    done = subprocess.run(  # a real process in a sandbox whose mount is read-only
        [*frozen, str(TOOLCARDS), "list", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    line = one_line(done)
    assert str(tmp_path) in line and "not writable" in line


@pytest.fixture
def held_store_file(tmp_path: Path) -> Iterator[Path]:
    with held_store(tmp_path / "team.db", "example-team") as store:
        yield store


@pytest.mark.timeout(150)
def test_a_store_locked_by_another_process(
    tmp_path: Path, held_store_file: Path, toolcards_cli: InProcessCli
) -> None:
    line = one_line(toolcards_cli("list", "-c", str(config_with(tmp_path))))
    assert str(held_store_file) in line and "another process" in line


@pytest.mark.timeout(150)
def test_dashboard_on_a_store_that_is_not_a_store(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    store = str(tmp_path / "notes.db")
    line = one_line(toolcards_cli("dashboard", "--store", store, "--team", "release-team"))
    assert "notes.db" in line and "not a toolcards store" in line
