"""The policy decision table (policy_table.yaml), run against the executor."""

from __future__ import annotations

import pytest

from toolcards.governance import CapabilityRegistry, Executor, load_policy_table, run_policy_table
from toolcards.governance.policy.table import executor_caller

from .conftest import TABLE_PATH

pytestmark = pytest.mark.anyio


async def test_policy_table_holds_on_the_executor() -> None:
    table = load_policy_table(TABLE_PATH)
    executor = Executor(CapabilityRegistry.from_tools(table.tools), table.policy)
    mismatches = await run_policy_table(table, executor_caller(executor))
    assert [(row.name, row.expect, got) for row, got in mismatches] == []
    assert len(table.rows) >= 25


async def test_policy_table_allowed_rows_really_run() -> None:
    table = load_policy_table(TABLE_PATH)
    executor = Executor(CapabilityRegistry.from_tools(table.tools), table.policy)
    row = next(r for r in table.rows if r.tool == "crm_read" and r.expect == "allow")
    result = await executor.call(row.tool, dict(row.args), row.identity)
    assert result.ok and result.value == {"tool": "crm_read", "args": {"id": 1}}


async def test_policy_table_runner_reports_a_wrong_surface() -> None:
    table = load_policy_table(TABLE_PATH)

    async def always_allow(row: object) -> str:
        return "allow"

    mismatches = await run_policy_table(table, always_allow)
    assert mismatches and all(row.expect != "allow" for row, _ in mismatches)


async def test_policy_table_holds_on_the_pydantic_ai_toolset() -> None:
    from dataclasses import replace

    from pydantic_ai.exceptions import ApprovalRequired, ModelRetry

    from toolcards.core.toolset import build_function_toolset
    from toolcards.governance import GovernedToolset, PolicyTableRow
    from toolcards.governance.capability import surface_context

    table = load_policy_table(TABLE_PATH)
    inner = build_function_toolset(table.tools)

    async def call(row: PolicyTableRow) -> str:
        toolset = GovernedToolset(
            inner, policy=table.policy, identity=row.identity, hide_denied=False
        )
        ctx = replace(surface_context(), tool_call_id=f"t-{row.name}")
        tools = await toolset.get_tools(ctx)
        tool = tools.get(row.tool) or next(iter(tools.values()))
        try:
            result = await toolset.call_tool(row.tool, dict(row.args), ctx, tool)
        except ApprovalRequired:
            return "approve"
        except ModelRetry as retry:
            if str(retry).startswith("invalid arguments for"):
                return "invalid"
            return "deny" if str(retry).startswith("unknown tool:") else "allow"
        return "deny" if str(result).startswith("denied:") else "allow"

    mismatches = await run_policy_table(table, call)
    assert [(row.name, row.expect, got) for row, got in mismatches] == []
