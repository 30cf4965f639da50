"""The files the host hands toolcards by name (a config, the policy it names): read bounded,
and told apart from files an agent may have written.

A name given with ``-c`` or ``policy:`` may be a FIFO, a device (``/dev/zero`` was read until
memory ran out) or a file inside a workspace: :func:`read_bounded` reads only a regular UTF-8
file of at most :data:`MAX_BYTES`, and :func:`read_host_file` reads one real path and says
whether it lies where agents write (under a workspaces root, or a folder holding its marker),
so the file judged is the file read. That real path is read with no link followed on it, and
so is a policy that lies where agents write (:func:`where_agents_write`): a link planted on
the way after the check is refused, never followed to a host file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = [
    "DEFAULT_ROOT",
    "MAX_BYTES",
    "ROOTS_MARKER",
    "ROOT_ENV",
    "HostFile",
    "open_unlinked",
    "read_bounded",
    "read_host_file",
    "where_agents_write",
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
    A link planted on the real path after it was resolved (at its name or a folder's) is not
    followed. OSError and UnicodeDecodeError as :func:`read_bounded`."""
    real = Path(os.path.realpath(path))
    return HostFile(real, where_agents_write(real), read_bounded(real, what, follow_links=False))


def read_bounded(path: str | Path, what: str = "config file", *, follow_links: bool = True) -> str:
    """The text of the file at ``path``: OSError unless it is a regular file of at most
    :data:`MAX_BYTES` (never waiting on a FIFO), UnicodeDecodeError unless it is UTF-8;
    ``follow_links=False``: OSError when ``path`` itself or a folder on it is a link (each
    name is opened from its folder's descriptor without following links, so a folder swapped
    for a link while the path is walked is refused too)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(path, flags) if follow_links else open_unlinked(Path(path), flags, what)
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


_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
"""A folder on a walked path, held only to open the next name from (no read right needed)."""


def open_unlinked(path: Path, flags: int, what: str) -> int:
    """The file at ``path`` (made absolute) opened with ``flags``, walked from ``/`` one name at
    a time with ``O_NOFOLLOW``: OSError (ELOOP) naming the link when a name on it is one."""
    names = Path(os.path.abspath(path)).parts
    fd = os.open(names[0], _FOLDER)
    try:
        for name in names[1:-1]:
            child = _open_name(name, _FOLDER, fd, what)
            os.close(fd)
            fd = child
        return _open_name(names[-1], flags, fd, what)
    finally:
        os.close(fd)


def _open_name(name: str, flags: int, folder: int, what: str) -> int:
    """``name`` in the folder open as ``folder``, opened with ``flags`` and ``O_NOFOLLOW``."""
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=folder)
    except OSError:
        try:
            link = stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        if not link:
            raise
        raise OSError(
            errno.ELOOP, f"{name!r} on the {what}'s path is a link, which is not followed"
        ) from None


def where_agents_write(path: str | Path) -> bool:
    """Whether ``path`` (made absolute, links not resolved) lies where agents write: under the
    workspaces root (:func:`workspaces_root`) or a folder holding the marker the workspace
    tools leave in one."""
    path = Path(os.path.abspath(path))
    if path.is_relative_to(workspaces_root()):
        return True
    return any((parent / ROOTS_MARKER).is_file() for parent in path.parents)


def workspaces_root(root: str | Path | None = None) -> Path:
    """``root`` when given, else ``$TOOLCARDS_WORKSPACES_ROOT`` (default ``./workspaces``),
    absolute, symlinks resolved."""
    chosen = root if root else os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    return Path(chosen).expanduser().resolve()
