"""Containment: every model-supplied path or pattern is checked before any filesystem access."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from toolcards.core.errors import RetriableError

MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
CACHE_DIR_NAME = ".toolcards-cache"
"""Hidden sibling of the workspaces under the workspaces root (never inside a workspace)."""


class Contained:
    """A workspace directory and the rules for turning model paths into real paths inside it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def cache_dir(self, kind: str) -> Path:
        """``<workspaces root>/.toolcards-cache/<kind>/<workspace id>``: outside every listing."""
        return self.root.parent / CACHE_DIR_NAME / kind / self.root.name

    def resolve(self, path: str, *, allow_root: bool = False) -> Path:
        """The real (symlink-free) path of ``path`` inside the workspace, or RetriableError."""
        text = _check_text(path, "path")
        if text in ("", "."):
            if not allow_root:
                raise RetriableError("a path to a file inside the workspace is required")
            return self.root
        _check_relative(text, "path")
        resolved = Path(os.path.realpath(self.root / text))
        if not self.contains(resolved):
            raise RetriableError(
                f"path {path!r} leads outside the workspace (through a symbolic link); "
                "use a path whose real location is inside the workspace"
            )
        if resolved == self.root and not allow_root:
            raise RetriableError(f"path {path!r} is the workspace itself, not a file")
        return resolved

    def contains(self, real: Path) -> bool:
        """True when the already-resolved ``real`` is the workspace or lies inside it."""
        return real == self.root or self.root in real.parents

    def rel(self, real: Path) -> str:
        """``real`` relative to the workspace, with ``/`` separators (``.`` for the root)."""
        return real.relative_to(self.root).as_posix() or "."

    def inside_link(self, entry: Path) -> bool:
        """For a symbolic link found while walking: True when its target stays inside."""
        try:
            return self.contains(Path(os.path.realpath(entry)))
        except OSError:
            return False


def check_pattern(pattern: str, what: str) -> str:
    """A glob or include pattern: relative, no ``..`` part, no NUL; returns it stripped."""
    text = _check_text(pattern, what)
    if text.startswith(("!", "-")):
        raise RetriableError(f"{what} {pattern!r} may not start with '!' or '-'")
    _check_relative(text, what)
    for alternative in _brace_parts(text):
        if alternative.startswith(("/", "~")):
            raise RetriableError(f"{what} {pattern!r} may not contain an absolute part")
        if ".." in PurePosixPath(alternative).parts:
            raise RetriableError(f"{what} {pattern!r} may not contain '..'")
    return text


def check_relative_path(path: str) -> str:
    """A configured relative file path (no ``..``, not absolute, not empty); returns it."""
    text = _check_text(path, "path")
    if text in ("", "."):
        raise RetriableError("a file path is required")
    _check_relative(text, "path")
    return text


def _check_text(value: str, what: str) -> str:
    if not isinstance(value, str):
        raise RetriableError(f"{what} must be a string")
    if "\x00" in value:
        raise RetriableError(f"{what} contains a NUL byte")
    text = value.strip()
    if len(text) > MAX_PATH_CHARS:
        raise RetriableError(f"{what} is longer than {MAX_PATH_CHARS} characters")
    for name in text.split("/"):
        if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
            raise RetriableError(f"{what} has a name longer than {MAX_NAME_BYTES} bytes")
    return text


def _check_relative(text: str, what: str) -> None:
    if text.startswith(("/", "~", "\\")) or (len(text) > 1 and text[1] == ":"):
        raise RetriableError(
            f"{what} {text!r} is absolute; use a path relative to the workspace (e.g. 'src/a.py')"
        )
    if ".." in PurePosixPath(text.replace("\\", "/")).parts:
        raise RetriableError(f"{what} {text!r} may not contain '..'; stay inside the workspace")


def _brace_parts(text: str) -> list[str]:
    """The pattern with every ``{`` and ``,`` treated as a separator (for the ``..`` check)."""
    flat = text
    for ch in "{},":
        flat = flat.replace(ch, "\n")
    return [p for p in flat.split("\n") if p] + [text]
