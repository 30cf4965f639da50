"""`toolcards list` starts fast: listing the tools never loads pydantic-ai (about a second
of imports); the listing read from the tool callables is the one the built capabilities give.
(Start-up times themselves are measured in benchmarks/bench_surfaces.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from extra_tools import TOOLS as EXTRA_TOOLS
from table_tools import TOOLS as TABLE_TOOLS

from surfaces.surface_support import SURFACE_ENV, write_config
from toolcards import PlanningTool
from toolcards.governance.capability import CapabilityRegistry, ToolSummary
from toolcards.runtime import Team

PROBE = """
import json, sys
from toolcards.surfaces.main import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "pydantic_ai": sorted(
    m for m in sys.modules if m == "pydantic_ai" or m.startswith("pydantic_ai."))}),
    file=sys.stderr)
"""


def probe(config: Path, *args: str) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--json", "--config", str(config), *args],
        env=SURFACE_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report, done.stdout


def test_listing_tools_from_a_config_never_imports_pydantic_ai(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        local=None,
        store="team.db",
        cards=[{"type": "PlanningTool", "vector_store": False}],
        policy=_allow_all(tmp_path),
    )
    report, out = probe(config, "list")
    assert report == {"code": 0, "pydantic_ai": []}
    names = {row["name"] for row in json.loads(out)}
    assert {"update_planning", "search_planning", "crm_read", "send_email"} <= names


def test_calling_a_tool_types_its_pairs_without_pydantic_ai(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=None, policy=_allow_all(tmp_path))
    report, out = probe(config, "call", "crm_read", "id=3")
    assert report["code"] == 0 and not report["pydantic_ai"]  # "3" reached the tool as 3
    assert json.loads(out)["value"] == {"tool": "crm_read", "args": {"id": 3}}


def test_summaries_read_from_the_callables_match_the_built_capabilities() -> None:
    with Team("summaries") as team:
        factory = team.bind([PlanningTool(vector_store=False)], member="m")
        registry = CapabilityRegistry.combine(
            [
                CapabilityRegistry.from_factory(factory),
                CapabilityRegistry.from_tools([*TABLE_TOOLS, *EXTRA_TOOLS]),
            ]
        )
        listed = registry.summaries()
        built = [ToolSummary(cap.id, cap.description, cap.annotations) for cap in registry]
    assert listed == built
    assert any(s.annotations.requires_approval for s in listed)
    assert any(s.annotations.readonly for s in listed)


def _allow_all(base: Path) -> Path:
    policy = base / "allow.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    return policy
