"""A newcomer's first hour on a fresh clone: `make run` twice, the documented real-provider
command without a key (one line, non-zero, nothing broken), `make run` again; and the same
real-provider command on a fresh state directory, followed by the demo on that directory.

The clone reuses this interpreter's installed dependencies with the clone's own ``src`` first
on the path, which is what ``make run`` runs (``.venv/bin/python -m toolcards.demo``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.launch import PYTHON

REPO = Path(__file__).resolve().parents[2]
REAL_MODEL = ("--model", "openai:gpt-4o")


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout to clone")
    target = tmp_path_factory.mktemp("first-hour") / "toolcards"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True, timeout=120)
    return target


def make_run(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``make run`` in the clone (the demo with its default state), plus ``args``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", "TOOLCARDS_WORKSPACES_ROOT", "PYTHONPATH")
    }
    env.update(PYTHONPATH=str(clone / "src"), COLUMNS="120")
    return subprocess.run(
        [PYTHON, "-m", "toolcards.demo", *args],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def no_key_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "OPENAI_API_KEY" in lines[0]
    return lines[0]


@pytest.mark.timeout(900)
def test_first_hour_on_a_fresh_clone(clone: Path) -> None:
    where = make_run(clone, "--help")
    assert where.returncode == 0
    probe = subprocess.run(
        [sys.executable, "-c", "import toolcards; print(toolcards.__file__)"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(clone / "src")},
    )
    assert probe.stdout.strip().startswith(str(clone / "src")), probe.stdout  # the clone's code

    first = make_run(clone)
    assert first.returncode == 0, first.stderr
    assert "first run" in first.stdout and "notes/RELEASE.md" in first.stdout
    second = make_run(clone)
    assert second.returncode == 0, second.stderr
    assert "resumed from the SQLite store" in second.stdout

    no_key_line(make_run(clone, *REAL_MODEL))
    third = make_run(clone)
    assert third.returncode == 0, third.stderr
    assert "resumed from the SQLite store" in third.stdout
    assert "2 tasks total" in third.stdout


@pytest.mark.timeout(600)
def test_real_provider_command_on_a_fresh_state_then_the_demo(clone: Path) -> None:
    state = clone / "fresh-state"
    no_key_line(make_run(clone, "--state", str(state), *REAL_MODEL))
    assert not state.exists()
    done = make_run(clone, "--state", str(state))
    assert done.returncode == 0, done.stderr
    assert "first run" in done.stdout and "note:" not in done.stdout
    again = make_run(clone, "--state", str(state))
    assert again.returncode == 0 and "resumed from the SQLite store" in again.stdout
