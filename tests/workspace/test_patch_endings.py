"""workspace_patch and line endings and encodings: what the diff says about a line's ending
is kept, a file keeps its own style where the diff says nothing, and a file that is not UTF-8
is read and written in the encoding it has."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError

from .conftest import Tools


def test_a_line_added_with_crlf_is_written_crlf(tools: Tools, ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"a\nc\n")
    tools["workspace_patch"]("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n a\n+b\r\n c\n")
    assert (ws / "f.txt").read_bytes() == b"a\nb\r\nc\n"


@pytest.mark.parametrize(
    ("before", "patch", "after"),
    [
        (b"a\nb\n", "@@ -1,2 +1,2 @@\n-a\n-b\n+a\r\n+b\r\n", b"a\r\nb\r\n"),
        (b"a\r\nb\r\n", "@@ -1,2 +1,2 @@\n-a\r\n-b\r\n+a\n+b\n", b"a\nb\n"),
        (b"a\nb\nc\n", "@@ -1,3 +1,3 @@\n a\n-b\n+b\r\n c\n", b"a\nb\r\nc\n"),
    ],
    ids=["LF to CRLF", "CRLF to LF", "one line to CRLF"],
)
def test_a_diff_converting_line_endings_converts_them(
    tools: Tools, ws: Path, before: bytes, patch: str, after: bytes
) -> None:
    (ws / "f.txt").write_bytes(before)
    tools["workspace_patch"]("--- a/f.txt\n+++ b/f.txt\n" + patch)
    assert (ws / "f.txt").read_bytes() == after


def test_a_conversion_sent_twice_is_applied_once(tools: Tools, ws: Path) -> None:
    (ws / "f.txt").write_bytes(b"a\nb\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n-a\n-b\n+a\r\n+b\r\n"
    tools["workspace_patch"](patch)
    with pytest.raises(RetriableError, match="already applied"):
        tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_bytes() == b"a\r\nb\r\n"


def test_an_lf_diff_on_a_mixed_file_keeps_each_line_s_ending(tools: Tools, ws: Path) -> None:
    """A changed line keeps the ending of the line it replaces; an added line takes the
    ending of the line before it."""
    (ws / "f.txt").write_bytes(b"a\r\nb\nc\r\nd\n")
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,5 @@\n-a\n+A\n b\n c\n+c2\n d\n"
    tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_bytes() == b"A\r\nb\nc\r\nc2\r\nd\n"


def test_an_lf_diff_adding_at_the_end_of_a_crlf_file_without_final_newline(
    tools: Tools, ws: Path
) -> None:
    (ws / "f.txt").write_bytes(b"a\r\nb")
    tools["workspace_patch"]("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,3 @@\n a\n b\n+c\n")
    assert (ws / "f.txt").read_bytes() == b"a\r\nb\r\nc"


@pytest.mark.parametrize("file", [b"a\nb\nc\n", b"a\r\nb\r\nc\r\n"], ids=["LF file", "CRLF file"])
def test_a_diff_sent_with_crlf_line_ends_keeps_the_file_s_style(
    tools: Tools, ws: Path, file: bytes
) -> None:
    """Every line of the diff, its headers too, ends with CR LF (the sender's line ends, not
    the file's)."""
    (ws / "f.txt").write_bytes(file)
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n".replace("\n", "\r\n")
    tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_bytes() == file.replace(b"b", b"B")


# ---- encodings ----------------------------------------------------------------------------


def test_a_latin_1_file_is_patched_in_latin_1(tools: Tools, ws: Path) -> None:
    (ws / "f.py").write_bytes("# Gerhard Häring\nname = 'café'\n".encode("latin-1"))
    assert "Häring" in tools["workspace_read"]("f.py")
    patch = "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n # Gerhard Häring\n-name = 'café'\n"
    patch += "+name = 'crème brûlée'\n"
    tools["workspace_patch"](patch)
    assert (ws / "f.py").read_bytes() == "# Gerhard Häring\nname = 'crème brûlée'\n".encode(
        "latin-1"
    )


def test_a_windows_1252_file_keeps_its_quotes(tools: Tools, ws: Path) -> None:
    (ws / "f.txt").write_bytes("it’s\n€ 5\n".encode("cp1252"))
    tools["workspace_patch"]("--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n it’s\n-€ 5\n+€ 6\n")
    assert (ws / "f.txt").read_bytes() == "it’s\n€ 6\n".encode("cp1252")


@pytest.mark.parametrize(
    ("data", "text", "name"),
    [("é\n".encode("cp1252"), "é", "Windows-1252"), (b"\x81\n", "\x81", "Latin-1")],
    ids=["Windows-1252 file", "Latin-1 file"],
)
def test_a_character_the_file_s_encoding_cannot_hold_is_refused(
    tools: Tools, ws: Path, data: bytes, text: str, name: str
) -> None:
    (ws / "f.txt").write_bytes(data)
    patch = f"--- a/f.txt\n+++ b/f.txt\n@@ -1 +1,2 @@\n {text}\n+→ next\n"
    with pytest.raises(RetriableError, match=f"f.txt is {name} text .* cannot hold"):
        tools["workspace_patch"](patch)
    assert (ws / "f.txt").read_bytes() == data


def test_an_edit_of_a_latin_1_file_stays_latin_1(tools: Tools, ws: Path) -> None:
    (ws / "f.txt").write_bytes("café\n".encode("latin-1"))
    tools["workspace_edit"]("f.txt", "café", "cafés")
    assert (ws / "f.txt").read_bytes() == "cafés\n".encode("latin-1")


def test_a_non_utf8_file_full_of_control_bytes_is_still_binary(tools: Tools, ws: Path) -> None:
    (ws / "blob.dat").write_bytes(bytes(range(1, 32)) * 20 + b"\xff")
    with pytest.raises(RetriableError, match="binary"):
        tools["workspace_read"]("blob.dat")


def test_a_lone_surrogate_in_a_diff_is_refused(tools: Tools, ws: Path) -> None:
    (ws / "f.txt").write_text("a\n")
    with pytest.raises(RetriableError, match="not a character"):
        tools["workspace_patch"]("--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n+\ud800\n")
    assert (ws / "f.txt").read_text() == "a\n"
