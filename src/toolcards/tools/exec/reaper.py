"""Run a command as a child subreaper, then kill whatever it left behind (Linux, local mode).

Used by the local backend when no pids cgroup tracks the command: processes that escape the
process group (``setsid``, double forks) are re-parented here instead of to init, so they can
still be found and killed. Runs as a plain script (``python -I reaper.py -- argv``): it must
import nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 500


def children() -> list[int]:
    """Direct children of this process (orphans of the command land here)."""
    found: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
        except OSError:
            continue
    return found


def sweep() -> None:
    """SIGKILL every descendant, level by level, and reap them, until none is left."""
    for _ in range(SWEEP_ROUNDS):
        for pid in children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        time.sleep(0.002)


def main(argv: list[str]) -> int:
    """Run ``argv`` and return its exit status (128+N when killed by signal N)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("reaper: cannot become a child subreaper", file=sys.stderr)
        return 126

    def on_term(signum: int, frame: object) -> None:
        sweep()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        proc = subprocess.Popen(argv)
    except OSError as exc:
        print(f"{argv[0]}: cannot run: {exc.strerror or exc}", file=sys.stderr)
        return 127
    code = proc.wait()
    sweep()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    sys.exit(main(args) if args else 2)
