"""Things the runner watches while a command runs: a cancel signal and workspace growth."""

from __future__ import annotations

import contextlib
import math
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

WATCH_INTERVAL_S = 0.1
"""How often the workspace's file system is sampled while a command runs."""
MTIME_SLACK_S = 2.0
"""Files modified this long before the start still count (coarse file system clocks)."""
MAX_NEW_ENTRIES = 100_000
"""Entries (files, directories, links: inodes) one command may add to the workspace before
it is killed (``disk``): empty files and short links take no block, only an inode, and a
full inode table fills the disk as surely as its bytes do."""
MAX_WALK_ENTRIES = 10 * MAX_NEW_ENTRIES
"""Entries one count of the workspace looks at (its directories twice, every walk it takes).
It counts only once the file system grew past a bound; a workspace it cannot count to the end
(more entries, deeper than :data:`MAX_WALK_DEPTH`, changed under every walk) cannot show the
command stayed under its cap, and is taken as over it."""
MAX_WALK_DEPTH = 256
"""Directory levels one count enters (it holds one descriptor per level)."""
MAX_HELD_LOOKS = 1 << 16
"""Descriptors and deleted mappings one count of the command's unnamed files looks at (over
every task of the command): past it the count stopped short, as a walk cut off does."""
MAX_MAPS_BYTES = 32 << 20
"""Bytes of memory maps (``/proc/<pid>/maps``) that count reads, over every process of the
command (a usual process's take 10-70 KB): past it the count stopped short. A job that mapped
a file with a 3,900-byte name 64,000 times in each of its processes had the host read 130-250
MB per process, 65 s past its timeout."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Cancel:
    """A one-shot cancel signal a selector can wait on (a pipe that becomes readable)."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self._lock = threading.Lock()
        self._set = False
        self._closed = False

    def fileno(self) -> int:
        """The descriptor that turns readable when cancelled."""
        return self._read

    @property
    def is_set(self) -> bool:
        """True once :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Cancel (idempotent, safe from any thread)."""
        with self._lock:
            if self._set or self._closed:
                self._set = True
                return
            self._set = True
            os.write(self._write, b"x")

    def close(self) -> None:
        """Release the descriptors."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for fd in (self._read, self._write):
                with contextlib.suppress(OSError):
                    os.close(fd)


class WorkspaceGrowth:
    """How much a command added to the workspace while it ran, checked cheaply and often.

    The cheap signal is the drop of free space and free inodes on the file system holding the
    workspace (``statvfs``, a few microseconds). Only when one passes its bound is the
    workspace walked (by descriptors, links never followed; bounded in entries, depth and
    time, see :func:`modified`) to add up the entries changed since the start, with the files
    the command's processes (``members``, set once it started) hold open or mapped with no
    name left (deleted while held, or ``O_TMPFILE``: no walk finds them, see :func:`held`).
    Growth neither explains is another writer's and discounted, so other writers on the same
    file system never get a command killed, but a second command writing into the same
    workspace at the same time is counted too. File systems that report no inode counts
    (btrfs allocates them as it goes) are bounded by the bytes only.
    """

    def __init__(self, workspace: Path, cap: int, max_entries: int | None = None) -> None:
        self.workspace = workspace
        self.cap = cap
        self.max_entries = MAX_NEW_ENTRIES if max_entries is None else max_entries
        self.started = time.time()
        self.base, self.base_entries = self._used()
        self.written = 0
        self.entries = 0
        self.uncounted = False
        self.members: Callable[[], Iterable[int]] = list
        """The command's processes now (set by the runner once it started)."""
        try:
            self.device = os.stat(workspace).st_dev
        except OSError:
            self.device = -1
        self.next_check = time.monotonic() + WATCH_INTERVAL_S

    def _used(self) -> tuple[int, int]:
        try:
            st = os.statvfs(self.workspace)
        except OSError:
            return 0, 0
        return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree

    def exceeded(self, deadline: float = math.inf) -> bool:
        """True when the command added more than ``cap`` bytes or ``max_entries`` entries, or
        when the workspace grew and could not be counted to the end. A count cut off by
        ``deadline`` (the command's, ``time.monotonic()``) decides nothing: the timeout does."""
        self.next_check = time.monotonic() + WATCH_INTERVAL_S
        used, entries = self._used()
        grown, made = used - self.base, entries - self.base_entries
        if grown <= self.cap and made <= self.max_entries:
            return False
        since, caps = self.started - MTIME_SLACK_S, (self.cap, self.max_entries)
        counted = modified(self.workspace, since, deadline, caps)
        if counted is None:
            self.uncounted = time.monotonic() < deadline
            return self.uncounted
        self.written, self.entries = counted
        unnamed = held(self.members(), self.device, deadline)
        if unnamed is None:
            self.uncounted = time.monotonic() < deadline
            return self.uncounted
        # never more than the growth the walk left unexplained (a file that was there before
        # the start and is deleted while held did not grow the file system)
        self.written += min(unnamed, max(0, grown - self.written))
        if self.written > self.cap or self.entries > self.max_entries:
            return True
        # growth elsewhere on the file system: discount it
        self.base += max(0, grown - self.written)
        self.base_entries += max(0, made - self.entries)
        return False

    def overrun(self) -> str:
        """What went past its bound, for the result's warning."""
        if self.uncounted:
            return (
                f"the workspace grew past its cap and could not be counted (over "
                f"{MAX_WALK_ENTRIES} entries or {MAX_WALK_DEPTH} levels, changing or "
                f"unreadable, or over {MAX_HELD_LOOKS} open files or {MAX_MAPS_BYTES} bytes "
                f"of memory maps)"
            )
        if self.written > self.cap:
            return f"wrote {self.written} bytes into the workspace (cap {self.cap})"
        return f"made {self.entries} entries in the workspace (cap {self.max_entries})"


