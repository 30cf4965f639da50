"""The MCP Inspector's CLI (`npx @modelcontextprotocol/inspector --cli`, run as npx runs it:
node and the package's bin script) against a real `toolcards serve`. Skipped, with the reason,
when npx or the inspector is not installed (`npm install -g @modelcontextprotocol/inspector`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.newcomer import inspector_command, inspector_missing
from surfaces.surface_support import HERE, TOOLCARDS, HttpServer, write_config
from toolcards.governance import Identity

CAROL = Identity("carol", "user", ["finance"])


MISSING = inspector_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))


def inspect(*args: str) -> Any:
    proc = subprocess.run(
        [*inspector_command(), "--cli", *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_UPDATE_NOTIFIER": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-1000:] + proc.stderr[-1000:]
    return json.loads(proc.stdout)


def stdio_target(config: Path) -> list[str]:
    env = [f"TOOLCARDS_CONFIG={config}", f"PYTHONPATH={HERE}"]
    return [*(a for e in env for a in ("-e", e)), str(TOOLCARDS), "serve"]


def test_inspector_lists_the_principals_tools_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=CAROL)
    listed = inspect(*stdio_target(config), "--method", "tools/list")
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == {"crm_read", "crm_search", "transfer_money", "send_email"}
    assert tools["transfer_money"]["annotations"]["destructiveHint"] is True


def test_inspector_calls_a_tool_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=CAROL)
    result = inspect(
        *stdio_target(config), "--method", "tools/call", "--tool-name", "crm_read",
        "--tool-arg", "id=4",
    )  # fmt: skip
    assert result["isError"] is False
    assert result["structuredContent"] == {"tool": "crm_read", "args": {"id": 4}}


def test_inspector_sees_a_denial_as_an_error_result(tmp_path: Path) -> None:
    config = write_config(tmp_path, local=CAROL)
    result = inspect(
        *stdio_target(config), "--method", "tools/call", "--tool-name", "crm_delete",
        "--tool-arg", "id=4",
    )  # fmt: skip
    assert result["isError"] is True
    assert result["content"][0]["text"] == "unknown tool: crm_delete"  # carol may not see it


def test_inspector_calls_a_tool_over_http(tmp_path: Path) -> None:
    policy = tmp_path / "open.yaml"
    policy.write_text(
        "default_effect: deny\nrules:\n  - {targets: [crm_read], effect: allow}\n",
        encoding="utf-8",
    )
    server = HttpServer(write_config(tmp_path, policy=policy))
    try:
        listed = inspect(server.url, "--method", "tools/list")
        result = inspect(
            server.url, "--method", "tools/call", "--tool-name", "crm_read", "--tool-arg", "id=2"
        )
    finally:
        server.stop()
    assert [t["name"] for t in listed["tools"]] == ["crm_read"]
    assert result["structuredContent"] == {"tool": "crm_read", "args": {"id": 2}}
