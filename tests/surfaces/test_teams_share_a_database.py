"""Two teams' configs on one PostgreSQL database stay apart on every surface: team b's
approver neither lists nor grants team a's pending call, team b's audit tail, query and verify
show none of team a's rows (each team's hash chain is its own), and team a's calls do not use
up team b's rate limit (real PostgreSQL, real `toolcards serve` processes, the command line in
the test's process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_clients import http_session

from surfaces.surface_support import HttpServer, token_for, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from toolcards.governance import Identity
from toolcards.surfaces.outcomes import ExitCode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

ANN = Identity("ann", "user", ["approver"])
AGENT = Identity("agent.crawler", "agent", ["worker"])
POLICY = """
default_effect: allow
limits:
  - {targets: [crm_read], rate: 2/hour}
"""


def team_config(base: Path, url: str, team: str) -> Path:
    folder = base / team
    folder.mkdir()
    policy = folder / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    return write_config(
        folder,
        audit=False,
        local=ANN,
        tokens=[AGENT],
        policy=policy,
        tools=["table_tools:TOOLS", "approval_tools:TOOLS"],
        store=url,
        team_id=team,
    )


async def test_another_teams_approver_neither_lists_nor_grants_a_pending_call(
    tmp_path: Path, postgres_url: str
) -> None:
    a = team_config(tmp_path, postgres_url, "a")
    b = team_config(tmp_path, postgres_url, "b")
    notes = tmp_path / "notes.txt"
    server = HttpServer(a, env={"NOTES_FILE": str(notes)})
    results: list[Any] = []
    try:
        async with http_session(server.url, token_for(AGENT)) as s, anyio.create_task_group() as tg:

            async def call() -> None:
                results.append(await s.call_tool("send_note", {"to": "ops", "body": "a's"}))

            tg.start_soon(call)
            with anyio.fail_after(30):
                while not (rows := json.loads(toolcards(a, "approvals", "list").stdout)):
                    await anyio.sleep(0.2)
            seen_by_b = json.loads(toolcards(b, "approvals", "list").stdout)
            shown_to_b = toolcards(b, "approvals", "show", rows[0]["approval_id"])
            granted_by_b = toolcards(b, "approvals", "grant", rows[0]["approval_id"])
            still_pending = json.loads(toolcards(a, "approvals", "list").stdout)
            denied = toolcards(a, "approvals", "deny", rows[0]["approval_id"])
    finally:
        server.stop()
    assert seen_by_b == []
    assert shown_to_b.returncode != ExitCode.OK
    assert granted_by_b.returncode != ExitCode.OK
    assert [r["approval_id"] for r in still_pending] == [rows[0]["approval_id"]]
    assert denied.returncode == ExitCode.OK, denied.stderr
    assert results[0].is_error is True
    assert not notes.exists()


def test_another_teams_audit_tail_and_query_show_none_of_its_rows(
    tmp_path: Path, postgres_url: str
) -> None:
    a = team_config(tmp_path, postgres_url, "a")
    b = team_config(tmp_path, postgres_url, "b")
    assert toolcards(a, "call", "crm_search", "query=only a").returncode == ExitCode.OK
    assert toolcards(b, "call", "crm_search", "query=only b").returncode == ExitCode.OK
    tail_a = json.loads(toolcards(a, "audit", "tail", "-n", "50").stdout)
    tail_b = json.loads(toolcards(b, "audit", "tail", "-n", "50").stdout)
    query_b = json.loads(toolcards(b, "audit", "query", "--tool", "crm_search").stdout)
    assert [e["args"]["query"] for e in tail_a if e["tool"] == "crm_search"] == ["only a"]
    assert [e["args"]["query"] for e in tail_b if e["tool"] == "crm_search"] == ["only b"]
    assert [e["args"]["query"] for e in query_b] == ["only b"]
    chain_a = json.loads(toolcards(a, "audit", "verify").stdout)  # each team's chain is its own
    chain_b = json.loads(toolcards(b, "audit", "verify").stdout)
    assert (chain_a["ok"], chain_a["rows"]) == (True, len(tail_a))
    assert (chain_b["ok"], chain_b["rows"]) == (True, len(tail_b))


def test_one_teams_calls_leave_another_teams_rate_limit_alone(
    tmp_path: Path, postgres_url: str
) -> None:
    a = team_config(tmp_path, postgres_url, "a")
    b = team_config(tmp_path, postgres_url, "b")
    spent = [toolcards(a, "call", "crm_read", f"id={n}").returncode for n in range(3)]
    first_of_b = toolcards(b, "call", "crm_read", "id=9")
    assert spent == [ExitCode.OK, ExitCode.OK, ExitCode.RATE_LIMITED]
    assert first_of_b.returncode == ExitCode.OK, first_of_b.stderr
