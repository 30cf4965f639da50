"""MCP tasks on real `toolcards serve` processes sharing one config's store: a 2025-11-25
client (raw JSON-RPC over stdio) and a 2026-07-28 client (FastMCP with ``fastmcp-tasks``, over
HTTP) each start a command of seconds and an approval-gated write as tasks; a second connection
(another process) polls them, cancels the write and reads the command's result; another
principal's ``tasks/get`` of the same id is refused; each call has one audit row."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp.types as types
import pytest
import yaml
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

from surfaces.mcp_clients import http_session
from surfaces.raw_stdio import RawStdio
from surfaces.surface_support import HttpServer, token_for, write_config
from toolcards.governance import AuditLog, Identity

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.timeout(300)]

CALLER = Identity("agent.runner", "agent", ["worker"])
OTHER = Identity("mallory", "agent", ["worker"])
APPROVER = Identity("ann", "user", ["approver"])
POLICY = {
    "default_effect": "allow",
    "rules": [{"description": "writes need a human", "targets": ["workspace_write"],
               "effect": "approve"}],
}  # fmt: skip


class _Id(types.RequestParams):
    model_config = ConfigDict(populate_by_name=True)
    task_id: str = Field(alias="taskId")


class _Get(types.Request[_Id, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _Id


class _Cancel(types.Request[_Id, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _Id


class _Task(types.Result):
    model_config = ConfigDict(extra="allow")
    status: str
    status_message: str | None = Field(default=None, alias="statusMessage")


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, HttpServer, dict[str, str]]]:
    base = tmp_path_factory.mktemp("tasks")
    (base / "workspaces" / "w").mkdir(parents=True)
    policy = base / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    cards = [{"type": "WorkspaceTool", "workspace_id": "w"},
             {"type": "ExecTool", "workspace_id": "w", "mode": "bwrap",
              "allowed_commands": ["sleep"]}]  # fmt: skip
    config = write_config(base, local=CALLER, tokens=[CALLER, OTHER, APPROVER], policy=policy,
                          tools=[], cards=cards, team_id="tasks")  # fmt: skip
    env = {"TOOLCARDS_WORKSPACES_ROOT": str(base / "workspaces")}
    server = HttpServer(config, env=env)
    try:
        yield base, server, env
    finally:
        server.stop()


def rows(base: Path, tool: str) -> list[tuple[str, str]]:
    with AuditLog(base / "audit.db") as log:
        return [(e.outcome, e.call_id or "") for e in log.query(limit=1000) if e.tool == tool]


async def wait_rows(base: Path, tool: str, count: int) -> list[tuple[str, str]]:
    with anyio.fail_after(60):
        while len(found := rows(base, tool)) < count:
            await anyio.sleep(0.1)
    return found


async def test_a_2025_client_polls_cancels_and_reads_its_tasks_from_another_process(
    served: tuple[Path, HttpServer, dict[str, str]],
) -> None:
    base, server, env = served
    stdio = RawStdio(base / "toolcards.yaml", env)
    try:
        run = {"name": "exec_command", "arguments": {"command": "sleep 3"}, "task": {"ttl": 60000}}
        command = stdio.request("tools/call", run, timeout=60)["result"]["task"]["taskId"]
        write = {"name": "workspace_write", "arguments": {"path": "w1.txt", "content": "x"},
                 "task": {}}  # fmt: skip
        gated = stdio.request("tools/call", write, timeout=60)["result"]["task"]["taskId"]
        async with http_session(server.url, token_for(CALLER)) as second:
            seen = await second.send_request(_Get(params=_Id(taskId=command)), _Task)
            assert seen.status in ("working", "completed")
            with anyio.fail_after(60):
                while "waiting for approval" not in (
                    (await second.send_request(_Get(params=_Id(taskId=gated)), _Task))
                    .status_message or ""
                ):  # fmt: skip
                    await anyio.sleep(0.1)
            cancelled = await second.send_request(_Cancel(params=_Id(taskId=gated)), _Task)
            assert cancelled.status == "cancelled"
        async with http_session(server.url, token_for(OTHER)) as other:
            with pytest.raises(MCPError) as refused:
                await other.send_request(_Get(params=_Id(taskId=command)), _Task)
        assert refused.value.error.code == -32602
        result = stdio.request("tasks/result", {"taskId": command}, timeout=60)["result"]
        assert "exit_code: 0" in result["content"][0]["text"]
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": command}
    finally:
        stdio.close()
    assert [o for o, _ in await wait_rows(base, "exec_command", 1)] == ["ok"]
    assert [o for o, _ in await wait_rows(base, "workspace_write", 1)] == ["cancelled"]
    assert not (base / "workspaces" / "w" / "w1.txt").exists()


async def test_a_2026_client_runs_a_task_read_from_a_second_connection(
    served: tuple[Path, HttpServer, dict[str, str]],
) -> None:
    import fastmcp_tasks
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    base, server, _ = served

    def client(who: Identity) -> Any:
        headers = {"Authorization": f"Bearer {token_for(who)}"}
        return Client(StreamableHttpTransport(server.url, headers=headers), mode="2026-07-28")

    async with client(CALLER) as first, client(CALLER) as second, client(OTHER) as other:
        started = await fastmcp_tasks.call_tool_task(first, "exec_command", {"command": "sleep 2"})
        gated = await fastmcp_tasks.call_tool_task(
            first, "workspace_write", {"path": "w2.txt", "content": "y"}
        )
        again = fastmcp_tasks.ToolTask(second, "exec_command", started.create_result)
        assert (await again.status()).status in ("working", "completed")
        with pytest.raises(Exception, match="not found"):
            await fastmcp_tasks.ToolTask(other, "exec_command", started.create_result).status()
        await fastmcp_tasks.ToolTask(second, "workspace_write", gated.create_result).cancel()
        result = await again.result()
    assert "exit_code: 0" in result.content[0].text  # type: ignore[union-attr]
    ours = {started.task_id, gated.task_id}
    assert len(ours) == 2
    assert [o for o, _ in await wait_rows(base, "workspace_write", 2)] == ["cancelled"] * 2
    assert [o for o, _ in await wait_rows(base, "exec_command", 2)] == ["ok", "ok"]
