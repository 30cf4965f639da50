"""Every read checks the size first; document conversion has a time limit that stops it, a
memory limit and a cap on the text it hands back."""

from __future__ import annotations

import hashlib
import os
import resource
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace import docs
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool
from toolcards.tools.workspace.paths import CACHE_DIR_NAME

from .conftest import Tools, tools_of

pytestmark = pytest.mark.timeout(60)

GIB = 1024**3


def _sparse(path: Path, size: int) -> None:
    """A file of ``size`` bytes that takes no disk space (and would take long to read)."""
    with open(path, "wb") as handle:
        handle.write(b"%PDF-1.4\n")
        handle.truncate(size)


def test_huge_document_is_refused_before_it_is_read(tools: Tools, ws: Path) -> None:
    _sparse(ws / "report.pdf", GIB)
    start = time.monotonic()
    with pytest.raises(RetriableError, match=r"1024 MiB, over the 50 MiB cap for a document"):
        tools["workspace_read"]("report.pdf")
    assert time.monotonic() - start < 5  # bounded-time regression: no byte was read


def test_huge_image_is_refused_before_it_is_read(tools: Tools, ws: Path) -> None:
    _sparse(ws / "shot.png", GIB)
    with pytest.raises(RetriableError, match="1024 MiB, over the 20 MiB cap for an image"):
        tools["workspace_view"]("shot.png")


def _zeros_png(width: int, height: int) -> bytes:
    """An RGBA PNG of zeros, written by hand: a few hundred KiB that decode to 4 bytes a pixel."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body).to_bytes(4, "big")
        return len(body).to_bytes(4, "big") + kind + body + crc

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    packer = zlib.compressobj(9)
    row = bytes(1 + 4 * width)  # filter byte, then the pixels
    pixels = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    body = chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def _ico_of(png: bytes) -> bytes:
    """An ICO whose one entry declares 1x1 pixels and holds ``png`` (Pillow reads its size
    from the PNG and decodes it while opening the file)."""
    entry = struct.pack("<BBBBHHII", 1, 1, 0, 0, 1, 32, len(png), 6 + 16)
    return struct.pack("<HHH", 0, 1, 1) + entry + png


def _peak_rss() -> int:
    """This process's peak resident memory so far, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def test_image_of_too_many_pixels_is_refused_before_it_is_decoded(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 336 KiB PNG of 9400x9400 pixels, under Pillow's own bound, was decoded to 1.2 GiB."""
    pytest.importorskip("PIL")
    (ws / "shot.png").write_bytes(_zeros_png(9400, 9400))
    decoders = _spy_decoders(monkeypatch)
    peak = _peak_rss()
    with pytest.raises(RetriableError, match=r"9400x9400 pixels, over the 25 M pixel cap"):
        tools["workspace_view"]("shot.png")
    assert decoders == []
    assert _peak_rss() - peak < 256 * 1024 * 1024  # decoding it took 1.2 GiB


def test_image_whose_content_is_another_format_is_refused_before_it_is_decoded(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 336 KiB 'shot.png' that was an ICO declaring 1x1 pixels passed the pixel cap after
    Pillow had decoded the 9400x9400 PNG inside it while opening it (599 MiB at 12000x12000)."""
    pytest.importorskip("PIL")
    (ws / "shot.png").write_bytes(_ico_of(_zeros_png(9400, 9400)))
    decoders = _spy_decoders(monkeypatch)
    peak = _peak_rss()
    with pytest.raises(RetriableError, match=r"^shot\.png is not a PNG image$"):
        tools["workspace_view"]("shot.png")
    assert decoders == []
    assert _peak_rss() - peak < 256 * 1024 * 1024


