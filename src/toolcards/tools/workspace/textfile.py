"""Text files as the tools see them: LF inside, the file's own line endings on disk."""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from toolcards.core.errors import RetriableError

MAX_TEXT_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class TextDoc:
    """A decoded text file: ``text`` uses ``\\n``; ``crlf`` says the file used ``\\r\\n``."""

    text: str
    crlf: bool = False
    bom: bool = False

    @property
    def final_newline(self) -> bool:
        return self.text.endswith("\n")

    def encode(self, text: str) -> bytes:
        """``text`` (LF) in this file's line-ending style."""
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        return ("\ufeff" if self.bom else "").encode("utf-8") + text.encode("utf-8")


def is_binary(data: bytes) -> bool:
    """True for data that is not text (a NUL byte in the first 8 KiB)."""
    return b"\x00" in data[:8192]


def decode(data: bytes, rel: str) -> TextDoc:
    """Decode UTF-8 text; a file whose newlines are all ``\\r\\n`` is normalised to LF."""
    if is_binary(data):
        raise RetriableError(f"{rel} is a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RetriableError(f"{rel} is not UTF-8 text") from None
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    crlf_count = text.count("\r\n")
    if crlf_count and crlf_count == text.count("\n"):
        return TextDoc(text.replace("\r\n", "\n"), crlf=True, bom=bom)
    return TextDoc(text, bom=bom)


def load(path: Path, rel: str) -> tuple[TextDoc, bytes]:
    """Read and decode a text file; returns the document and the raw bytes."""
    if path.is_dir():
        raise RetriableError(f"{rel} is a directory; use workspace_list")
    if not path.exists():
        raise RetriableError(f"file not found: {rel}")
    if path.stat().st_size > MAX_TEXT_BYTES:
        raise RetriableError(f"{rel} is larger than {MAX_TEXT_BYTES // (1024 * 1024)} MiB")
    data = path.read_bytes()
    return decode(data, rel), data


def keep_style(old: TextDoc, new_text: str) -> str:
    """``new_text`` (LF) with the old file's final-newline convention."""
    new_text = new_text.replace("\r\n", "\n")
    if old.final_newline and new_text and not new_text.endswith("\n"):
        return new_text + "\n"
    if not old.final_newline and old.text and new_text.endswith("\n"):
        return new_text.rstrip("\n") if new_text.strip("\n") else new_text
    return new_text


@dataclass
class Transaction:
    """File writes and deletions applied all together, or not at all.

    Every new content is first written to a temporary file next to its target; only then are
    the targets replaced one by one. If any step fails, the files already changed get their
    old bytes back, created files and directories are removed, and the error propagates.
    """

    writes: dict[Path, bytes] = field(default_factory=dict)
    deletes: list[Path] = field(default_factory=list)

    def write(self, path: Path, data: bytes) -> None:
        self.writes[path] = data

    def delete(self, path: Path) -> None:
        self.deletes.append(path)

    def commit(self) -> None:
        created_dirs: list[Path] = []
        temps: dict[Path, Path] = {}
        originals: dict[Path, bytes | None] = {}
        done: list[Path] = []
        try:
            for path in [*self.writes, *self.deletes]:
                originals[path] = path.read_bytes() if path.is_file() else None
            for path, data in self.writes.items():
                created_dirs.extend(_make_parents(path.parent))
                temps[path] = _temp_write(path, data)
            for path in self.writes:
                os.replace(temps[path], path)
                del temps[path]
                done.append(path)
            for path in self.deletes:
                if path.exists():
                    path.unlink()
                done.append(path)
        except BaseException:
            for temp in temps.values():
                with contextlib.suppress(OSError):
                    temp.unlink()
            for path in reversed(done):
                with contextlib.suppress(OSError):
                    _restore(path, originals.get(path))
            for directory in reversed(created_dirs):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise


def write_atomic(path: Path, data: bytes) -> None:
    """Write one file atomically (parents created)."""
    txn = Transaction()
    txn.write(path, data)
    txn.commit()


def _make_parents(directory: Path) -> list[Path]:
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir()
    return list(reversed(missing))


def _temp_write(path: Path, data: bytes) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if path.exists():
            os.chmod(name, path.stat().st_mode & 0o7777)
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def _restore(path: Path, original: bytes | None) -> None:
    if original is None:
        if path.exists():
            path.unlink()
        return
    os.replace(_temp_write(path, original), path)
