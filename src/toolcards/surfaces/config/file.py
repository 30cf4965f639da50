"""The config loader's file calls: a config file's text, and whether it lies in a workspace.

Kept apart from :mod:`toolcards.surfaces.config.model`, which knows where workspaces live: a module
that knows workspace roots makes no file calls of its own (``tests/test_containment_rule.py``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from toolcards.core.trust import ROOTS_MARKER

MAX_CONFIG_BYTES = 1 << 20
"""A config or policy file's size at most (they are a few kilobytes)."""


def read_config_text(path: Path, what: str = "config file") -> str:
    """The text of the config (or policy) file at ``path``: a regular file of at most
    :data:`MAX_CONFIG_BYTES`, UTF-8 (OSError or UnicodeDecodeError otherwise; a FIFO or a
    device such as ``/dev/zero`` is never read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, f"the {what} is not a regular file", str(path))
        chunks, size = [], 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                raise OSError(0, f"the {what} is larger than {MAX_CONFIG_BYTES} bytes", str(path))
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
