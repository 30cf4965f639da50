"""Resource limits of one command: the settings, the rlimits, and bounded output capture."""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from toolcards.core.errors import ToolcardsError

SHM_SHARE = 4
"""/dev/shm gets 1/SHM_SHARE of ``tmp_bytes``, /tmp the rest."""
EPOLL_SHARE = 4
"""A command may reach at most 1/EPOLL_SHARE of the host user's epoll watches (see
:func:`check_epoll_watches`)."""
MAX_USER_WATCHES = Path("/proc/sys/fs/epoll/max_user_watches")


class ExecLimits(BaseModel):
    """Per-command limits. ``None`` switches one off (the output, tmpfs and open-file caps
    are always on)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpu_seconds: int | None = Field(default=60, ge=1)
    """CPU time (RLIMIT_CPU); the command gets SIGXCPU, then SIGKILL one second later."""
    memory_bytes: int | None = Field(default=1 << 30, ge=16 << 20)
    """Address space (RLIMIT_AS) of every process of the command."""
    file_size_bytes: int | None = Field(default=256 << 20, ge=1)
    """Largest file the command may write (RLIMIT_FSIZE)."""
    max_processes: int | None = Field(default=128, ge=4)
    """Processes and threads alive at once: a pids cgroup when one is writable, else
    RLIMIT_NPROC (never as root, where it does not apply; outside a private user namespace
    it is set to the user's current count plus this)."""
    open_files: int = Field(default=64, ge=16)
    """Descriptors one process may hold (RLIMIT_NOFILE, never above the host's own hard
    limit). Pipe and socket buffers are kernel memory outside RLIMIT_AS: the host's limit
    let one process queue GiBs in socket pairs. Epoll watches are charged to the host user
    (:func:`check_epoll_watches`): 64 keeps the defaults' worst case (131,072) under a
    quarter of the budget of hosts with 2.5 GiB of RAM or more."""
    cpus: float = Field(default=1.0, gt=0, le=256)
    """CPU share for container backends (``docker --cpus``)."""
    output_bytes: int = Field(default=64_000, ge=256, le=16 << 20)
    """Bytes kept per stream: the head and the tail, with a marker for what was dropped."""
    tmp_bytes: int = Field(default=64 << 20, ge=1 << 20)
    """RAM the sandbox's in-memory file systems may hold together (``/tmp`` and ``/dev/shm``
    are size-capped tmpfs mounts; tmpfs pages are not in RLIMIT_AS, so they are budgeted
    here). Never more than ``memory_bytes``."""
    workspace_write_bytes: int | None = Field(default=1 << 30, ge=1 << 20)
    """Bytes one command may add to the workspace, watched while it runs (killed: disk)."""

    @model_validator(mode="after")
    def _fits_the_epoll_budget(self) -> ExecLimits:
        check_epoll_watches(self, host_max_user_watches())
        return self

    def tmpfs_sizes(self) -> tuple[int, int]:
        """Sizes of the ``/tmp`` and ``/dev/shm`` tmpfs mounts (together at most the budget)."""
        total = self.tmp_bytes
        if self.memory_bytes is not None:
            total = min(total, self.memory_bytes)
        shm = max(1 << 20, total // SHM_SHARE)
        return max(1 << 20, total - shm), shm


class LimitUnavailable(ToolcardsError, RuntimeError):
    """A configured limit cannot be enforced on this host (we refuse to run unbounded)."""


def host_max_user_watches() -> int | None:
    """The host's per-user epoll watch budget (``fs.epoll.max_user_watches``); None off Linux."""
    try:
        return int(MAX_USER_WATCHES.read_text())
    except (OSError, ValueError):
        return None


def check_epoll_watches(limits: ExecLimits, max_user_watches: int | None) -> None:
    """Refuse ``limits`` whose command could hold 1/EPOLL_SHARE of ``max_user_watches``.

    The kernel counts epoll watches per host user, and the sandbox's uid is the host user's:
    30 processes with 1,024 descriptors each, split between epoll instances and pipes added
    to every one of them, held all 5.5 million of a 24 GiB host and the host's own
    ``epoll_ctl`` (every asyncio loop) failed with ENOSPC. That split holds
    ``(open_files/2)^2`` watches a process. It is not the most a command can hold: a watch
    outlives its descriptor while its file is open elsewhere, so re-adding a file under other
    descriptor numbers holds more (see the card's "Disk and memory"). Nothing is checked
    without a process cap or off Linux.
    """
    if limits.max_processes is None or max_user_watches is None:
        return
    worst = limits.max_processes * (limits.open_files // 2) ** 2
    if worst * EPOLL_SHARE > max_user_watches:
        raise LimitUnavailable(
            f"max_processes x (open_files/2)^2 = {worst:,} epoll watches, more than "
            f"1/{EPOLL_SHARE} of this host user's {max_user_watches:,} "
            f"(fs.epoll.max_user_watches): lower open_files or max_processes"
        )


RlimitPlan = list[tuple[int, int, int]]
"""(resource, soft, hard) triples to set on the command's first process."""


def rlimit_plan(limits: ExecLimits, nproc: int | None = None) -> RlimitPlan:
    """The rlimits for ``limits``; ``nproc``, when given, becomes RLIMIT_NPROC (the fallback
    for ``max_processes`` when no pids cgroup exists; useless as root). RLIMIT_MSGQUEUE is 0
    on Linux: queue bytes are charged to the host user, so a command could use up that user's
    819,200 and make the host's own ``mq_open`` fail (bwrap's filter refuses it too)."""
    plan: RlimitPlan = []
    if limits.cpu_seconds is not None:
        plan.append((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1))
    if limits.memory_bytes is not None:
        plan.append((resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes))
    if limits.file_size_bytes is not None:
        plan.append((resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes))
    if nproc is not None:
        plan.append((resource.RLIMIT_NPROC, nproc, nproc))
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]  # above it: EPERM unprivileged
    files = limits.open_files if hard == resource.RLIM_INFINITY else min(limits.open_files, hard)
    plan.append((resource.RLIMIT_NOFILE, files, files))
    if sys.platform == "linux":
        plan.append((resource.RLIMIT_MSGQUEUE, 0, 0))
    return plan


CAN_PRLIMIT = hasattr(resource, "prlimit")
"""Linux: limits are set on the started process from outside (no ``preexec_fn``, no fork)."""


def apply_rlimits(pid: int, plan: RlimitPlan) -> None:
    """Set ``plan`` on process ``pid`` with prlimit(2) (Linux)."""
    for which, soft, hard in plan:
        resource.prlimit(pid, which, (soft, hard))  # type: ignore[attr-defined,unused-ignore]


def preexec(plan: RlimitPlan, procs: str | None) -> Callable[[], None]:
    """A ``preexec_fn`` applying ``plan`` (and joining the cgroup file ``procs``) in the child:
    the fallback where prlimit(2) does not exist. It forces a full fork, so Linux avoids it."""

    def apply() -> None:
        if procs is not None:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        for which, soft, hard in plan:
            resource.setrlimit(which, (soft, hard))

    return apply


class BoundedOutput:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        """Add bytes read from the stream."""
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def dropped(self) -> int:
        """Bytes neither in the head nor in the tail."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept bytes as text, with a marker where bytes were dropped."""
        head = self.head.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + self.tail.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[... {self.dropped} bytes omitted ...]\n{tail}"
