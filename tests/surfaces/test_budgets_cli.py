"""Budgets over the MCP server and the command line: the calls past a budget of the config's
policy end over_budget (an MCP error result whose _meta says so, exit code 10 for `toolcards
call`), counted in the approvals file every process of the config shares, and `toolcards
budgets` shows what is spent and what is left (real server over HTTP, official-SDK client,
the command line in process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_clients import http_session

from surfaces.surface_support import HttpServer, token_for, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from toolcards.governance import AuditLog, Identity
from toolcards.surfaces.outcomes import ExitCode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

AGENT = Identity("agent.runner", "agent", ["worker"])
LOCAL = Identity("ops", "user", ["operator"])
POLICY = """\
default_effect: allow
budgets:
  - {name: finishes, targets: [finish], per: principal, calls: 2}
  - {name: team tokens, per: team, period: day, tokens: 5000}
"""


def config(base: Path) -> Path:
    (base / "policy.yaml").write_text(POLICY, encoding="utf-8")
    return write_config(
        base,
        local=LOCAL,
        tokens=[AGENT],
        policy=base / "policy.yaml",
        tools=["ending_tools:TOOLS"],
        approvals=str(base / "approvals.db"),
    )


def spent(base: Path, path: Path) -> dict[tuple[str, str], tuple[float, float]]:
    done = toolcards(path, "budgets")
    assert done.returncode == 0, done.stderr
    return {(r["budget"], r["scope"]): (r["spent"], r["left"]) for r in json.loads(done.stdout)}


async def test_calls_past_a_budget_end_over_budget_on_mcp_and_the_cli(tmp_path: Path) -> None:
    path = config(tmp_path)
    server = HttpServer(path, env={"ENDINGS_DIR": str(tmp_path)})
    try:
        async with http_session(server.url, token_for(AGENT)) as session:
            results = [
                await session.call_tool("finish", {"how": "ok", "tag": f"t{i}"}) for i in range(3)
            ]
    finally:
        server.stop()
    assert [r.is_error for r in results] == [False, False, True]
    refused: Any = results[2]
    assert refused.meta["toolcards/outcome"] == {"outcome": "over_budget", "kind": "over_budget"}
    assert refused.content[0].text.startswith(
        f"over budget: 'finishes' allows 2 calls per principal ({AGENT.id})"
    )

    calls = [toolcards(path, "call", "finish", "--json", '{"how": "ok", "tag": "c"}')]
    calls.append(toolcards(path, "call", "finish", "--json", '{"how": "ok", "tag": "d"}'))
    calls.append(toolcards(path, "call", "finish", "--json", '{"how": "ok", "tag": "e"}'))
    assert [c.returncode for c in calls] == [0, 0, ExitCode.OVER_BUDGET]  # ops's own two
    assert json.loads(calls[2].stdout)["outcome"] == "over_budget"

    assert spent(tmp_path, path) == {
        ("finishes", AGENT.id): (2.0, 0.0),
        ("finishes", LOCAL.id): (2.0, 0.0),
        ("team tokens", ""): (0.0, 5000.0),  # shown before its first use
    }
    with AuditLog(tmp_path / "audit.db") as log:
        stopped = log.query(outcome="over_budget", limit=100)
    assert sorted(e.principal for e in stopped) == sorted([LOCAL.id, AGENT.id])


async def test_budgets_lists_a_team_budget_before_its_first_use_and_none_without_budgets(
    tmp_path: Path,
) -> None:
    path = config(tmp_path)
    done = toolcards(path, "budgets")
    rows = json.loads(done.stdout)
    assert [(r["budget"], r["per"], r["window"][:8]) for r in rows] == [
        ("team tokens", "team", "per day ")
    ]
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
    assert json.loads(toolcards(path, "budgets").stdout) == []
