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

    The cheap signal is the drop of free space on the file system holding the workspace
    (``statvfs``, a few microseconds). Only when it passes ``cap`` is the workspace walked
    (without following links) to add up the files changed since the start; other writers
    on the same file system therefore never get a command killed, but a second command
    writing into the same workspace at the same time is counted too.
    """

    def __init__(self, workspace: Path, cap: int) -> None:
        self.workspace = workspace
        self.cap = cap
        self.started = time.time()
        self.base = self._used()
        self.written = 0
        self.next_check = time.monotonic() + WATCH_INTERVAL_S

    def _used(self) -> int:
        try:
            st = os.statvfs(self.workspace)
        except OSError:
            return 0
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def exceeded(self) -> bool:
        """True when the command wrote more than ``cap`` bytes into the workspace."""
        self.next_check = time.monotonic() + WATCH_INTERVAL_S
        grown = self._used() - self.base
        if grown <= self.cap:
            return False
        self.written = modified_bytes(self.workspace, self.started - MTIME_SLACK_S)
        if self.written > self.cap:
            return True
        self.base += grown - self.written  # growth elsewhere on the file system: discount it
        return False


def modified_bytes(root: Path, since: float) -> int:
    """Bytes of the regular files under ``root`` changed at or after ``since`` (no links): by
    their inode change time, which a job cannot set (a modification time set back with
    ``utime`` hid 40 MiB written past a 2 MiB cap)."""
    total = 0
    stack = [str(root)]
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
            elif stat.S_ISREG(st.st_mode) and st.st_ctime >= since:
                total += st.st_blocks * 512
    return total
