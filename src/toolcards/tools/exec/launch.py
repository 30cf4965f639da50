"""What a backend hands the runner: the argv to start, and an optional start gate."""

from __future__ import annotations

import contextlib
import os
import re
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_CHILD_PID = re.compile(rb'"child-pid"\s*:\s*(\d+)')


@dataclass
class Gate:
    """A sandbox that reports its first process and then waits until released.

    bwrap writes ``{"child-pid": N}`` to ``info_fd`` and blocks the sandbox on a read of the
    other end of ``release_fd`` (``--info-fd`` / ``--block-fd``); in between, the runner puts
    process N in the pids cgroup and sets its rlimits, which everything it starts inherits.
    """

    info_fd: int
    """Read end: the sandbox's first process id arrives here."""
    release_fd: int
    """Write end: one byte lets the sandbox go on."""
    closed: bool = False
    child: int | None = None
    """The first process's id, once reported."""

    def pid(self, deadline: float) -> int | None:
        """The waiting process's pid, or None when the sandbox died or the deadline passed."""
        data = b""
        poller = select.poll()  # not select.select: descriptors may be above FD_SETSIZE
        poller.register(self.info_fd, select.POLLIN)
        while time.monotonic() < deadline:
            if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                break
            chunk = os.read(self.info_fd, 4096)
            if not chunk:
                break
            data += chunk
            found = _CHILD_PID.search(data)
            if found:
                self.child = int(found.group(1))
                return self.child
        found = _CHILD_PID.search(data)
        self.child = int(found.group(1)) if found else None
        return self.child

    def release(self) -> None:
        """Let the sandbox run its command."""
        os.write(self.release_fd, b"1")

    def close(self) -> None:
        """Close our ends, once (closing the release end unreleased also lets the sandbox go:
        kill it first)."""
        if self.closed:
            return
        self.closed = True
        for fd in (self.info_fd, self.release_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class Launch:
    """What a backend decided to execute for one command."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    on_kill: Callable[[int], None] | None = None
    """Extra teardown (given the launched pid) before the process group is killed."""
    cleanup: list[Callable[[], None]] = field(default_factory=list)
    """Always run after the command, killed or not (temporary directories, ...)."""
    pass_fds: tuple[int, ...] = ()
    """Descriptors the command inherits (e.g. bwrap's seccomp program); closed after launch."""
    sigkill_is_oom: bool = False
    """A SIGKILL status means the memory limit was hit (container OOM killer)."""
    gate: Gate | None = None
    """When set, limits go on the process the gate reports, before it is released."""
    host_limits: bool = True
    """Whether the runner applies rlimits and the pids cgroup (False: the backend enforces
    them elsewhere, e.g. inside a container)."""

    def close_passed(self) -> None:
        """Close our copies of ``pass_fds`` (after the start, or when it never happens)."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pass_fds = ()
