"""The benchmark scripts keep running: each one that needs no server starts and finishes in its
quick mode (figures are printed, never asserted), so an API change cannot leave one broken."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from support.launch import PYTHON

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = [
    "factory",
    "governance",
    "guardrails",
    "history",
    "memory",
    "runtime",
    "vector",
    "vector_scale",
    "retrieval",
    "workspace",
    "patch",
    "exec",
    "resource_race",
    "cli",
    "deferred",
    "resume",
    "mcp_results",
    "grants",
]


@pytest.mark.timeout(140)
@pytest.mark.parametrize("name", SCRIPTS)
def test_the_benchmark_runs_in_quick_mode(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOOLCARDS_BENCH_RESULTS"}
    env["TOOLCARDS_WORKSPACES_ROOT"] = str(tmp_path / "workspaces")
    done = subprocess.run(
        [PYTHON, str(BENCHMARKS / f"bench_{name}.py"), "--quick"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip()  # it printed its figures
