"""The allowlist names first programs only; the sandbox is the boundary (and says so)."""

from __future__ import annotations

import contextlib
import os
import pty
import sys
from pathlib import Path

import pytest
from tests.exec.support import RUNNABLE, needs_bwrap, tools_of

from toolcards.core.errors import RetriableError
from toolcards.tools.exec.card import ExecTool


def _exec(mode: str, allowed: list[str] | None) -> dict[str, object]:
    return tools_of(ExecTool(mode=mode, limits=RUNNABLE, allowed_commands=allowed))


def test_env_sh_is_refused_when_env_is_not_listed() -> None:
    with pytest.raises(RetriableError, match="'env' is not allowed"):
        _exec("local", ["cat", "ls"])["exec_command"]("env sh -c 'echo hi'")  # type: ignore[operator]


def test_env_sh_runs_a_shell_when_env_is_listed() -> None:
    """The allowlist does not follow what a started program starts in turn."""
    out = _exec("local", ["env"])["exec_command"]("env sh -c 'echo $((6*7))'")  # type: ignore[operator]
    assert "42" in str(out)


@needs_bwrap
@pytest.mark.parametrize(
    "command",
    [
        "env sh -c 'touch {outside}/escaped; cat /etc/shadow; echo shell-ran'",
        r"find . -maxdepth 0 -exec sh -c 'touch {outside}/escaped; echo shell-ran' ;",
    ],
)
def test_a_shell_reached_through_a_listed_program_stays_in_the_sandbox(
    command: str, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    run = _exec("bwrap", ["env", "find"])["exec_command"]
    out = str(run(command.format(outside=outside)))  # type: ignore[operator]
    assert "shell-ran" in out
    assert not (outside / "escaped").exists()
    assert "root:" not in out


def test_description_states_what_the_allowlist_means() -> None:
    doc = ExecTool(mode="local", limits=RUNNABLE, allowed_commands=["pytest"]).get_tools()[0]
    text = " ".join((doc.__doc__ or "").split())
    assert "Allowed: pytest (the program a command starts with;" in text
    assert "no shell" not in text.lower()


@needs_bwrap
def test_the_sandbox_init_shows_no_host_path(workspaces: Path) -> None:
    run = _exec("bwrap", ["cat"])["exec_command"]
    out = str(run("cat /proc/1/cmdline"))  # type: ignore[operator]
    assert "bwrap" in out  # the sandbox's first process is bwrap's init
    assert str(workspaces) not in out
    assert "toolcards-bwrap-etc" not in out and "--bind" not in out


SYSCTL = "/proc/sys/vm/swappiness"
SYSCTL_WRITE = (
    "import errno\n"
    f"p = '{SYSCTL}'\n"
    "cur = int(open(p).read())\n"
    "print('read', cur)\n"
    "try:\n"
    "    with open(p, 'w') as f:\n"
    "        f.write(str(cur + 1 if cur < 100 else cur - 1))\n"
    "    print('WROTE')\n"
    "except OSError as exc:\n"
    "    print('refused', errno.errorcode[exc.errno])\n"
)


@needs_bwrap
def test_a_command_cannot_change_the_host_kernels_settings(workspaces: Path) -> None:
    """uid 0 inside is the host's uid: a writable /proc/sys changed the host's sysctls when the
    host ran as root. The command still reads them; its write is refused (read-only mount)."""
    workspace = workspaces / "ws"
    workspace.mkdir()
    (workspace / "sysctl.py").write_text(SYSCTL_WRITE)
    host = Path(SYSCTL).read_text()
    try:
        tool = ExecTool(
            mode="bwrap", limits=RUNNABLE, allowed_commands=["python3"], workspace_id="ws"
        )
        out = str(tools_of(tool)["exec_command"]("python3 sysctl.py"))
        after = Path(SYSCTL).read_text()
    finally:
        if Path(SYSCTL).read_text() != host:  # before the fix, as root: put it back
            Path(SYSCTL).write_text(host)
    assert f"read {host.strip()}" in out
    assert "refused EROFS" in out and "WROTE" not in out
    assert after == host


TTY_JOB = (
    "import errno, os\n"
    "try:\n"
    "    os.close(os.open('/dev/tty', os.O_RDWR | os.O_NOCTTY))\n"
    "    print('OPENED')\n"
    "except OSError as exc:\n"
    "    print('refused', errno.errorcode[exc.errno])\n"
)
TTY_HOST = """
import os, sys
from pathlib import Path
from toolcards.tools.exec.limits import ExecLimits
from toolcards.tools.exec.service import ExecService, ExecSettings
workspace, cap = Path(sys.argv[1]), sys.argv[2]
os.close(os.open("/dev/tty", os.O_RDWR))  # this host process has a controlling terminal
limits = ExecLimits(max_processes=None if cap == "None" else int(cap))
settings = ExecSettings(mode="bwrap", limits=limits, allowed_commands=("python3",))
result = ExecService(settings).run("python3 tty.py", workspace)
(workspace / "result").write_text(f"{result.exit_code} {result.stdout}{result.stderr}")
"""


@needs_bwrap
def test_a_command_cannot_open_the_hosts_terminal(workspaces: Path) -> None:
    """The host runs on a terminal (a pty here): the sandbox is in a session of its own, so
    /dev/tty names no terminal for it (it read what the operator typed there)."""
    workspace = workspaces / "ws"
    workspace.mkdir()
    (workspace / "tty.py").write_text(TTY_JOB)
    cap = str(RUNNABLE.max_processes)
    pid, terminal = pty.fork()
    if pid == 0:  # the host, on the pty as its controlling terminal
        os.execv(sys.executable, [sys.executable, "-c", TTY_HOST, str(workspace), cap])
    shown = b""
    with contextlib.suppress(OSError):  # EIO once the host has ended
        while chunk := os.read(terminal, 4096):
            shown += chunk
    os.close(terminal)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, shown
    assert (workspace / "result").read_text() == "0 refused ENXIO\n"
