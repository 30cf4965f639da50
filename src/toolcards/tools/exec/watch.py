"""Things the runner watches while a command runs: a cancel signal and workspace growth."""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from pathlib import Path

WATCH_INTERVAL_S = 0.1
"""How often the workspace's file system is sampled while a command runs."""
MTIME_SLACK_S = 2.0
"""Files modified this long before the start still count (coarse file system clocks)."""
MAX_NEW_ENTRIES = 100_000
"""Entries (files, directories, links: inodes) one command may add to the workspace before
it is killed (``disk``): empty files and short links take no block, only an inode, and a
full inode table fills the disk as surely as its bytes do."""


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
    workspace walked (without following links) to add up the entries changed since the start;
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
        self.next_check = time.monotonic() + WATCH_INTERVAL_S

    def _used(self) -> tuple[int, int]:
        try:
            st = os.statvfs(self.workspace)
        except OSError:
            return 0, 0
        return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree

    def exceeded(self) -> bool:
        """True when the command added more than ``cap`` bytes or ``max_entries`` entries."""
        self.next_check = time.monotonic() + WATCH_INTERVAL_S
        used, entries = self._used()
        grown, made = used - self.base, entries - self.base_entries
        if grown <= self.cap and made <= self.max_entries:
            return False
        self.written, self.entries = modified(self.workspace, self.started - MTIME_SLACK_S)
        if self.written > self.cap or self.entries > self.max_entries:
            return True
        # growth elsewhere on the file system: discount it
        self.base += max(0, grown - self.written)
        self.base_entries += max(0, made - self.entries)
        return False

    def overrun(self) -> str:
        """What went past its bound, for the result's warning."""
        if self.written > self.cap:
            return f"wrote {self.written} bytes into the workspace (cap {self.cap})"
        return f"made {self.entries} entries in the workspace (cap {self.max_entries})"


def modified(root: Path, since: float) -> tuple[int, int]:
    """Allocated bytes and number of the entries under ``root`` (itself included) changed at
    or after ``since``, each inode once, links not followed. Every kind counts: a directory or
    a symbolic link takes a block like a small file does (30,000 of them filled 118 MiB past a
    16 MiB cap when only regular files counted). Changed is by inode change time, which a job
    cannot set (a modification time set back with ``utime`` hid 40 MiB past a 2 MiB cap)."""
    total = count = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    with contextlib.suppress(OSError):
        total, count = _counted(os.lstat(root), since, seen)
    while stack:
        path = stack.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)
            size, new = _counted(st, since, seen)
            total, count = total + size, count + new
    return total, count


def _counted(st: os.stat_result, since: float, seen: set[tuple[int, int]]) -> tuple[int, int]:
    """(bytes, 1) for a changed inode not counted yet, else (0, 0) (hard links count once)."""
    key = (st.st_dev, st.st_ino)
    if st.st_ctime < since or key in seen:
        return 0, 0
    seen.add(key)
    return st.st_blocks * 512, 1
