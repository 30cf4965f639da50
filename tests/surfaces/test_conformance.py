"""The official MCP conformance suite's server scenarios against `toolcards serve`, over
streamable HTTP and over stdio (through a relay): every scenario for a capability the server
declares passes. Skipped where Node or the suite is not installed (`.ci/run` installs both)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "conformance"))

from run import UNDECLARED, run, suite_entry

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        suite_entry() is None, reason="npm @modelcontextprotocol/conformance absent"
    ),
]


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_every_declared_capability_scenario_passes(transport: str) -> None:
    code, output, summary = run(transport)
    failing = {k: v for k, v in summary.items() if v[1] and k not in UNDECLARED}
    assert summary, output[-3000:]
    assert failing == {}, output[-3000:]
    assert code == 0
