"""Write the pinned patch cases of ``test_patch_cases.py`` from the CPython standard library's
history: the files of eight CPython releases (3.6.15, 3.7.16, 3.8.18, 3.9.18, 3.10.13,
3.11.7, 3.12.1, 3.13.0), each file compared with itself in the next release.

Each case is a workspace (files and their bytes), a diff as ``git diff`` prints it, and the
expected workspace after it, or ``None`` when the diff must be refused and the files left as
they were. A diff is never judged by the code under test: the expected files are the real later
release, or the later release with the same mechanical change (line endings, encoding, final
newline) applied to it, and states in between are the earlier file with a chosen part of the
real change applied (``difflib`` opcodes over its lines). The cases are fixed files
(``patch_cases.tar.xz``): the test's cases do not change with any repository's history.

Categories:

- ``real diffs``: a release's diff applied to the earlier file.
- ``one-sided re-sent``: a diff whose hunk has context on one side only (it belongs at the
  file's start or end), sent again to the file it already changed: refused.
- ``CRLF/mixed endings``: the change on CRLF files (diff with CRs, and a diff written with LF
  only), on files that mix CRLF and LF lines, and on CPython's own CRLF files.
- ``endings conversion``: diffs that convert a file (or a part of it) between LF and CRLF.
- ``no final newline``: the change where one side or both lack the final newline.
- ``repeated context drift``: the diff of one part of the change (1 to 3 context lines) sent
  to the file with the rest of the change applied, where a hunk's context and removed lines
  occur more than once.
- ``moved lines``: the same, where the hunks only moved (their lines are unique).
- ``edited nearby context``: one edit's diff sent to the file where a neighbouring edit of the
  same release changed a line of its context.
- ``Latin-1``: CPython's ISO-8859-1 files (``sqlite3/test``), and UTF-8 files whose every
  character fits Latin-1 written in it.

The files in the cases are CPython's (Python Software Foundation License, as the releases
ship them); the generator only picks and rearranges them.

Run: .venv/bin/python tests/workspace/data/make_patch_cases.py [PYENV_VERSIONS_DIR]
(default ``~/.pyenv/versions``); ``--seed N --out FILE`` draws another set of cases (to check
a change against cases it was not tuned on).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import io
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

TARGET = Path(__file__).resolve().parent / "patch_cases.tar.xz"
RELEASES = ["3.6.15", "3.7.16", "3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"]
SEED = 44
MAX_BYTES = 24_000
PER_CATEGORY = 90
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
Op = tuple[str, int, int, int, int]


@dataclass
class Pair:
    """One file in two consecutive releases."""

    path: str
    old: bytes
    new: bytes
    source: str

    def lines(self) -> tuple[list[bytes], list[bytes]]:
        return self.old.splitlines(keepends=True), self.new.splitlines(keepends=True)


@dataclass
class Case:
    category: str
    source: str
    before: dict[str, bytes]
    diff: bytes
    after: dict[str, bytes] | None


# ---- material ------------------------------------------------------------------------------


def _library(versions: Path, release: str) -> Path:
    return versions / release / "lib" / f"python{'.'.join(release.split('.')[:2])}"


def _files(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for top, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in {"site-packages", "__pycache__"})
        for name in sorted(names):
            path = Path(top) / name
            if not path.is_symlink() and path.is_file():
                out[str(path.relative_to(root))] = path
    return out


def pairs(versions: Path) -> list[Pair]:
    """Every text file changed between two consecutive releases, both sides within the size."""
    found: list[Pair] = []
    for older, newer in itertools.pairwise(RELEASES):
        before, after = _files(_library(versions, older)), _files(_library(versions, newer))
        for rel in sorted(set(before) & set(after)):
            old, new = before[rel].read_bytes(), after[rel].read_bytes()
            if old == new or not 0 < len(old) <= MAX_BYTES or not 0 < len(new) <= MAX_BYTES:
                continue
            if b"\0" in old or b"\0" in new or rel.endswith((".pyc", ".exe", ".so", ".a")):
                continue
            found.append(Pair(f"Lib/{rel}", old, new, f"CPython {older} -> {newer}: Lib/{rel}"))
    return found


def utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ---- changes between two versions of a file -------------------------------------------------


def opcodes(old: list[bytes], new: list[bytes]) -> list[Op]:
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [op for op in matcher.get_opcodes() if op[0] != "equal"]


def apply_ops(old: list[bytes], new: list[bytes], ops: list[Op]) -> list[bytes]:
    """``old`` with the chosen opcodes of the change to ``new`` applied."""
    out: list[bytes] = []
    at = 0
    for _, i1, i2, j1, j2 in sorted(ops, key=lambda op: op[1]):
        out += old[at:i1] + new[j1:j2]
        at = i2
    return out + old[at:]


def groups(ops: list[Op], gap: int) -> list[list[Op]]:
    """Opcodes closer than ``gap`` unchanged lines to each other, as ``git diff`` joins them
    into one hunk."""
    out: list[list[Op]] = []
    for op in ops:
        if out and op[1] - out[-1][-1][2] <= gap:
            out[-1].append(op)
        else:
            out.append([op])
    return out


def git_diff(path: str, old: bytes, new: bytes, context: int = 3) -> bytes:
    """``git diff`` of the two versions of ``path`` (``--- a/path``, ``+++ b/path``)."""
    with tempfile.TemporaryDirectory() as tmp:
        for side, data in (("a", old), ("b", new)):
            target = Path(tmp, side, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": tmp,
               "PATH": os.environ.get("PATH", "/usr/bin:/bin")}  # fmt: skip
        done = subprocess.run(
            ["git", "diff", "--no-index", "--no-prefix", "--no-color", f"-U{context}",
             f"a/{path}", f"b/{path}"],
            cwd=tmp, env=env, capture_output=True, check=False, timeout=60,
        )  # fmt: skip
    if done.returncode != 1 or not done.stdout:
        raise RuntimeError(f"git diff failed for {path}: {done.stderr!r}")
    return done.stdout


def hunks(diff: bytes) -> list[tuple[int, list[bytes], list[bytes], list[bytes]]]:
    """Each hunk's old start and its old lines, new lines and line kinds (``b" "``, ``b"-"``,
    ``b"+"``), read the plain way (for choosing cases, never for judging them)."""
    out: list[tuple[int, list[bytes], list[bytes], list[bytes]]] = []
    for line in diff.split(b"\n"):
        match = _HUNK.match(line)
        if match:
            out.append((int(match.group(1)), [], [], []))
        elif out and line[:1] in (b" ", b"-", b"+"):
            _, old, new, kinds = out[-1]
            kinds.append(line[:1])
            if line[:1] != b"+":
                old.append(line[1:])
            if line[:1] != b"-":
                new.append(line[1:])
    return out


def occurrences(lines: list[bytes], block: list[bytes]) -> list[int]:
    """Where ``block`` (lines without their LF) stands in ``lines`` (with their LF)."""
    bare = [line.rstrip(b"\n") for line in lines]
    n = len(block)
    return [p for p in range(len(bare) - n + 1) if bare[p : p + n] == block] if n else []


# ---- line endings and encodings ------------------------------------------------------------


def crlf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n")


def mixed(old: list[bytes], new: list[bytes]) -> tuple[bytes, bytes]:
    """Both versions with some lines ending in CRLF: a line of the older file keeps its choice
    in the newer one (its text block alternates between CRLF and LF at each blank line), and
    a line the change adds ends as a hash of its text says."""
    ends: list[bool] = []
    windows = False
    for line in old:
        if not line.strip():
            windows = not windows
        ends.append(windows)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    new_ends = [hashlib.sha256(line).digest()[0] % 2 == 1 for line in new]
    for tag, i1, i2, j1, _ in matcher.get_opcodes():
        if tag == "equal":
            new_ends[j1 : j1 + i2 - i1] = ends[i1:i2]

    def join(lines: list[bytes], flags: list[bool]) -> bytes:
        return b"".join(
            line[:-1] + b"\r\n" if flag and line.endswith(b"\n") else line
            for line, flag in zip(lines, flags, strict=True)
        )

    return join(old, ends), join(new, new_ends)


def latin1(data: bytes) -> bytes | None:
    """UTF-8 text written in Latin-1, when it has characters beyond ASCII that all fit."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.isascii():
        return None
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return None


