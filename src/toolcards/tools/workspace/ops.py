"""The file operations behind the tools, over one contained workspace and one agent's view."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace import docs, grep, listing
from toolcards.tools.workspace.edits import apply_edit, unified_diff
from toolcards.tools.workspace.ledger import ReadLedger
from toolcards.tools.workspace.models import EditItem
from toolcards.tools.workspace.patch import FilePatch, apply_hunks, parse_patch
from toolcards.tools.workspace.paths import Contained, check_pattern
from toolcards.tools.workspace.textfile import TextDoc, Transaction, keep_style, load, write_atomic


@dataclass(frozen=True, slots=True)
class ReadCaps:
    """Output bounds of workspace_read."""

    max_line_chars: int = 2000
    max_lines: int = 2000
    max_chars: int = 200_000


@dataclass
class _Pending:
    """A file being changed inside one multi-file operation."""

    path: Path
    rel: str
    doc: TextDoc
    before: str
    after: str | None
    existed: bool


_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(root: Path) -> threading.RLock:
    """One lock per workspace: read-check-write sequences of one process never interleave."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(str(root), threading.RLock())


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    @functools.wraps(method)
    def wrapper(self: Workspace, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return cast(F, wrapper)


class Workspace:
    """One workspace seen by one agent: contained paths, a read ledger, atomic writes."""

    def __init__(self, root: Path, agent: str) -> None:
        self.paths = Contained(root)
        self.root = self.paths.root
        self.ledger = ReadLedger(self.root, agent)
        self.lock = _lock_for(self.root)

    # ---- reading ------------------------------------------------------------------------

    def read(self, path: str, offset: int, limit: int, caps: ReadCaps) -> str:
        real = self.paths.resolve(path)
        rel = self.paths.rel(real)
        if offset < 1 or limit < 1:
            raise RetriableError("offset and limit must be at least 1")
        if real.is_file() and docs.is_document(real):
            text = docs.document_markdown(real, rel, self.paths.cache_dir("docs"))
        else:
            doc, data = load(real, rel)
            self.ledger.saw(rel, data)
            text = doc.text
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        if not lines:
            return f"{rel} is empty."
        if offset > len(lines):
            raise RetriableError(f"offset {offset} is past the end of {rel} ({len(lines)} lines)")
        last = min(len(lines), offset + min(limit, caps.max_lines) - 1)
        out: list[str] = []
        budget = caps.max_chars
        for n in range(offset, last + 1):
            line = f"{n:6d}\t{_cut(lines[n - 1], caps.max_line_chars)}"
            budget -= len(line) + 1
            if budget < 0 and out:
                last = n - 1
                break
            out.append(line)
        if last < len(lines):
            out.append(
                f"[... {len(lines) - last} more lines of {len(lines)}; "
                f"continue with offset={last + 1}]"
            )
        return "\n".join(out)

    def list_dir(self, path: str, depth: int, max_entries: int) -> str:
        real = self.paths.resolve(path, allow_root=True)
        if not real.is_dir():
            raise RetriableError(f"{path!r} is not a directory")
        return listing.render_tree(self.paths, real, max(1, min(depth, 10)), max_entries)

    def glob(self, pattern: str, path: str, max_results: int) -> str:
        pattern = check_pattern(pattern, "pattern")
        start = self.paths.resolve(path, allow_root=True)
        return listing.glob_files(self.paths, start, pattern, max_results)

    def grep(self, pattern: str, path: str, include: str, limit: int, engine: str) -> str:
        regex = grep.compile_pattern(pattern)
        if include:
            include = check_pattern(include, "include")
        start = self.paths.resolve(path, allow_root=True)
        if not start.exists():
            raise RetriableError(f"path not found: {path}")
        rg = grep.find_rg() if engine != "python" else None
        if engine == "rg" and rg is None:
            raise RetriableError("ripgrep (rg) is not installed")
        if rg is not None:
            target = "" if start == self.root else self.paths.rel(start)
            hits = grep.grep_rg(rg, self.root, pattern, target, include, limit)
        else:
            hits = grep.grep_python(self.root, regex, start, include, limit)
        return grep.render(hits, limit)

    def view(self, path: str, max_dimension: int) -> Any:
        real = self.paths.resolve(path)
        rel = self.paths.rel(real)
        if not real.is_file():
            raise RetriableError(f"file not found: {rel}")
        return docs.image_content(real, rel, self.paths.cache_dir("images"), max_dimension)

    # ---- writing ------------------------------------------------------------------------

    @_locked
    def write(self, path: str, content: str) -> str:
        real = self.paths.resolve(path)
        rel = self.paths.rel(real)
        if real.is_dir():
            raise RetriableError(f"{rel} is a directory")
        if real.exists():
            doc, _ = load(real, rel)
            data = doc.encode(keep_style(doc, content))
            verb = "Updated"
        else:
            data = content.encode("utf-8")
            verb = "Created"
        write_atomic(real, data)
        self.ledger.saw(rel, data)
        return f"{verb} {rel} ({len(data)} bytes)."

    @_locked
    def edit(self, path: str, old: str, new: str, replace_all: bool) -> str:
        real = self.paths.resolve(path)
        if old == "" and not real.exists():
            return self.write(path, new)
        return self.multi_edit(
            [EditItem(path=path, old_string=old, new_string=new, replace_all=replace_all)]
        )

    @_locked
    def multi_edit(self, edits: list[EditItem]) -> str:
        if not edits:
            raise RetriableError("edits is empty")
        pending: dict[Path, _Pending] = {}
        for number, item in enumerate(edits, 1):
            try:
                real = self.paths.resolve(item.path)
                entry = pending.get(real) or self._open(real)
                pending[real] = entry
                assert entry.after is not None
                old = item.old_string.replace("\r\n", "\n")
                new = item.new_string.replace("\r\n", "\n")
                entry.after = apply_edit(entry.after, old, new, replace_all=item.replace_all).text
            except RetriableError as exc:
                prefix = f"edit {number} of {len(edits)} ({item.path}): " if len(edits) > 1 else ""
                suffix = " No file was changed." if len(edits) > 1 else ""
                raise RetriableError(f"{prefix}{exc}{suffix}") from None
        return self._commit(list(pending.values()))

    @_locked
    def patch(self, patch_text: str) -> str:
        if "\x00" in patch_text:
            raise RetriableError("patch contains a NUL byte")
        files = parse_patch(patch_text)
        pending: dict[Path, _Pending] = {}
        summary: list[str] = []
        for fp in files:
            summary.append(self._plan_file(fp, pending))
        self._commit(list(pending.values()), diffs=False)
        return "Patch applied:\n" + "\n".join(summary)

    def _plan_file(self, fp: FilePatch, pending: dict[Path, _Pending]) -> str:
        src = self._patch_target(fp.old, pending, must_exist=True) if fp.old else None
        dst = self._patch_target(fp.new, pending, must_exist=False) if fp.new else None
        if src is None and dst is None:
            raise RetriableError("a patch file section names /dev/null on both sides")
        if src is None:
            assert dst is not None
            if dst.existed:
                raise RetriableError(f"{dst.rel} already exists; patch it instead of creating it")
            dst.after = apply_hunks("", fp.hunks, dst.rel)
            return f"A {dst.rel}"
        assert src.after is not None
        result = apply_hunks(src.after, fp.hunks, src.rel) if fp.hunks else src.after
        if dst is None:
            if not fp.hunks:
                src.after = None
                return f"D {src.rel}"
            if result.strip():
                raise RetriableError(f"{src.rel}: a deletion patch must remove every line")
            src.after = None
            return f"D {src.rel}"
        if dst is src:
            src.after = result
            return f"M {src.rel}"
        if dst.existed or dst.after is not None:
            raise RetriableError(f"cannot rename {src.rel} to {dst.rel}: the target exists")
        dst.doc, dst.after, src.after = src.doc, result, None
        return f"R {src.rel} -> {dst.rel}"

    def _patch_target(self, name: str, pending: dict[Path, _Pending], must_exist: bool) -> _Pending:
        real = self.paths.resolve(name)
        entry = pending.get(real)
        if entry is None:
            entry = self._open(real, missing_ok=not must_exist)
            pending[real] = entry
        if must_exist and entry.after is None:
            raise RetriableError(f"file not found: {entry.rel}")
        return entry

    def _open(self, real: Path, missing_ok: bool = False) -> _Pending:
        rel = self.paths.rel(real)
        if missing_ok and not real.exists():
            return _Pending(real, rel, TextDoc(""), "", None, existed=False)
        doc, data = load(real, rel)
        self.ledger.check_fresh(rel, data)
        return _Pending(real, rel, doc, doc.text, doc.text, existed=True)

    def _commit(self, entries: list[_Pending], diffs: bool = True) -> str:
        txn = Transaction()
        changed: list[_Pending] = []
        for e in entries:
            if e.after is None:
                if e.existed:
                    txn.delete(e.path)
                    changed.append(e)
            elif e.after != e.before or not e.existed:
                txn.write(e.path, e.doc.encode(e.after))
                changed.append(e)
        if not changed:
            raise RetriableError("the edit changes nothing")
        txn.commit()
        out: list[str] = []
        for e in changed:
            if e.after is None:
                self.ledger.forget(e.rel)
            else:
                self.ledger.saw(e.rel, e.doc.encode(e.after))
            if diffs:
                out.append(unified_diff(e.before, e.after or "", e.rel))
        return "\n".join(out) if diffs else ""

    @_locked
    def delete(self, path: str) -> str:
        real = self._entry(path)
        rel = self.paths.rel(real) if not real.is_symlink() else path.strip().strip("/")
        if real.is_symlink() or real.is_file():
            real.unlink()
        elif real.is_dir():
            if any(real.iterdir()):
                raise RetriableError(f"{rel} is a directory that is not empty")
            real.rmdir()
        else:
            raise RetriableError(f"not found: {rel}")
        self.ledger.forget(rel)
        return f"Deleted {rel}."

    def _entry(self, path: str) -> Path:
        """The entry itself (a symbolic link is not followed), with a contained parent."""
        real = self.paths.resolve(path)
        text = path.strip().rstrip("/")
        head, _, name = text.rpartition("/")
        parent = self.paths.resolve(head, allow_root=True)
        lexical = parent / name
        return lexical if lexical.is_symlink() else real

    def mkdir(self, path: str) -> str:
        real = self.paths.resolve(path)
        if real.exists() and not real.is_dir():
            raise RetriableError(f"{self.paths.rel(real)} exists and is a file")
        os.makedirs(real, exist_ok=True)
        return f"Directory {self.paths.rel(real)} is ready."


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + f" [... {len(line) - limit} more chars]"
