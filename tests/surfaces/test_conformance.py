"""The official MCP conformance suite's server scenarios against `toolcards serve`, over
streamable HTTP and over stdio (through a relay), for each revision it speaks (2025-11-25 by
the initialize handshake, 2026-07-28 by per-request envelopes): every scenario for a
capability the server declares passes. Skipped where Node or a suite knowing the revision is
not installed (`.ci/run` installs Node and the 2025-11-25 suite; see `conformance/run.py`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "conformance"))

from run import REVISIONS, run, suite_entry, undeclared

pytestmark = [pytest.mark.timeout(1800)]


@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_every_declared_capability_scenario_passes(transport: str, revision: str) -> None:
    if suite_entry(revision) is None:
        pytest.skip(f"no npm @modelcontextprotocol/conformance knowing {revision}")
    code, output, summary = run(transport, revision=revision)
    failing = {k: v for k, v in summary.items() if v[1] and k not in undeclared(revision)}
    assert summary, output[-3000:]
    assert failing == {}, output[-3000:]
    assert code == 0