# ---- the categories ------------------------------------------------------------------------


def real_diffs(pair: Pair) -> Iterator[Case]:
    if utf8(pair.old) and utf8(pair.new) and b"\r" not in pair.old + pair.new:
        diff = git_diff(pair.path, pair.old, pair.new)
        yield Case("real diffs", pair.source, {pair.path: pair.old}, diff, {pair.path: pair.new})


def one_sided_resent(pair: Pair) -> Iterator[Case]:
    if not (utf8(pair.old) and utf8(pair.new)) or b"\r" in pair.old + pair.new:
        return
    old, new = pair.lines()
    ops = opcodes(old, new)
    chunks = groups(ops, 6)
    for chunk in (chunks[0], chunks[-1]) if len(chunks) > 1 else chunks:
        once = b"".join(apply_ops(old, new, chunk))
        diff = git_diff(pair.path, pair.old, once)
        ((_, _, _, kinds),) = hunks(diff)
        leading = min(i for i, k in enumerate(kinds) if k != b" ")
        trailing = len(kinds) - max(i for i, k in enumerate(kinds) if k != b" ") - 1
        if leading == 3 and trailing == 3:  # context on both sides: not at the start or end
            continue
        yield Case("one-sided re-sent", pair.source, {pair.path: once}, diff, None)
        full = b"".join(apply_ops(old, new, ops))
        if full != once:  # the whole release's change made, this part of it sent again
            yield Case("one-sided re-sent", pair.source, {pair.path: full}, diff, None)


