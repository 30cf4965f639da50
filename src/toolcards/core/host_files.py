"""The files the host hands toolcards by name (a config, the policy it names): read bounded,
and told apart from files an agent may have written.

A name given with ``-c`` or ``policy:`` may be a FIFO, a device (``/dev/zero`` was read until
memory ran out) or a file inside a workspace: :func:`read_bounded` reads only a regular UTF-8
file of at most :data:`MAX_BYTES`, and :func:`read_host_file` reads one real path and says
whether it lies where agents write (under a workspaces root, or a folder holding its marker),
so the file judged is the file read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "DEFAULT_ROOT",
    "MAX_BYTES",
    "ROOTS_MARKER",
    "ROOT_ENV",
    "HostFile",
    "read_bounded",
    "read_host_file",
    "workspaces_root",
]

ROOT_ENV = "TOOLCARDS_WORKSPACES_ROOT"
DEFAULT_ROOT = "./workspaces"

ROOTS_MARKER = ".toolcards-workspaces"
"""The (empty) file the workspace tools leave in a workspaces root: a file below it, which an
agent may have written, is never taken for the operator's (a config there grants no trust)."""

MAX_BYTES = 1 << 20
"""A config or policy file's size at most (they are a few kilobytes)."""


class HostFile:
    """A file the host named, read once (:func:`read_host_file`): its real path (the one
    judged and read), whether it lies where agents write (a config that is data) and its text.
    A plain class, not a NamedTuple: the forwarding CLI imports this module without ``typing``."""

    __slots__ = ("data", "path", "text")

    def __init__(self, path: Path, data: bool, text: str) -> None:
        self.path, self.data, self.text = path, data, text


def read_host_file(path: str | Path, what: str = "config file") -> HostFile:
    """The file at ``path``, resolved once and then judged and read by that real path: a link
    re-pointed between the read and the check (an agent's own config, then a name outside
    every workspaces root) made the file read an agent's and the file judged the operator's.
    A link planted at the real path after it was resolved is not followed (OSError ELOOP).
    OSError and UnicodeDecodeError as :func:`read_bounded`."""
    real = Path(os.path.realpath(path))
    data = _below_a_root(real, [workspaces_root()])
    return HostFile(real, data, read_bounded(real, what, follow_links=False))


def read_bounded(path: str | Path, what: str = "config file", *, follow_links: bool = True) -> str:
    """The text of the file at ``path``: OSError unless it is a regular file of at most
    :data:`MAX_BYTES` (never waiting on a FIFO), UnicodeDecodeError unless it is UTF-8;
    ``follow_links=False``: OSError when ``path`` itself is a link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, f"the {what} is not a regular file", str(path))
        chunks, size = [], 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                raise OSError(0, f"the {what} is larger than {MAX_BYTES} bytes", str(path))
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8")


def _below_a_root(real: Path, roots: Sequence[Path]) -> bool:
    """Whether the real path ``real`` (not resolved again) lies under a workspaces root (one
    of ``roots``, or a folder holding the marker the workspace tools leave in one): an agent
    may have written it."""
    if any(real.is_relative_to(root) for root in roots):
        return True
    return any((parent / ROOTS_MARKER).is_file() for parent in real.parents)


def workspaces_root(root: str | Path | None = None) -> Path:
    """``root`` when given, else ``$TOOLCARDS_WORKSPACES_ROOT`` (default ``./workspaces``),
    absolute, symlinks resolved."""
    chosen = root if root else os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    return Path(chosen).expanduser().resolve()
