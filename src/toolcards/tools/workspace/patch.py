"""GNU unified diffs: parsing (lenient about hunk counts). Applying hunks: :mod:`.hunks`."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from toolcards.core.errors import RetriableError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
MAX_FILES = 256
"""Files one patch or multi-edit may change: each holds its directory's descriptor until all
are written (a patch creating 600 files held 1,200, and every other open of the process failed
with EMFILE meanwhile under a 1,024 limit)."""


@dataclass
class Hunk:
    """One hunk: its lines as ``(op, text)`` (``" "``, ``"-"``, ``"+"``), each text as the diff
    wrote it, with the CR of a CR LF line kept."""

    old_start: int
    new_start: int
    lines: list[tuple[str, str]] = field(default_factory=list)
    old_no_eol: bool = False
    new_no_eol: bool = False
    heading: str = ""
    """The text after the second ``@@`` (the section line ``git diff`` names), stripped."""

    def old_block(self) -> list[str]:
        return [t for op, t in self.lines if op != "+"]

    def new_block(self) -> list[str]:
        return [t for op, t in self.lines if op != "-"]


@dataclass
class FilePatch:
    """One file's change: ``old``/``new`` are workspace paths, None for /dev/null."""

    old: str | None
    new: str | None
    hunks: list[Hunk] = field(default_factory=list)
    headers: tuple[str | None, str | None] = (None, None)
    """The ``---``/``+++`` paths as written (a side ``diff -N`` marks missing keeps its name)."""
    git: bool = False
    """Under a ``diff --git`` header: differing names are a rename."""


def parse_patch(patch_text: str) -> list[FilePatch]:
    """Parse a unified diff with one or more files; RetriableError when it is malformed."""
    lines = _without_transport_crs(patch_text.split("\n"))
    end = len(lines)  # blank lines at the end are left to the last hunk's counts
    while end and not lines[end - 1].strip():
        end -= 1
    if end and lines[0].startswith("```") and lines[end - 1].strip() == "```":
        lines = lines[1 : end - 1]  # a diff sent inside a Markdown code fence
    files: list[FilePatch] = []
    git_paths: tuple[str | None, str | None] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            git_paths = _git_header(line.rstrip("\r"))
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _header_path(line[4:]), _header_path(lines[i + 1][4:])
            files.append(  # `diff -N` marks a missing side with the epoch as its time
                FilePatch(
                    None if _epoch(line[4:]) else old,
                    None if _epoch(lines[i + 1][4:]) else new,
                    headers=(old, new),
                    git=git_paths is not None,
                )
            )
            git_paths = None
            i += 1
        elif line.startswith("@@"):
            if not files:
                raise RetriableError("patch hunk before any '--- a/path' / '+++ b/path' header")
            hunk, i = _parse_hunk(lines, i)
            files[-1].hunks.append(hunk)
            continue
        elif line.startswith(_UNSUPPORTED):
            _refuse_unsupported(line)
        elif git_paths is not None and (special := _special_mode(line)) is not None:
            raise RetriableError(
                f"the patch touches {special} ({line.strip()}), which workspace_patch cannot "
                "apply; patch regular files only"
            )
        elif git_paths is not None:
            git_paths = _git_rename(line, git_paths)
            if _git_only_change(line, lines, i):
                files.append(FilePatch(*git_paths, git=True))
                if line.startswith("new file"):
                    files[-1].old = None
                if line.startswith("deleted file"):
                    files[-1].new = None
                git_paths = None
        i += 1
    if not files:
        raise RetriableError(
            "no file headers found; send a unified diff with '--- a/path' and '+++ b/path' lines"
        )
    _strip_prefixes(files)
    check_file_count({path for fp in files for path in (fp.old, fp.new) if path}, "the patch")
    return files


def check_file_count(paths: set[str], what: str) -> None:
    """RetriableError when ``what`` names more than :data:`MAX_FILES` files (checked before
    any is opened, and for a patch before the policy sees its paths)."""
    if len(paths) > MAX_FILES:
        raise RetriableError(
            f"{what} changes {len(paths)} files, more than the {MAX_FILES} one call may "
            "change; split it into several calls"
        )