def endings(pair: Pair) -> Iterator[Case]:
    if not (utf8(pair.old) and utf8(pair.new)):
        return
    category = "CRLF/mixed endings"
    if b"\r\n" in pair.old and b"\r\n" in pair.new:  # CPython's own CRLF files
        diff = git_diff(pair.path, pair.old, pair.new)
        yield Case(category, pair.source, {pair.path: pair.old}, diff, {pair.path: pair.new})
        return
    if b"\r" in pair.old + pair.new:
        return
    old, new = crlf(pair.old), crlf(pair.new)
    diff = git_diff(pair.path, old, new)
    yield Case(category, pair.source + " (CRLF)", {pair.path: old}, diff, {pair.path: new})
    lf_diff = git_diff(pair.path, pair.old, pair.new)
    yield Case(category, pair.source + " (LF diff, CRLF file)", {pair.path: old}, lf_diff,
               {pair.path: new})  # fmt: skip
    mixed_old, mixed_new = mixed(*pair.lines())
    if mixed_old != mixed_new:
        diff = git_diff(pair.path, mixed_old, mixed_new)
        yield Case(category, pair.source + " (mixed)", {pair.path: mixed_old}, diff,
                   {pair.path: mixed_new})  # fmt: skip


def conversion(pair: Pair) -> Iterator[Case]:
    category = "endings conversion"
    if not (utf8(pair.old) and utf8(pair.new)) or b"\r" in pair.old + pair.new:
        return
    if len(pair.old) > 8000:
        return
    variants = [
        ("LF to CRLF", pair.old, crlf(pair.old)),
        ("CRLF to LF", crlf(pair.old), pair.old),
        ("LF to CRLF with the change", pair.old, crlf(pair.new)),
        ("CRLF to LF with the change", crlf(pair.old), pair.new),
    ]
    old_lines = pair.old.splitlines(keepends=True)
    if len(old_lines) > 20:
        part = len(old_lines) // 3
        converted = b"".join(old_lines[:part] + [crlf(x) for x in old_lines[part : 2 * part]]
                             + old_lines[2 * part :])  # fmt: skip
        variants.append(("a third of the lines to CRLF", pair.old, converted))
    for label, old, new in variants:
        diff = git_diff(pair.path, old, new)
        yield Case(category, f"{pair.source} ({label})", {pair.path: old}, diff, {pair.path: new})


