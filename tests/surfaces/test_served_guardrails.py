"""Guardrail hooks named in the surfaces config (``hooks:``) guard what `toolcards serve`
serves: the official MCP client (in memory, to the server `toolcards serve` runs) reads
results redacted and refusals as errors; the CLI (in process) exits 9 on a refusal; the audit
row names the hook."""

from __future__ import annotations

import json
from pathlib import Path

import mcp.types as types
import pytest
from guard_tools import AWS_KEY, POLICY
from revision_clients import LEGACY, in_process_client

from surfaces.surface_support import toolcards_in_process, write_config
from toolcards.governance import AuditLog, Identity

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(90)]

LOCAL = Identity("local.user", "user")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    return write_config(
        tmp_path,
        local=LOCAL,
        policy=policy,
        tools=["guard_tools:TOOLS"],
        hooks=["guard_tools:HOOKS"],
    )


def _text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_an_mcp_client_reads_a_result_with_the_key_redacted(config: Path) -> None:
    async with in_process_client(config, LEGACY) as session:
        result = await session.call_tool("read_env", {"service": "db"})
    assert result.is_error is False
    assert AWS_KEY not in _text(result) and "AWS_ACCESS_KEY_ID=[REDACTED]" in _text(result)


async def test_an_mcp_client_reads_a_refusal_as_an_error_audited_with_the_hook(
    config: Path,
) -> None:
    async with in_process_client(config, LEGACY) as session:
        result = await session.call_tool("wipe", {"target": "prod"})
    assert result.is_error is True
    assert "refused: production is never wiped" in _text(result)
    with AuditLog(config.parent / "audit.db") as audit:
        row = audit.query(tool="wipe")[-1]
    assert (row.outcome, row.hook) == ("refused", "never_wipe_prod")


def test_the_cli_exits_nine_on_a_refusal(config: Path) -> None:
    done = toolcards_in_process(config, "call", "wipe", "target=prod")
    assert done.returncode == 9, done.stderr
    assert json.loads(done.stdout)["kind"] == "refused"


def test_a_hooks_entry_that_is_no_hook_is_one_config_error(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    config = write_config(
        tmp_path,
        local=LOCAL,
        policy=policy,
        tools=["guard_tools:TOOLS"],
        hooks=["guard_tools:TOOLS"],
    )
    done = toolcards_in_process(config, "call", "wipe", "target=x")
    assert done.returncode == 2
    assert "hooks: 'guard_tools:TOOLS' holds" in done.stderr and "not a ToolHook" in done.stderr