def held(pids: Iterable[int], dev: int, deadline: float = math.inf) -> int | None:
    """Allocated bytes of the files on device ``dev`` that the processes ``pids`` hold open or
    mapped and that have no name left, each inode once; None past :data:`MAX_HELD_LOOKS`
    descriptors and mappings or :data:`MAX_MAPS_BYTES` bytes of memory maps, or at
    ``deadline``. Every task's descriptor table is read (a thread can unshare its own); a
    mapping whose file cannot be looked at (that takes CAP_SYS_ADMIN) counts its length."""
    looks, pids = _Looks(dev, deadline), list(pids)
    if all(looks.tasks(pid) for pid in pids) and all(looks.maps(pid) for pid in pids):
        return looks.bytes
    return None


class _Budget:
    """The looks left to one count, and its deadline (``time.monotonic()``)."""

    def __init__(self, looks: int, deadline: float) -> None:
        self.left, self.deadline = looks, deadline

    def spend(self) -> bool:
        """Take one look from the budget; False when it or the time ran out."""
        self.left -= 1
        return self.left >= 0 and time.monotonic() < self.deadline


class _Looks(_Budget):
    """One count of the unnamed files some processes hold, within its budget."""

    def __init__(self, dev: int, deadline: float) -> None:
        super().__init__(MAX_HELD_LOOKS, deadline)
        self.dev = dev
        self.maps_left = MAX_MAPS_BYTES
        self.seen: set[tuple[int, ...]] = set()
        self.bytes = 0

    def add(self, path: str) -> bool:
        """Count the file ``path`` (a /proc link) names when it has no name on ``dev``;
        False when it cannot be looked at (closed meanwhile, or not permitted)."""
        try:
            st = os.stat(path)
        except OSError:
            return False
        key = (st.st_dev, st.st_ino)
        if st.st_nlink == 0 and key[0] == self.dev and key not in self.seen:
            self.seen.add(key)
            self.bytes += st.st_blocks * 512
        return True

    def tasks(self, pid: int) -> bool:
        """Count the descriptors of every task of ``pid``; False when the budget ran out."""
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{pid}/task"):
                fds = f"/proc/{pid}/task/{tid}/fd"
                with contextlib.suppress(OSError):
                    for fd in os.listdir(fds):
                        if not self.spend():
                            return False
                        self.add(f"{fds}/{fd}")
        return True

    def maps(self, pid: int) -> bool:
        """Count the deleted files ``pid`` maps, read a line at a time within the bytes left
        and the deadline; False when the budget or the time ran out."""
        try:
            with open(f"/proc/{pid}/maps", "rb") as f:
                while line := f.readline(self.maps_left + 1):
                    self.maps_left -= len(line)
                    if self.maps_left < 0 or time.monotonic() >= self.deadline:
                        return False
                    if line.endswith(b" (deleted)\n") and not self.mapped(pid, line):
                        return False
        except OSError:
            pass  # gone
        return True

    def mapped(self, pid: int, line: bytes) -> bool:
        """Count the deleted file of one line of ``pid``'s maps; False when the budget ran
        out."""
        if not self.spend():
            return False
        span, _, offset, where, inode = line.split(maxsplit=5)[:5]
        major, minor = (int(part, 16) for part in where.split(b":"))
        if os.makedev(major, minor) != self.dev:
            return True
        if self.add(f"/proc/{pid}/map_files/{span.decode()}"):
            return True
        start, end = (int(part, 16) for part in span.split(b"-"))
        key = (self.dev, int(inode), int(offset, 16), end - start)
        if key[:2] not in self.seen and key not in self.seen:  # its length, each range once
            self.seen.add(key)
            self.bytes += end - start
        return True


