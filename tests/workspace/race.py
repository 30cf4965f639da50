"""A symbolic-link swap race against the workspace tools (used by tests and the benchmark).

A separate process swaps ``d`` (a real directory inside the workspace) and ``d.link`` (a link
to a directory outside) as fast as it can, atomically when the kernel offers
``renameat2(RENAME_EXCHANGE)``, by two renames otherwise. Meanwhile the tools read, write,
search, list, edit, create directories in and delete under ``d/``. Every call whose effect or
output reached the outside directory counts as an escape.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolcards.core.errors import RetriableError

SWAPPER = r"""
import ctypes, os, sys
os.chdir(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
exchange = getattr(libc, "renameat2", None)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if exchange is not None and exchange(AT_FDCWD, b"d", AT_FDCWD, b"d.link", RENAME_EXCHANGE) != 0:
    exchange = None
print("exchange" if exchange else "renames", flush=True)
while True:
    if exchange is not None:
        exchange(AT_FDCWD, b"d", AT_FDCWD, b"d.link", RENAME_EXCHANGE)
        continue
    try:
        os.rename("d", "d.real"); os.rename("d.link", "d")
        os.rename("d", "d.link"); os.rename("d.real", "d")
    except OSError:
        pass
"""

SECRET = "TOP SECRET"


def prepare(ws: Path, outside: Path) -> None:
    """``ws/d/secret.txt`` (inside), ``outside/secret.txt`` (the secret), ``ws/d.link``."""
    (ws / "d").mkdir()
    (ws / "d" / "secret.txt").write_text("inside\n")
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "outside-only.txt").write_text(f"{SECRET}\n")
    (ws / "d.link").symlink_to(outside, target_is_directory=True)


def _outside_changed(outside: Path, before: set[str]) -> bool:
    """True when a call created, changed or removed anything outside (which is then undone)."""
    names = {p.name for p in outside.iterdir()}
    for extra in names - before:
        target = outside / extra
        target.rmdir() if target.is_dir() else target.unlink()
    secret = outside / "secret.txt"
    intact = secret.is_file() and secret.read_text() == f"{SECRET}\n"
    if not intact:
        secret.write_text(f"{SECRET}\n")
    return names != before or not intact


def _restore_inside(real_dir: int) -> None:
    """Put ``secret.txt`` back into the real directory (held by descriptor) after a delete."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with contextlib.suppress(FileExistsError):
        os.close(os.open("secret.txt", flags, 0o644, dir_fd=real_dir))


def _attempt(kind: str, tools: dict[str, Callable[..., Any]], n: int) -> str:
    if kind == "read":
        return str(tools["workspace_read"]("d/secret.txt"))
    if kind == "write":
        return str(tools["workspace_write"](f"d/new{n % 7}.txt", "planted\n"))
    if kind == "grep":
        return str(tools["workspace_grep"]("SECRET|inside", "d"))
    if kind == "list":
        return str(tools["workspace_list"]("d"))
    if kind == "glob":
        return str(tools["workspace_glob"]("*.txt", "d"))
    if kind == "edit":
        return str(tools["workspace_edit"]("d/secret.txt", "SECRET", "CHANGED"))
    if kind == "mkdir":
        return str(tools["workspace_mkdir"](f"d/made{n % 7}"))
    if kind == "delete":
        return str(tools["workspace_delete"]("d/secret.txt"))
    raise ValueError(kind)


def run_race(
    tools: dict[str, Callable[..., Any]],
    ws: Path,
    outside: Path,
    attempts: dict[str, int],
) -> tuple[Counter[str], str]:
    """Escapes per kind of call, and the swap method the swapper used."""
    before = {p.name for p in outside.iterdir()}
    escapes: Counter[str] = Counter()
    real_dir = os.open(ws / "d", os.O_RDONLY | os.O_DIRECTORY)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(ws)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert swapper.stdout is not None
        method = swapper.stdout.readline().strip()
        time.sleep(0.05)
        for kind, count in attempts.items():
            for n in range(count):
                try:
                    out = _attempt(kind, tools, n)
                except RetriableError as exc:
                    out = str(exc)
                if _outside_changed(outside, before) or SECRET in out or "outside-only" in out:
                    escapes[kind] += 1
                if kind == "delete":
                    _restore_inside(real_dir)
    finally:
        swapper.kill()
        swapper.wait()
        os.close(real_dir)
    return escapes, method
