"""Text files as the tools see them: LF inside, the file's own line endings on disk.

Files are read from descriptors the containment walk opened, and written next to their target
inside a held directory descriptor, so no path is looked up twice.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass, field

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.paths import Spot, make_dirs, undo_dirs

MAX_TEXT_BYTES = 20 * 1024 * 1024
_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TextDoc:
    """A decoded text file: ``text`` uses ``\\n``; ``crlf`` says the file used ``\\r\\n``;
    ``encoding`` is ``utf-8``, or ``cp1252``/``latin-1`` for a file that is not UTF-8."""

    text: str
    crlf: bool = False
    bom: bool = False
    encoding: str = "utf-8"

    @property
    def final_newline(self) -> bool:
        return self.text.endswith("\n")

    def as_on_disk(self) -> TextDoc:
        """The same file with its text as on disk (CR LF line ends kept, encoded as is)."""
        if not self.crlf:
            return self
        return TextDoc(self.text.replace("\n", "\r\n"), bom=self.bom, encoding=self.encoding)

    def encode(self, text: str, rel: str) -> bytes:
        """``text`` (LF) in this file's line-ending style and encoding; RetriableError when
        the encoding cannot hold a character of it (the file is not changed)."""
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        try:
            data = text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            line = text.count("\n", 0, exc.start) + 1
            char = text[exc.start]
            if self.encoding == "utf-8":
                raise RetriableError(
                    f"{rel}: the new text has {char!r} (line {line}), which is not a character "
                    "(a lone surrogate); send valid text"
                ) from None
            name = _ENCODING_NAMES[self.encoding]
            raise RetriableError(
                f"{rel} is {name} text (not UTF-8), and the new text has {char!r} (line {line}), "
                f"which {name} cannot hold; use only characters {name} has (or delete the file "
                "and write it anew as UTF-8)"
            ) from None
        return ("\ufeff".encode() if self.bom else b"") + data


_ENCODING_NAMES = {"cp1252": "Windows-1252", "latin-1": "Latin-1"}
_CONTROL = bytes(c for c in range(32) if c not in b"\t\n\v\f\r\x1b")


def is_binary(data: bytes) -> bool:
    """True for data that is not text (a NUL byte in the first 8 KiB)."""
    return b"\x00" in data[:8192]


def decode(data: bytes, rel: str) -> TextDoc:
    """Decode UTF-8 text, else one-byte text (Windows-1252 when every byte is one of its
    characters, else Latin-1: either gives back the same bytes when written unchanged); a file
    whose newlines are all ``\\r\\n`` is normalised to LF."""
    if is_binary(data):
        raise RetriableError(f"{rel} is a binary file, not text")
    encoding = "utf-8"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        sample = data[: 1 << 16]
        if b"\x00" in data or 100 * sum(sample.count(c) for c in _CONTROL) > len(sample):
            raise RetriableError(f"{rel} is a binary file, not text") from None
        try:
            text, encoding = data.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            text, encoding = data.decode("latin-1"), "latin-1"
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    crlf_count = text.count("\r\n")
    if crlf_count and crlf_count == text.count("\n"):
        return TextDoc(text.replace("\r\n", "\n"), crlf=True, bom=bom, encoding=encoding)
    return TextDoc(text, bom=bom, encoding=encoding)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def regular_fd(spot: Spot, *, cap: int, allow_hardlinks: bool, what: str = "a file") -> int:
    """The opened descriptor of a regular file within ``cap`` bytes; RetriableError else.

    Checks come from ``fstat`` on the descriptor itself: a FIFO or device is never read, a file
    with other names (hard links) is refused unless allowed, and the size is checked before
    any byte is read.
    """
    rel, st = spot.rel, spot.st
    if st is None:
        raise RetriableError(f"file not found: {rel}")
    if stat.S_ISDIR(st.st_mode):
        raise RetriableError(f"{rel} is a directory; use workspace_list")
    if not stat.S_ISREG(st.st_mode):
        raise RetriableError(
            f"{rel} is {_kind(st.st_mode)}; only regular files and directories can be used"
        )
    if spot.fd is None:
        raise RetriableError(f"{rel} changed while it was being opened; try again")
    if st.st_nlink > 1 and not allow_hardlinks:
        raise RetriableError(
            f"{rel} has {st.st_nlink} hard links (other names that may lie outside the "
            "workspace); it is not read unless the card sets allow_hardlinks"
        )
    if st.st_size > cap:
        raise RetriableError(f"{rel} is {_size(st.st_size)}, over the {_size(cap)} cap for {what}")
    return spot.fd


def read_fd(fd: int, cap: int, rel: str) -> bytes:
    """Every byte of an opened regular file, refusing one that grew past ``cap`` meanwhile.

    One ``pread`` of the size ``fstat`` gives (plus one byte, to see the end) is the usual
    cost; a file that grows while it is read is read on, up to the cap.
    """
    size = os.fstat(fd).st_size
    data = os.pread(fd, min(size, cap) + 1, 0)
    if len(data) <= size:
        return data
    chunks = [data]
    total = len(data)
    while True:
        if total > cap:
            raise RetriableError(f"{rel} is over the {_size(cap)} cap")
        chunk = os.pread(fd, _CHUNK, total)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)


def load(
    spot: Spot, *, cap: int = MAX_TEXT_BYTES, allow_hardlinks: bool = False
) -> tuple[TextDoc, bytes]:
    """Read and decode an opened text file; returns the document and the raw bytes."""
    fd = regular_fd(spot, cap=cap, allow_hardlinks=allow_hardlinks, what="a text file")
    data = read_fd(fd, cap, spot.rel)
    return decode(data, spot.rel), data


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / (1024 * 1024):.0f} MiB"
    if n >= 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n} bytes"


def keep_style(old: TextDoc, new_text: str) -> str:
    """``new_text`` (LF) with the old file's final-newline convention."""
    new_text = new_text.replace("\r\n", "\n")
    if old.final_newline and new_text and not new_text.endswith("\n"):
        return new_text + "\n"
    if not old.final_newline and old.text and new_text.endswith("\n"):
        return new_text.rstrip("\n") if new_text.strip("\n") else new_text
    return new_text


