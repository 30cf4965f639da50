"""Starting commands without preexec_fn: the bwrap start gate, prlimit, pooled cgroups."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.exec.support import PROCESS_CAP, RUNNABLE, needs_bwrap, needs_process_cap, tools_of

from toolcards.core.errors import RetriableError
from toolcards.tools.exec import spawn
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.cgroups import POOL
from toolcards.tools.exec.launch import Gate, Launch
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.runner import run

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prlimit is Linux")
CAP = 48 if PROCESS_CAP != "none" else None


def _limits_of(out: str) -> dict[str, list[str]]:
    body = out.split("stdout (")[1].split("stderr (")[0]
    return {line[:26].strip(): line[26:].split() for line in body.splitlines()[1:]}


@linux_only
@pytest.mark.parametrize("mode", ["local", pytest.param("bwrap", marks=needs_bwrap)])
def test_commands_start_without_preexec_fn(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    real = subprocess.Popen

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(spawn.subprocess, "Popen", recording)
    out = tools_of(ExecTool(mode=mode, limits=RUNNABLE, allowed_commands=["true"]))["exec_command"](
        "true"
    )
    assert "exit_code: 0" in out
    assert seen and all(kw.get("preexec_fn") is None for kw in seen)


@needs_bwrap
def test_bwrap_limits_bind_before_the_command_runs() -> None:
    """``cat`` reads its limits at once: under the gate there is no window without them."""
    limits = ExecLimits(
        cpu_seconds=7, memory_bytes=300 << 20, file_size_bytes=12345, max_processes=CAP
    )
    card = ExecTool(mode="bwrap", limits=limits, allowed_commands=["cat"])
    rows = _limits_of(tools_of(card)["exec_command"]("cat /proc/self/limits"))
    assert rows["Max cpu time"][:2] == ["7", "8"]
    assert rows["Max address space"][:2] == [str(300 << 20)] * 2
    assert rows["Max file size"][:2] == ["12345", "12345"]


@needs_bwrap
def test_bwrap_cpu_limit_kills() -> None:
    card = ExecTool(mode="bwrap", limits=ExecLimits(cpu_seconds=1, max_processes=CAP))
    out = tools_of(card)["exec_command"]('python3 -c "while True: pass"')
    assert "killed: cpu" in out


@needs_bwrap
def test_bwrap_file_size_limit_kills() -> None:
    card = ExecTool(mode="bwrap", limits=ExecLimits(file_size_bytes=1000, max_processes=CAP))
    out = tools_of(card)["exec_command"]("python3 -c \"open('big', 'wb').write(b'x' * 100000)\"")
    assert "killed: file_size" in out


@linux_only
@pytest.mark.timeout(30)
def test_a_gate_that_never_reports_does_not_hang(tmp_path: Path) -> None:
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    launch = Launch(
        argv=["sh", "-c", "exit 3"],
        env={"PATH": "/usr/bin:/bin"},
        cwd=str(tmp_path),
        pass_fds=(info_w, block_r),
        gate=Gate(info_fd=info_r, release_fd=block_w),
    )
    result = run(
        launch,
        display_argv=["x"],
        backend="test",
        timeout_s=10,
        limits=RUNNABLE,
        process_cap=PROCESS_CAP,
    )
    assert result.exit_code == 3


@needs_bwrap
def test_a_limit_that_cannot_be_set_stops_the_command_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, workspaces: Path
) -> None:
    def refuse(pid: int, plan: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(spawn, "apply_rlimits", refuse)
    card = ExecTool(mode="bwrap", limits=RUNNABLE, workspace_id="gate", allowed_commands=["touch"])
    with pytest.raises(RetriableError, match="could not apply the limits"):
        tools_of(card)["exec_command"]("touch ran")
    assert not (workspaces / "gate" / "ran").exists()


@needs_process_cap
@linux_only
def test_pids_groups_are_reused_empty() -> None:
    if PROCESS_CAP != "cgroup":
        pytest.skip("no pids cgroup here")
    first = POOL.take(77)
    assert first is not None
    path = first.path
    POOL.give(first)
    again = POOL.take(77)
    assert again is not None and again.path == path and again.pids() == []
    POOL.give(again)


@linux_only
def test_a_group_holding_our_own_thread_is_never_killed() -> None:
    if PROCESS_CAP != "cgroup":
        pytest.skip("no pids cgroup here")
    group = POOL.take(64)
    assert group is not None
    try:
        with group.spawning_thread() as inside:
            if not inside:
                pytest.skip("threads cannot stand in a group alone here (cgroup v2)")
            assert group.kill_all(rounds=2) is False  # and this process is still alive
    finally:
        POOL.give(group)
