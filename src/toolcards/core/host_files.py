"""The files the host hands toolcards by name (a config, the policy it names): read bounded,
and told apart from files an agent may have written.

A name given with ``-c`` or ``policy:`` may be a FIFO, a device (``/dev/zero`` was read until
memory ran out) or a file inside a workspace: :func:`read_bounded` reads only a regular UTF-8
file of at most :data:`MAX_BYTES`, :func:`inside_workspaces` says whether it lies where
agents write (:func:`written_by_agents`: under the workspaces root of this process).
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
    "inside_workspaces",
    "read_bounded",
    "workspaces_root",
    "written_by_agents",
]

ROOT_ENV = "TOOLCARDS_WORKSPACES_ROOT"
DEFAULT_ROOT = "./workspaces"

ROOTS_MARKER = ".toolcards-workspaces"
"""The (empty) file the workspace tools leave in a workspaces root: a file below it, which an
agent may have written, is never taken for the operator's (a config there grants no trust)."""

MAX_BYTES = 1 << 20
"""A config or policy file's size at most (they are a few kilobytes)."""


def read_bounded(path: str | Path, what: str = "config file") -> str:
    """The text of the file at ``path``: OSError unless it is a regular file of at most
    :data:`MAX_BYTES` (never waiting on a FIFO), UnicodeDecodeError unless it is UTF-8."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
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


def inside_workspaces(path: Path, roots: Sequence[Path] = ()) -> bool:
    """Whether ``path`` lies under a workspaces root (one of ``roots``, or a folder holding
    the marker the workspace tools leave in one): an agent may have written it."""
    where = path.resolve()
    if any(where.is_relative_to(root) for root in roots):
        return True
    return any((parent / ROOTS_MARKER).is_file() for parent in where.parents)


def workspaces_root(root: str | Path | None = None) -> Path:
    """``root`` when given, else ``$TOOLCARDS_WORKSPACES_ROOT`` (default ``./workspaces``),
    absolute, symlinks resolved."""
    chosen = root if root else os.environ.get(ROOT_ENV) or DEFAULT_ROOT
    return Path(chosen).expanduser().resolve()


def written_by_agents(path: Path) -> bool:
    """Whether the file at ``path`` lies where agents write: under this process's workspaces
    root (:func:`workspaces_root`) or a folder holding the marker (a config there is data)."""
    return inside_workspaces(path, [workspaces_root()])
