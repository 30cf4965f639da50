"""A prompt that fails logs what its audit row keeps: the error's type and its text redacted,
never a traceback, whose last line would repeat an argument in clear (through the official
client, in process)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from surfaces.surface_support import write_config
from toolcards.governance import AuditLog, Identity
from toolcards.surfaces.config import load_config
from toolcards.surfaces.mcp_server.server import GovernedMCPServer
from toolcards.surfaces.runtime import SurfaceRuntime

pytestmark = pytest.mark.anyio

SECRET = "hunter2-TOPSECRET"


async def test_a_failing_prompt_logs_its_error_redacted_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    config = write_config(
        tmp_path,
        local=Identity("alice", "user"),
        tools=[],
        policy=policy,
        prompts=["structured_tools:FAILING_PROMPTS"],
    )
    caplog.set_level(logging.DEBUG, logger="toolcards")
    with SurfaceRuntime.from_config(load_config(config), durability="sync") as rt:
        server = GovernedMCPServer(rt)
        async with server.running(), Client(server.server) as client:
            with pytest.raises(MCPError, match="prompt login failed"):
                await client.get_prompt("login", {"user": "bob", "password": SECRET})
    failed = [r for r in caplog.records if "prompt login failed" in r.getMessage()]
    assert failed and all(r.exc_info is None for r in failed)
    assert (
        "ValueError: invalid literal for int() with base 10: '[REDACTED]'" in failed[0].getMessage()
    )
    assert not [r for r in caplog.records if SECRET in r.getMessage() or r.exc_text]
    with AuditLog(tmp_path / "audit.db") as log:
        rows = [r for r in log.query() if r.tool == "prompt:login"]
    assert [r.outcome for r in rows] == ["error"] and SECRET not in str(rows[0].error)
