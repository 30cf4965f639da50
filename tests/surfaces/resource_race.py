"""A link-swap race against MCP resource reads (used by the tests and the benchmark).

The workspace ``w`` holds ``dir/secret.txt`` (inside) and ``lnk``, a symbolic link to a
directory outside the workspaces root whose ``secret.txt`` holds :data:`SENTINEL`. A swapper
exchanges ``dir`` and ``lnk`` as fast as it can (``renameat2(RENAME_EXCHANGE)`` through
ctypes, two renames where the kernel lacks it) while a real MCP client reads
``toolcards://workspace/w/dir/secret.txt``. A read whose text holds the sentinel escaped.

The swapper runs on the host (:func:`host_swapper`) or as an ExecTool job in the sandbox
(:func:`exec_swapper`), which plants the link itself, as a model with a shell would.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from support.scripted import wait_until
from surfaces.surface_support import write_config
from toolcards.governance import Identity

SENTINEL = "SENTINEL-FROM-OUTSIDE-THE-WORKSPACE"
URI = "toolcards://workspace/w/dir/secret.txt"
OUTSIDE_ONLY = "outside-only.txt"
"""A name only the outside directory has (a listing that shows it walked outside)."""
SCRIPT = ".swap.py"
"""The swapper's file name inside the workspace (hidden: never listed as a resource)."""
STOP = ".stop"
"""A file the swapper looks for to end (it also ends after its time budget)."""
READER = Identity("reader", "user", ["lead"])
POLICY = {"default_effect": "allow", "rules": []}

SWAPPER = r"""
import ctypes, os, sys, time
first, second, target, stop, seconds = sys.argv[1:6]
if target and not os.path.lexists(second):
    os.symlink(target, second)
libc = ctypes.CDLL(None, use_errno=True)
exchange = getattr(libc, "renameat2", None)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = first.encode(), second.encode()
if exchange is not None and exchange(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
    exchange = None
print("exchange" if exchange else "renames", flush=True)
deadline = time.monotonic() + float(seconds)
n = 0
while n % 4096 or not (os.path.exists(stop) or time.monotonic() > deadline):
    n += 1
    if exchange is not None:
        exchange(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
        continue
    try:
        os.rename(first, first + ".real"); os.rename(second, first)
        os.rename(first, second); os.rename(first + ".real", first)
    except OSError:
        pass
print("swaps", n, flush=True)
"""


@dataclass
class Tally:
    """What the raced reads saw: the inside file, a refusal (not found), another error, or
    the outside file (an escape)."""

    inside: int = 0
    refused: int = 0
    errors: int = 0
    escapes: int = 0

    @property
    def attempts(self) -> int:
        return self.inside + self.refused + self.errors + self.escapes


def prepare(base: Path, *, with_exec: bool = False) -> tuple[Path, Path, Path]:
    """The config, the workspace and the outside directory under ``base``."""
    root = base / "workspaces"
    ws = root / "w"
    (ws / "dir").mkdir(parents=True)
    (ws / "dir" / "secret.txt").write_text("inside\n", encoding="utf-8")
    (ws / SCRIPT).write_text(SWAPPER, encoding="utf-8")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SENTINEL}\n", encoding="utf-8")
    (outside / OUTSIDE_ONLY).write_text(f"{SENTINEL}\n", encoding="utf-8")
    policy = base / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    cards: list[dict[str, Any]] = [{"type": "WorkspaceTool", "workspace_id": "w"}]
    if with_exec:
        cards.append({"type": "ExecTool", "workspace_id": "w", "mode": "bwrap",
                      "timeout_s": 600, "allowed_commands": ["python3"]})  # fmt: skip
    config = write_config(base, local=READER, policy=policy, tools=[], cards=cards,
                          team_id="race")  # fmt: skip
    return config, ws, outside


def server_env(base: Path) -> dict[str, str]:
    return {"TOOLCARDS_WORKSPACES_ROOT": str(base / "workspaces")}


def _argv(first: str, second: str, link_to: Path | None, seconds: float) -> list[str]:
    return [SCRIPT, first, second, str(link_to or ""), STOP, str(seconds)]


@contextlib.contextmanager
def host_swapper(
    ws: Path,
    link_to: Path | None,
    first: str = "dir",
    second: str = "lnk",
    seconds: float = 600,
) -> Iterator[str]:
    """The swapper as a host process in ``ws``, exchanging ``first`` and ``second``
    (``second`` made a link to ``link_to`` first, when given); yields its method."""
    (ws / STOP).unlink(missing_ok=True)
    argv = [sys.executable, *_argv(first, second, link_to, seconds)]
    proc = subprocess.Popen(argv, cwd=ws, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait()


@dataclass
class SwapJob:
    """The ExecTool job running the swapper; ``output`` is its result once it stopped."""

    job_id: str
    output: str = ""


@contextlib.asynccontextmanager
async def exec_swapper(
    session: ClientSession, ws: Path, outside: Path, seconds: float = 500
) -> AsyncIterator[SwapJob]:
    """The swapper as an ExecTool job (``exec_start``) that plants ``lnk`` itself; yields the
    job once the link exists, and stops the job (and waits for its result) on exit."""
    (ws / STOP).unlink(missing_ok=True)
    started = await session.call_tool(
        "exec_start", {"command": " ".join(["python3", *_argv("dir", "lnk", outside, seconds)])}
    )
    text = "".join(getattr(c, "text", "") for c in started.content)
    assert not started.is_error and "job_id:" in text, text
    job = SwapJob(text.split("job_id:", 1)[1].split()[0])
    try:
        wait_until(lambda: os.path.lexists(ws / "lnk") or os.path.lexists(ws / "dir.real"))
        yield job
    finally:
        (ws / STOP).write_text("", encoding="utf-8")
        done = await session.call_tool("exec_result", {"job_id": job.job_id, "wait_s": 60})
        job.output = "".join(getattr(c, "text", "") for c in done.content)


async def raced_reads(
    session: ClientSession, count: int, uri: str = URI, in_flight: int = 1
) -> Tally:
    """``count`` reads of ``uri``, ``in_flight`` at a time, sorted by what they returned."""
    tally = Tally()

    async def read_one() -> None:
        try:
            read = await session.read_resource(uri)
        except MCPError as exc:
            if exc.error.code == -32002:
                tally.refused += 1
            else:
                tally.errors += 1
            return
        content = read.contents[0]
        text = getattr(content, "text", None)
        seen = text if text is not None else base64.b64decode(content.blob).decode(errors="replace")
        if SENTINEL in seen:
            tally.escapes += 1
        else:
            tally.inside += 1

    await in_parallel(count, read_one, in_flight)
    return tally


async def in_parallel(count: int, call: Callable[[], Awaitable[None]], in_flight: int) -> None:
    """``call()`` ``count`` times over one session, ``in_flight`` awaiting at once (a stdio
    round trip on a loaded machine is mostly waiting to be scheduled)."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    async with anyio.create_task_group() as group:
        for _ in range(max(1, min(in_flight, count))):
            group.start_soon(worker)
