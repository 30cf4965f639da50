"""The bwrap seccomp filter: no setuid/setgid files from inside the sandbox."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from tests.exec.support import RUNNABLE, needs_bwrap, sync

from toolcards.tools.exec.backends.seccomp import setid_filter
from toolcards.tools.exec.card import ExecTool


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_program_is_well_formed(machine: str) -> None:
    program = setid_filter(machine)
    assert program is not None and len(program) % 8 == 0
    ins = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    for pc, (code, jt, jf, _) in enumerate(ins):
        if code in (0x15, 0x45):  # every jump lands inside the program
            assert pc + 1 + max(jt, jf) < len(ins)
    assert ins[-2][0] == ins[-1][0] == 0x06  # ends with the two refusals


def test_unknown_machine_has_no_program() -> None:
    assert setid_filter("sparc64") is None


def _run(command: str) -> str:
    allowed = ["python3", "chmod", "touch", "stat"]
    tool = ExecTool(mode="bwrap", limits=RUNNABLE, allowed_commands=allowed, workspace_id="sc")
    return str(sync(tool.get_tools()[0])(command))


SETID_ATTEMPTS = [
    "chmod u+s f",
    "chmod g+s f",
    "python3 -c \"import os; os.chmod('f', 0o4755)\"",
    "python3 -c \"import os; os.close(os.open('g', os.O_CREAT | os.O_WRONLY, 0o4755))\"",
    "python3 -c \"import os; os.mknod('h', 0o102755)\"",
]


@needs_bwrap
@pytest.mark.parametrize("attempt", SETID_ATTEMPTS)
def test_setid_bits_are_refused(attempt: str, workspaces: Path) -> None:
    assert "exit_code: 0" in _run("touch f")
    out = _run(attempt)
    assert "exit_code: 0" not in out and "not permitted" in out
    for name in ("f", "g", "h"):
        path = workspaces / "sc" / name
        assert not path.exists() or not path.stat().st_mode & 0o6000


@needs_bwrap
def test_ordinary_modes_still_work(workspaces: Path) -> None:
    assert "exit_code: 0" in _run("touch f")
    assert "exit_code: 0" in _run("chmod 750 f")
    assert (workspaces / "sc" / "f").stat().st_mode & 0o7777 == 0o750


TIOCSTI_SCRIPT = (
    "import fcntl, os, termios\n"
    "os.setsid()\n"
    "m, s = os.openpty()\n"
    "fcntl.ioctl(s, termios.TIOCSCTTY, 0)\n"
    "try:\n"
    "    fcntl.ioctl(s, termios.TIOCSTI, b'x')\n"
    "    print('INJECTED')\n"
    "except OSError as exc:\n"
    "    print('refused', exc.errno)\n"
)


@needs_bwrap
def test_typing_into_a_terminal_is_refused(workspaces: Path) -> None:
    """TIOCSTI on a terminal the command controls: the filter refuses it (EPERM)."""
    (workspaces / "sc").mkdir(parents=True, exist_ok=True)
    (workspaces / "sc" / "sti.py").write_text(TIOCSTI_SCRIPT)
    out = _run("python3 sti.py")
    assert "INJECTED" not in out and "refused 1" in out
