"""The policy decision table's tools, importable by a config (``tools: [table_tools:TOOLS]``)."""

from __future__ import annotations

from pathlib import Path

from toolcards.governance import load_policy_table

TABLE_PATH = Path(__file__).resolve().parents[1] / "governance" / "policy_table.yaml"
TOOLS = load_policy_table(TABLE_PATH).tools
