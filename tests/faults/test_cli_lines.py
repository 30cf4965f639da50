"""Actor-system mistakes on the CLI are one line each: ``system: ray`` with a SQLite store, and
a Ray address nobody listens on (which is not tried again while the command shuts down)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support.launch import TOOLCARDS as LAUNCHED
from support.processes import free_port

TOOLCARDS = str(LAUNCHED)


def _call(folder: Path, store: str, system: str) -> subprocess.CompletedProcess[str]:
    (folder / "policy.yaml").write_text("default_effect: allow\n")
    (folder / "toolcards.yaml").write_text(
        f"team_id: lines\nstore: '{store}'\nsystem: {system}\npolicy: policy.yaml\n"
        "principals: {local: {id: alice}}\ncards: [{type: PlanningTool, vector_store: false}]\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run(
        [TOOLCARDS, "call", "search_planning"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    assert "Traceback" not in lines[0]
    return lines[0]


def test_ray_with_a_sqlite_store_is_one_line_naming_both_keys(tmp_path: Path) -> None:
    done = _call(tmp_path, "team.db", "ray")
    assert done.returncode != 0
    line = _one_line(done)
    assert "system" in line and "store" in line and "postgresql://" in line


@pytest.mark.parametrize("serve", [False, True], ids=["call", "serve"])
def test_an_unreachable_ray_address_is_one_line_naming_it(
    tmp_path: Path, pg_url: str, serve: bool
) -> None:
    address = f"127.0.0.1:{free_port()}"
    if serve:
        done = _serve(tmp_path, pg_url, f"{{ray: {{address: '{address}', connect_timeout: 2}}}}")
    else:
        done = _call(tmp_path, pg_url, f"{{ray: {{address: '{address}', connect_timeout: 2}}}}")
    assert done.returncode != 0
    line = _one_line(done)
    assert address in line and "Ray" in line


def _serve(folder: Path, store: str, system: str) -> subprocess.CompletedProcess[str]:
    _call(folder, store, system)  # writes the config
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run(
        [TOOLCARDS, "serve", "--transport", "http", "--port", str(free_port())],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
