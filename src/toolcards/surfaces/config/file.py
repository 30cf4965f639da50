"""The config loader's one file call: a config file's text.

Kept apart from :mod:`toolcards.surfaces.config.model`, which knows where workspaces live: a module
that knows workspace roots makes no file calls of its own (``tests/test_containment_rule.py``).
"""

from __future__ import annotations

from pathlib import Path


def read_config_text(path: Path) -> str:
    """The text of the config file at ``path`` (OSError as ``Path.read_text`` raises it)."""
    return path.read_text(encoding="utf-8")
