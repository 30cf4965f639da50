"""workspace_patch: GNU unified diffs over several files, applied atomically."""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, SupportsIndex

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.hunks import PatchedText, patch_work
from toolcards.tools.workspace.patch import MAX_FILES, parse_patch, patch_paths

from .conftest import Tools


@pytest.fixture
def files(ws: Path) -> Path:
    (ws / "a.py").write_text("one\ntwo\nthree\nfour\nfive\n")
    (ws / "b.py").write_text("alpha\nbeta\n")
    return ws


def test_modifies_a_file(tools: Tools, files: Path) -> None:
    out = tools["workspace_patch"](
        "--- a/a.py\n+++ b/a.py\n@@ -2,3 +2,3 @@\n two\n-three\n+THREE\n four\n"
    )
    assert out == "Patch applied:\nM a.py"
    assert (files / "a.py").read_text() == "one\ntwo\nTHREE\nfour\nfive\n"


def test_creates_modifies_deletes_and_renames_in_one_patch(tools: Tools, files: Path) -> None:
    patch = (
        "--- /dev/null\n+++ b/new/c.py\n@@ -0,0 +1,2 @@\n+gamma\n+delta\n"
        "--- a/b.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-alpha\n-beta\n"
        "diff --git a/a.py b/moved.py\nsimilarity index 90%\nrename from a.py\nrename to moved.py\n"
        "--- a/a.py\n+++ b/moved.py\n@@ -1,2 +1,2 @@\n-one\n+ONE\n two\n"
    )
    out = tools["workspace_patch"](patch)
    assert out.splitlines()[1:] == ["A new/c.py", "D b.py", "R a.py -> moved.py"]
    assert (files / "new" / "c.py").read_text() == "gamma\ndelta\n"
    assert not (files / "b.py").exists()
    assert not (files / "a.py").exists()
    assert (files / "moved.py").read_text().startswith("ONE\ntwo\n")


def test_atomic_when_the_last_file_fails(tools: Tools, files: Path) -> None:
    patch = (
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-one\n+ONE\n"
        "--- /dev/null\n+++ b/c.py\n@@ -0,0 +1 @@\n+new\n"
        "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-not there\n+x\n"
    )
    with pytest.raises(RetriableError, match="b.py: hunk 1 does not apply"):
        tools["workspace_patch"](patch)
    assert (files / "a.py").read_text() == "one\ntwo\nthree\nfour\nfive\n"
    assert not (files / "c.py").exists()


def test_zero_context_insert_does_not_wipe_the_file(tools: Tools, files: Path) -> None:
    tools["workspace_patch"]("--- a/a.py\n+++ b/a.py\n@@ -2,0 +3,1 @@\n+inserted\n")
    assert (files / "a.py").read_text() == "one\ntwo\ninserted\nthree\nfour\nfive\n"


def test_insert_at_top_with_zero_line(tools: Tools, files: Path) -> None:
    tools["workspace_patch"]("--- a/b.py\n+++ b/b.py\n@@ -0,0 +1 @@\n+# header\n")
    assert (files / "b.py").read_text() == "# header\nalpha\nbeta\n"


def test_shifted_hunk_is_located_by_context(tools: Tools, files: Path) -> None:
    tools["workspace_patch"]("--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n four\n-five\n+FIVE\n")
    assert (files / "a.py").read_text().endswith("four\nFIVE\n")


def test_wrong_hunk_counts_are_tolerated(tools: Tools, files: Path) -> None:
    tools["workspace_patch"]("--- a/b.py\n+++ b/b.py\n@@ -1,9 +1,9 @@\n alpha\n-beta\n+BETA\n")
    assert (files / "b.py").read_text() == "alpha\nBETA\n"


