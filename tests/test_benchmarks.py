"""The benchmark scripts keep running: each one starts and finishes in its quick mode (figures
are printed, never asserted), so an API change cannot leave one broken. Not here, for their
time (20 s to minutes even in quick mode, on servers and clusters of their own):
``bench_surfaces``, ``bench_sessions`` and ``bench_distributed``.

A script that starts processes itself (servers, CLI runs, measuring interpreters, bwrap jobs)
runs as its own process; the others run in this one, as ``python SCRIPT --quick`` would run
them (``__main__``, its own argv, cwd and environment), and must leave it as they found it:
the environment, ``sys.path``, no thread still running, no module of theirs imported."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.launch import PYTHON

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
IN_PROCESS = [
    "guardrails",
    "history",
    "memory",
    "runtime",
    "vector",
    "vector_scale",
    "retrieval",
    "workspace",
    "patch",
    "deferred",
    "grants",
    "persist_versions",
]
OWN_PROCESS = [
    "factory",  # times `import toolcards` in fresh interpreters
    "governance",  # kills audit-writing processes
    "exec",  # bwrap and bare subprocesses
    "resource_race",  # a stdio `toolcards serve`
    "cli",  # `toolcards` command lines and a served dashboard
    "dashboard",  # a chromium page (when installed)
    "resume",  # each resume in a fresh process
    "mcp_results",  # stdio MCP servers
    "budgets",  # a PostgreSQL server behind a counting proxy
]


@pytest.mark.timeout(140)
@pytest.mark.parametrize("name", OWN_PROCESS)
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


def _theirs(module: object) -> bool:
    """A module imported from the benchmarks or from a test folder a script put on its path."""
    where = getattr(module, "__file__", None) or ""
    return where.startswith(str(BENCHMARKS)) or (
        where.startswith(str(ROOT / "tests")) and "support" not in Path(where).parts
    )


@pytest.mark.timeout(140)
@pytest.mark.parametrize("name", IN_PROCESS)
def test_the_benchmark_runs_in_quick_mode_in_process(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = BENCHMARKS / f"bench_{name}.py"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "--quick"])
    monkeypatch.setattr(sys, "path", [str(BENCHMARKS), *sys.path])  # as `python SCRIPT` has it
    monkeypatch.delenv("TOOLCARDS_BENCH_RESULTS", raising=False)
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "workspaces"))
    environ, modules = dict(os.environ), set(sys.modules)
    threads = set(threading.enumerate())
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        assert exc.code in (None, 0), exc.code
    finally:
        changed = {k for k in environ.keys() | os.environ.keys() if environ.get(k) != os.getenv(k)}
        os.environ.clear()
        os.environ.update(environ)
        for module in set(sys.modules) - modules:
            if _theirs(sys.modules[module]):
                del sys.modules[module]
    assert capsys.readouterr().out.strip()  # it printed its figures
    deadline = time.monotonic() + 10
    while (left := set(threading.enumerate()) - threads) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"bench_{name} left threads running: {left}"
    # a script that sets a variable for its own run only: none of it leaked (it is put back)
    assert changed <= {"TOOLCARDS_WORKSPACES_ROOT", "OPENBLAS_NUM_THREADS"}, changed
