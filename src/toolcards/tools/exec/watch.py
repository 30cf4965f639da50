"""Things the runner watches while a command runs: a cancel signal and workspace growth."""

from __future__ import annotations

import contextlib
import math
import os
import stat
import threading
import time
from collections.abc import Iterator
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
"""Entries one count of the workspace looks at. It counts only once the file system grew past
a bound; a workspace it cannot count to the end (more entries, deeper than
:data:`MAX_WALK_DEPTH`, a directory swapped while counted) cannot show the command stayed
under its cap, and is taken as over it."""
MAX_WALK_DEPTH = 256
"""Directory levels one count enters (it holds one descriptor per level)."""
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
    time, see :func:`modified`) to add up the entries changed since the start;
    other writers on the same file system therefore never get a command killed, but a second
    command writing into the same workspace at the same time is counted too. File systems that
    report no inode counts (btrfs allocates them as it goes) are bounded by the bytes only.
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
        counted = modified(self.workspace, self.started - MTIME_SLACK_S, deadline)
        if counted is None:
            self.uncounted = time.monotonic() < deadline
            return self.uncounted
        self.written, self.entries = counted
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
                f"{MAX_WALK_ENTRIES} entries or {MAX_WALK_DEPTH} levels, or changing)"
            )
        if self.written > self.cap:
            return f"wrote {self.written} bytes into the workspace (cap {self.cap})"
        return f"made {self.entries} entries in the workspace (cap {self.max_entries})"


def modified(root: Path, since: float, deadline: float = math.inf) -> tuple[int, int] | None:
    """Allocated bytes and number of the entries under ``root`` (itself included) changed at
    or after ``since``, each inode once, links not followed. Every kind counts: a directory or
    a symbolic link takes a block like a small file does (30,000 of them filled 118 MiB past a
    16 MiB cap when only regular files counted). Changed is by inode change time, which a job
    cannot set (a modification time set back with ``utime`` hid 40 MiB past a 2 MiB cap).

    The walk goes by descriptors: each directory is opened with ``O_NOFOLLOW | O_DIRECTORY``
    relative to its parent's descriptor and listed through it, so a directory the job swaps
    for a link while it is counted is never followed (by path, the host listed the host
    directory a link named). None when the count stopped short: past
    :data:`MAX_WALK_ENTRIES` entries, :data:`MAX_WALK_DEPTH` levels, at ``deadline``
    (``time.monotonic()``), or at a directory turned into something else while counted."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return 0, 0
    tally = _Tally(since, deadline)
    tally.add(os.fstat(top))
    if not tally.walk(top):
        return None
    return tally.bytes, tally.entries


class _Tally:
    """One count of the changed entries below a workspace, within the entry budget, the
    depth and the deadline."""

    def __init__(self, since: float, deadline: float) -> None:
        self.since, self.deadline = since, deadline
        self.left = MAX_WALK_ENTRIES
        self.seen: set[tuple[int, int]] = set()
        self.bytes = self.entries = 0

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
        """Count everything below the held directory ``top`` (closed here, with every
        descriptor opened on the way; one per level is held); False when stopped short."""
        stack = [(top, self._subdirs(top))]
        try:
            while stack:
                fd, subdirs = stack[-1]
                if subdirs is None:
                    return False
                name = next(subdirs, None)
                if name is None:
                    stack.pop()
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
                stack.append((child, self._subdirs(child)))
        finally:
            for fd, _ in stack:
                os.close(fd)
        return True

    def _subdirs(self, fd: int) -> Iterator[str] | None:
        """Count the entries of the held directory ``fd``: the names of its subdirectories,
        or None when the entry budget or the deadline ran out."""
        dirs: list[str] = []
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    self.left -= 1
                    if self.left < 0 or time.monotonic() >= self.deadline:
                        return None
                    try:
                        st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        dirs.append(entry.name)
                    self.add(st)
        except OSError:
            pass  # unreadable: what was listed is counted
        return iter(dirs)