@dataclass
class _Change:
    spot: Spot
    data: bytes | None
    original: bytes | None
    mode: int | None
    dir_fd: int = -1
    temp: str | None = None
    done: bool = False


@dataclass
class Transaction:
    """File writes and deletions applied all together, or not at all.

    Targets are resolved places (``Spot``) whose directory descriptors are held. Every new
    content is first written to a temporary file in its target's directory; only then are the
    targets replaced one by one (a rename inside that directory). If any step fails, the files
    already changed get their old bytes back, created files and directories are removed, and
    the error propagates. The caller keeps ownership of the spots.
    """

    changes: list[_Change] = field(default_factory=list)

    def write(self, spot: Spot, data: bytes, original: bytes | None = None) -> None:
        mode = stat.S_IMODE(spot.st.st_mode) if spot.st is not None else None
        self.changes.append(_Change(spot, data, original, mode))

    def delete(self, spot: Spot, original: bytes | None = None) -> None:
        mode = stat.S_IMODE(spot.st.st_mode) if spot.st is not None else None
        self.changes.append(_Change(spot, None, original, mode))

    def commit(self) -> None:
        created: list[tuple[int, str]] = []
        try:
            for ch in self.changes:
                if ch.spot.parent is None:
                    raise RetriableError(f"{ch.spot.rel} is a directory")
                if ch.data is None:
                    ch.dir_fd = os.dup(ch.spot.parent)
                    continue
                ch.dir_fd, made = make_dirs(ch.spot.parent, ch.spot.missing)
                created.extend(made)
                ch.temp = _temp_write(ch.dir_fd, ch.spot.name, ch.data, ch.mode)
            for ch in self.changes:
                if ch.temp is not None:
                    os.replace(ch.temp, ch.spot.name, src_dir_fd=ch.dir_fd, dst_dir_fd=ch.dir_fd)
                    ch.temp = None
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(ch.spot.name, dir_fd=ch.dir_fd)
                ch.done = True
        except BaseException:
            self._undo()
            undo_dirs(created)
            raise
        else:
            undo_dirs(created, remove=False)
        finally:
            for ch in self.changes:
                if ch.dir_fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(ch.dir_fd)
                ch.dir_fd = -1

    def _undo(self) -> None:
        for ch in reversed(self.changes):
            if ch.dir_fd < 0:
                continue
            with contextlib.suppress(OSError):
                if ch.temp is not None:
                    os.unlink(ch.temp, dir_fd=ch.dir_fd)
                if not ch.done:
                    continue
                if ch.original is None:
                    os.unlink(ch.spot.name, dir_fd=ch.dir_fd)
                else:
                    temp = _temp_write(ch.dir_fd, ch.spot.name, ch.original, ch.mode)
                    os.replace(temp, ch.spot.name, src_dir_fd=ch.dir_fd, dst_dir_fd=ch.dir_fd)


def _temp_write(dir_fd: int, name: str, data: bytes, mode: int | None) -> str:
    """A new temporary file beside ``name`` in ``dir_fd`` holding ``data``; returns its name."""
    temp = f".{name[:40]}.{secrets.token_hex(4)}.tmp"
    fd = os.open(
        temp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600 if mode is None else 0o600 | mode,
        dir_fd=dir_fd,
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if mode is not None:
            os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    os.close(fd)
    return temp
