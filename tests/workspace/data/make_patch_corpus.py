"""Write the pinned corpus of test_patch_history.py from commits of a git repository.

Each case is one ``<name>.tar.gz`` holding ``patch.diff`` (``git diff -M`` of the commit), the
files the diff touches as they were before it (``before/``) and after it (``after/``). The
cases are fixed files: the test's cases do not change with the repository's history.

Run: .venv/bin/python tests/workspace/data/make_patch_corpus.py REPO COMMIT [COMMIT ...]
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "patch_corpus"


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def _paths(repo: Path, commit: str) -> tuple[list[str], list[str]]:
    """The paths the diff reads (before) and writes (after)."""
    raw = _git(repo, "diff", "-M", "--name-status", "-z", f"{commit}^", commit).split(b"\0")
    before: list[str] = []
    after: list[str] = []
    fields = [f.decode() for f in raw if f]
    i = 0
    while i < len(fields):
        status = fields[i]
        if status[0] in "RC":
            old, new = fields[i + 1], fields[i + 2]
            before.append(old)
            after.append(new)
            i += 3
            continue
        path = fields[i + 1]
        if status[0] != "A":
            before.append(path)
        if status[0] != "D":
            after.append(path)
        i += 2
    return before, after


def _add(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    archive.addfile(info, io.BytesIO(data))


def write_case(repo: Path, commit: str) -> Path:
    before, after = _paths(repo, commit)
    target = HERE / f"{commit[:12]}.tar.gz"
    with tarfile.open(target, "w:gz") as archive:
        _add(archive, "patch.diff", _git(repo, "diff", "-M", "--no-color", f"{commit}^", commit))
        for path in before:
            _add(archive, f"before/{path}", _git(repo, "show", f"{commit}^:{path}"))
        for path in after:
            _add(archive, f"after/{path}", _git(repo, "show", f"{commit}:{path}"))
    return target


def main() -> None:
    repo = Path(sys.argv[1])
    HERE.mkdir(exist_ok=True)
    for commit in sys.argv[2:]:
        full = _git(repo, "rev-parse", commit).decode().strip()
        print(write_case(repo, full))


if __name__ == "__main__":
    main()