def no_final_newline(pair: Pair) -> Iterator[Case]:
    if not (utf8(pair.old) and utf8(pair.new)) or b"\r" in pair.old + pair.new:
        return
    if not (pair.old.endswith(b"\n") and pair.new.endswith(b"\n")):
        return
    old, new = pair.old[:-1], pair.new[:-1]
    for label, a, b in (("old side", old, pair.new), ("new side", pair.old, new),
                        ("both sides", old, new)):  # fmt: skip
        if a == b:
            continue
        diff = git_diff(pair.path, a, b)
        yield Case("no final newline", f"{pair.source} (no final newline: {label})",
                   {pair.path: a}, diff, {pair.path: b})  # fmt: skip


def _drift_cases(pair: Pair, rng: random.Random) -> Iterator[tuple[str, Case]]:
    """One part of the change sent (1 to 3 context lines) to the file with the rest applied:
    the case and whether a sent hunk's old lines repeat in that file."""
    if not (utf8(pair.old) and utf8(pair.new)) or b"\r" in pair.old + pair.new:
        return
    old, new = pair.lines()
    ops = opcodes(old, new)
    for context in (3, 2, 1):
        chunks = groups(ops, 2 * context)
        if len(chunks) < 2:
            continue
        sent = rng.choice(chunks)
        rest = [op for op in ops if op not in sent]
        workspace = apply_ops(old, new, rest)
        once = b"".join(apply_ops(old, new, sent))
        diff = git_diff(pair.path, pair.old, once, context)
        repeated = moved = False
        for _, block, _, _ in hunks(diff):
            where = occurrences(workspace, [line.rstrip(b"\n") for line in block])
            repeated |= len(where) > 1
        start = hunks(diff)[0][0]
        first = occurrences(workspace, hunks(diff)[0][1])
        moved = bool(first) and first[0] != max(start - 1, 0)
        expected = b"".join(apply_ops(old, new, ops))
        case = Case("", f"{pair.source} (-U{context}, {len(sent)} of {len(ops)} edits sent)",
                    {pair.path: b"".join(workspace)}, diff, {pair.path: expected})  # fmt: skip
        if repeated:
            yield "repeated context drift", case
        elif moved:
            yield "moved lines", case


def edited_nearby(pair: Pair, rng: random.Random) -> Iterator[Case]:
    if not (utf8(pair.old) and utf8(pair.new)) or b"\r" in pair.old + pair.new:
        return
    old, new = pair.lines()
    ops = opcodes(old, new)
    candidates = []
    for k, op in enumerate(ops):
        near = [o for o in ops[max(0, k - 1) : k + 2]
                if o is not op and (0 < o[1] - op[2] < 3 or 0 < op[1] - o[2] < 3)]  # fmt: skip
        if near:
            candidates.append((op, near))
    if not candidates:
        return
    sent, near = rng.choice(candidates)
    once = b"".join(apply_ops(old, new, [sent]))
    diff = git_diff(pair.path, pair.old, once)
    everything = rng.random() < 0.5  # the nearby edits alone, or the whole rest of the change
    applied = [o for o in ops if o is not sent] if everything else near
    workspace = b"".join(apply_ops(old, new, applied))
    expected = b"".join(apply_ops(old, new, [*applied, sent]))
    label = "the rest of the change" if everything else f"{len(near)} nearby edit(s)"
    yield Case("edited nearby context", f"{pair.source} (one edit sent; {label} made)",
               {pair.path: workspace}, diff, {pair.path: expected})  # fmt: skip


