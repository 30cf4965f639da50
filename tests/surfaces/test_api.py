"""The Python helpers for registries built in code: ``serve_mcp`` and ``cli``."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from support.launch import PYTHON
from surfaces.surface_support import POLICY, SURFACE_ENV
from toolcards.governance import AuditLog, Identity
from toolcards.governance.policy.table import PolicyTable
from toolcards.surfaces import run_cli
from toolcards.surfaces.outcomes import ExitCode

BOB = Identity("bob", "user", ["sales"])


def test_cli_helper_runs_a_call_on_code_built_tools(
    table: PolicyTable, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_cli(table.tools, policy=POLICY, identity=BOB, argv=["call", "crm_read", "id=3"])
    assert exit_.value.code == ExitCode.OK
    assert '"id": 3' in capsys.readouterr().out


def test_cli_helper_applies_the_policy(table: PolicyTable, tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    with pytest.raises(SystemExit) as exit_:
        run_cli(table.tools, policy=POLICY, identity=BOB, audit=audit, argv=["call", "crm_delete"])
    assert exit_.value.code == ExitCode.UNKNOWN_TOOL  # bob may not see crm_delete
    with AuditLog(audit) as log:
        assert [(e.principal, e.outcome) for e in log.tail(5)] == [("bob", "unknown_tool")]


@pytest.mark.anyio
async def test_serve_mcp_serves_code_built_tools_over_stdio() -> None:
    code = (
        "from table_tools import TOOLS\n"
        "from toolcards.governance import Identity\n"
        "from toolcards.surfaces import serve_mcp\n"
        f"serve_mcp(TOOLS, policy={str(POLICY)!r}, identity=Identity('bob', 'user', ['sales']))\n"
    )
    params = StdioServerParameters(command=PYTHON, args=["-c", code], env=SURFACE_ENV)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        names = {t.name for t in (await s.list_tools()).tools}
        denied = await s.call_tool("crm_delete", {"id": 1})
    assert names == {"crm_read", "crm_search", "send_email"}
    assert denied.is_error is True
