"""Every tool refuses paths and patterns that lead outside the workspace, touching nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.core.host_files import ROOTS_MARKER
from toolcards.tools.workspace.paths import CACHE_DIR_NAME

from .conftest import Tools

ESCAPES = [
    "../outside/secret.txt",
    "a/../../outside/secret.txt",
    "/etc/passwd",
    "~/secret.txt",
    "sub/../..",
    "x\x00y",
    "a" * 300,
    "d/" * 600,
]


@pytest.mark.parametrize("bad", ESCAPES)
def test_read_refuses_escaping_path(tools: Tools, bad: str) -> None:
    with pytest.raises(RetriableError):
        tools["workspace_read"](bad)


@pytest.mark.parametrize("bad", ESCAPES)
def test_write_refuses_escaping_path_and_creates_nothing(
    tools: Tools, tmp_path: Path, bad: str
) -> None:
    before = sorted(p for p in tmp_path.rglob("*"))
    with pytest.raises(RetriableError):
        tools["workspace_write"](bad, "pwned")
    # opening the workspace marks its root (workspace_dir), whatever the path
    assert sorted(p for p in tmp_path.rglob("*") if p.name != ROOTS_MARKER) == before


def test_absolute_path_to_outside_file_is_refused(tools: Tools, outside: Path) -> None:
    with pytest.raises(RetriableError, match="absolute"):
        tools["workspace_read"](str(outside / "secret.txt"))


def test_symlink_inside_pointing_out_is_refused_for_read(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(RetriableError, match="outside"):
        tools["workspace_read"]("link.txt")


def test_symlink_pointing_out_is_refused_for_write(tools: Tools, ws: Path, outside: Path) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(RetriableError):
        tools["workspace_write"]("link.txt", "pwned")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_dangling_symlink_to_outside_target_is_refused(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "new.txt").symlink_to(outside / "created.txt")
    with pytest.raises(RetriableError):
        tools["workspace_write"]("new.txt", "pwned")
    assert not (outside / "created.txt").exists()


def test_symlinked_parent_directory_is_refused(tools: Tools, ws: Path, outside: Path) -> None:
    (ws / "dir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RetriableError):
        tools["workspace_write"]("dir/planted.txt", "pwned")
    with pytest.raises(RetriableError):
        tools["workspace_read"]("dir/secret.txt")
    with pytest.raises(RetriableError):
        tools["workspace_list"]("dir")
    assert not (outside / "planted.txt").exists()


def test_edit_through_symlink_is_refused(tools: Tools, ws: Path, outside: Path) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(RetriableError):
        tools["workspace_edit"]("link.txt", "TOP", "NO")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_delete_of_symlink_removes_the_link_not_the_target(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "inner.txt").write_text("keep\n")
    (ws / "alias.txt").symlink_to(ws / "inner.txt")
    tools["workspace_delete"]("alias.txt")
    assert not (ws / "alias.txt").is_symlink()
    assert (ws / "inner.txt").read_text() == "keep\n"


def test_delete_through_symlinked_parent_is_refused(tools: Tools, ws: Path, outside: Path) -> None:
    (ws / "dir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RetriableError):
        tools["workspace_delete"]("dir/secret.txt")
    assert (outside / "secret.txt").exists()


def test_mkdir_through_symlinked_parent_is_refused(tools: Tools, ws: Path, outside: Path) -> None:
    (ws / "dir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RetriableError):
        tools["workspace_mkdir"]("dir/made")
    assert not (outside / "made").exists()


def test_workspace_root_itself_cannot_be_deleted(tools: Tools, ws: Path) -> None:
    with pytest.raises(RetriableError):
        tools["workspace_delete"]("")
    with pytest.raises(RetriableError):
        tools["workspace_delete"](".")
    assert ws.is_dir()


@pytest.mark.parametrize(
    "pattern", ["../*", "../outside/*.txt", "/etc/*", "{a,../x}/*", "a/{/etc,b}"]
)
def test_glob_refuses_patterns_with_parent_or_absolute_parts(tools: Tools, pattern: str) -> None:
    with pytest.raises(RetriableError):
        tools["workspace_glob"](pattern)


@pytest.mark.parametrize("include", ["../*.txt", "/etc/*", "{*.py,../*}", "!*.py"])
def test_grep_refuses_include_with_parent_or_absolute_parts(tools: Tools, include: str) -> None:
    with pytest.raises(RetriableError):
        tools["workspace_grep"]("SECRET", "", include)


def test_grep_and_glob_do_not_follow_directory_links_out(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "dir").symlink_to(outside, target_is_directory=True)
    (ws / "f.txt").symlink_to(outside / "secret.txt")
    assert "SECRET" not in tools["workspace_grep"]("SECRET")
    assert "secret" not in tools["workspace_glob"]("**/*.txt")


def test_list_marks_links_pointing_out_without_following(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "dir").symlink_to(outside, target_is_directory=True)
    out = tools["workspace_list"]("", 3)
    assert "dir@ (link, outside the workspace)" in out
    assert "secret.txt" not in out


def test_other_workspace_is_unreachable(tools: Tools, root: Path) -> None:
    (root / "other").mkdir()
    (root / "other" / "plan.txt").write_text("other team\n")
    with pytest.raises(RetriableError):
        tools["workspace_read"]("../other/plan.txt")


def test_cache_directory_is_unreachable_and_not_listed(tools: Tools, ws: Path, root: Path) -> None:
    cache = root / CACHE_DIR_NAME / "docs" / "default"
    cache.mkdir(parents=True)
    (cache / "x.md").write_text("cached\n")
    with pytest.raises(RetriableError):
        tools["workspace_read"](f"../{CACHE_DIR_NAME}/docs/default/x.md")
    with pytest.raises(RetriableError):
        tools["workspace_read"](str(cache / "x.md"))
    assert CACHE_DIR_NAME not in tools["workspace_list"]("", 5)


def test_patch_header_naming_outside_path_is_refused(tools: Tools, outside: Path) -> None:
    patch = (
        "--- a/../outside/secret.txt\n+++ b/../outside/secret.txt\n"
        "@@ -1 +1 @@\n-TOP SECRET\n+pwned\n"
    )
    with pytest.raises(RetriableError):
        tools["workspace_patch"](patch)
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_patch_creating_absolute_path_is_refused(tools: Tools, outside: Path) -> None:
    target = outside / "planted.txt"
    patch = f"--- /dev/null\n+++ {target}\n@@ -0,0 +1 @@\n+pwned\n"
    with pytest.raises(RetriableError):
        tools["workspace_patch"](patch)
    assert not target.exists()


def test_multi_edit_with_outside_path_changes_nothing(
    tools: Tools, ws: Path, outside: Path
) -> None:
    (ws / "a.txt").write_text("alpha\n")
    edits = [
        {"path": "a.txt", "old_string": "alpha", "new_string": "beta"},
        {"path": "../outside/secret.txt", "old_string": "TOP", "new_string": "NO"},
    ]
    from toolcards.tools.workspace.models import EditItem

    with pytest.raises(RetriableError):
        tools["workspace_multi_edit"]([EditItem(**e) for e in edits])
    assert (ws / "a.txt").read_text() == "alpha\n"
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def test_overlong_name_is_refused_before_the_filesystem(tools: Tools, ws: Path) -> None:
    with pytest.raises(RetriableError, match="longer than"):
        tools["workspace_mkdir"]("n" * 256)
    assert os.listdir(ws) == []


PATH_CALLS = {
    "workspace_list": lambda t, p: t["workspace_list"](p),
    "workspace_glob": lambda t, p: t["workspace_glob"]("*", p),
    "workspace_grep": lambda t, p: t["workspace_grep"]("SECRET", p),
    "workspace_view": lambda t, p: t["workspace_view"](p),
    "workspace_edit": lambda t, p: t["workspace_edit"](p, "TOP", "NO"),
    "workspace_delete": lambda t, p: t["workspace_delete"](p),
    "workspace_mkdir": lambda t, p: t["workspace_mkdir"](p),
}


@pytest.mark.parametrize("tool", sorted(PATH_CALLS))
@pytest.mark.parametrize("bad", ["..", "../outside", "/tmp", "a/../../outside", "x\x00"])
def test_every_path_argument_is_contained(tools: Tools, outside: Path, tool: str, bad: str) -> None:
    with pytest.raises(RetriableError):
        PATH_CALLS[tool](tools, bad)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


@pytest.mark.parametrize(
    "header",
    [
        '--- "a/\\056\\056/\\056\\056/planted.txt"\n+++ "b/\\056\\056/\\056\\056/planted.txt"\n',
        "--- x/../../planted.txt\n+++ y/../../planted.txt\n",
        "--- planted.txt.orig\n+++ ../planted.txt\n",
    ],
)
def test_patch_paths_that_unquote_or_strip_to_outside_are_refused(
    tools: Tools, ws: Path, header: str
) -> None:
    """Git-quoted octal escapes, dropped tree names and `x.orig x` pairs never lead out."""
    (ws.parent / "planted.txt").write_text("keep\n")
    with pytest.raises(RetriableError):
        tools["workspace_patch"](header + "@@ -1 +1 @@\n-keep\n+pwned\n")
    assert (ws.parent / "planted.txt").read_text() == "keep\n"
