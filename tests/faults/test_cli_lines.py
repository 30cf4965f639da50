"""The rows of docs/distributed.md's failure table a command line meets when it starts, through
the command line itself (``list``, ``call``, ``serve``, ``dashboard``): each is one line and
its exit code, never a traceback. A store, database or cluster that cannot be used exits 1; a
config that cannot work exits 2 and speaks the config.

Most rows run the CLI entry point in this process. The rows about Ray run in a fresh process
(the fork server's): what the process has connected to is their subject, and a test process
may be connected to the session's cluster already."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from support.cli import InProcessCli
from support.launch import TOOLCARDS
from support.processes import free_port
from toolcards.runtime import open_store
from toolcards.surfaces.outcomes import ExitCode

COMMANDS = {
    "list": ["list"],
    "call": ["call", "search_planning"],
    "serve": ["serve"],
    "dashboard": ["dashboard", "--port"],
}


def _config(folder: Path, store: str, system: str = "pykka") -> Path:
    (folder / "policy.yaml").write_text("default_effect: allow\n")
    path = folder / "toolcards.yaml"
    path.write_text(
        f"team_id: lines\nstore: '{store}'\nsystem: {system}\npolicy: policy.yaml\n"
        "principals: {local: {id: alice}}\ncards: [{type: PlanningTool, vector_store: false}]\n"
    )
    return path


def _argv(config: Path, command: str) -> list[str]:
    argv = ["-c", str(config), *COMMANDS[command]]
    return [*argv, str(free_port())] if command == "dashboard" else argv


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in lines[0] and lines[0].startswith("error: ")
    return lines[0]


def _ray_on_sqlite(folder: Path) -> tuple[Path, ExitCode, list[str]]:
    """``system: ray`` with a file store: a config error naming both keys."""
    return _config(folder, "team.db", "ray"), ExitCode.USAGE, ["system: ray", "postgresql://"]


def _postgresql_down(folder: Path) -> tuple[Path, ExitCode, list[str]]:
    """Nothing listens at the store's address: its URL, the password hidden."""
    url = f"postgresql://toolcards:secret-pw@127.0.0.1:{free_port()}/toolcards"
    return _config(folder, url), ExitCode.FAILED, [url.replace("secret-pw", "***")]


def _schema_too_new(folder: Path) -> tuple[Path, ExitCode, list[str]]:
    """The store was written by a newer toolcards."""
    open_store(str(folder / "team.db")).close()
    with sqlite3.connect(folder / "team.db") as conn:
        conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    return _config(folder, "team.db"), ExitCode.FAILED, ["schema 99, newer than this toolcards"]


ROWS = {"ray on sqlite": _ray_on_sqlite, "postgresql down": _postgresql_down,
        "schema too new": _schema_too_new}  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("row", ROWS)
def test_a_start_that_cannot_work_is_one_line_and_its_exit_code(
    tmp_path: Path,
    row: str,
    command: str,
    toolcards_cli: InProcessCli,
) -> None:
    config, expected, named = ROWS[row](tmp_path)
    done = toolcards_cli(*_argv(config, command), env={"TOOLCARDS_CONFIG": None})
    line = _one_line(done.stdout + done.stderr)
    assert done.returncode == expected, line
    assert all(part in line for part in named) and "secret-pw" not in line, line


def _fresh_process(folder: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TOOLCARDS_CONFIG")}
    return subprocess.run(
        [str(TOOLCARDS), *argv], cwd=folder, capture_output=True, text=True, timeout=180,
        env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_ray_on_postgresql_without_a_cluster_address_is_a_config_error(
    tmp_path: Path, pg_url: str
) -> None:
    """No ``address:``, no ``RAY_ADDRESS``: each process would start a private Ray and run its
    own copy of the team's actors (before: a 35-line traceback of a ValueError, exit 1)."""
    config = _config(tmp_path, pg_url, "ray")
    for command in COMMANDS:
        done = _fresh_process(tmp_path, _argv(config, command))
        line = _one_line(done.stdout + done.stderr)
        assert done.returncode == ExitCode.USAGE, (command, line)
        assert "system: {ray: {address: HOST:PORT}}" in line and "RAY_ADDRESS" in line, line
        assert "ValueError" not in line and "RayActorSystem" not in line


@pytest.mark.timeout(300)
@pytest.mark.parametrize("command", ["call", "serve", "dashboard"])
def test_an_unreachable_ray_address_is_one_line_naming_it(
    tmp_path: Path, pg_url: str, command: str
) -> None:
    address = f"127.0.0.1:{free_port()}"
    system = f"{{ray: {{address: '{address}', connect_timeout: 2}}}}"
    done = _fresh_process(tmp_path, _argv(_config(tmp_path, pg_url, system), command))
    line = _one_line(done.stdout + done.stderr)
    assert done.returncode == ExitCode.FAILED
    assert address in line and "Ray" in line