def test_repeated_context_goes_to_the_place_nearest_the_header_line(tools: Tools, ws: Path) -> None:
    (ws / "r.txt").write_text("x\ny\nw\n" + "z\n" * 5 + "x\ny\nw\n")
    tools["workspace_patch"]("--- a/r.txt\n+++ b/r.txt\n@@ -11,3 +11,3 @@\n x\n-y\n+Y\n w\n")
    assert (ws / "r.txt").read_text() == "x\ny\nw\n" + "z\n" * 5 + "x\nY\nw\n"


@pytest.mark.parametrize("header", ["@@ -3,3 +3,3 @@", "@@ -4,3 +4,3 @@"])
def test_repeated_context_about_as_near_both_ways_is_refused(
    tools: Tools, ws: Path, header: str
) -> None:
    """Places 2 and 4 lines from the header's line (or a true tie, 3 and 3): which one is meant
    depends on how far the file moved, which the diff does not say."""
    before = "x\ny\nw\nz\nz\nz\nx\ny\nw\n"
    (ws / "r.txt").write_text(before)
    with pytest.raises(RetriableError, match="several places"):
        tools["workspace_patch"](f"--- a/r.txt\n+++ b/r.txt\n{header}\n x\n-y\n+Y\n w\n")
    assert (ws / "r.txt").read_text() == before


def test_repeated_context_is_looked_for_in_the_section_the_header_names(
    tools: Tools, ws: Path
) -> None:
    """`git diff` names the section a hunk is in (the nearest line above it that starts with a
    letter): of two equal places, the one in that section, even where the other stands at the
    header's line."""
    body = "    x = 1\n    return x\n\n"
    before = f"def first():\n{body}def second():\n{body}"
    (ws / "s.py").write_text(before)
    patch = (
        "--- a/s.py\n+++ b/s.py\n@@ -2,3 +2,3 @@ def second():\n"
        "-    x = 1\n+    x = 2\n     return x\n \n"
    )
    tools["workspace_patch"](patch)
    assert (ws / "s.py").read_text() == f"def first():\n{body}def second():\n{body}".replace(
        "def second():\n    x = 1", "def second():\n    x = 2"
    )


