"""The package's modules by dotted name, read from the source tree (for the structure tests)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "toolcards"


def package_modules() -> dict[str, Path]:
    """``toolcards.x.y`` -> its file, for every module of the package (packages by __init__)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found