def _spy_decoders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the decoders Pillow creates from now on (one per image it decodes)."""
    from PIL import Image

    decoders: list[str] = []
    get_decoder = Image._getdecoder

    def decoder(*args: Any) -> Any:
        decoders.append(args[1])
        return get_decoder(*args)

    monkeypatch.setattr(Image, "_getdecoder", decoder)
    return decoders


def test_text_cap_is_configurable_per_card(ws: Path) -> None:
    (ws / "log.txt").write_text("x" * 5000 + "\n")
    tools = tools_of(WorkspaceTool(max_text_bytes=4096))
    with pytest.raises(RetriableError, match="over the 4 KiB cap for a text file"):
        tools["workspace_read"]("log.txt")
    with pytest.raises(RetriableError, match="over the 4 KiB cap"):
        tools["workspace_edit"]("log.txt", "x", "y", True)


def test_grep_skips_files_over_the_text_cap_and_says_so(ws: Path) -> None:
    (ws / "big.txt").write_text("needle\n" + "x" * 5000 + "\n")
    (ws / "small.txt").write_text("needle\n")
    card = WorkspaceTool(max_text_bytes=4096, workspace_grep=GrepParam(engine="python"))
    assert tools_of(card)["workspace_grep"]("needle").splitlines() == [
        "small.txt:1:needle",
        "[1 file not searched: over the size cap or hard-linked]",
    ]


def test_document_cap_is_configurable_per_card(ws: Path) -> None:
    _sparse(ws / "r.pdf", 3 * 1024 * 1024)
    tools = tools_of(WorkspaceTool(max_document_bytes=2 * 1024 * 1024))
    with pytest.raises(RetriableError, match="over the 2 MiB cap for a document"):
        tools["workspace_read"]("r.pdf")


def test_conversion_over_its_time_limit_is_stopped(ws: Path) -> None:
    pytest.importorskip("markitdown")
    openpyxl = pytest.importorskip("openpyxl")
    book = openpyxl.Workbook()
    book.active.append(["name", "qty"])
    book.save(ws / "stock.xlsx")
    tools = tools_of(WorkspaceTool(document_timeout_s=0.05))
    start = time.monotonic()
    with pytest.raises(RetriableError, match=r"took longer than 0\.05 s and was stopped"):
        tools["workspace_read"]("stock.xlsx")
    assert time.monotonic() - start < 10


def _fake_converter(monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """The converter child replaced by the Python ``script`` (started and fed as the real one)."""
    pytest.importorskip("markitdown")  # the parent checks the extra is installed
    monkeypatch.setattr(docs, "_converter_argv", lambda suffix: [sys.executable, "-c", script])


def test_document_text_over_the_cap_is_cut_and_the_converter_stopped(
    ws: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a small document whose text expands: the child writes twice the cap, then would run on
    # until the time limit; only a read that stops at the cap and kills the child answers
    lines = 2 * docs.MAX_DOCUMENT_TEXT_BYTES // 64
    script = (
        "import sys, time; sys.stdin.buffer.read(); "
        f"sys.stdout.buffer.write((b'x' * 63 + b'\\n') * {lines}); "
        "sys.stdout.flush(); time.sleep(120)"
    )
    _fake_converter(monkeypatch, script)
    (ws / "bomb.docx").write_bytes(b"PK tiny")
    tools = tools_of(WorkspaceTool(document_timeout_s=30))
    head = tools["workspace_read"]("bomb.docx", limit=1)
    assert head.startswith("     1\t" + "x" * 63)
    [cached] = (root / CACHE_DIR_NAME / "docs" / "default").glob("*.md")
    assert cached.stat().st_size <= docs.MAX_DOCUMENT_TEXT_BYTES
    total = cached.read_text().count("\n")
    tail = tools["workspace_read"]("bomb.docx", offset=total - 1)
    assert tail.endswith("[... the document's text is cut here: it is longer than 4 MiB]")


def test_converter_runs_with_an_address_space_limit(
    tools: Tools, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = (
        "import resource, sys; sys.stdin.buffer.read(); "
        "print(resource.getrlimit(resource.RLIMIT_AS))"
    )
    _fake_converter(monkeypatch, script)
    (ws / "r.pdf").write_bytes(b"%PDF-1.4 x")
    cap = docs.CONVERTER_MEMORY_BYTES
    assert tools["workspace_read"]("r.pdf") == f"     1\t({cap}, {cap})"


def test_cached_text_over_the_cap_is_converted_again(
    tools: Tools, ws: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_converter(monkeypatch, "import sys; sys.stdin.buffer.read(); print('fresh')")
    (ws / "r.pdf").write_bytes(b"%PDF-1.4 x")
    cache = root / CACHE_DIR_NAME / "docs" / "default"
    cache.mkdir(parents=True)
    stale = cache / f"{hashlib.sha256(b'%PDF-1.4 x').hexdigest()}.md"
    stale.write_bytes(b"y" * (docs.MAX_DOCUMENT_TEXT_BYTES + 1))  # cached before the cap
    assert tools["workspace_read"]("r.pdf") == "     1\tfresh"
    assert stale.read_text() == "fresh\n"


def _cached_names(root: Path) -> set[str]:
    return {p.name for p in (root / CACHE_DIR_NAME / "docs" / "default").iterdir()}


def _key(data: bytes) -> str:
    return f"{hashlib.sha256(data).hexdigest()}.md"


def test_document_cache_keeps_a_byte_bound_evicting_the_least_recently_used(
    tools: Tools, ws: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each distinct document read left its text outside the workspace, for good
    _fake_converter(monkeypatch, "import sys; sys.stdin.buffer.read(); print('x' * 1023)")
    monkeypatch.setattr(docs, "MAX_CACHE_BYTES", 3 * 1024)  # three texts of 1 KiB
    for name in "abc":
        (ws / f"{name}.pdf").write_bytes(name.encode())
        tools["workspace_read"](f"{name}.pdf", limit=1)
    tools["workspace_read"]("a.pdf", limit=1)  # a cache hit: a is now used after b and c
    (ws / "d.pdf").write_bytes(b"d")
    tools["workspace_read"]("d.pdf", limit=1)
    assert _cached_names(root) == {_key(b"a"), _key(b"c"), _key(b"d")}


def test_document_cache_keeps_an_entry_bound(
    tools: Tools, ws: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_converter(monkeypatch, "import sys; sys.stdin.buffer.read(); print('text')")
    monkeypatch.setattr(docs, "MAX_CACHE_ENTRIES", 2)
    for name in "abc":
        (ws / f"{name}.pdf").write_bytes(name.encode())
        tools["workspace_read"](f"{name}.pdf")
    assert _cached_names(root) == {_key(b"b"), _key(b"c")}
    assert tools["workspace_read"]("a.pdf") == "     1\ttext"  # converted again


def test_caps_round_trip_through_json(ws: Path) -> None:
    card = WorkspaceTool(
        allow_hardlinks=True, max_text_bytes=4096, max_document_bytes=8192,
        max_image_bytes=8192, document_timeout_s=5.0,
        workspace_grep=GrepParam(timeout_s=2.5),
    )  # fmt: skip
    again = WorkspaceTool.model_validate_json(card.model_dump_json())
    assert again == card
    assert os.fspath(ws)
