"""The canonical name of a workspace path: the one the tools act on, which the policy decides on
(``Contained.canonical``, ``patch_paths`` and the cards' ``PathArgs`` declarations)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.core.spec import annotations_of
from toolcards.tools.workspace import stored
from toolcards.tools.workspace.card import WorkspaceTool
from toolcards.tools.workspace.patch import patch_paths
from toolcards.tools.workspace.paths import Contained

from .conftest import tools_of

SPELLINGS = [
    "deploy/prod.env",
    "./deploy/prod.env",
    ".//deploy/prod.env",
    "deploy/./prod.env",
    "deploy//prod.env",
    " deploy/prod.env",
    "deploy/prod.env\n",
    "./deploy/./prod.env/",
]


@pytest.fixture
def deploy(ws: Path) -> Path:
    (ws / "deploy").mkdir()
    (ws / "deploy" / "prod.env").write_text("KEY=1\n")
    return ws


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_of_a_path_has_one_canonical_name(deploy: Path, spelling: str) -> None:
    assert Contained(deploy).canonical(spelling) == "deploy/prod.env"


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_missing_file_has_the_same_canonical_name(ws: Path, spelling: str) -> None:
    assert Contained(ws).canonical(spelling) == "deploy/prod.env"


def test_escaped_bytes_of_a_missing_name_are_named_as_the_file_system_spells_them(
    ws: Path,
) -> None:
    """``d\\udcc3\\udca9ploiement`` (JSON escapes of the bytes of ``é``) names the file
    ``déploiement`` on disk: the policy must see that name, also before it exists."""
    escaped = "d\udcc3\udca9ploiement/x.txt"
    paths = Contained(ws)
    assert paths.canonical(escaped) == "d\u00e9ploiement/x.txt"
    (ws / "d\u00e9ploiement").mkdir()
    assert paths.canonical(escaped) == "d\u00e9ploiement/x.txt"
    assert paths.canonical("bad\udcff.txt") == "bad\udcff.txt"  # not UTF-8: stays escaped


@pytest.mark.parametrize("spelling", ["a\ud800b", "x/\udbff\udfff"])
def test_a_surrogate_no_bytes_make_is_refused(ws: Path, spelling: str) -> None:
    with pytest.raises(RetriableError, match="lone surrogate"):
        Contained(ws).canonical(spelling)


@pytest.mark.parametrize("spelling", ["notes/../deploy/prod.env", "/deploy/prod.env", "a\\..\\b"])
def test_a_path_the_tools_refuse_has_no_canonical_name(deploy: Path, spelling: str) -> None:
    with pytest.raises(RetriableError):
        Contained(deploy).canonical(spelling)


def test_a_link_inside_the_workspace_is_named_by_its_target(deploy: Path) -> None:
    (deploy / "shortcut").symlink_to("deploy")
    (deploy / "notes").mkdir()
    (deploy / "notes" / "env").symlink_to("../deploy/prod.env")
    paths = Contained(deploy)
    assert paths.canonical("shortcut/prod.env") == "deploy/prod.env"
    assert paths.canonical("notes/env") == "deploy/prod.env"
    assert paths.canonical("notes/env", follow=False) == "notes/env"


def test_the_workspace_itself_is_dot_where_allowed(ws: Path) -> None:
    assert Contained(ws).canonical("", allow_root=True) == "."
    assert Contained(ws).canonical("./", allow_root=True) == "."
    with pytest.raises(RetriableError):
        Contained(ws).canonical("./")


def test_a_case_sensitive_file_system_keeps_other_cases_apart(deploy: Path) -> None:
    (deploy / "DEPLOY").mkdir()
    assert Contained(deploy).canonical("DEPLOY/prod.env") == "DEPLOY/prod.env"
    assert Contained(deploy).canonical("Deploy/prod.env") == "Deploy/prod.env"


BLANK_LINKS = [
    (" deploy", "link/prod.env"),
    ("\tdeploy", "link/prod.env"),
    ("\u3000deploy", "link/prod.env"),
    ("\x1cdeploy/", "link/prod.env"),
    ("deploy/prod.env ", "link"),
    ("deploy/prod.env\n", "link"),
    ("deploy/prod.env\u00a0", "link"),
]
"""Link targets with blank space at an end of the name they lead to: the policy saw
``" deploy/prod.env"``, the tool read it again, stripped, as ``deploy/prod.env``."""


@pytest.mark.parametrize(("target", "path"), BLANK_LINKS)
def test_a_link_to_a_name_with_blank_space_at_an_end_is_refused(
    deploy: Path, target: str, path: str
) -> None:
    (deploy / "link").symlink_to(target)
    with pytest.raises(RetriableError, match="no path argument spells"):
        Contained(deploy).canonical(path)


def _via(ws: Path, name: str) -> Contained:
    """The directory ``name`` holding ``prod.env``, reached through the link ``via``."""
    (ws / name).mkdir()
    (ws / name / "prod.env").write_text("KEY=1\n")
    (ws / "via").symlink_to(name)
    return Contained(ws)


@pytest.mark.parametrize("name", [" deploy", "~deploy", "c:", "a\\..\\b"])
def test_a_name_a_path_argument_cannot_spell_is_refused(ws: Path, name: str) -> None:
    """Given back, each is stripped (another name) or refused (after the policy allowed it)."""
    with pytest.raises(RetriableError, match="no path argument spells"):
        _via(ws, name).canonical("via/prod.env")


@pytest.mark.parametrize("name", ["deploy ", "de ploy", "d\u00e9ploy"])
def test_a_canonical_name_is_its_own_canonical_name(ws: Path, name: str) -> None:
    paths = _via(ws, name)
    rel = paths.canonical("via/prod.env")
    assert rel == f"{name}/prod.env"
    assert paths.canonical(rel) == rel


@contextlib.contextmanager
def case_insensitive_dir() -> Iterator[Path]:
    """A directory on a case-insensitive file system (a tmpfs mounted with ``casefold``, as
    root on a kernel with unicode support); skips the test where none can be made."""
    base = Path(tempfile.mkdtemp())
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "casefold", "tmpfs", str(base)], capture_output=True
    )
    if done.returncode != 0:
        base.rmdir()
        pytest.skip("no case-insensitive file system can be mounted here")
    try:
        yield base
    finally:
        subprocess.run(["umount", str(base)], check=False)
        base.rmdir()


def test_a_case_insensitive_file_system_names_the_stored_case() -> None:
    with case_insensitive_dir() as root:
        (root / "deploy").mkdir()
        (root / "deploy" / "prod.env").write_text("KEY=1\n")
        assert Contained(root).canonical("DEPLOY/Prod.ENV") == "deploy/prod.env"
        assert Contained(root).canonical("DEPLOY/new.env") == "deploy/new.env"


def test_patch_paths_name_both_sides_of_every_file() -> None:
    patch = (
        "diff --git a/notes/a.md b/deploy/a.md\n"
        "similarity index 100%\n"
        "rename from notes/a.md\n"
        "rename to deploy/a.md\n"
        "diff --git a/release/new.md b/release/new.md\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/./release/new.md\n"
        "@@ -0,0 +1 @@\n"
        "+hi\n"
    )
    assert patch_paths(patch) == ["notes/a.md", "deploy/a.md", "./release/new.md"]


def test_every_workspace_tool_declares_its_paths(ws: Path) -> None:
    declared = {name: annotations_of(fn).paths for name, fn in tools_of(WorkspaceTool()).items()}
    assert all(paths is not None for paths in declared.values()), declared
    multi, patch = declared["workspace_multi_edit"], declared["workspace_patch"]
    assert multi is not None and multi.fields == ("edits[].path",)
    assert patch is not None and [name for name, _ in patch.texts] == ["patch_text"]


def test_declared_paths_resolve_to_canonical_arguments(deploy: Path) -> None:
    tools = tools_of(WorkspaceTool())
    multi = annotations_of(tools["workspace_multi_edit"]).paths
    assert multi is not None
    edits = [
        {"path": "./notes/a.md", "old_string": "a", "new_string": "b"},
        {"path": "deploy//prod.env", "old_string": "1", "new_string": "2"},
    ]
    args, each = multi.resolve({"edits": edits})
    assert [e["path"] for e in args["edits"]] == ["notes/a.md", "deploy/prod.env"]
    assert each == {"path": ("notes/a.md", "deploy/prod.env")}
    assert edits[0]["path"] == "./notes/a.md"  # the caller's arguments are not changed


def test_a_deleted_link_is_named_as_the_link(deploy: Path) -> None:
    (deploy / "env").symlink_to("deploy/prod.env")
    delete = annotations_of(tools_of(WorkspaceTool())["workspace_delete"]).paths
    assert delete is not None
    assert delete.resolve({"path": "./env"})[0] == {"path": "env"}
    assert os.path.islink(deploy / "env")


@pytest.fixture
def planted(ws: Path) -> Path:
    """``B`` (a few hundred entries and a non-ASCII ``é``) holds ``y``, a link that enters and
    leaves ``é`` a hundred times, as an exec job could plant it."""
    big = ws / "B"
    big.mkdir()
    for i in range(300):
        (big / f"f{i:03d}").touch()
    (big / "\u00e9").mkdir()
    (big / "y").symlink_to("\u00e9/.." + "/\u00e9/.." * 100)
    return ws


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The directories ``os.scandir`` reads from now on (one item a read)."""
    reads: list[object] = []
    scandir = os.scandir

    def counted(path: int) -> Iterator[os.DirEntry[str]]:
        reads.append(path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", counted)
    return reads


def as_case_insensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every non-ASCII name aliases another spelling, as on a case-insensitive file system."""
    monkeypatch.setattr(stored, "_aliased", lambda name, dir_fd, entry: not name.isascii())


def test_a_link_that_enters_a_directory_again_reads_its_parent_once(
    planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each entry into a non-ASCII directory read its whole parent (to find the stored name):
    one path cost thousands of full directory reads, blocking the executor's event loop."""
    as_case_insensitive(monkeypatch)
    reads = count_reads(monkeypatch)
    assert Contained(planted).canonical("B/y", allow_root=True) == "B"
    assert len(reads) == 1


def test_only_a_name_another_spelling_opens_is_listed(
    planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no other case or normal form opens the same entry, the directory does not alias
    the name: it is stored as opened, and no directory is read (``B`` was read for each)."""
    (planted / "B" / "\u00c9").mkdir()  # another entry: a case-sensitive file system
    (planted / "B" / "\u00e9" / "\u00e8").touch()
    os.link(planted / "B" / "\u00e9" / "\u00e8", planted / "B" / "\u00e9" / "\u00c8")
    reads = count_reads(monkeypatch)
    assert Contained(planted).canonical("B/\u00e9/new.txt") == "B/\u00e9/new.txt"
    assert Contained(planted).canonical("B/\u00c9/\u65e5") == "B/\u00c9/\u65e5"
    assert reads == []
    assert Contained(planted).canonical("B/\u00e9/\u00e8") == "B/\u00e9/\u00e8"
    assert len(reads) == 1  # its twin is the same file: the listing tells the stored name


def test_a_stored_name_past_the_listing_bound_is_refused(
    planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory is read for stored names within a bound of entries: a name the entries
    read do not show is refused, never guessed; one they show is named."""
    as_case_insensitive(monkeypatch)
    at = [entry.name for entry in os.scandir(planted / "B")].index("\u00e9")
    monkeypatch.setattr(stored, "MAX_LISTED", at)
    with pytest.raises(RetriableError, match=f"within the {at} entries"):
        Contained(planted).canonical("B/\u00e9/x")
    monkeypatch.setattr(stored, "MAX_LISTED", at + 1)
    assert Contained(planted).canonical("B/\u00e9/x") == "B/\u00e9/x"


def test_a_resolution_walks_a_bounded_number_of_names(planted: Path) -> None:
    """40 links of ~4 KB each made ~80,000 names for one path; past 4,096 it is refused."""
    (planted / "B" / "dots").symlink_to("." + "/." * 1500)
    (planted / "B" / "chain").symlink_to("dots/dots/dots")
    assert Contained(planted).canonical("B/dots", allow_root=True) == "B"
    with pytest.raises(RetriableError, match="walks more than 4096 names"):
        Contained(planted).canonical("B/chain", allow_root=True)


def test_a_listing_of_links_reads_no_directory_to_label_them(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """workspace_list resolved each of 500 links through ``B/\u00e9`` anew, each reading all of
    ``B`` for stored names: 500 reads of a 100,000-entry directory took 43 s for one call."""
    (ws / "B").mkdir()
    for i in range(300):
        (ws / "B" / f"f{i:03d}").touch()
    (ws / "B" / "\u00e9").mkdir()
    (ws / "links").mkdir()
    for i in range(499):  # and one more: the 500 entries a listing shows
        (ws / "links" / f"l{i:03d}").symlink_to("../B/\u00e9")
    (ws / "links" / "out").symlink_to("../B/\u00e9/../../..")
    reads = count_reads(monkeypatch)
    out = tools_of(WorkspaceTool())["workspace_list"]("links")
    assert out.count("(link, inside)") == 499
    assert "out@ (link, outside the workspace)" in out
    assert len(reads) == 1  # the listing of links itself