def latin_1(pair: Pair) -> Iterator[Case]:
    if not utf8(pair.old) or not utf8(pair.new):
        old, new, label = pair.old, pair.new, "ISO-8859-1 file"
    else:
        encoded = latin1(pair.old), latin1(pair.new)
        if encoded[0] is None or encoded[1] is None or encoded[0] == encoded[1]:
            return
        old, new, label = encoded[0], encoded[1], "written in Latin-1"
        if utf8(old) and utf8(new):
            return
    try:
        old.decode("latin-1"), new.decode("latin-1")
    except UnicodeDecodeError:
        return
    diff = git_diff(pair.path, old, new)
    yield Case("Latin-1", f"{pair.source} ({label})", {pair.path: old}, diff, {pair.path: new})


def build(versions: Path, seed: int = SEED) -> list[Case]:
    material = pairs(versions)
    rng = random.Random(seed)
    order = material[:]
    rng.shuffle(order)
    cases: list[Case] = []
    plain: list[tuple[str, Callable[[Pair], Iterator[Case]], int]] = [
        ("real diffs", real_diffs, 60),
        ("one-sided re-sent", one_sided_resent, PER_CATEGORY),
        ("CRLF/mixed endings", endings, PER_CATEGORY),
        ("endings conversion", conversion, 50),
        ("no final newline", no_final_newline, 60),
        ("Latin-1", latin_1, PER_CATEGORY),
    ]
    for category, make, limit in plain:
        made = [c for c in cases if c.category == category]
        # CPython's own CRLF and ISO-8859-1 files first, then the rest in the shuffled order
        first = [p for p in order if b"\r\n" in p.old or not utf8(p.old)]
        for pair in first + [p for p in order if not (b"\r\n" in p.old or not utf8(p.old))]:
            if len(made) >= limit:
                break
            for case in make(pair):
                made.append(case)
        cases += made[:limit]
    drift: dict[str, list[Case]] = {"repeated context drift": [], "moved lines": []}
    for pair in order:
        if all(len(v) >= PER_CATEGORY for v in drift.values()):
            break
        for category, case in _drift_cases(pair, rng):
            if len(drift[category]) < PER_CATEGORY:
                case.category = category
                drift[category].append(case)
    nearby: list[Case] = []
    for pair in order:
        if len(nearby) >= PER_CATEGORY:
            break
        nearby += edited_nearby(pair, rng)
    return cases + drift["repeated context drift"] + drift["moved lines"] + nearby


def write(cases: list[Case], target: Path = TARGET) -> None:
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> str:
        key = hashlib.sha256(data).hexdigest()[:20]
        blobs[key] = data
        return key

    index = []
    for number, case in enumerate(cases, 1):
        index.append({
            "id": f"{number:04d}",
            "category": case.category,
            "source": case.source,
            "before": {path: blob(data) for path, data in case.before.items()},
            "diff": blob(case.diff),
            "after": None if case.after is None
            else {path: blob(data) for path, data in case.after.items()},
        })  # fmt: skip
    with tarfile.open(target, "w:xz", preset=9) as archive:
        for name, data in [("cases.json", json.dumps(index, indent=1).encode())] + [
            (f"blobs/{key}", blobs[key]) for key in sorted(blobs)
        ]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            archive.addfile(info, io.BytesIO(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="?", type=Path,
                        default=Path.home() / ".pyenv" / "versions")  # fmt: skip
    parser.add_argument("--seed", type=int, default=SEED, help="another draw, to check")
    parser.add_argument("--out", type=Path, default=TARGET)
    args = parser.parse_args()
    missing = [r for r in RELEASES if not _library(args.versions, r).is_dir()]
    if missing:
        sys.exit(f"missing CPython releases under {args.versions}: {', '.join(missing)}")
    cases = build(args.versions, args.seed)
    write(cases, args.out)
    counts: dict[str, int] = {}
    for case in cases:
        counts[case.category] = counts.get(case.category, 0) + 1
    print(f"{args.out}: {len(cases)} cases, {args.out.stat().st_size:,} bytes")
    for category, n in counts.items():
        print(f"  {category}: {n}")


if __name__ == "__main__":
    main()
