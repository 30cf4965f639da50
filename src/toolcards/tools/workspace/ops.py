"""The file operations behind the tools, over one contained workspace and one agent's view."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from toolcards.core.errors import RetriableError
from toolcards.core.progress import report_progress
from toolcards.tools.workspace import docs, grep, listing
from toolcards.tools.workspace.edits import Span, apply_edit, compose_spans, unified_diffs
from toolcards.tools.workspace.hunks import PatchedText, patch_work
from toolcards.tools.workspace.ledger import ReadLedger
from toolcards.tools.workspace.limits import Limits, ReadCaps
from toolcards.tools.workspace.models import EditItem
from toolcards.tools.workspace.patch import FilePatch, check_file_count, parse_patch
from toolcards.tools.workspace.paths import Contained, Spot, check_pattern, make_dirs, undo_dirs
from toolcards.tools.workspace.textfile import (
    TextDoc,
    Transaction,
    keep_style,
    load,
    read_fd,
    regular_fd,
)
from toolcards.tools.workspace.work_budget import WorkBudget


@dataclass
class _Pending:
    """A file being changed inside one multi-file operation."""

    spot: Spot
    doc: TextDoc
    before: str
    after: str | None
    data: bytes | None
    spans: list[Span] = field(default_factory=list)
    """What the edits changed from ``before`` to ``after``, for the answer's diff."""
    patched: PatchedText | None = None
    """The text as lines while a patch's sections change it (``after`` is then the text before
    them, until :meth:`settle`)."""

    @property
    def rel(self) -> str:
        return self.spot.rel

    @property
    def existed(self) -> bool:
        return self.data is not None

    def as_lines(self, work: WorkBudget) -> PatchedText:
        """The text as lines for a patch section's hunks: split once, for every section."""
        if self.patched is None:
            assert self.after is not None
            self.patched = PatchedText(self.after, work)
        return self.patched

    def settle(self) -> None:
        """``after`` made the text the patch's sections left (joined once, at the commit)."""
        if self.patched is not None:
            self.after, self.patched = self.patched.text(), None


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

    def __init__(self, root: Path, agent: str, limits: Limits | None = None) -> None:
        self.paths = Contained(root)
        self.root = self.paths.root
        self.limits = limits or Limits()
        self.ledger = ReadLedger(self.root, agent)
        self.lock = _lock_for(self.root)

    # ---- reading ------------------------------------------------------------------------

    def read(self, path: str, offset: int, limit: int, caps: ReadCaps) -> str:
        if offset < 1 or limit < 1:
            raise RetriableError("offset and limit must be at least 1")
        lim = self.limits
        with self.paths.locate(path) as spot:
            rel = spot.rel
            document = docs.is_document(rel) and not spot.is_dir
            if document:
                cap = lim.max_document_bytes
                fd = regular_fd(
                    spot, cap=cap, allow_hardlinks=lim.allow_hardlinks, what="a document"
                )
                data = read_fd(fd, cap, rel)
            else:
                doc, data = load(spot, cap=lim.max_text_bytes, allow_hardlinks=lim.allow_hardlinks)
        if document:
            text = docs.document_markdown(
                data, rel, self.paths.cache_dir("docs"), lim.document_timeout_s
            )
        else:
            self.ledger.saw(rel, data)
            text = doc.text
        return number_lines(text, rel, offset, limit, caps)

    def list_dir(self, path: str, depth: int, max_entries: int) -> str:
        with self.paths.locate(path, allow_root=True) as spot:
            if spot.exists and not spot.is_dir:
                raise RetriableError(f"{path!r} is not a directory")
            fd = spot.opened_dir()
            return listing.render_tree(
                self.paths, fd, spot.rel, max(1, min(depth, 10)), max_entries
            )

    def glob(self, pattern: str, path: str, max_results: int) -> str:
        pattern = check_pattern(pattern, "pattern")
        with self.paths.locate(path, allow_root=True) as spot:
            if not spot.is_dir:
                return f"{spot.rel} is not a directory."
            return listing.glob_files(spot.opened_dir(), spot.rel, pattern, max_results)

    def grep(self, pattern: str, path: str, include: str, options: grep.GrepOptions) -> str:
        grep.check_pattern(pattern)
        if include:
            include = check_pattern(include, "include")
        rg = grep.find_rg() if options.engine != "python" else None
        if options.engine == "rg" and rg is None:
            raise RetriableError("ripgrep (rg) is not installed")
        # ripgrep checks its own patterns; Python compiles only what its engine will run
        regex = grep.compile_pattern(pattern) if rg is None else None
        with self.paths.locate(path, allow_root=True) as spot:
            if not spot.exists:
                raise RetriableError(f"path not found: {path}")
            files = grep.SearchFiles(spot, include, self.limits.max_text_bytes,
                                     self.limits.allow_hardlinks)  # fmt: skip
            hits = None
            if rg is not None:
                try:
                    hits = grep.grep_rg(rg, pattern, files, options)
                except grep.RgPatternError:
                    if options.engine == "rg":
                        raise
                    files.skipped = 0  # "auto": the Python engine takes every Python pattern
            if hits is None:
                hits = grep.grep_python(regex or grep.compile_pattern(pattern), files, options)
        return grep.render(hits, options.max_matches, files.skipped, files.narrowed)

    def view(self, path: str, max_dimension: int) -> Any:
        lim = self.limits
        with self.paths.locate(path) as spot:
            rel = spot.rel
            docs.check_image_name(rel)
            cap = lim.max_image_bytes
            fd = regular_fd(spot, cap=cap, allow_hardlinks=lim.allow_hardlinks, what="an image")
            data = read_fd(fd, cap, rel)
        return docs.image_content(data, rel, self.paths.cache_dir("images"), max_dimension)

    # ---- writing ------------------------------------------------------------------------

    @_locked
    def write(self, path: str, content: str) -> str:
        with self.paths.locate(path) as spot:
            rel = spot.rel
            if spot.is_dir:
                raise RetriableError(f"{rel} is a directory")
            original: bytes | None = None
            if spot.exists:
                # the old bytes only give the style; a hard-linked file is replaced, not changed
                doc, original = load(spot, cap=self.limits.max_text_bytes, allow_hardlinks=True)
                data = doc.encode(keep_style(doc, content), rel)
                verb = "Updated"
            else:
                data = TextDoc("").encode(content, rel)
                verb = "Created"
            txn = Transaction()
            txn.write(spot, data, original)
            txn.commit()
        self.ledger.saw(rel, data)
        return f"{verb} {rel} ({len(data)} bytes)."

    @_locked
    def edit(self, path: str, old: str, new: str, replace_all: bool) -> str:
        if old == "" and not self.paths.exists(path):
            return self.write(path, new)
        return self.multi_edit(
            [EditItem(path=path, old_string=old, new_string=new, replace_all=replace_all)]
        )

    @_locked
    def multi_edit(self, edits: list[EditItem]) -> str:
        if not edits:
            raise RetriableError("edits is empty")
        check_file_count({item.path for item in edits}, "the multi-edit")
        with contextlib.ExitStack() as held:
            pending: dict[str, _Pending] = {}
            for number, item in enumerate(edits, 1):
                try:
                    entry = self._pending(item.path, pending, held, must_exist=True)
                    assert entry.after is not None
                    old = item.old_string.replace("\r\n", "\n")
                    new = item.new_string.replace("\r\n", "\n")
                    result = apply_edit(
                        entry.after,
                        old,
                        new,
                        replace_all=item.replace_all,
                        cap=self.limits.max_text_bytes,
                    )
                    entry.after = result.text
                    entry.spans = compose_spans(entry.spans, result.spans)
                except RetriableError as exc:
                    prefix = (
                        f"edit {number} of {len(edits)} ({item.path}): " if len(edits) > 1 else ""
                    )
                    suffix = " No file was changed." if len(edits) > 1 else ""
                    raise RetriableError(f"{prefix}{exc}{suffix}") from None
            return self._commit(list(pending.values()))

    @_locked
    def patch(self, patch_text: str) -> str:
        if "\x00" in patch_text:
            raise RetriableError("patch contains a NUL byte")
        files = parse_patch(patch_text)
        with contextlib.ExitStack() as held:
            pending: dict[str, _Pending] = {}
            summary: list[str] = []
            notes: list[str] = []
            work = patch_work()  # one budget for every section, of one file or many
            for number, fp in enumerate(files, 1):
                summary.append(self._plan_file(fp, pending, held, notes, work))
                report_progress(number, len(files), f"checked {number} of {len(files)} files")
            self._commit(list(pending.values()), diffs=False)
        return "\n".join(["Patch applied:", *summary, *notes])

    def _plan_file(
        self,
        fp: FilePatch,
        pending: dict[str, _Pending],
        held: ExitStack,
        notes: list[str],
        work: WorkBudget,
    ) -> str:
        """One file's part of a patch, applied to its pending text (as on disk: CRs kept)."""
        if self._in_place(fp, pending):
            fp.old = fp.new
        src = self._pending(fp.old, pending, held, must_exist=True, raw=True) if fp.old else None
        dst = self._pending(fp.new, pending, held, must_exist=False, raw=True) if fp.new else None
        if src is None and dst is None:
            raise RetriableError("a patch file section names /dev/null on both sides")
        if src is None:
            assert dst is not None
            if dst.existed:
                raise RetriableError(f"{dst.rel} already exists; patch it instead of creating it")
            dst.after, dst.patched = "", None
            dst.as_lines(work).apply_all(fp.hunks, dst.rel)
            return f"A {dst.rel}"
        if fp.hunks:
            notes += src.as_lines(work).apply_all(fp.hunks, src.rel)
        if dst is None:
            if fp.hunks and src.as_lines(work).text().strip():
                raise RetriableError(f"{src.rel}: a deletion patch must remove every line")
            src.after, src.patched = None, None
            return f"D {src.rel}"
        if dst is src:
            return f"M {src.rel}"
        if dst.existed or dst.after is not None:
            raise RetriableError(f"cannot rename {src.rel} to {dst.rel}: the target exists")
        dst.doc, dst.after, dst.patched = src.doc, src.after, src.patched
        src.after, src.patched = None, None
        return f"R {src.rel} -> {dst.rel}"

    def _in_place(self, fp: FilePatch, pending: dict[str, _Pending]) -> bool:
        """``diff -u x.orig x`` (two names, no git header): when only the new name exists,
        that file is the one patched, as patch(1) does."""
        if not (fp.old and fp.new) or fp.old == fp.new or fp.git or fp.old in pending:
            return False
        return not self._exists(fp.old) and self._exists(fp.new)

    def _exists(self, path: str) -> bool:
        with self.paths.locate(path) as spot:
            return bool(spot.exists)

    def _pending(
        self,
        path: str,
        pending: dict[str, _Pending],
        held: ExitStack,
        *,
        must_exist: bool,
        raw: bool = False,
    ) -> _Pending:
        """The file behind ``path`` in this operation (opened and checked once); ``raw``: its
        text as on disk (CR LF line ends kept), for patches."""
        spot = self.paths.locate(path)
        entry = pending.get(spot.rel)
        if entry is not None:
            spot.close()
        else:
            held.callback(spot.close)
            entry = self._open(spot, missing_ok=not must_exist, raw=raw)
            pending[spot.rel] = entry
        if must_exist and entry.after is None:
            raise RetriableError(f"file not found: {entry.rel}")
        return entry

    def _open(self, spot: Spot, *, missing_ok: bool, raw: bool = False) -> _Pending:
        if missing_ok and not spot.exists:
            return _Pending(spot, TextDoc(""), "", None, None)
        lim = self.limits
        doc, data = load(spot, cap=lim.max_text_bytes, allow_hardlinks=lim.allow_hardlinks)
        if raw:
            doc = doc.as_on_disk()
        spot.release_entry()  # only the directory is needed from now on (fewer held fds)
        self.ledger.check_fresh(spot.rel, data)
        return _Pending(spot, doc, doc.text, doc.text, data)

    def _commit(self, entries: list[_Pending], diffs: bool = True) -> str:
        txn = Transaction()
        changed: list[_Pending] = []
        for e in entries:
            e.settle()
            if e.after is None:
                if e.existed:
                    txn.delete(e.spot, e.data)
                    changed.append(e)
            elif e.after != e.before or not e.existed:
                txn.write(e.spot, e.doc.encode(e.after, e.rel), e.data)
                changed.append(e)
        if not changed:
            raise RetriableError("the edit changes nothing")
        txn.commit()
        out: list[tuple[str, str, str, list[Span]]] = []
        for e in changed:
            if e.after is None:
                self.ledger.forget(e.rel)
            else:
                self.ledger.saw(e.rel, e.doc.encode(e.after, e.rel))
            if diffs:
                out.append((e.before, e.after or "", e.rel, e.spans))
        return unified_diffs(out) if diffs else ""

    @_locked
    def delete(self, path: str) -> str:
        with self.paths.locate(path, follow=False) as spot:
            rel = spot.rel
            if not spot.exists or spot.parent is None:
                raise RetriableError(f"not found: {rel}")
            if spot.is_dir:
                try:
                    os.rmdir(spot.name, dir_fd=spot.parent)
                except OSError as exc:
                    if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                        raise RetriableError(f"{rel} is a directory that is not empty") from None
                    raise
            else:
                os.unlink(spot.name, dir_fd=spot.parent)
        self.ledger.forget(rel)
        return f"Deleted {rel}."

    def mkdir(self, path: str) -> str:
        with self.paths.locate(path) as spot:
            if spot.exists and not spot.is_dir:
                raise RetriableError(f"{spot.rel} exists and is a file")
            if not spot.exists and spot.parent is not None:
                fd, created = make_dirs(spot.parent, (*spot.missing, spot.name))
                os.close(fd)
                undo_dirs(created, remove=False)
            return f"Directory {spot.rel} is ready."


