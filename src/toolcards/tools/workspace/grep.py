"""workspace_grep: ripgrep when installed, an identical pure-Python search otherwise."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.globs import glob_matches, sort_key, walk_files
from toolcards.tools.workspace.textfile import is_binary

MAX_LINE_CHARS = 300
RG_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class GrepHit:
    path: str
    line: int
    text: str

    def render(self) -> str:
        text = self.text
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + " [...]"
        return f"{self.path}:{self.line}:{text}"


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Validate a model's regex (same check for both engines)."""
    if not pattern:
        raise RetriableError("pattern is empty")
    if "\x00" in pattern or "\n" in pattern:
        raise RetriableError("pattern may not contain NUL or newline characters")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RetriableError(f"invalid regex pattern {pattern!r}: {exc}") from None


def find_rg() -> str | None:
    """The ripgrep executable on PATH, if any."""
    return shutil.which("rg")


def rg_argv(rg: str, pattern: str, target: str, include: str, limit: int) -> list[str]:
    """ripgrep's argv: every model value is an option *value* or follows ``--``."""
    argv = [
        rg,
        "--no-config",
        "--no-heading",
        "--with-filename",
        "--line-number",
        "--null",
        "--color=never",
        "--no-messages",
        "--no-ignore",
        "--sort=path",
        f"--max-count={limit + 1}",
    ]
    if include:
        argv.append(f"--glob={include}")
    argv.append(f"--regexp={pattern}")
    argv.append("--")
    if target:
        argv.append(target)
    return argv


def grep_rg(
    rg: str, root: Path, pattern: str, target: str, include: str, limit: int
) -> list[GrepHit]:
    """Run ripgrep in ``root``; stops reading after ``limit + 1`` hits."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIPGREP")}
    hits: list[GrepHit] = []
    with subprocess.Popen(
        rg_argv(rg, pattern, target, include, limit),
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            hit = _parse_rg_line(raw)
            if hit is not None:
                hits.append(hit)
            if len(hits) > limit:
                proc.kill()
                break
        try:
            _, err = proc.communicate(timeout=RG_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise RetriableError("search timed out; narrow the path or pattern") from None
        message = err.decode("utf-8", "replace").strip()
        if proc.returncode == 2 and not hits and message:
            detail = " ".join(message.splitlines()[:6])
            raise RetriableError(f"search failed: {detail}")
    hits.sort(key=lambda h: (sort_key(h.path), h.line))
    return hits


def _parse_rg_line(raw: bytes) -> GrepHit | None:
    path, sep, rest = raw.partition(b"\x00")
    if not sep:
        return None
    number, sep, text = rest.partition(b":")
    if not sep or not number.isdigit():
        return None
    rel = path.decode("utf-8", "replace")
    rel = rel[2:] if rel.startswith("./") else rel
    line = text.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
    return GrepHit(rel, int(number), line)


def grep_python(
    root: Path, regex: re.Pattern[str], start: Path, include: str, limit: int
) -> list[GrepHit]:
    """The same search in Python: same files (no hidden, no links, no binaries), same order."""
    hits: list[GrepHit] = []
    filtered = bool(include) and start.is_dir()  # like ripgrep: a named file is searched
    for rel, path in walk_files(root, start):
        if filtered and not glob_matches(include, rel):
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if is_binary(data) or b"\x00" in data:
            continue
        lines = data.decode("utf-8", "replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            line = line.rstrip("\r")
            if regex.search(line):
                hits.append(GrepHit(rel, number, line))
                if len(hits) > limit:
                    return hits
    return hits


def render(hits: list[GrepHit], limit: int) -> str:
    """Hits as ``path:line:text`` lines, capped, with a truncation marker."""
    if not hits:
        return "No matches found."
    lines = [h.render() for h in hits[:limit]]
    if len(hits) > limit:
        lines.append(f"[... more than {limit} matches; narrow the pattern, path or include]")
    return "\n".join(lines)