def _without_transport_crs(lines: list[str]) -> list[str]:
    """The diff's lines with the CR of every line dropped when the whole text was sent with
    CR LF line ends (its ``---``, ``+++`` and ``@@`` lines end with a CR too): those CRs are
    the transport's, not the files'. Otherwise a CR before a line's LF is the file's and is
    kept (``git diff`` of a CR LF file)."""
    frame = [line for line in lines if line.startswith(("@@", "--- ", "+++ "))]
    if frame and all(line.endswith("\r") for line in frame):
        return [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


def patch_paths(patch_text: str) -> list[str]:
    """Every workspace path a patch names (both sides of each file: renames, creations,
    deletions), as :func:`parse_patch` reads them for the tool; RetriableError when the tool
    would refuse the patch text."""
    return [path for fp in parse_patch(patch_text) for path in (fp.old, fp.new) if path]


_GIT_EXTENDED = ("old mode ", "new mode ", "deleted file mode ", "new file mode ", "copy from ",
                 "copy to ", "rename from ", "rename to ", "similarity index ",
                 "dissimilarity index ", "index ")  # fmt: skip
_MAX_EXTENDED = 16
"""Extended header lines a git block is read for (it has at most about eight)."""


def _git_only_change(line: str, lines: list[str], i: int) -> bool:
    """A git header block with no ---/+++ lines (pure rename, empty new or deleted file).

    The block ends at the first line that is not an extended header line: it has content
    changes only when that line is a ``---`` header. A following ``diff --git`` belongs to the
    next file, whatever comes after it.
    """
    if not line.startswith(("rename to ", "new file mode", "deleted file mode")):
        return False
    for rest in itertools.islice(lines, i + 1, i + 1 + _MAX_EXTENDED):
        if rest.startswith(_GIT_EXTENDED):
            continue
        return not rest.startswith("--- ")
    return True  # the end, or more extended lines than a block has: no content after them


_UNSUPPORTED = ("old mode ", "new mode ", "copy from ", "copy to ", "Binary files ",
                "GIT binary patch")  # fmt: skip


_SPECIAL_MODES = {"120000": "a symbolic link", "160000": "a submodule"}


def _special_mode(line: str) -> str | None:
    """What a git header line's mode says the entry is, when it is not a regular file."""
    if not line.startswith(("new file mode ", "deleted file mode ", "index ")):
        return None
    return _SPECIAL_MODES.get(line.rsplit(" ", 1)[-1].strip())


def _refuse_unsupported(line: str) -> None:
    """Parts of a git diff this tool cannot apply are refused, never skipped."""
    if line.startswith(("old mode ", "new mode ")):
        raise RetriableError(
            "the patch changes a file mode, which workspace_patch cannot apply; "
            "remove the 'old mode'/'new mode' lines"
        )
    if line.startswith(("copy from ", "copy to ")):
        raise RetriableError(
            "the patch copies a file, which workspace_patch cannot apply; "
            "send the new file as a creation (--- /dev/null) instead"
        )
    raise RetriableError("the patch changes a binary file, which workspace_patch cannot apply")


def _git_rename(line: str, paths: tuple[str | None, str | None]) -> tuple[str | None, str | None]:
    """``rename from``/``rename to`` lines (written without the a/ b/ prefixes)."""
    prefixed = bool(paths[0] and paths[0].startswith("a/"))
    if line.startswith("rename from "):
        return ("a/" if prefixed else "") + unquote(line[12:].strip()), paths[1]
    if line.startswith("rename to "):
        return paths[0], ("b/" if prefixed else "") + unquote(line[10:].strip())
    return paths


def _git_header(line: str) -> tuple[str | None, str | None]:
    body = line[len("diff --git ") :]
    match = re.match(r'^("(?:[^"\\]|\\.)*"|a/.+?) ("(?:[^"\\]|\\.)*"|b/.+)$', body)
    if match is None or '"' not in body:
        match = re.match(r"^(a/.+) (b/.+)$", body)
    if match:
        return unquote(match.group(1)), unquote(match.group(2))
    return None, None


def _header_path(raw: str) -> str | None:
    path = unquote(raw.split("\t", 1)[0].strip())
    return None if path == "/dev/null" else path


_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?(?: ([+-]\d{4}))?\s*$")


def _epoch(raw: str) -> bool:
    """True when a ``---``/``+++`` header's time is the Unix epoch (in any time zone): how
    ``diff -N`` writes the side of a file that does not exist."""
    _, _, stamp = raw.partition("\t")
    match = _STAMP.match(stamp.strip())
    if match is None:
        return False

    when = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    offset = match.group(2) or "+0000"
    sign = 1 if offset[0] == "+" else -1
    zone = timezone(sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[3:5])))
    return when.replace(tzinfo=zone).timestamp() == 0