def number_lines(text: str, rel: str, offset: int, limit: int, caps: ReadCaps) -> str:
    """Lines ``offset``.. of ``text`` numbered like ``cat -n``, within ``caps``.

    Only the lines shown are split out of the text, so a large file costs a count of its
    newlines and no list of all its lines.
    """
    total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if not total:
        return f"{rel} is empty."
    if offset > total:
        raise RetriableError(f"offset {offset} is past the end of {rel} ({total} lines)")
    want = min(limit, caps.max_lines, total - offset + 1)
    lines = text[_line_start(text, offset) :].split("\n", want)[:want]
    last = offset + want - 1
    out: list[str] = []
    budget = caps.max_chars
    for n, line in enumerate(lines, offset):
        row = f"{n:6d}\t{_cut(line, caps.max_line_chars)}"
        budget -= len(row) + 1
        if budget < 0 and out:
            last = n - 1
            break
        out.append(row)
    if last < total:
        out.append(f"[... {total - last} more lines of {total}; continue with offset={last + 1}]")
    return "\n".join(out)


def _line_start(text: str, line: int, step: int = 1 << 20) -> int:
    """The index where 1-based ``line`` starts (newlines counted a chunk at a time)."""
    pos, at = 0, 1
    while at < line:
        end = min(len(text), pos + step)
        n = text.count("\n", pos, end)
        if at + n < line:
            at, pos = at + n, end
            continue
        while at < line:
            pos = text.index("\n", pos) + 1
            at += 1
    return pos


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + f" [... {len(line) - limit} more chars]"
