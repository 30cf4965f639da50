"""The subreaper used by local mode when no pids cgroup tracks the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.exec.support import assert_none_left

from toolcards.tools.exec.backends import LocalBackend, SandboxSpec
from toolcards.tools.exec.backends.local import REAPER
from toolcards.tools.exec.limits import ExecLimits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _spec(tmp_path: Path, tracked: bool) -> SandboxSpec:
    return SandboxSpec(
        workspace=tmp_path, env={}, network=False, limits=ExecLimits(), tracked=tracked
    )


def test_escaped_daemon_is_killed_when_the_command_exits(marker: str) -> None:
    code = (
        "import subprocess; "
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True); print('spawned')"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", REAPER, "--", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "spawned\n")
    assert_none_left(marker)


def test_exit_status_is_passed_through() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", REAPER, "--", "sh", "-c", "exit 7"], timeout=30, check=False
    )
    assert done.returncode == 7


def test_missing_program_is_127() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", REAPER, "--", "no-such-prog-q"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 127 and "cannot run" in done.stderr


def test_local_wraps_untracked_commands_only(tmp_path: Path) -> None:
    plain = LocalBackend().launch(["ls"], _spec(tmp_path, tracked=True))
    wrapped = LocalBackend().launch(["ls"], _spec(tmp_path, tracked=False))
    assert plain.argv == ["ls"]
    assert wrapped.argv[-3:] == [REAPER, "--", "ls"]
    assert wrapped.on_kill is not None
