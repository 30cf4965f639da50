"""local: runs on the host. No isolation at all; limits and the timeout still apply."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from toolcards.tools.exec.backends.base import DEFAULT_PATH, Backend, SandboxSpec
from toolcards.tools.exec.launch import Launch

REAPER = str(Path(__file__).resolve().parent.parent / "reaper.py")
REAPER_STOP_S = 2.0


class LocalBackend(Backend):
    """Unconfined: only ever used when chosen explicitly with ``mode="local"``."""

    name: ClassVar[str] = "local"
    isolating: ClassVar[bool] = False
    workdir: ClassVar[str | None] = None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    def launch(self, argv: Sequence[str], spec: SandboxSpec) -> Launch:
        env = {**spec.env, "HOME": str(spec.workspace), "PWD": str(spec.workspace)}
        env.setdefault("PATH", DEFAULT_PATH)
        if spec.tracked or not sys.platform.startswith("linux"):
            return Launch(argv=list(argv), env=env, cwd=str(spec.workspace))
        # no cgroup: a subreaper catches what escapes the process group (setsid, daemons)
        wrapped = [sys.executable, "-I", "-S", REAPER, "--", *argv]
        return Launch(argv=wrapped, env=env, cwd=str(spec.workspace), on_kill=_stop_reaper)

    def describe(self, network: bool) -> str:
        return (
            "UNCONFINED (local mode): commands run directly on the host with this process's "
            "permissions; files outside the workspace and the network are NOT protected"
        )


def _stop_reaper(pid: int) -> None:
    """Ask the reaper to kill its descendants, and give it a moment before the group kill."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + REAPER_STOP_S
    while time.monotonic() < deadline:
        try:  # WNOWAIT: leave the exit status for the runner to collect
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.005)
