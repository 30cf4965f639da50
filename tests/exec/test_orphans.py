"""A bwrap sandbox's init outlives the bwrap process that started it by an instant and is
orphaned: whoever adopts it must reap it. Until then it counts against the pids cgroup, so a
reused group would fill up with such zombies and refuse every command after ~128 of them (in
a container whose PID 1 reaps lazily, or where this process is PID 1 or a subreaper)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.exec.support import needs_bwrap, needs_process_cap

from toolcards.tools.exec.service import ExecService, ExecSettings

pytestmark = [needs_bwrap, needs_process_cap, pytest.mark.timeout(300)]


def test_more_commands_than_the_process_cap_run_in_one_service(tmp_path: Path) -> None:
    service = ExecService(ExecSettings(mode="bwrap", timeout_s=30))
    cap = service.settings.limits.max_processes
    assert cap is not None
    try:
        for i in range(cap + 20):
            result = service.run("true", tmp_path)
            assert result.exit_code == 0, f"command {i}: {result.stderr}"
    finally:
        service.close()


SUBREAPER = textwrap.dedent(
    """
    import ctypes, os, sys, tempfile
    from pathlib import Path
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER: orphans come to us
    from toolcards.tools.exec.service import ExecService, ExecSettings
    service = ExecService(ExecSettings(mode="bwrap", timeout_s=30))
    workspace = Path(tempfile.mkdtemp())
    for _ in range(20):
        assert service.run("true", workspace).exit_code == 0
    service.close()
    zombies = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        zombies += state == "Z" and int(ppid) == os.getpid()
    print(zombies)
    """
)


def test_a_subreaper_host_reaps_the_sandboxes_it_adopts() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SUBREAPER], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "0"  # no zombie left behind
