"""workspace_patch on real history: every recent commit of this repository, as `git diff -M`
prints it (renames, new and deleted files, many hunks), applied to its parent's tree gives
exactly the commit's tree."""

from __future__ import annotations

import filecmp
import io
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from toolcards.tools.workspace.card import WorkspaceTool

REPO = Path(__file__).resolve().parents[2]
COMMITS = 30


def _git(*args: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, check=True, timeout=60
    ).stdout


def _commits() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return []
    try:
        found = _git("rev-list", "--no-merges", f"-n{COMMITS}", "HEAD").decode().split()
    except subprocess.CalledProcessError:
        return []
    return [c for c in found if _has_parent(c)]


def _has_parent(commit: str) -> bool:
    try:
        _git("rev-parse", "--verify", "-q", f"{commit}^")
    except subprocess.CalledProcessError:
        return False
    return True


def _extract(commit: str, into: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(_git("archive", commit))) as archive:
        archive.extractall(into, filter="data")


def _files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and ".toolcards" not in p.relative_to(root).parts
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("commit", _commits() or [pytest.param("", marks=pytest.mark.skip)])
def test_a_real_commit_applies_to_exactly_its_tree(
    commit: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diff = _git("diff", "-M", "--no-color", f"{commit}^", commit).decode("utf-8", "replace")
    if "Binary files" in diff or "GIT binary patch" in diff or not diff.strip():
        pytest.skip("a binary or empty change (refused by design)")
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "root"))
    workspace = tmp_path / "root" / "default"
    want = tmp_path / "want"
    workspace.mkdir(parents=True)
    want.mkdir()
    _extract(f"{commit}^", workspace)
    _extract(commit, want)
    patch = {fn.__name__: fn for fn in WorkspaceTool().get_tools()}["workspace_patch"]
    patch(diff)
    got, expected = _files(workspace), _files(want)
    assert got == expected
    differ = [f for f in got if not filecmp.cmp(workspace / f, want / f, shallow=False)]
    assert differ == []
