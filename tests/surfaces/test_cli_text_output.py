"""A tool's text value printed without rich (output that is no terminal) is byte for byte
what rich prints, and whatever rich would change (tabs, control characters, emoji codes)
still goes through rich."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from toolcards.surfaces.cli.state import print_text

TEXTS = [
    "created ids: [1]",
    "",
    "two\nlines",
    "ends with a newline\n",
    "é ü 漢字 🙂 [bold]not markup[/bold]",
    "a\ttab",
    "a carriage\rreturn",
    "an :thumbs_up: code",
    "trailing spaces   ",
    "x" * 500,
]


def _rich(text: str) -> str:
    buffer = io.StringIO()
    Console(file=buffer, highlight=False, soft_wrap=True).print(text, markup=False)
    return buffer.getvalue()


@pytest.mark.parametrize("text", TEXTS)
def test_text_is_printed_as_rich_prints_it(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    print_text(text)
    assert capsys.readouterr().out == _rich(text)
