"""The containment API for code outside the tools (``toolcards.tools.workspace``):
``read_bytes`` and ``list_files`` on real files, links, FIFOs and hard links."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace import AccessRefused, access, globs, list_files, read_bytes
from toolcards.tools.workspace.globs import WalkBound
from toolcards.tools.workspace.paths import Contained, iter_dir

from .race import prepare, run_race

pytestmark = pytest.mark.timeout(60)

CAP = 1000


def test_a_regular_file_is_read(ws: Path) -> None:
    (ws / "notes.md").write_bytes(b"# notes\n")
    assert read_bytes(ws, "notes.md", CAP) == b"# notes\n"


def test_a_link_that_stays_inside_is_followed(ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "real" / "a.txt").write_bytes(b"inside\n")
    (ws / "alias").symlink_to("real", target_is_directory=True)
    assert read_bytes(ws, "alias/a.txt", CAP) == b"inside\n"


def test_a_link_to_an_outside_directory_is_refused(ws: Path, outside: Path) -> None:
    (ws / "lnk").symlink_to(outside, target_is_directory=True)
    with pytest.raises(AccessRefused, match="outside"):
        read_bytes(ws, "lnk/secret.txt", CAP)


@pytest.mark.parametrize("rel", ["../outside/secret.txt", "/etc/hostname", "a\x00b", ""])
def test_a_path_that_leaves_the_workspace_or_is_malformed_is_refused(ws: Path, rel: str) -> None:
    with pytest.raises(AccessRefused):
        read_bytes(ws, rel, CAP)


def test_a_fifo_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(AccessRefused, match="named pipe"):
        read_bytes(ws, "pipe", CAP)


def test_a_hard_link_to_an_outside_file_is_refused(ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "planted.txt")
    with pytest.raises(AccessRefused, match="hard links") as refused:
        read_bytes(ws, "planted.txt", CAP)
    assert "SECRET" not in str(refused.value)


def test_a_file_over_the_cap_is_refused_before_it_is_read(ws: Path) -> None:
    (ws / "big.bin").write_bytes(b"x" * (CAP + 1))
    with pytest.raises(AccessRefused, match="cap"):
        read_bytes(ws, "big.bin", CAP)


def test_a_directory_is_refused(ws: Path) -> None:
    (ws / "sub").mkdir()
    with pytest.raises(AccessRefused, match="directory"):
        read_bytes(ws, "sub", CAP)


def test_listing_shows_only_what_read_bytes_reads(ws: Path, outside: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    (ws / ".hidden").mkdir()
    (ws / ".hidden" / "c.txt").write_text("c\n")
    (ws / ".env").write_text("d\n")
    (ws / "lnk").symlink_to(outside, target_is_directory=True)
    (ws / "alias.txt").symlink_to("b.txt")
    os.mkfifo(ws / "pipe")
    os.link(outside / "secret.txt", ws / "planted.txt")
    assert list_files(ws, 100) == ["b.txt", "src/a.py"]


@pytest.mark.parametrize("rel", [".env", ".git/config", "./.env", "src/.secrets", "env-link"])
def test_a_hidden_file_is_not_read_as_it_is_not_listed(ws: Path, rel: str) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[remote] url = https://u:tok@host/r\n")
    (ws / ".env").write_text("API_KEY=abc\n")
    (ws / "src").mkdir()
    (ws / "src" / ".secrets").write_text("k\n")
    (ws / "env-link").symlink_to(".env")  # a link inside, to a hidden name
    assert list_files(ws, 100) == []
    with pytest.raises(AccessRefused):
        read_bytes(ws, rel, CAP)


def test_a_resource_named_through_a_link_to_a_blank_spelled_name_is_not_read(ws: Path) -> None:
    """An MCP resource is decided on its canonical name, then read by that name: a link to
    ``" deploy"`` was decided as ``" deploy/prod.env"`` and read, stripped, as ``deploy/``."""
    (ws / "deploy").mkdir()
    (ws / "deploy" / "prod.env").write_text("KEY=1\n")
    (ws / "blank").symlink_to(" deploy")
    with pytest.raises(RetriableError, match="no path argument spells"):
        Contained(ws).canonical("blank/prod.env")
    with pytest.raises(AccessRefused, match="no path argument spells"):
        read_bytes(ws, "blank/prod.env", CAP)


def test_listing_stops_at_the_limit(ws: Path) -> None:
    for n in range(10):
        (ws / f"f{n}.txt").write_text("x\n")
    assert list_files(ws, 3) == ["f0.txt", "f1.txt", "f2.txt"]


def _file_beside_links(ws: Path, links: int) -> None:
    """One file and ``links`` links to it (entries a listing reads but never shows)."""
    (ws / "a.txt").write_text("x\n")
    (ws / "s").mkdir()
    for n in range(links):
        os.symlink("../a.txt", ws / "s" / f"{n:06d}")


def test_listing_reads_at_most_its_bound_of_entries_it_never_shows(ws: Path) -> None:
    _file_beside_links(ws, 5000)
    bound = WalkBound(1000, 60.0)
    assert list_files(ws, 500, bound=bound) == ["a.txt"]
    assert bound.visited <= 1000
    assert bound.narrowed


def test_listing_is_bounded_by_default(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _file_beside_links(ws, 5000)
    read: list[str] = []

    def counted(dir_fd: int, limit: int | None = None) -> Iterator[os.DirEntry[str]]:
        entries = list(iter_dir(dir_fd, limit))
        read.extend(e.name for e in entries)
        return iter(entries)

    monkeypatch.setattr(access, "MAX_LIST_ENTRIES", 1000)
    monkeypatch.setattr(globs, "iter_dir", counted)
    assert list_files(ws, 500) == ["a.txt"]
    assert len(read) <= 1000 + 2  # and one more a directory read (it tells the end)


def test_listing_a_missing_workspace_is_refused(root: Path) -> None:
    with pytest.raises(AccessRefused):
        list_files(root / "nowhere", 10)


def _as_tools(ws: Path) -> dict[str, object]:
    """The API in the shape the race harness calls (a refusal is a RetriableError there)."""

    def read(rel: str) -> str:
        try:
            return read_bytes(ws, rel, CAP).decode()
        except AccessRefused as exc:
            raise RetriableError(str(exc)) from None

    return {"workspace_read": read, "workspace_list": lambda _: "\n".join(list_files(ws, 100))}


@pytest.mark.timeout(120)
def test_no_read_or_listing_escapes_while_a_directory_is_swapped_for_an_outside_link(
    ws: Path, outside: Path
) -> None:
    prepare(ws, outside)
    escapes, _ = run_race(_as_tools(ws), ws, outside, {"read": 2000, "list": 2000})  # type: ignore[arg-type]
    assert dict(escapes) == {}


def test_a_folder_on_the_workspaces_path_swapped_for_a_link_is_not_followed(
    tmp_path: Path,
) -> None:
    """Attack: once the tool had its workspace (``<agents' folder>/workspaces/team2``, as a
    data config names it), the agent swapped the folder ``workspaces`` for a link to the host's
    root: each call opened the workspace by its path again and read another team's files."""
    mine, host = tmp_path / "mine", tmp_path / "host"
    (mine / "workspaces" / "team2").mkdir(parents=True)
    (host / "team2").mkdir(parents=True)
    (host / "team2" / "secret.txt").write_text("team2-only-secret")
    paths = Contained(mine / "workspaces" / "team2")
    (mine / "workspaces").rename(mine / "was")
    (mine / "workspaces").symlink_to(host)
    with pytest.raises(OSError, match="'workspaces' on the workspace's path is a link"):
        paths.locate("secret.txt")
