"""Every Python block of README.md and docs/ runs as written: on its own, offline, in an empty
directory, in a fresh interpreter (bounded in time), without printing a warning. A block that
cannot (it needs a server, a cluster or names defined elsewhere) is marked with a
``<!-- fragment -->`` line right before its fence and is not run."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.launch import PYTHON as INTERPRETER

REPO = Path(__file__).resolve().parents[2]
FRAGMENT = "<!-- fragment -->"
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")
PYTHON = {"python", "py", "python3"}
SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TAVILY_API_KEY", "TOOLCARDS_WORKSPACES_ROOT")
MAX_FRAGMENT_SHARE = 0.25
"""Fragments stay rare: at most this share of the Python blocks."""
WARNING = re.compile(r"^.+:\d+: (\w*Warning): .*$", re.MULTILINE)
"""A warning as Python prints it (``file:line: Category: message``)."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    code: str
    fragment: bool

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def python_blocks(path: Path) -> list[Block]:
    """The Python blocks of a Markdown page, each with its line and fragment mark."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:  # blocks are skipped whole, so every fence seen here opens one
            i += 1
            continue
        indent = len(opening.group("indent"))
        end = i + 1
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        if opening.group("lang") in PYTHON:
            previous = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
            code = "\n".join(ln[indent:] for ln in lines[i + 1 : end]) + "\n"
            found.append(Block(path, i + 1, code, previous == FRAGMENT))
        i = end + 1
    return found


ALL = [block for page in pages() for block in python_blocks(page)]
RUNNABLE = [block for block in ALL if not block.fragment]


def test_fragments_stay_rare() -> None:
    fragments = [b.name for b in ALL if b.fragment]
    assert len(fragments) <= MAX_FRAGMENT_SHARE * len(ALL), fragments


def test_every_fragment_mark_sits_right_before_a_python_block() -> None:
    marked = {(b.path, b.line) for b in ALL if b.fragment}
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() != FRAGMENT:
                continue
            following = next(j for j in range(i + 1, len(lines)) if lines[j].strip())
            assert (page, following + 1) in marked, f"{page}:{i + 1}: a mark without a block"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_block_runs_on_its_own(block: Block, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(block.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in SECRETS}
    env["PYTHONPATH"] = str(REPO / "src")
    env["HOME"] = str(tmp_path)  # nothing of the user's is read or written
    done = subprocess.run(
        [INTERPRETER, script.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
    )
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr[-3000:]}"
    warned = [found.group(0) for found in WARNING.finditer(done.stderr)]
    assert not warned, f"{block.name} printed warnings:\n" + "\n".join(warned)
