"""workspace_patch on real history: pinned commits of this repository, each as `git diff -M`
printed it (renames, new and deleted files, many hunks), applied to the files it touched as
they were before gives exactly those files after it. The cases are fixed files under
``data/patch_corpus`` (written by ``data/make_patch_corpus.py``), so they do not change with
the repository's history."""

from __future__ import annotations

import filecmp
import tarfile
from pathlib import Path

import pytest

from toolcards.tools.workspace.card import WorkspaceTool

CORPUS = Path(__file__).resolve().parent / "data" / "patch_corpus"
CASES = sorted(p.name.removesuffix(".tar.gz") for p in CORPUS.glob("*.tar.gz"))


def _files(root: Path) -> list[str]:
    if not root.exists():
        return []
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and ".toolcards" not in p.relative_to(root).parts
    )


def test_the_corpus_holds_renames_additions_and_deletions() -> None:
    diffs = []
    for case in CASES:
        with tarfile.open(CORPUS / f"{case}.tar.gz") as archive:
            member = archive.extractfile("patch.diff")
            assert member is not None
            diffs.append(member.read().decode())
    joined = "\n".join(diffs)
    assert len(CASES) >= 10
    assert "rename from " in joined and "new file mode" in joined
    assert "deleted file mode" in joined


@pytest.mark.parametrize("case", CASES)
def test_a_real_commit_applies_to_exactly_its_tree(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tarfile.open(CORPUS / f"{case}.tar.gz") as archive:
        archive.extractall(tmp_path / "case", filter="data")
    diff = (tmp_path / "case" / "patch.diff").read_text(encoding="utf-8")
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(tmp_path / "root"))
    workspace = tmp_path / "root" / "default"
    workspace.parent.mkdir(parents=True)
    before = tmp_path / "case" / "before"
    if before.exists():
        before.rename(workspace)
    else:
        workspace.mkdir()
    want = tmp_path / "case" / "after"
    patch = {fn.__name__: fn for fn in WorkspaceTool().get_tools()}["workspace_patch"]
    patch(diff)
    got, expected = _files(workspace), _files(want)
    assert got == expected
    differ = [f for f in got if not filecmp.cmp(workspace / f, want / f, shallow=False)]
    assert differ == []