_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(text: str) -> str:
    """A path as git prints it, unquoted: ``"caf\\303\\251.md"`` (C escapes, octal UTF-8
    bytes) is ``café.md``; a path without quotes is returned as it is."""
    if not (len(text) >= 2 and text[0] == text[-1] == '"'):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            octal = re.match(r"[0-7]{3}", body[i + 1 : i + 4])
            if octal:
                out.append(int(octal.group(0), 8) & 0xFF)
                i += 4
                continue
            if body[i + 1] in _C_ESCAPES:
                out.append(_C_ESCAPES[body[i + 1]])
                i += 2
                continue
        out.extend(body[i].encode("utf-8", "surrogateescape"))
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _strip_prefixes(files: list[FilePatch]) -> None:
    """Drop the directory names of the two trees compared (``a/`` and ``b/``, or any two
    different names such as ``diff -ruN orig mod`` writes, when every file pairs up)."""
    olds = [f.old for f in files if f.old is not None]
    news = [f.new for f in files if f.new is not None]
    if all(p.startswith("a/") for p in olds) and all(p.startswith("b/") for p in news):
        strip = True
    else:
        pairs = [(a, b) for a, b in (f.headers for f in files) if a is not None and b is not None]
        firsts = {a.split("/", 1)[0] for a, _ in pairs}, {b.split("/", 1)[0] for _, b in pairs}
        strip = (
            len(pairs) == len(files)
            and all("/" in p and not p.startswith("/") for pair in pairs for p in pair)
            and len(firsts[0]) == len(firsts[1]) == 1
            and firsts[0] != firsts[1]
            and all(old.split("/", 1)[1] == new.split("/", 1)[1] for old, new in pairs)
        )
    if strip:
        for f in files:
            f.old = f.old.split("/", 1)[1] if f.old is not None else None
            f.new = f.new.split("/", 1)[1] if f.new is not None else None


def _parse_hunk(lines: list[str], i: int) -> tuple[Hunk, int]:
    match = _HUNK.match(lines[i])
    if match is None:
        raise RetriableError(f"malformed hunk header {lines[i]!r}; expected '@@ -a,b +c,d @@'")
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_count = int(match.group(2)) if match.group(2) is not None else 1
    new_count = int(match.group(4)) if match.group(4) is not None else 1
    hunk = Hunk(old_start, new_start, heading=lines[i][match.end() :].strip())
    body: list[str] = []
    left = [old_count, new_count]  # lines the header says are still to come
    j = i + 1
    while j < len(lines):
        line = lines[j]
        if line.startswith(("@@", "diff --git ")):
            break
        header = line.startswith("--- ") and j + 1 < len(lines) and lines[j + 1].startswith("+++ ")
        if header and not _content_pair(lines, j, left):
            break
        if line and line[0] not in " +-\\" and line != "\r":
            break
        body.append(line)
        op = line[0] if line not in ("", "\r") else " "
        left[0] -= op in " -"
        left[1] -= op in " +"
        j += 1
    body = _fit_counts(body, old_count, new_count)
    for line in body:
        if line.startswith("\\"):
            if hunk.lines and hunk.lines[-1][0] in " -":
                hunk.old_no_eol = True
            if hunk.lines and hunk.lines[-1][0] in " +":
                hunk.new_no_eol = True
            continue
        op, text = (line[0], line[1:]) if line not in ("", "\r") else (" ", line)
        hunk.lines.append((op, text))
    if not hunk.lines:
        raise RetriableError(f"empty hunk at {lines[i]!r}")
    return hunk, j


def _content_pair(lines: list[str], j: int, left: list[int]) -> bool:
    """Whether ``lines[j]``/``lines[j + 1]`` (``--- x``/``+++ y``) are a removed ``-- x`` and
    an added ``++ y`` of this hunk rather than the next file's header: the counts have room for
    them, and they are not followed by a hunk header (a file header always is), unless they
    are exactly the hunk's last two lines."""
    if left[0] < 1 or left[1] < 1:
        return False
    after = lines[j + 2] if j + 2 < len(lines) else ""
    return not after.startswith("@@") or left == [1, 1]


def _fit_counts(body: list[str], old_count: int, new_count: int) -> list[str]:
    """The prefix of ``body`` that matches the header counts when one exists (models often
    get the counts wrong; then the whole body up to the next header is the hunk)."""
    old = new = 0
    for k, line in enumerate(body):
        if old == old_count and new == new_count:
            rest = body[k:]
            if all(r.startswith("\\") or not r.strip() for r in rest):
                return body[:k] + [r for r in rest if r.startswith("\\")][:1]
            break
        op = line[0] if line not in ("", "\r") else " "
        if op == "\\":
            continue
        old += op in " -"
        new += op in " +"
    end = len(body)
    while end and body[end - 1] in ("", "\r"):
        end -= 1
    return body[:end]