def test_crlf_file_keeps_crlf(tools: Tools, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a\r\nb\r\nc\r\n")
    tools["workspace_patch"]("--- a/w.txt\n+++ b/w.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
    assert (ws / "w.txt").read_bytes() == b"a\r\nB\r\nc\r\n"


def test_no_newline_marker_is_honoured(tools: Tools, ws: Path) -> None:
    (ws / "n.txt").write_text("a\nb\n")
    patch = "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"
    tools["workspace_patch"](patch)
    assert (ws / "n.txt").read_text() == "a\nc"


def test_creating_an_existing_file_is_refused(tools: Tools, files: Path) -> None:
    with pytest.raises(RetriableError, match="already exists"):
        tools["workspace_patch"]("--- /dev/null\n+++ b/a.py\n@@ -0,0 +1 @@\n+x\n")


def test_text_without_headers_is_refused(tools: Tools, files: Path) -> None:
    with pytest.raises(RetriableError, match="no file headers"):
        tools["workspace_patch"]("just some words")


def test_stale_file_is_refused(tools: Tools, files: Path) -> None:
    tools["workspace_read"]("b.py")
    (files / "b.py").write_text("alpha\nbeta\ngamma\n")
    with pytest.raises(RetriableError, match="re-read first"):
        tools["workspace_patch"]("--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-alpha\n+A\n")


def test_rolls_back_when_writing_the_last_file_fails(
    tools: Tools, files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    real_replace = os.replace
    calls = {"n": 0}

    def failing_replace(src: str, dst: str, **kwargs: int) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(5, "I/O error")
        real_replace(src, dst, **kwargs)

    patch = (
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-one\n+ONE\n"
        "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-alpha\n+ALPHA\n"
        "--- /dev/null\n+++ b/c.py\n@@ -0,0 +1 @@\n+new\n"
    )
    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(RetriableError, match="I/O error"):
        tools["workspace_patch"](patch)
    monkeypatch.undo()
    assert (files / "a.py").read_text() == "one\ntwo\nthree\nfour\nfive\n"
    assert (files / "b.py").read_text() == "alpha\nbeta\n"
    assert sorted(p.name for p in files.iterdir()) == ["a.py", "b.py"]


def test_pure_git_rename_without_hunks(tools: Tools, files: Path) -> None:
    out = tools["workspace_patch"](
        "diff --git a/b.py b/lib/b.py\nsimilarity index 100%\n"
        "rename from b.py\nrename to lib/b.py\n"
    )
    assert out.splitlines()[1:] == ["R b.py -> lib/b.py"]
    assert (files / "lib" / "b.py").read_text() == "alpha\nbeta\n"
    assert not (files / "b.py").exists()


def test_hunks_are_applied_in_order_with_offsets(tools: Tools, files: Path) -> None:
    patch = (
        "--- a/a.py\n+++ b/a.py\n"
        "@@ -1,2 +1,3 @@\n one\n+one-and-a-half\n two\n"
        "@@ -4,2 +5,2 @@\n four\n-five\n+FIVE\n"
    )
    tools["workspace_patch"](patch)
    assert (files / "a.py").read_text() == "one\none-and-a-half\ntwo\nthree\nfour\nFIVE\n"


def test_git_deletion_without_hunks(tools: Tools, files: Path) -> None:
    out = tools["workspace_patch"]("diff --git a/b.py b/b.py\ndeleted file mode 100644\n")
    assert out.splitlines()[1:] == ["D b.py"]
    assert not (files / "b.py").exists()


def test_git_new_empty_file(tools: Tools, files: Path) -> None:
    tools["workspace_patch"]("diff --git a/e.txt b/e.txt\nnew file mode 100644\n")
    assert (files / "e.txt").read_text() == ""


def test_diff_inside_a_markdown_fence_is_accepted(tools: Tools, files: Path) -> None:
    tools["workspace_patch"]("```diff\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-alpha\n+ALPHA\n```\n")
    assert (files / "b.py").read_text() == "ALPHA\nbeta\n"


def _git(repo: Path, *args: str) -> str:
    import subprocess

    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout


@pytest.fixture
def git_rename_diff(tmp_path: Path) -> str:
    """Real `git diff -M` output: a pure rename followed by another file's content change."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("one\ntwo\nthree\nfour\nfive\n")
    (repo / "b.py").write_text("alpha\nbeta\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    _git(repo, "mv", "a.py", "a2.py")
    (repo / "b.py").write_text("alpha\nBETA\n")
    _git(repo, "add", "-A")
    return _git(repo, "diff", "-M", "--cached")


def test_git_rename_followed_by_another_files_diff_applies_whole(
    tools: Tools, files: Path, git_rename_diff: str
) -> None:
    assert "rename to a2.py\ndiff --git a/b.py b/b.py" in git_rename_diff
    out = tools["workspace_patch"](git_rename_diff)
    assert out.splitlines()[1:] == ["R a.py -> a2.py", "M b.py"]
    assert not (files / "a.py").exists()
    assert (files / "a2.py").read_text() == "one\ntwo\nthree\nfour\nfive\n"
    assert (files / "b.py").read_text() == "alpha\nBETA\n"


def test_git_mode_change_is_refused_not_skipped(tools: Tools, files: Path) -> None:
    patch = (
        "diff --git a/a.py b/a.py\nold mode 100644\nnew mode 100755\n"
        "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-alpha\n+ALPHA\n"
    )
    with pytest.raises(RetriableError, match="file mode"):
        tools["workspace_patch"](patch)
    assert (files / "b.py").read_text() == "alpha\nbeta\n"


def test_git_binary_change_is_refused_not_skipped(tools: Tools, files: Path) -> None:
    patch = (
        "diff --git a/logo.png b/logo.png\nindex 1111111..2222222 100644\n"
        "Binary files a/logo.png and b/logo.png differ\n"
    )
    with pytest.raises(RetriableError, match="binary"):
        tools["workspace_patch"](patch)


@pytest.mark.parametrize(
    "header",
    [
        "new file mode 120000\nindex 0000000..8d14cbf\n--- /dev/null\n+++ b/link\n"
        "@@ -0,0 +1 @@\n+a.py\n\\ No newline at end of file\n",
        "index 8d14cbf..2222222 120000\n--- a/link\n+++ b/link\n@@ -1 +1 @@\n-a.py\n+b.py\n",
        "deleted file mode 120000\nindex 8d14cbf..0000000\n",
        "new file mode 160000\nindex 0000000..1234567\n--- /dev/null\n+++ b/link\n"
        "@@ -0,0 +1 @@\n+Subproject commit 1234567\n",
    ],
)
def test_a_symlink_or_submodule_in_a_git_diff_is_refused_not_flattened(
    tools: Tools, files: Path, header: str
) -> None:
    patch = (
        "diff --git a/b.py b/b.py\n--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-alpha\n+ALPHA\n"
        f"diff --git a/link b/link\n{header}"
    )
    before = (files / "b.py").read_text()
    with pytest.raises(RetriableError, match="symbolic link|submodule"):
        tools["workspace_patch"](patch)
    assert not (files / "link").exists()
    assert (files / "b.py").read_text() == before  # all or nothing


NAMES = ["café.md", "my file.txt", "tab\there.txt", 'say "hi".txt', "back\\slash.txt"]


def test_git_quoted_paths_are_unquoted(tools: Tools, ws: Path, tmp_path: Path) -> None:
    """Real `git diff` output for names git quotes (non-ASCII as octal bytes, tab, quote,
    backslash) and a rename of such a name."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    for name in NAMES:
        (repo / name).write_text(f"{name}\nline\n")
        (ws / name).write_text(f"{name}\nline\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    for name in NAMES[1:]:
        (repo / name).write_text(f"{name}\nLINE\n")
    _git(repo, "mv", "café.md", "naïve.md")
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "-M", "--cached")
    assert '"a/tab\\there.txt"' in diff and "\\303\\251" in diff  # git quoted them
    out = tools["workspace_patch"](diff)
    assert "R café.md -> naïve.md" in out
    assert not (ws / "café.md").exists()
    assert (ws / "naïve.md").read_text() == "café.md\nline\n"
    for name in NAMES[1:]:
        assert (ws / name).read_text() == f"{name}\nLINE\n"


@pytest.mark.parametrize("trees", [("a", "b"), ("orig", "mod")])
def test_gnu_diff_ruN_of_two_trees_applies(
    tools: Tools, ws: Path, tmp_path: Path, trees: tuple[str, str]
) -> None:
    """Real `diff -ruN OLD NEW` output: the missing side of a new or deleted file is marked
    with the epoch as its time, and the two tree names are dropped."""
    import shutil
    import subprocess

    if shutil.which("diff") is None:
        pytest.skip("diff is not installed")
    old, new = tmp_path / trees[0], tmp_path / trees[1]
    for tree in (old, new, ws):
        tree.mkdir(exist_ok=True)
    for tree in (old, ws):
        (tree / "keep.txt").write_text("one\ntwo\n")
        (tree / "gone.txt").write_text("bye\n")
    (new / "keep.txt").write_text("one\nTWO\n")
    (new / "sub").mkdir()
    (new / "sub" / "made.txt").write_text("hello\n")
    done = subprocess.run(
        ["diff", "-ruN", trees[0], trees[1]], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 1 and "1970-01-01" in done.stdout
    out = tools["workspace_patch"](done.stdout)
    assert "A sub/made.txt" in out and "D gone.txt" in out
    assert (ws / "keep.txt").read_text() == "one\nTWO\n"
    assert (ws / "sub" / "made.txt").read_text() == "hello\n"
    assert not (ws / "gone.txt").exists()
    assert not (ws / trees[1]).exists()


def test_a_creation_under_a_directory_keeps_the_directory(tools: Tools, ws: Path) -> None:
    tools["workspace_patch"]("--- /dev/null\n+++ src/new.py\n@@ -0,0 +1 @@\n+x = 1\n")
    assert (ws / "src" / "new.py").read_text() == "x = 1\n"


def test_removed_and_added_lines_that_look_like_file_headers(tools: Tools, ws: Path) -> None:
    """`-- old` removed and `++ new` added print as `--- old`/`+++ new` inside a hunk (SQL,
    Lua and Haskell comments): the counts say they are content, not the next file."""
    (ws / "q.sql").write_text("select 1;\n-- old\nselect 2;\n" + "x\n" * 8 + "-- tail\n")
    (ws / "z.txt").write_text("x\n")
    patch = (
        "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n"
        "@@ -1,3 +1,3 @@\n select 1;\n--- old\n+++ new\n select 2;\n"
        "@@ -11 +11 @@\n--- tail\n+++ end\n"
        "diff --git a/z.txt b/z.txt\n--- a/z.txt\n+++ b/z.txt\n@@ -1 +1 @@\n-x\n+y\n"
    )
    tools["workspace_patch"](patch)
    assert (ws / "q.sql").read_text() == "select 1;\n++ new\nselect 2;\n" + "x\n" * 8 + "++ end\n"
    assert (ws / "z.txt").read_text() == "y\n"


def test_diff_u_of_a_backup_and_the_file_patches_the_file(tools: Tools, ws: Path) -> None:
    """`diff -u f.py.orig f.py`: only the new name exists here, so it is the file patched (as
    patch(1) does), not a missing file."""
    (ws / "f.py").write_text("a\nb\n")
    patch = "--- f.py.orig\t2026-01-01 10:00:00 +0000\n+++ f.py\t2026-01-01 10:01:00 +0000\n"
    patch += "@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
    assert tools["workspace_patch"](patch) == "Patch applied:\nM f.py"
    assert (ws / "f.py").read_text() == "a\nB\n"
    assert not (ws / "f.py.orig").exists()


@pytest.mark.timeout(60)  # a bound, not a measurement: 14 s before, growing squared
def test_a_hunk_followed_by_many_blank_lines_is_parsed_in_linear_work(
    tools: Tools, files: Path
) -> None:
    """Counts never met, then 100,000 blank lines (trimmed one list copy at a time)."""
    blanks = "\n" * 100_000
    tools["workspace_patch"](
        f"--- a/b.py\n+++ b/b.py\n@@ -1,9 +1,5 @@\n alpha\n-beta\n+BETA\n{blanks}"
    )
    assert (files / "b.py").read_text() == "alpha\nBETA\n"


@pytest.mark.timeout(60)  # 25 s before, growing squared
def test_many_extended_header_lines_are_read_in_linear_work(tools: Tools, files: Path) -> None:
    """20,000 ``rename to`` lines under one git header (each looked past all the others)."""
    renames = "rename to c.py\n" * 20_000
    patch = f"diff --git a/b.py b/b.py\n{renames}--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-x\n+y\n"
    with pytest.raises(RetriableError):
        tools["workspace_patch"](patch)
    assert (files / "b.py").read_text() == "alpha\nbeta\n"


@pytest.mark.timeout(60)
def test_hunks_against_a_file_of_identical_lines_are_weighed_within_a_bound(
    tools: Tools, ws: Path
) -> None:
    """200 hunks against 100,000 identical lines: each hunk's lines stand everywhere (it took
    15 s, growing with hunks times lines). Each stands at its header's line, no other place as
    near: applied, weighing the places near it only. Naming a section the file lacks, each
    weighs every place for one in it: refused as too many places, the file untouched."""
    before = "a\n" * 100_000
    (ws / "same.txt").write_text(before)
    hunks = "".join(f"@@ -{k},2 +{k},2 @@\n-a\n+b\n a\n" for k in range(1, 400, 2))
    tools["workspace_patch"](f"--- a/same.txt\n+++ b/same.txt\n{hunks}")
    assert (ws / "same.txt").read_text() == "b\na\n" * 200 + "a\n" * (100_000 - 400)
    (ws / "sectioned.txt").write_text(before)
    hunks = hunks.replace(" @@\n", " @@ nowhere\n")
    with pytest.raises(RetriableError, match="too many places"):
        tools["workspace_patch"](f"--- a/sectioned.txt\n+++ b/sectioned.txt\n{hunks}")
    assert (ws / "sectioned.txt").read_text() == before


@pytest.mark.timeout(60)  # 138 s before
def test_a_long_hunk_against_a_file_of_its_lines_is_weighed_within_a_bound(
    tools: Tools, ws: Path
) -> None:
    """Attack: a hunk of 50,000 lines of one word (and one line the file lacks) against a file
    of 100,000 lines of it: all 50,000 lines were compared at each of 50,000 places, then
    difflib compared them whole with windows as long."""
    before = "x\n" * 100_000
    (ws / "same.txt").write_text(before)
    hunk = "@@ -1,50001 +1,50001 @@\n" + " x\n" * 50_000 + "-y\n+z\n"
    with pytest.raises(RetriableError, match="too many places"):
        tools["workspace_patch"](f"--- a/same.txt\n+++ b/same.txt\n{hunk}")
    assert (ws / "same.txt").read_text() == before


class _Reads(list[str]):
    """A file's lines that count the lines their searches (``index``) read."""

    read = 0

    def index(self, value: str, start: SupportsIndex = 0, stop: SupportsIndex = sys.maxsize) -> int:
        start, stop = operator.index(start), operator.index(stop)
        try:
            found = super().index(value, start, stop)
        except ValueError:
            self.read += max(min(stop, len(self)) - start, 0)
            raise
        self.read += found + 1 - start
        return found


def _insertions(count: int, heading: str = "") -> str:
    """One-line insertions after the odd lines of a file of ``L0000000`` lines."""
    return "--- a/big.txt\n+++ b/big.txt\n" + "".join(
        f"@@ -{k},1 +{k},2 @@{heading}\n L{k - 1:07d}\n+new{k}\n" for k in range(1, 2 * count, 2)
    )


def test_hunks_are_looked_for_near_their_line_not_through_the_rest_of_the_file() -> None:
    """Attack: 500 one-line insertions (19 KB) against 2,000,000 distinct lines: each hunk's
    old lines and result were searched from its place to the file's end (charged one step):
    35 s under the workspace lock. Now the lines read stay near each hunk's line."""
    lines = 200_000
    before = "".join(f"L{i:07d}\n" for i in range(lines))
    patched = PatchedText(before, patch_work())
    patched.lines = read = _Reads(patched.lines)
    patched.apply_all(parse_patch(_insertions(500))[0].hunks, "big.txt")
    after = patched.text()
    assert after.count("\nnew") == 500 and after.endswith(f"L{lines - 1:07d}\n")
    assert read.read <= 2 * (500 * 2 + lines)  # before: 200,000,000


@pytest.mark.timeout(60)
def test_hunks_that_read_the_whole_file_each_are_refused_within_a_bound(
    tools: Tools, ws: Path
) -> None:
    """500 hunks naming a section the file lacks: each reads the rest of the file for a place
    in that section; the lines read are charged, and refused as too many, the file untouched."""
    before = "".join(f"L{i:07d}\n" for i in range(200_000))
    (ws / "big.txt").write_text(before)
    with pytest.raises(RetriableError, match="too many places"):
        tools["workspace_patch"](_insertions(500, " def nowhere():"))
    assert (ws / "big.txt").read_text() == before


def _creations(count: int) -> str:
    return "".join(f"--- /dev/null\n+++ b/f{i}.txt\n@@ -0,0 +1 @@\n+x\n" for i in range(count))


def test_a_patch_of_more_files_than_one_call_may_change_is_refused_before_any_is_opened(
    tools: Tools, ws: Path
) -> None:
    """Attack: a 27 KB patch creating 600 files held two descriptors per file until all were
    written; every other open of the process (HTTP accepts, audit rows) failed with EMFILE
    meanwhile under a 1,024 limit."""
    too_many = _creations(MAX_FILES + 1)
    with pytest.raises(RetriableError, match=f"changes {MAX_FILES + 1} files, more than"):
        patch_paths(too_many)  # what the policy is given: refused before it decides
    with pytest.raises(RetriableError, match="split it into several calls"):
        tools["workspace_patch"](too_many)
    assert list(ws.iterdir()) == []
    assert tools["workspace_patch"](_creations(MAX_FILES)).count("\nA f") == MAX_FILES


def _hunk_of_lines(start: int, body: str) -> str:
    count = body.count("\n")
    old = count - body.count("\n+")
    return f"--- a/f.txt\n+++ b/f.txt\n@@ -{start},{old} +{start},{count - old} @@\n{body}"


@pytest.mark.timeout(60)  # a bound, not a measurement
@pytest.mark.parametrize(
    ("before", "hunk"),
    [
        # no exact place: 2,000 removed lines tried at 3,000 places (5,000 at 10,000: 42 s)
        ("x\n" * 5_000 + "c2\n", _hunk_of_lines(100, " c1\n" + "-x\n" * 2_000 + " c2\n")),
        # an exact place away from its line: the places around that line tried as rivals
        ("x\n" * 3_000 + "c\n" + "x\n" * 3_000, _hunk_of_lines(2_900, " c\n" + "-x\n" * 2_000)),
    ],
    ids=["fuzzy", "rivals"],
)
def test_a_hunk_tried_with_differing_context_is_charged_the_lines_compared(
    tools: Tools, ws: Path, before: str, hunk: str
) -> None:
    """Attack: a hunk whose removed lines all equal a line standing everywhere in the file was
    tried, with its context differing, at each place those lines stand (up to 10,000 places
    times the hunk's lines), uncharged: applied after a minute under the workspace lock. Now
    each place costs the lines compared there: refused as too many places, the file untouched."""
    (ws / "f.txt").write_text(before)
    with pytest.raises(RetriableError, match="too many places"):
        tools["workspace_patch"](hunk)
    assert (ws / "f.txt").read_text() == before


@pytest.mark.timeout(60)  # a bound, not a measurement
def test_long_lines_read_for_hunks_whose_context_differs_are_charged_their_size(
    tools: Tools, ws: Path
) -> None:
    """Attack: 1,000 hunks whose context line differs from the file's, against a file ending
    in 200 CR LF lines of 64 KiB: each hunk copied those lines without their CRs twice, looking
    for its changed lines, charged a step a line: 15 s holding the workspace lock. The lines
    read are now charged their size as well: 100 such hunks are refused, the file untouched."""
    before = "".join(f"c{i}\r\na{i}\r\n" for i in range(100)) + ("y" * 65_536 + "\r\n") * 200
    (ws / "f.txt").write_bytes(before.encode())
    hunks = "".join(
        f"@@ -{2 * i + 1},2 +{2 * i + 1},2 @@\n c{i}X\r\n-a{i}\r\n+b{i}\r\n" for i in range(100)
    )
    with pytest.raises(RetriableError, match="too many places"):  # before: applied
        tools["workspace_patch"](f"--- a/f.txt\n+++ b/f.txt\n{hunks}")
    assert (ws / "f.txt").read_bytes() == before.encode()


def test_sections_naming_one_file_share_one_budget(tools: Tools, ws: Path) -> None:
    """Attack: each section of a patch naming the same file was weighed with a fresh budget:
    200 sections spent 178 times the bound in one call (90 s). One section costing well over
    half the bound applies; two such in one patch are refused, the file untouched."""
    before = "x\n" * 3_000 + "y\nw\n"
    (ws / "f.txt").write_text(before)

    def section(old: str, new: str) -> str:  # its line 300 lines below the header's
        return _hunk_of_lines(3_000 - 1_200 - 300 + 1, " x\n" * 1_200 + f"-{old}\n+{new}\n w\n")

    with pytest.raises(RetriableError, match="too many places"):
        tools["workspace_patch"](section("y", "z") + section("z", "v"))
    assert (ws / "f.txt").read_text() == before
    tools["workspace_patch"](section("y", "z"))
    assert (ws / "f.txt").read_text().endswith("x\nz\nw\n")


def _changes(count: int) -> tuple[str, str, str]:
    """A file of 500,000 lines, a patch changing its first ``count`` lines one section each,
    and the file after it."""
    lines = [f"L{i}\n" for i in range(500_000)]
    patch = "".join(
        f"--- a/f.txt\n+++ b/f.txt\n@@ -{i + 1} +{i + 1} @@\n-L{i}\n+M{i}\n" for i in range(count)
    )
    return "".join(lines), patch, "".join([f"M{i}\n" for i in range(count)] + lines[count:])


def _top_insertions(count: int) -> tuple[str, str, str]:
    """A file of two lines, one of 4 MiB, a patch inserting ``count`` lines at its top one
    section each, and the file after it."""
    before = "a\n" + "x" * (4 << 20) + "\n"
    patch = "".join(f"--- a/f.txt\n+++ b/f.txt\n@@ -0,0 +1 @@\n+b{i}\n" for i in range(count))
    return before, patch, "".join(f"b{i}\n" for i in reversed(range(count))) + before


def _calls(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> list[None]:
    """A list that grows by one at each call of ``owner``'s method ``name`` (which still runs)."""
    calls: list[None] = []
    method = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        return method(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.timeout(60)  # a bound, not a measurement
@pytest.mark.parametrize(
    "case", [lambda: _changes(60), lambda: _top_insertions(200)], ids=["lines", "long-line"]
)
def test_a_file_named_in_many_sections_is_split_once_and_joined_once(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch, case: Callable[[], tuple[str, ...]]
) -> None:
    """Attack: each section of a patch naming one file split the file's whole text into lines
    and joined it again (60 one-line changes to a file of 1,000,000 lines: 16 s; 300 lines
    inserted at the top of a file of two lines, one of 19 MiB, charged 3 steps each: 27 s
    holding the workspace lock). The file is now split when its first section is applied and
    joined at the commit, once each, however many sections name it."""
    before, patch, after = case()
    (ws / "f.txt").write_text(before)
    splits = _calls(monkeypatch, PatchedText, "__init__")
    joins = _calls(monkeypatch, PatchedText, "text")
    tools["workspace_patch"](patch)
    assert (len(splits), len(joins)) == (1, 1)  # before: one of each per section
    assert (ws / "f.txt").read_text() == after


@pytest.mark.timeout(60)  # a bound, not a measurement
def test_insertions_that_move_the_rest_of_the_file_are_charged(tools: Tools, ws: Path) -> None:
    """Attack: 20,000 one-line insertions (0.5 MB) into a file of 1,000,000 lines moved the
    lines after each, uncharged: 15 s under the workspace lock. Now the lines moved are
    charged: 1,500 insertions into 400,000 lines are refused, the file untouched."""
    before = "x\n" * 400_000
    (ws / "f.txt").write_text(before)
    hunks = "".join(f"@@ -{k},0 +{2 * k},1 @@\n+a\n" for k in range(1, 1_501))
    with pytest.raises(RetriableError, match="too many places"):
        tools["workspace_patch"](f"--- a/f.txt\n+++ b/f.txt\n{hunks}")
    assert (ws / "f.txt").read_text() == before
