"""Helpers for tests that run toolcards the way a person at a terminal does: a command on a
pseudo-terminal of a given width, a team store held open by another process, and whether the
MCP Inspector is installed. Importable as ``support.newcomer``."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

INSPECTOR = "@modelcontextprotocol/inspector"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

_HOLD = textwrap.dedent(
    """
    import sys, time
    from toolcards.runtime import Team
    team = Team(sys.argv[2], sys.argv[1])
    print("held", flush=True)
    time.sleep(300)
    """
)


def on_a_terminal(
    args: list[str], cwd: Path, env: dict[str, str], columns: int = 80, timeout: float = 240
) -> str:
    """Run ``args`` with stdout and stderr on a pseudo-terminal ``columns`` wide; the text it
    wrote, without colour codes."""
    master, slave = pty.openpty()
    env = {**env, "COLUMNS": str(columns), "LINES": "50"}
    proc = subprocess.Popen(args, cwd=cwd, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    try:
        while select.select([master], [], [], timeout)[0]:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return ANSI.sub("", text)


@contextlib.contextmanager
def held_store(store: Path, team_id: str) -> Iterator[Path]:
    """``store`` opened by the team ``team_id`` in another process, until the block ends."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(store), team_id], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield store
    finally:
        holder.kill()
        holder.wait(timeout=30)


@functools.cache  # asked at import by several test modules; `npm root -g` takes a second
def inspector_package() -> Path | None:
    """The MCP Inspector's globally installed package folder, or None."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("npx") is None:
        return None
    root = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=30)
    folder = Path(root.stdout.strip()) / INSPECTOR
    return folder if folder.is_dir() else None


def inspector_missing() -> str | None:
    """Why the MCP Inspector cannot be run here, or None when it can."""
    if shutil.which("npx") is None:
        return "npx is not installed"
    if inspector_package() is None:
        return f"{INSPECTOR} is not installed (npm install -g {INSPECTOR})"
    return None


def inspector_command() -> list[str]:
    """The command npx runs for the Inspector (node and the package's bin script), without
    npx's own Node process (about 0.6 s of CPU a run)."""
    folder = inspector_package()
    assert folder is not None, inspector_missing()
    bins = json.loads((folder / "package.json").read_text(encoding="utf-8"))["bin"]
    script = bins if isinstance(bins, str) else next(iter(bins.values()))
    return [shutil.which("node") or "node", str(folder / script)]
