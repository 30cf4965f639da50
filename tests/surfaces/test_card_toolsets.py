"""The tools of an MCPTool card in the surfaces config are served like card tools: listed and
called from the CLI and over MCP, under the same policy and audit, with the real MCP server
behind them (kept connected while `toolcards serve` runs)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from support.launch import PYTHON
from surfaces.mcp_clients import stdio_session
from surfaces.surface_support import ECHO_ARGS, ECHO_CARD, toolcards_in_process, toolcards_json
from toolcards import ToolFactory
from toolcards.governance import Identity, Policy
from toolcards.surfaces.outcomes import ExitCode
from toolcards.surfaces.runtime import SurfaceRuntime
from toolcards.tools.mcp import MCPTool

pytestmark = pytest.mark.timeout(120)

ARGS = ECHO_ARGS
CARD = {**ECHO_CARD, "tool_prefix": "ext", "include_tools": ["add", "pid", "echo"]}
POLICY = """
default_effect: allow
rules:
  - targets: [ext_echo]
    effect: deny
    description: no echo for anyone
"""


def _config(tmp_path: Path, card: dict[str, Any] = CARD) -> Path:
    command = shlex.join([card["command"], *card["args"]])
    (tmp_path / "policy.yaml").write_text(POLICY, encoding="utf-8")
    body = {
        "team_id": "ext",
        "store": "team.db",
        "policy": "policy.yaml",
        "audit": "audit.db",
        "principals": {"local": {"id": "alice", "roles": ["ops"]}},
        "mcp_commands": [command],
        "cards": [card],
    }
    path = tmp_path / "toolcards.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


@pytest.mark.timeout(300)  # six CLI processes, each starting the MCP server: a loaded machine
def test_the_cli_lists_and_calls_the_tools_of_an_mcp_card(tmp_path: Path) -> None:
    config = _config(tmp_path)
    listed = toolcards_in_process(config, "list")
    assert listed.returncode == 0, listed.stderr
    names = {tool["name"] for tool in json.loads(listed.stdout)}
    assert {"ext_add", "ext_pid"} <= names  # ext_echo is denied, so hidden
    assert "ext_echo" not in names
    done = toolcards_in_process(config, "call", "ext_add", "--args", '{"a": 2, "b": 40}')
    assert done.returncode == 0, done.stderr
    assert "42" in done.stdout
    denied = toolcards_in_process(config, "call", "ext_echo", "--args", '{"text": "hi"}')
    assert denied.returncode == ExitCode.UNKNOWN_TOOL  # hidden tools look unknown
    bad = toolcards_in_process(config, "call", "ext_add", "--args", '{"a": "two", "b": 1}')
    assert bad.returncode == ExitCode.INVALID, bad.stdout + bad.stderr
    tail = toolcards_in_process(config, "audit", "tail", "-n", "10")
    rows = json.loads(tail.stdout)
    assert ("ext_add", "alice", "ok") in [(r["tool"], r["principal"], r["outcome"]) for r in rows]


def test_a_server_serves_the_mcp_tools_over_one_kept_connection(tmp_path: Path) -> None:
    config = _config(tmp_path)

    async def session() -> tuple[set[str], list[str]]:
        async with stdio_session(config) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            pids = []
            for _ in range(2):
                result = await client.call_tool("ext_pid", {})
                assert not result.is_error
                pids.append(result.content[0].text)  # type: ignore[union-attr]
            return tools, pids

    tools, pids = anyio.run(session)
    assert {"ext_add", "ext_pid"} <= tools and "ext_echo" not in tools
    assert pids[0] == pids[1]  # the same MCP server process answered both calls


def test_a_runtime_built_in_code_serves_a_cards_toolset(tmp_path: Path) -> None:
    card = MCPTool(
        name="echo",
        transport="stdio",
        command=PYTHON,
        args=ARGS,
        include_tools=["add"],
        connect_timeout_seconds=20,
    )
    runtime = SurfaceRuntime.build(
        ToolFactory([card]), policy=Policy.allow_all(), identity=Identity("alice")
    )
    with runtime as rt:
        assert rt.visible_to(Identity("alice")) == ["add"]


def test_an_unreachable_mcp_server_lists_no_tools_and_says_why(tmp_path: Path) -> None:
    missing = {
        **CARD,
        "args": [str(tmp_path / "missing.py"), "stdio"],
        "connect_timeout_seconds": 5,
    }
    config = _config(tmp_path, missing)
    listed = toolcards_json(config, "list")  # a real process: what its log says on stderr
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == []
    assert "MCP server 'echo' is unavailable" in listed.stderr
