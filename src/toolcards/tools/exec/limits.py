"""Resource limits of one command: rlimits, a process cap, and bounded output capture."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

CGROUP_V1_PIDS = Path("/sys/fs/cgroup/pids")
CGROUP_V2_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
GROUP_PARENT = "toolcards-exec"


class ExecLimits(BaseModel):
    """Per-command limits. ``None`` switches one off (the output cap is always on)."""

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
    cpus: float = Field(default=1.0, gt=0, le=256)
    """CPU share for container backends (``docker --cpus``)."""
    output_bytes: int = Field(default=64_000, ge=256, le=16 << 20)
    """Bytes kept per stream: the head and the tail, with a marker for what was dropped."""


class LimitUnavailable(RuntimeError):
    """A configured limit cannot be enforced on this host (we refuse to run unbounded)."""


class PidsGroup:
    """A throw-away pids cgroup: caps the process count and kills everything in it at the end.

    Works with the cgroup v1 ``pids`` hierarchy or a cgroup v2 tree with the ``pids``
    controller, whenever the directory is writable (root, or a delegated subtree).
    """

    def __init__(self, path: Path, max_pids: int) -> None:
        self.path = path
        self.procs = str(path / "cgroup.procs")
        (path / "pids.max").write_text(str(max_pids))

    @classmethod
    def create(cls, max_pids: int) -> PidsGroup | None:
        """A new group, or None when no writable pids cgroup exists here."""
        for parent in _pids_parents():
            path = parent / GROUP_PARENT / uuid.uuid4().hex[:16]
            try:
                path.mkdir(parents=True)
                if not (path / "pids.max").exists():  # cgroup v2: delegate pids to our subtree
                    (path.parent / "cgroup.subtree_control").write_text("+pids")
                return cls(path, max_pids)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
        return None

    def pids(self) -> list[int]:
        """Processes currently in the group."""
        try:
            text = Path(self.procs).read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def kill_all(self, rounds: int = 50) -> None:
        """SIGKILL every member until the group is empty (forks racing the kill included)."""
        for _ in range(rounds):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def close(self) -> None:
        """Kill what is left and remove the group."""
        self.kill_all()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _pids_parents() -> list[Path]:
    parents: list[Path] = []
    if (CGROUP_V1_PIDS / "cgroup.procs").exists():
        parents.append(CGROUP_V1_PIDS)
    for root in CGROUP_V2_ROOTS:
        controllers = root / "cgroup.controllers"
        try:
            if "pids" in controllers.read_text().split():
                subtree = root / "cgroup.subtree_control"
                if "pids" not in subtree.read_text().split():
                    subtree.write_text("+pids")
                parents.append(root)
        except OSError:
            continue
    return parents


def process_cap_method(limits: ExecLimits) -> str:
    """How ``max_processes`` is enforced here: ``cgroup``, ``rlimit`` or ``none``."""
    if limits.max_processes is None:
        return "none"
    group = PidsGroup.create(limits.max_processes)
    if group is not None:
        group.close()
        return "cgroup"
    # RLIMIT_NPROC never applies to uid 0; for other users it is counted per user namespace
    # (Linux >= 5.14), so inside a sandbox with its own namespace it caps the sandbox alone.
    return "rlimit" if os.geteuid() != 0 else "none"


def user_task_count(uid: int | None = None) -> int:
    """Processes (and, on Linux, threads) the user runs now: what RLIMIT_NPROC counts."""
    uid = os.geteuid() if uid is None else uid
    proc = Path("/proc")
    if not proc.is_dir():
        return _ps_count(uid)
    count = 0
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            status = (proc / entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 0").split()[1]) == uid:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def _ps_count(uid: int) -> int:
    done = subprocess.run(["ps", "-A", "-o", "uid="], capture_output=True, text=True, check=False)
    return sum(1 for line in done.stdout.split() if line.strip() == str(uid))


def preexec(limits: ExecLimits, group: PidsGroup | None, nproc: int | None) -> Callable[[], None]:
    """A ``preexec_fn`` that applies the limits in the child, before the command starts.

    ``nproc``, when given, is set as RLIMIT_NPROC: the fallback for ``max_processes`` when no
    pids group exists (useless as root, which the service refuses up front).
    """
    settings: list[tuple[int, int, int]] = []
    if limits.cpu_seconds is not None:
        settings.append((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1))
    if limits.memory_bytes is not None:
        settings.append((resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes))
    if limits.file_size_bytes is not None:
        fsize = limits.file_size_bytes
        settings.append((resource.RLIMIT_FSIZE, fsize, fsize))
    if nproc is not None:
        settings.append((resource.RLIMIT_NPROC, nproc, nproc))
    procs = group.procs if group is not None else None

    def apply() -> None:
        if procs is not None:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        for which, soft, hard in settings:
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
