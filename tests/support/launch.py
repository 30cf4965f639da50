"""The ``toolcards`` command the tests run, :data:`TOOLCARDS`, and their Python, :data:`PYTHON`.

It is a small launcher script that hands its arguments, working directory, environment and
standard streams to this worker's fork server (:mod:`support.zygote`), which forks a process
that has the third-party packages imported already, and then stands for that process: it
forwards the signals it gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) and ends as
the process ended (its exit code, or killed by the same signal); killed itself, the process
is killed too. Without a running fork server (``TOOLCARDS_TEST_FORK=0``, or a test run
outside this suite's session) it execs the real console script, :data:`REAL_TOOLCARDS`.

Tests about the process itself (what it imports, its pid, its memory) run
:data:`REAL_TOOLCARDS`.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["PYTHON", "REAL_TOOLCARDS", "TOOLCARDS", "start_fork_server"]

REAL_TOOLCARDS = Path(sys.executable).parent / "toolcards"

_LAUNCHER = r"""#!@PYTHON@ -S
import os, sys

REAL, SOCKET, MODE = @REAL@, @SOCKET@, @MODE@


def real():
    os.execv(REAL, [REAL, *sys.argv[1:]])


import socket

server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    server.connect(SOCKET)
except OSError:
    real()
import json, resource, signal, struct

streams = []
for fd in (0, 1, 2):
    try:
        os.fstat(fd)
        streams.append(fd)
    except OSError:
        pass
spaces = {}
for name in ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup"):
    try:
        spaces[name] = os.readlink(f"/proc/self/ns/{name}")
    except OSError:
        pass
with open("/proc/self/cgroup") as cgroup:
    groups = cgroup.read()
mask = os.umask(0o22)
os.umask(mask)
context = dict(
    namespaces=spaces,
    limits={name: resource.getrlimit(getattr(resource, name))
            for name in dir(resource) if name.startswith("RLIMIT_")},
    cgroup=groups,
    ids=[os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())],
    umask=mask,
)
body = json.dumps(
    dict(mode=MODE, program=REAL, argv=sys.argv[1:], cwd=os.getcwd(), env=dict(os.environ),
         streams=streams, context=context)
).encode()
pending = []
pid = None


def forward(signum, frame):
    if pid is None:
        pending.append(signum)
        return
    try:
        os.kill(pid, signum)
    except OSError:
        pass


for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
               signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(signum, forward)
try:
    socket.send_fds(server, [struct.pack("!I", len(body))], streams)
    server.sendall(body)
except OSError:
    real()
answers = server.makefile("rb")
line = answers.readline()
if line == b"real\n":  # this process differs from the fork server's (see support.zygote)
    for signum in pending:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    real()
if not line:
    os._exit(70)
null = os.open(os.devnull, os.O_RDWR)
for fd in streams:  # the process has them now: their end of file is its own
    os.dup2(null, fd)
pid = int(line)
for signum in pending:
    forward(signum, None)
kind, _, value = answers.readline().decode().partition(" ")
if kind == "signal":
    signal.signal(int(value), signal.SIG_DFL)
    os.kill(os.getpid(), int(value))
    os._exit(128 + int(value))
os._exit(int(value) if kind == "exit" else 70)
"""


def _launcher(folder: Path, mode: str, program: str) -> Path:
    path = folder / mode
    text = (
        _LAUNCHER.replace("@PYTHON@", sys.executable)
        .replace("@REAL@", repr(program))
        .replace("@SOCKET@", repr(str(folder / "zygote.sock")))
        .replace("@MODE@", repr(mode))
    )
    path.write_text(text)
    path.chmod(0o755)
    return path


_FOLDER = Path(tempfile.mkdtemp(prefix="toolcards-launch-"))
atexit.register(shutil.rmtree, _FOLDER, True)
TOOLCARDS = _launcher(_FOLDER, "toolcards", str(REAL_TOOLCARDS))
PYTHON = str(_launcher(_FOLDER, "python", sys.executable))
"""This interpreter, for ``PYTHON -c CODE``, ``PYTHON -m MODULE`` or ``PYTHON SCRIPT`` (with
no interpreter option; any other form runs the real interpreter)."""


class ForkServer:
    """This worker's fork server; :meth:`stop` ends it and the processes it still has."""

    def __init__(self) -> None:
        socket_path = _FOLDER / "zygote.sock"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.log = (_FOLDER / "zygote.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("zygote.py")),
                str(socket_path),
            ],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=self.log,
            env=env,
        )
        deadline = time.monotonic() + 120
        while not socket_path.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the fork server did not start: {self.output()[-2000:]}")
            time.sleep(0.05)

    def output(self) -> str:
        return (_FOLDER / "zygote.log").read_text(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            (_FOLDER / "zygote.sock").unlink()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_fork_server() -> ForkServer | None:
    """This worker's fork server, or None when ``TOOLCARDS_TEST_FORK=0`` asks for real starts."""
    if os.environ.get("TOOLCARDS_TEST_FORK", "1") == "0":
        return None
    return ForkServer()
