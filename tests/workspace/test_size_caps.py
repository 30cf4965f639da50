"""Every read checks the size first; document conversion has a time limit that stops it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.card import GrepParam, WorkspaceTool

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


def test_caps_round_trip_through_json(ws: Path) -> None:
    card = WorkspaceTool(
        allow_hardlinks=True, max_text_bytes=4096, max_document_bytes=8192,
        max_image_bytes=8192, document_timeout_s=5.0,
        workspace_grep=GrepParam(timeout_s=2.5),
    )  # fmt: skip
    again = WorkspaceTool.model_validate_json(card.model_dump_json())
    assert again == card
    assert os.fspath(ws)
