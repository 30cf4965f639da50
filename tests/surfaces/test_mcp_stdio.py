"""`toolcards serve` over stdio, through the official mcp client: listing, annotations,
error results, hostile input and approvals by elicitation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp_clients import stdio_session

from surfaces.surface_support import audit_rows, write_config
from toolcards.governance import AuditLog, Identity
from toolcards.governance.policy.table import PolicyTable
from toolcards.surfaces.mcp_server.server import JSON_SCHEMA_DIALECT, META_KEY

pytestmark = pytest.mark.anyio

ALICE = Identity("alice", "user", ["data_admin"])
BOB = Identity("bob", "user", ["sales"])
CAROL = Identity("carol", "user", ["finance"])
BIG_TRANSFER = {"amount": 500, "currency": "EUR", "to": "acct-9"}


def outcome(result: types.CallToolResult) -> str:
    return str(result.meta[META_KEY]["outcome"]) if result.meta else "ok"


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def last_entry(config: Path) -> Any:
    with AuditLog(config.parent / "audit.db") as log:
        return log.tail(1)[0]


async def test_tools_list_shows_only_tools_the_principal_may_call(tmp_path: Path) -> None:
    async with stdio_session(write_config(tmp_path, local=BOB)) as s:
        names = {t.name for t in (await s.list_tools()).tools}
    assert names == {"crm_read", "crm_search", "send_email"}


async def test_tools_list_carries_mcp_annotations(tmp_path: Path) -> None:
    async with stdio_session(write_config(tmp_path, local=ALICE)) as s:
        tools = {t.name: t.annotations for t in (await s.list_tools()).tools}
    assert tools["crm_read"] == types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    assert tools["crm_delete"] is not None and tools["crm_delete"].destructive_hint is True
    assert tools["send_email"] is not None and tools["send_email"].open_world_hint is True


async def test_tools_list_carries_the_capability_json_schema(
    tmp_path: Path, table: PolicyTable
) -> None:
    from toolcards.governance import CapabilityRegistry

    expected = CapabilityRegistry.from_tools(table.tools)["transfer_money"].json_schema
    async with stdio_session(write_config(tmp_path, local=CAROL)) as s:
        tool = next(t for t in (await s.list_tools()).tools if t.name == "transfer_money")
    assert tool.input_schema == {"$schema": JSON_SCHEMA_DIALECT, **expected}
    assert tool.input_schema["required"] == ["amount", "currency", "to"]


async def test_denied_call_is_an_error_result_with_readable_text(tmp_path: Path) -> None:
    dave = Identity("dave", "user", ["ops"])
    async with stdio_session(write_config(tmp_path, local=dave)) as s:
        result = await s.call_tool("run_command", {"command": "rm"})
    assert result.is_error is True
    assert outcome(result) == "denied"
    assert text(result) == "denied: run_command is not permitted for dave"


async def test_hidden_tool_is_an_unknown_tool_error_result(tmp_path: Path) -> None:
    async with stdio_session(write_config(tmp_path, local=BOB)) as s:
        hidden = await s.call_tool("crm_delete", {"id": 1})
        missing = await s.call_tool("crm_reed", {"id": 1})
    assert hidden.is_error is True and outcome(hidden) == "unknown_tool"
    assert text(hidden) == "unknown tool: crm_delete"
    assert text(missing) == "unknown tool: crm_reed; did you mean crm_read?"


async def test_wrong_argument_type_is_an_invalid_args_error(tmp_path: Path) -> None:
    async with stdio_session(write_config(tmp_path, local=ALICE)) as s:
        result = await s.call_tool("crm_delete", {"id": "not a number"})
    assert result.is_error is True and outcome(result) == "invalid_args"
    assert text(result).startswith("invalid arguments for crm_delete: id:")


async def test_huge_arguments_are_refused_and_the_server_keeps_serving(tmp_path: Path) -> None:
    async with stdio_session(write_config(tmp_path, local=BOB)) as s:
        huge = await s.call_tool("crm_read", {"id": 1, "padding": "x" * 2_000_000})
        after = await s.call_tool("crm_read", {"id": 7})
    assert huge.is_error is True and outcome(huge) == "invalid_args"
    assert after.is_error is False
    assert after.structured_content == {"tool": "crm_read", "args": {"id": 7}}


async def test_identity_in_arguments_does_not_change_the_caller(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=BOB)
    smuggled = {"id": 1, "identity": "alice", "principal": "alice", "roles": ["data_admin"]}
    async with stdio_session(config) as s:
        result = await s.call_tool("crm_delete", smuggled)
    assert outcome(result) == "unknown_tool"
    entry = last_entry(config)
    assert (entry.principal, entry.roles, entry.surface) == ("bob", ("sales",), "mcp")


async def test_approval_fails_closed_without_elicitation(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=CAROL)
    async with stdio_session(config) as s:
        result = await s.call_tool("transfer_money", BIG_TRANSFER)
    assert result.is_error is True and outcome(result) == "needs_approval"
    assert "approval" in text(result)
    assert last_entry(config).outcome == "needs_approval"


def elicitor(action: str, content: dict[str, Any] | None, seen: list[str]) -> Any:
    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return answer


async def test_elicitation_accept_runs_the_call_once_with_its_arguments(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=CAROL, approval="client")
    asked: list[str] = []
    callback = elicitor("accept", {"approve": True}, asked)
    async with stdio_session(config, elicitation_callback=callback) as s:
        result = await s.call_tool("transfer_money", BIG_TRANSFER)
    assert result.is_error is False
    assert result.structured_content == {
        "tool": "transfer_money",
        "args": {"amount": 500.0, "currency": "EUR", "to": "acct-9"},
    }
    assert len(asked) == 1 and "transfer_money" in asked[0] and "acct-9" in asked[0]
    entry = last_entry(config)
    assert (entry.decision, entry.outcome) == ("approve", "ok")


async def test_elicitation_decline_refuses_the_call(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=CAROL, approval="client")
    async with stdio_session(config, elicitation_callback=elicitor("decline", None, [])) as s:
        result = await s.call_tool("transfer_money", BIG_TRANSFER)
    assert result.is_error is True
    assert result.meta is not None and result.meta[META_KEY]["kind"] == "approval"
    assert "refused" in text(result)
    assert [r[8] for r in audit_rows(config.parent / "audit.db")] == ["denied"]


async def test_elicitation_accept_without_a_yes_refuses_the_call(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=CAROL, approval="client")
    callback = elicitor("accept", {"approve": False}, [])
    async with stdio_session(config, elicitation_callback=callback) as s:
        result = await s.call_tool("transfer_money", BIG_TRANSFER)
    assert result.is_error is True and "refused" in text(result)


async def test_rate_limited_call_is_an_error_with_retry_after(tmp_path: Path) -> None:
    policy = tmp_path / "limited.yaml"
    policy.write_text(
        "default_effect: allow\nlimits:\n  - {targets: [crm_read], rate: 1/hour}\n",
        encoding="utf-8",
    )
    async with stdio_session(write_config(tmp_path, local=BOB, policy=policy)) as s:
        first = await s.call_tool("crm_read", {"id": 1})
        second = await s.call_tool("crm_read", {"id": 1})
    assert first.is_error is False
    assert second.is_error is True and second.meta is not None
    assert second.meta[META_KEY]["outcome"] == "rate_limited"
    assert second.meta[META_KEY]["retry_after"] > 0
