"""Throw-away pids cgroups: a process cap, and a way to find and kill everything a command made.

Groups are set up outside the command's process, never in a ``preexec_fn``: a sandbox that
waits at a start gate is moved in by pid, and with cgroup v1 the spawning thread joins the
group for the instant of the spawn (v1 places threads, not only processes), so the child is
born inside it. Empty groups go back to a small pool instead of being removed and re-created.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from toolcards.tools.exec.limits import ExecLimits

CGROUP_V1_PIDS = Path("/sys/fs/cgroup/pids")
CGROUP_V2_ROOTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
GROUP_PARENT = "toolcards-exec"
POOL_SIZE = 16


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class PidsGroup:
    """A pids cgroup: caps the process count and kills everything in it at the end.

    Works with the cgroup v1 ``pids`` hierarchy or a cgroup v2 tree with the ``pids``
    controller, whenever the directory is writable (root, or a delegated subtree).
    """

    def __init__(self, path: Path, max_pids: int, v1: bool = False) -> None:
        self.path = path
        self.max_pids = max_pids
        self.v1 = v1
        self.procs = str(path / "cgroup.procs")
        _write(str(path / "pids.max"), str(max_pids))

    @classmethod
    def create(cls, max_pids: int) -> PidsGroup | None:
        """A new group, or None when no writable pids cgroup exists here."""
        for parent in _pids_parents():
            path = parent / GROUP_PARENT / uuid.uuid4().hex[:16]
            try:
                path.mkdir(parents=True)
                if not (path / "pids.max").exists():  # cgroup v2: delegate pids to our subtree
                    (path.parent / "cgroup.subtree_control").write_text("+pids")
                return cls(path, max_pids, v1=parent == CGROUP_V1_PIDS)
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
        return None

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the group."""
        _write(self.procs, str(pid))

    @contextlib.contextmanager
    def spawning_thread(self) -> Iterator[bool]:
        """Put the calling thread in the group for the duration (cgroup v1 only).

        Yields True when the thread is inside: a child it starts then begins its life in the
        group, with no window before it is moved. The thread moves itself by writing ``0``,
        which the kernel does without the global lock that moving another process takes (that
        lock waits for an RCU grace period: milliseconds). Yields False where threads cannot
        be placed alone (cgroup v2): the caller moves the child by pid instead.
        """
        home = _thread_home() if self.v1 else None
        if home is None:
            yield False
            return
        try:
            _write(str(self.path / "tasks"), "0")
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            try:
                _write(home, "0")
            except OSError:  # the home group went away: the hierarchy's root takes us
                _write(str(CGROUP_V1_PIDS / "tasks"), "0")

    def pids(self) -> list[int]:
        """Processes currently in the group."""
        try:
            fd = os.open(self.procs, os.O_RDONLY)
        except OSError:
            return []
        try:
            text = os.read(fd, 1 << 16)
        except OSError:
            return []
        finally:
            os.close(fd)
        return [int(p) for p in text.split()]

    def charged(self) -> int:
        """Tasks the group still counts against its cap: its members, and exited ones that no
        parent has reaped yet (zombies leave ``cgroup.procs`` before they stop counting)."""
        try:
            return int((self.path / "pids.current").read_text())
        except (OSError, ValueError):
            return 0

    def kill_all(self, rounds: int = 50) -> bool:
        """SIGKILL every member until the group is empty (forks racing the kill included).

        Returns True when the group is empty."""
        me = os.getpid()
        for i in range(rounds):
            pids = self.pids()
            if not pids:
                return True
            if me in pids:  # one of our threads stands in the group: never kill ourselves
                return False
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.001 if i < 5 else 0.01)
        return not self.pids()

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


class GroupPool:
    """Empty groups kept for reuse (creating and removing one costs ~0.25 ms)."""

    def __init__(self, size: int = POOL_SIZE) -> None:
        self.size = size
        self._idle: dict[int, list[PidsGroup]] = {}
        self._lock = threading.Lock()

    def take(self, max_pids: int) -> PidsGroup | None:
        """An empty group capped at ``max_pids``, or None when no pids cgroup is writable."""
        with self._lock:
            idle = self._idle.get(max_pids)
            if idle:
                return idle.pop()
        return PidsGroup.create(max_pids)

    def give(self, group: PidsGroup) -> None:
        """Return ``group`` after its command: kept when it is empty and counts nothing, else
        removed (a zombie nobody reaped yet, such as a sandbox's orphaned init in a container
        whose PID 1 reaps lazily, would count against every later command of the group)."""
        if not group.kill_all() or group.charged():
            group.close()
            return
        with self._lock:
            idle = self._idle.setdefault(group.max_pids, [])
            if len(idle) < self.size:
                idle.append(group)
                return
        group.close()

    def clear(self) -> None:
        """Remove every idle group."""
        with self._lock:
            groups = [g for idle in self._idle.values() for g in idle]
            self._idle.clear()
        for group in groups:
            group.close()


POOL = GroupPool()
atexit.register(POOL.clear)


@functools.cache
def _thread_home() -> str | None:
    """The v1 pids ``tasks`` file of this process's group (where spawning threads go back)."""
    try:
        with open("/proc/thread-self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "pids" in controllers.split(","):
            tasks = CGROUP_V1_PIDS / rel.lstrip("/") / "tasks"
            return str(tasks) if tasks.exists() else None
    return None


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
    group = POOL.take(limits.max_processes)
    if group is not None:
        POOL.give(group)
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
