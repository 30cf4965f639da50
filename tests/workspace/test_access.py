"""The containment API for code outside the tools (``toolcards.tools.workspace``):
``read_bytes`` and ``list_files`` on real files, links, FIFOs and hard links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace import AccessRefused, list_files, read_bytes

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


def test_listing_stops_at_the_limit(ws: Path) -> None:
    for n in range(10):
        (ws / f"f{n}.txt").write_text("x\n")
    assert list_files(ws, 3) == ["f0.txt", "f1.txt", "f2.txt"]


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
