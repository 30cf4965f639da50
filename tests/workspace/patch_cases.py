"""Runs the pinned patch cases through ``workspace_patch``, ``git apply`` and GNU ``patch``.

The cases: ``data/patch_cases.tar.xz`` (CPython's history, written by
``data/make_patch_cases.py``) and the pinned commits of this repository
(``data/patch_corpus``, category ``pinned commits``). Each tool gets the same workspace and
the same diff; its outcome is judged by the files it leaves:

- ``correct``: the expected files (or, for a diff that must be refused, the files untouched);
- ``refused``: the tool said no and left the files as they were, where the diff should apply;
- ``WRONG``: the tool said the diff applied and the files are not the expected ones;
- ``partial``: the tool said no but changed files.

Usage: ``python tests/workspace/patch_cases.py [--only toolcards|git|gnu ...]`` prints the
counts per category, the three tools side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
CASES = DATA / "patch_cases.tar.xz"
COMMITS = DATA / "patch_corpus"
OUTCOMES = ("correct", "refused", "WRONG", "partial")
TOOLS = ("toolcards", "git apply", "GNU patch")


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    source: str
    before: dict[str, bytes]
    diff: bytes
    after: dict[str, bytes] | None
    """The expected files; None when the diff must be refused (the files left as before)."""


@dataclass
class Report:
    tool: str
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    """``WRONG`` and ``partial`` cases, one line each."""
    misses: list[str] = field(default_factory=list)

    def add(self, case: Case, outcome: str, detail: str = "") -> None:
        self.outcomes.setdefault(case.category, Counter())[outcome] += 1
        line = f"{case.id} [{case.category}] {case.source}: {outcome} {detail}".rstrip()
        if outcome in ("WRONG", "partial"):
            self.failures.append(line)
        elif outcome == "refused":
            self.misses.append(line)

    def count(self, outcome: str, category: str | None = None) -> int:
        if category is not None:
            return self.outcomes.get(category, Counter())[outcome]
        return sum(c[outcome] for c in self.outcomes.values())


@cache
def load_cases(path: Path = CASES) -> tuple[Case, ...]:
    """Every case: CPython's history (``path``), then this repository's pinned commits."""
    with tarfile.open(path) as archive:
        members = {m.name: m for m in archive.getmembers()}

        def read(name: str) -> bytes:
            handle = archive.extractfile(members[name])
            assert handle is not None
            return handle.read()

        index = json.loads(read("cases.json"))
        blobs = {name[6:]: read(name) for name in members if name.startswith("blobs/")}
    cases = [
        Case(
            entry["id"],
            entry["category"],
            entry["source"],
            {path: blobs[key] for path, key in entry["before"].items()},
            blobs[entry["diff"]],
            None
            if entry["after"] is None
            else {path: blobs[key] for path, key in entry["after"].items()},
        )
        for entry in index
    ]
    for archive_path in sorted(COMMITS.glob("*.tar.gz")):
        before: dict[str, bytes] = {}
        after: dict[str, bytes] = {}
        diff = b""
        with tarfile.open(archive_path) as archive:
            for member in archive.getmembers():
                handle = archive.extractfile(member)
                if handle is None:
                    continue
                data = handle.read()
                side, _, rel = member.name.partition("/")
                if member.name == "patch.diff":
                    diff = data
                elif side in ("before", "after"):
                    (before if side == "before" else after)[rel] = data
        name = archive_path.name.removesuffix(".tar.gz")
        cases.append(Case(name, "pinned commits", f"toolcards commit {name}", before, diff, after))
    return tuple(cases)


def diff_text(diff: bytes) -> str:
    """The diff as text, as an agent that read the files through the workspace sends it:
    UTF-8, else Windows-1252, else Latin-1 (the decodings ``workspace_read`` uses)."""
    for encoding in ("utf-8", "cp1252"):
        try:
            return diff.decode(encoding)
        except UnicodeDecodeError:
            continue
    return diff.decode("latin-1")


def _tree(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".toolcards" not in p.relative_to(root).parts
    }


def _lay_out(root: Path, files: dict[str, bytes]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def judge(case: Case, applied: bool, left: dict[str, bytes]) -> str:
    if case.after is None:
        return "correct" if left == case.before else ("WRONG" if applied else "partial")
    if applied:
        return "correct" if left == case.after else "WRONG"
    return "refused" if left == case.before else "partial"


Runner = Callable[[Case, Path], tuple[bool, str]]


def toolcards_runner() -> Runner:
    """``workspace_patch`` in this process, one workspace per case."""
    from toolcards.core.errors import RetriableError
    from toolcards.tools.workspace.card import WorkspaceTool

    def run(case: Case, root: Path) -> tuple[bool, str]:
        card = WorkspaceTool(workspace_id=f"case-{case.id}")
        card.use_workspaces_root(root.parent)
        patch = {fn.__name__: fn for fn in card.get_tools()}["workspace_patch"]
        try:
            return True, str(patch(diff_text(case.diff)))
        except RetriableError as exc:
            return False, str(exc).splitlines()[0]

    return run


_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C"}


def _command(argv: list[str], root: Path) -> tuple[bool, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root.parent), **_GIT_ENV,
           "GIT_CEILING_DIRECTORIES": str(root.parent)}  # fmt: skip
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, timeout=60, check=False)
    message = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
    return done.returncode == 0, message[0] if message else ""


def git_runner() -> Runner:
    def run(case: Case, root: Path) -> tuple[bool, str]:
        diff = root.parent / f"{root.name}.diff"
        diff.write_bytes(case.diff)
        return _command(["git", "apply", "--whitespace=nowarn", str(diff)], root)

    return run


def gnu_runner() -> Runner:
    def run(case: Case, root: Path) -> tuple[bool, str]:
        diff = root.parent / f"{root.name}.diff"
        diff.write_bytes(case.diff)
        argv = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch",
                "--reject-file=-", "-i", str(diff)]  # fmt: skip
        return _command(argv, root)

    return run


RUNNERS: dict[str, Callable[[], Runner]] = {
    "toolcards": toolcards_runner,
    "git apply": git_runner,
    "GNU patch": gnu_runner,
}


def available(tool: str) -> bool:
    return (
        tool == "toolcards" or shutil.which("git" if tool == "git apply" else "patch") is not None
    )


def run_tool(tool: str, cases: tuple[Case, ...], *, tmp: Path | None = None) -> Report:
    """Every case through ``tool``, each in a fresh directory."""
    runner = RUNNERS[tool]()
    report = Report(tool)
    with tempfile.TemporaryDirectory(dir=tmp) as scratch:
        for case in cases:
            root = Path(scratch) / f"case-{case.id}"
            _lay_out(root, case.before)
            applied, detail = runner(case, root)
            report.add(case, judge(case, applied, _tree(root)), detail)
            shutil.rmtree(root)
    return report


def render(reports: list[Report], cases: tuple[Case, ...]) -> str:
    categories = list(dict.fromkeys(c.category for c in cases))
    heads = [r.tool for r in reports]
    width = max(len(c) for c in categories) + 2
    lines = [
        "correct / refused / WRONG / partial writes, per category",
        f"{'category':<{width}}{'cases':>6}  " + "".join(f"{h:<24}" for h in heads),
    ]
    sizes = Counter(c.category for c in cases)
    for category in [*categories, None]:
        label = category or "all"
        total = sizes[category] if category else sum(sizes.values())
        cells = [" / ".join(str(r.count(o, category)) for o in OUTCOMES).ljust(24) for r in reports]
        lines.append(f"{label:<{width}}{total:>6}  " + "".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(TOOLS), choices=TOOLS)
    parser.add_argument("--failures", action="store_true", help="list WRONG and partial cases")
    parser.add_argument("--misses", action="store_true", help="list refused cases")
    parser.add_argument("--cases", type=Path, default=CASES, help="another draw of cases")
    args = parser.parse_args()
    cases = load_cases(args.cases)
    reports = [run_tool(tool, cases) for tool in args.only if available(tool)]
    print(render(reports, cases))
    for report in reports:
        for line in report.failures if args.failures else []:
            print(f"{report.tool}: {line}")
        for line in report.misses if args.misses else []:
            print(f"{report.tool}: {line}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    main()
