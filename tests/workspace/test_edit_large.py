"""Edits in large files: the closest region of a miss points at the right place, and matches
found through candidate lines are the ones a line-by-line scan finds."""

from __future__ import annotations

import random
import re
import sysconfig
from pathlib import Path

import pytest

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.locate import closest_region

from .conftest import Tools

_WORD = re.compile(r"[A-Za-z_]\w{2,}")


def _perturbed(rng: random.Random, block: list[str]) -> list[str] | None:
    """The block as a model might misremember it: a renamed word, a rewritten or lost line,
    or lost indentation."""
    lines = list(block)
    k = rng.randrange(len(lines))
    kind = rng.choice(["rename", "rewrite", "drop", "indent"])
    if kind == "rename":
        words = _WORD.findall(lines[k])
        if not words:
            return None
        word = rng.choice(words)
        lines[k] = lines[k].replace(word, word + "_x", 1)
    elif kind == "rewrite":
        lines[k] = "    something_else = compute(other)"
    elif kind == "drop" and len(lines) > 2:
        del lines[k]
    else:
        lines = [ln.strip() for ln in lines]
        lines[k] += "  # changed"
    return lines


def test_closest_region_points_at_the_misremembered_place_in_real_files() -> None:
    rng = random.Random(7)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    sources = [p for p in sorted(stdlib.glob("*.py")) if 8_000 < p.stat().st_size < 150_000]
    rng.shuffle(sources)
    hits = total = 0
    for source in sources[:40]:
        text = source.read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        for _ in range(5):
            size = rng.randint(2, 10)
            start = rng.randrange(0, len(lines) - size)
            block = lines[start : start + size]
            old = _perturbed(rng, block)
            if old is None or sum(1 for b in block if b.strip()) < 2 or "\n".join(old) in text:
                continue
            found = closest_region(text, "\n".join(old))
            total += 1
            hits += found is not None and abs(found[0] - 1 - start) <= 1
    assert total >= 100
    assert hits / total >= 0.85  # the earlier exhaustive scorer reached 0.91 on such cases


@pytest.fixture
def big(ws: Path) -> Path:
    path = ws / "big.py"
    path.write_text("".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(50_000)))
    return path


def test_miss_in_a_large_file_quotes_the_place_meant(tools: Tools, big: Path) -> None:
    with pytest.raises(RetriableError, match=r"Closest region \(line 80001\)") as info:
        tools["workspace_edit"]("big.py", "def f40000(y):\n    return x + 40000", "x")
    assert "def f40000(x):" in str(info.value)


def test_indentation_drift_deep_in_a_large_file_applies(tools: Tools, big: Path) -> None:
    tools["workspace_edit"](
        "big.py", "  def f45000(x):\n      return x + 45000", "  def f45000(x):\n      return -x"
    )
    lines = big.read_text().split("\n")
    assert lines[90_000:90_002] == ["def f45000(x):", "    return -x"]


def test_frequent_line_is_still_reported_as_ambiguous(tools: Tools, ws: Path) -> None:
    (ws / "rep.py").write_text("  x = 1\n  y = 2\n" * 3000)
    with pytest.raises(RetriableError, match="3000 places"):
        tools["workspace_edit"]("rep.py", "x = 1\ny = 2", "x = 3\ny = 4")
