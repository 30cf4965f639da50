"""One PostgreSQL-backed config, many processes at once: `toolcards serve` over HTTP and
`toolcards call` processes share the team, one audit trail, one approvals inbox and one rate
limit (real PostgreSQL server, real processes; nothing is forwarded)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_clients import http_session

from support.processes import free_port
from surfaces.surface_support import SURFACE_ENV, TOOLCARDS, HttpServer, token_for, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from toolcards.governance import AuditLog, Identity
from toolcards.surfaces.cli.control import endpoint_path, find_server
from toolcards.surfaces.outcomes import ExitCode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

BOB = Identity("bob", "user", ["sales"])
ANN = Identity("ann", "user", ["approver"])
AGENT = Identity("agent.crawler", "agent", ["worker"])
PASSWORD = "s3cret-pw"  # the test server's (tests/support/servers.py)
POLICY = """
default_effect: allow
limits:
  - {targets: [crm_read], rate: 3/hour}
"""


def shared_config(base: Path, url: str, **extra: Any) -> Path:
    policy = base / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    data: dict[str, Any] = {
        "local": BOB,
        "tokens": [BOB],
        "policy": policy,
        "tools": ["table_tools:TOOLS", "approval_tools:TOOLS"],
        "store": url,
        "cards": [{"type": "PlanningTool", "vector_store": False}],
        **extra,
    }
    return write_config(base, audit=False, **data)


def together(*commands: tuple[Path, tuple[str, ...]]) -> list[subprocess.CompletedProcess[str]]:
    """Run CLI processes at the same time; their results in order."""
    procs = [
        subprocess.Popen(
            [str(TOOLCARDS), "--json", "--config", str(config), *args],
            env=SURFACE_ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for config, args in commands
    ]
    done = []
    for proc, (_, args) in zip(procs, commands, strict=True):
        out, err = proc.communicate(timeout=90)
        done.append(subprocess.CompletedProcess(list(args), proc.returncode, out, err))
    return done


class Shared:
    def __init__(self, base: Path, url: str, config: Path, server: HttpServer) -> None:
        self.base, self.url, self.config, self.server = base, url, config, server

    def server_log(self) -> str:
        self.server.log.seek(0)
        return self.server.log.read().decode(errors="replace")


@pytest.fixture
def shared(tmp_path: Path, postgres_url: str) -> Iterator[Shared]:
    config = shared_config(tmp_path, postgres_url)
    server = HttpServer(config, env={"NOTES_FILE": str(tmp_path / "notes.txt")})
    try:
        yield Shared(tmp_path, postgres_url, config, server)
    finally:
        server.stop()


async def test_serve_and_two_cli_processes_share_one_rate_limit(shared: Shared) -> None:
    async with http_session(shared.server.url, token_for(BOB)) as s:
        first = await s.call_tool("crm_read", {"id": 1})
        cli_a, cli_b = await anyio.to_thread.run_sync(
            lambda: together(
                (shared.config, ("call", "crm_read", "id=2")),
                (shared.config, ("call", "crm_read", "id=3")),
            )
        )
        over_cli = await anyio.to_thread.run_sync(
            toolcards, shared.config, "call", "crm_read", "id=4"
        )
        over_mcp = await s.call_tool("crm_read", {"id": 5})
    assert first.is_error is False
    assert (cli_a.returncode, cli_b.returncode) == (ExitCode.OK, ExitCode.OK), cli_a.stderr
    assert over_cli.returncode == ExitCode.RATE_LIMITED
    assert json.loads(over_cli.stdout)["retry_after"] > 0
    assert over_mcp.is_error is True
    assert over_mcp.meta is not None
    assert over_mcp.meta["toolcards/outcome"]["outcome"] == "rate_limited"
    assert find_server(shared.config) is None  # nothing was forwarded: no endpoint record
    assert not endpoint_path(shared.config).exists()


async def test_every_process_writes_one_audit_trail_in_postgres(shared: Shared) -> None:
    async with http_session(shared.server.url, token_for(BOB)) as s:
        await s.call_tool("crm_search", {"query": "from mcp"})
        done = await anyio.to_thread.run_sync(
            toolcards, shared.config, "call", "crm_search", "query=from cli"
        )
    assert done.returncode == ExitCode.OK, done.stderr

    def rows() -> list[tuple[str, str]]:
        with AuditLog(shared.url, team_id="surfaces") as log:
            return sorted((e.surface, e.args["query"]) for e in log.query(tool="crm_search"))

    with anyio.fail_after(20):  # the server commits its batch a moment later
        while rows() != [("cli", "from cli"), ("mcp", "from mcp")]:
            await anyio.sleep(0.1)
    tail = toolcards(shared.config, "audit", "tail", "-n", "50")
    assert tail.returncode == 0, tail.stderr
    assert {e["surface"] for e in json.loads(tail.stdout) if e["tool"] == "crm_search"} == {
        "cli",
        "mcp",
    }
    assert not (shared.base / "audit.db").exists()


async def test_cli_and_server_share_the_team_board(shared: Shared) -> None:
    create = json.dumps({"create": [{"description": "written by the CLI"}]})
    async with http_session(shared.server.url, token_for(BOB)) as s:
        made = await anyio.to_thread.run_sync(
            toolcards, shared.config, "call", "update_planning", "--args", create
        )
        assert made.returncode == ExitCode.OK, made.stderr
        seen = await s.call_tool("search_planning", {})
        await s.call_tool("update_planning", {"create": [{"description": "written over MCP"}]})
        listed = await anyio.to_thread.run_sync(toolcards, shared.config, "call", "search_planning")
    assert "written by the CLI" in seen.content[0].text  # type: ignore[union-attr]
    assert listed.returncode == ExitCode.OK, listed.stderr
    assert "written over MCP" in listed.stdout and "written by the CLI" in listed.stdout


async def test_a_grant_in_a_cli_process_releases_the_call_waiting_in_the_server(
    tmp_path: Path, postgres_url: str
) -> None:
    config = shared_config(tmp_path, postgres_url, local=ANN, tokens=[AGENT])
    server = HttpServer(config, env={"NOTES_FILE": str(tmp_path / "notes.txt")})
    try:
        results: list[Any] = []
        async with (
            http_session(server.url, token_for(AGENT)) as s,
            anyio.create_task_group() as tasks,
        ):

            async def call() -> None:
                results.append(await s.call_tool("send_note", {"to": "ops", "body": "pg"}))

            tasks.start_soon(call)
            with anyio.fail_after(30):
                while not (rows := json.loads(toolcards(config, "approvals", "list").stdout)):
                    await anyio.sleep(0.2)
            granted = toolcards(config, "approvals", "grant", rows[0]["approval_id"])
    finally:
        server.stop()
    assert granted.returncode == ExitCode.OK, granted.stderr
    assert results[0].is_error is False
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "ops: pg\n"
    with AuditLog(postgres_url, team_id="surfaces") as log:
        assert [e.principal for e in log.query(outcome="approval_granted")] == ["ann"]


async def test_the_store_password_appears_in_no_output(shared: Shared) -> None:
    async with http_session(shared.server.url, token_for(BOB)) as s:
        await s.call_tool("crm_read", {"id": 1})
    outputs = [
        toolcards(shared.config, "list"),
        toolcards(shared.config, "call", "crm_read", "id=9"),
        toolcards(shared.config, "team", "status"),
    ]
    assert all(PASSWORD not in done.stdout + done.stderr for done in outputs)
    assert PASSWORD not in shared.server_log()


def test_an_unreachable_database_is_one_clear_error_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://toolcards:{PASSWORD}@127.0.0.1:{free_port()}/toolcards"
    done = toolcards(shared_config(tmp_path, url), "list")
    assert done.returncode == ExitCode.FAILED
    assert "is unavailable" in done.stderr and "127.0.0.1" in done.stderr
    assert PASSWORD not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


async def test_on_ray_the_server_and_a_cli_process_share_one_cluster_wide_tool_actor(
    tmp_path: Path, postgres_url: str, ray_cluster: Any
) -> None:
    import ray

    namespace = f"toolcards-surfaces-{tmp_path.name}"
    system = {"ray": {"address": ray_cluster.address, "namespace": namespace}}
    config = shared_config(tmp_path, postgres_url, system=system)
    create = json.dumps({"create": [{"description": "written by the CLI on Ray"}]})
    server = HttpServer(config, timeout=120)  # a bound: joining the cluster on a busy machine
    try:
        made = await anyio.to_thread.run_sync(
            toolcards, config, "call", "update_planning", "--args", create
        )
        async with http_session(server.url, token_for(BOB)) as s:
            seen = await s.call_tool("search_planning", {})
    finally:
        server.stop()
    assert made.returncode == ExitCode.OK, made.stderr
    assert "written by the CLI on Ray" in seen.content[0].text  # type: ignore[union-attr]
    actor = ray.get_actor("#PlanningTool", namespace=namespace)  # one actor, still serving
    ray.kill(actor, no_restart=True)