def job_processes(root: int) -> list[int]:
    """``root`` and the processes below it or in its session (``root`` leads one): the
    command's processes when no cgroup holds them. One that left both (a new session, then
    orphaned) is not found."""
    children: dict[int, list[int]] = {}
    found = {root}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        if int(fields[3]) == root:
            found.add(int(entry))
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return sorted(found)


def modified(
    root: Path,
    since: float,
    deadline: float = math.inf,
    caps: tuple[float, float] = (math.inf, math.inf),
) -> tuple[int, int] | None:
    """Allocated bytes and number of the entries under ``root`` (itself included) changed at
    or after ``since``, each inode once, links not followed. Every kind counts: a directory or
    a symbolic link takes a block like a small file does (30,000 of them filled 118 MiB past a
    16 MiB cap when only regular files counted). Changed is by inode change time, which a job
    cannot set (a modification time set back with ``utime`` hid 40 MiB past a 2 MiB cap).

    The walk goes by descriptors: each directory is opened with ``O_NOFOLLOW | O_DIRECTORY``
    relative to its parent's descriptor and listed through it, so a directory the job swaps
    for a link while it is counted is never followed (by path, the host listed the host
    directory a link named).

    A walk is no snapshot: once it ends, every directory it listed is looked at again, and if
    one changed since it was listed (an entry made, removed or renamed into or out of it
    changes its inode change time), the workspace is walked again, within what is left of
    the budget, unless the walk counted past ``caps`` (bytes, entries) already: what it
    missed would change nothing (a job that moved its files into a directory listed already,
    from the one listed last, and back before the next walk, kept 160 MiB past a 16 MiB cap).
    A walk nothing changed under saw every directory as it was once it ended.

    None when the count stopped short: past :data:`MAX_WALK_ENTRIES` entries,
    :data:`MAX_WALK_DEPTH` levels, at ``deadline`` (``time.monotonic()``), at a directory
    turned into something else while counted, or at one the host may not read or look into
    (a job's chmod hid what it wrote there)."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0, 0
    except OSError:
        return None  # made unreadable (mode 0300): its growth cannot be seen
    left = MAX_WALK_ENTRIES
    try:
        while left > 0 and time.monotonic() < deadline:
            tally = _Tally(since, left, deadline)
            tally.add(os.fstat(top))
            if not tally.walk(top):
                return None
            if tally.bytes > caps[0] or tally.entries > caps[1] or tally.unchanged(top):
                return tally.bytes, tally.entries
            left = tally.left
        return None  # changed under every walk the budget and the time allowed
    finally:
        os.close(top)


class _Tally(_Budget):
    """One count of the changed entries below a workspace, within the entry budget, the
    depth and the deadline."""

    def __init__(self, since: float, looks: int, deadline: float) -> None:
        super().__init__(looks, deadline)
        self.since = since
        self.seen: set[tuple[int, int]] = set()
        self.bytes = self.entries = 0
        self.listed: list[tuple[int, str, tuple[int, int, int]]] = []
        """The directories listed, in the walk's order: depth, name, and device, inode and
        change time as it began listing them."""

    def add(self, st: os.stat_result) -> None:
        """Count a changed inode not counted yet (a hard-linked file once)."""
        if st.st_ctime < self.since:
            return
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):  # a file with one name is met once
            key = (st.st_dev, st.st_ino)
            if key in self.seen:
                return
            self.seen.add(key)
        self.bytes += st.st_blocks * 512
        self.entries += 1

    def walk(self, top: int) -> bool:
        """Count everything below the held directory ``top`` (left open; every descriptor
        opened on the way is closed, one per level held); False when stopped short."""
        stack = [(top, self._subdirs(top, 0, ""))]
        try:
            while stack:
                fd, subdirs = stack[-1]
                if subdirs is None:
                    return False
                name = next(subdirs, None)
                if name is None:
                    stack.pop()
                    if stack:
                        os.close(fd)
                    continue
                if len(stack) >= MAX_WALK_DEPTH:
                    return False
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    continue  # removed meanwhile: nothing left in it to count
                except OSError:
                    return False  # swapped for a link or a file meanwhile: never followed
                stack.append((child, self._subdirs(child, len(stack), name)))
        finally:
            for fd, _ in stack[1:]:
                os.close(fd)
        return True

    def unchanged(self, top: int) -> bool:
        """True when every directory listed below the held directory ``top`` (itself
        included) is still the one listed, not changed since it was listed; one look each,
        from the budget, by descriptors as the walk went."""
        way = [top]  # the descriptors down to the last directory looked at
        try:
            for depth, name, listed in self.listed:
                if not self.spend():
                    return False
                if depth:
                    while len(way) > depth:
                        os.close(way.pop())
                    way.append(os.open(name, _DIR_FLAGS, dir_fd=way[-1]))
                st = os.fstat(way[-1])
                if (st.st_dev, st.st_ino, st.st_ctime_ns) != listed:
                    return False
        except OSError:
            return False  # removed or swapped meanwhile
        finally:
            for fd in way[1:]:
                os.close(fd)
        return True

    def _subdirs(self, fd: int, depth: int, name: str) -> Iterator[str] | None:
        """Count the entries of the held directory ``fd`` (``name`` in its parent, ``depth``
        levels below the top), noting it as listed: the names of its subdirectories, or None
        when the entry budget or the deadline ran out, or when it or an entry of it could not
        be read (a job's directory readable but not searchable hid 400 MiB written past a 16
        MiB cap through the files it held open in it)."""
        dirs: list[str] = []
        try:
            own = os.fstat(fd)
            self.listed.append((depth, name, (own.st_dev, own.st_ino, own.st_ctime_ns)))
            with os.scandir(fd) as entries:
                for entry in entries:
                    if not self.spend():
                        return None
                    try:
                        st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # removed meanwhile: nothing left of it to count
                    if stat.S_ISDIR(st.st_mode):
                        dirs.append(entry.name)
                    self.add(st)
        except OSError:
            return None  # unreadable, or its entries not (mode 0600): their growth unseen
        return iter(dirs)
