"""An MCP client never approves its own calls: an approval-required call waits for an approver
principal, who decides it out of band with `toolcards approvals list|grant|deny` (real server,
real official-SDK client, the CLI in process, sharing the approvals file)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp_clients import http_session

from surfaces.surface_support import HttpServer, token_for, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from toolcards.governance import AuditLog, Identity
from toolcards.surfaces.outcomes import ExitCode

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

AGENT = Identity("agent.crawler", "agent", ["worker"])
ANN = Identity("ann", "user", ["approver"])
CLERK = Identity("clerk", "user", ["sales"])
ALLOW_ALL = "default_effect: allow\n"


def configs(base: Path, **extra: Any) -> tuple[Path, Path]:
    """The server's config (Ann, an approver, is the CLI's principal) and a second config on
    the same audit trail and approvals file whose principal is the calling agent itself,
    holding the approver role."""
    policy = base / "policy.yaml"
    policy.write_text(ALLOW_ALL, encoding="utf-8")
    shared = {
        "policy": policy,
        "tools": ["approval_tools:TOOLS"],
        "audit": base / "audit.db",
        "approvals": str(base / "approvals.db"),
        **extra,
    }
    served = write_config(base, local=ANN, tokens=[AGENT], **shared)
    own = write_config(
        base, local=Identity(AGENT.id, "agent", ["approver"]), name="agent.yaml", **shared
    )
    return served, own


class Served:
    def __init__(self, base: Path, server: HttpServer, config: Path, own: Path) -> None:
        self.base, self.server, self.config, self.own = base, server, config, own
        self.notes = base / "notes.txt"

    def sent(self, marker: str) -> list[str]:
        text = self.notes.read_text(encoding="utf-8") if self.notes.exists() else ""
        return [line for line in text.splitlines() if marker in line]

    async def pending(self) -> list[dict[str, Any]]:
        """The inbox as `toolcards approvals list` shows it, once it holds a call."""
        with anyio.fail_after(30):
            while True:
                done = await anyio.to_thread.run_sync(toolcards, self.config, "approvals", "list")
                assert done.returncode == 0, done.stderr
                rows: list[dict[str, Any]] = json.loads(done.stdout)
                if rows:
                    return rows
                await anyio.sleep(0.1)

    async def cli(self, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return await anyio.to_thread.run_sync(lambda: toolcards(config, *args))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("approvals")
    config, own = configs(base, approval_timeout=60)
    server = HttpServer(config, env={"NOTES_FILE": str(base / "notes.txt")})
    yield Served(base, server, config, own)
    server.stop()


async def call_while(
    served: Served, args: dict[str, Any], decide: Any, **session: Any
) -> types.CallToolResult:
    """Call send_note as the agent over MCP; meanwhile ``await decide()``."""
    result: list[types.CallToolResult] = []
    async with (
        http_session(served.server.url, token_for(AGENT), **session) as s,
        anyio.create_task_group() as tasks,
    ):

        async def call() -> None:
            result.append(await s.call_tool("send_note", args))

        tasks.start_soon(call)
        await decide()
    return result[0]


def audit_outcomes(base: Path, principal: str) -> list[tuple[str, str, str]]:
    with AuditLog(base / "audit.db") as log:
        rows = log.query(principal=principal, limit=1000)
    return [(e.outcome, e.surface, e.tool) for e in rows]


async def test_a_grant_from_the_cli_runs_the_waiting_call_exactly_once(served: Served) -> None:
    args = {"to": "ops", "body": "grant-once"}
    granted: list[subprocess.CompletedProcess[str]] = []
    told: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        told.append(str(params.data))

    async def decide() -> None:
        (row,) = await served.pending()
        assert (row["tool"], row["caller"], row["args"]) == ("send_note", AGENT.id, args)
        assert row["reason"] == "the tool requires approval" and row["age_s"] >= 0
        granted.append(await served.cli(served.config, "approvals", "grant", row["approval_id"]))
        granted.append(await served.cli(served.config, "approvals", "grant", row["approval_id"]))

    result = await call_while(served, args, decide, logging_callback=on_log)
    assert result.is_error is False
    assert result.content[0].text == "sent to ops"  # type: ignore[union-attr]
    assert any("toolcards approvals grant" in text for text in told)  # the caller is told
    assert granted[0].returncode == ExitCode.OK, granted[0].stderr
    assert json.loads(granted[0].stdout)["approver"] == "ann"
    assert granted[1].returncode == ExitCode.DENIED  # a grant is spent once it was used
    assert served.sent("grant-once") == ["ops: grant-once"]
    assert ("approval_granted", "cli", "send_note") in audit_outcomes(served.base, "ann")


async def test_a_denial_from_the_cli_refuses_the_waiting_call(served: Served) -> None:
    args = {"to": "ops", "body": "deny-me"}

    async def decide() -> None:
        (row,) = await served.pending()
        done = await served.cli(
            served.config, "approvals", "deny", row["approval_id"], "--reason", "not today"
        )
        assert done.returncode == ExitCode.OK, done.stderr

    result = await call_while(served, args, decide)
    assert result.is_error is True
    assert result.meta is not None and result.meta["toolcards/outcome"]["kind"] == "approval"
    assert "refused" in result.content[0].text  # type: ignore[union-attr]
    assert served.sent("deny-me") == []
    with AuditLog(served.base / "audit.db") as log:
        (entry,) = log.query(principal="ann", outcome="approval_denied", limit=10)
    assert entry.reason is not None and "not today" in entry.reason


async def test_the_agent_cannot_grant_its_own_call(served: Served) -> None:
    args = {"to": "ops", "body": "self-approved"}
    refused: list[subprocess.CompletedProcess[str]] = []

    async def decide() -> None:
        (row,) = await served.pending()
        refused.append(await served.cli(served.own, "approvals", "grant", row["approval_id"]))
        assert [r["approval_id"] for r in await served.pending()] == [row["approval_id"]]
        await served.cli(served.config, "approvals", "deny", row["approval_id"])

    result = await call_while(served, args, decide)
    assert refused[0].returncode == ExitCode.DENIED
    assert "a caller cannot approve its own call" in refused[0].stderr
    assert result.is_error is True and served.sent("self-approved") == []
    assert ("approval_rejected", "cli", "send_note") in audit_outcomes(served.base, AGENT.id)


async def test_a_principal_without_the_approver_role_cannot_grant(
    served: Served, tmp_path: Path
) -> None:
    clerk = write_config(
        served.base,
        local=CLERK,
        name="clerk.yaml",
        policy=served.base / "policy.yaml",
        tools=["approval_tools:TOOLS"],
        audit=served.base / "audit.db",
        approvals=str(served.base / "approvals.db"),
    )
    args = {"to": "ops", "body": "clerk-approved"}
    refused: list[subprocess.CompletedProcess[str]] = []

    async def decide() -> None:
        (row,) = await served.pending()
        refused.append(await served.cli(clerk, "approvals", "grant", row["approval_id"]))
        await served.cli(served.config, "approvals", "deny", row["approval_id"])

    result = await call_while(served, args, decide)
    assert refused[0].returncode == ExitCode.DENIED
    assert "does not hold the 'approver' role" in refused[0].stderr
    assert result.is_error is True and served.sent("clerk-approved") == []


async def call_once(
    config: Path, body: str, asked: list[str] | None = None
) -> types.CallToolResult:
    """One send_note call by the agent on a fresh server of ``config``; an elicitation
    request is answered "approve" (and recorded in ``asked``) when ``asked`` is given."""

    async def approve(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert asked is not None
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    session: dict[str, Any] = {} if asked is None else {"elicitation_callback": approve}
    server = HttpServer(config, env={"NOTES_FILE": str(config.parent / "notes.txt")})
    try:
        async with http_session(server.url, token_for(AGENT), **session) as s:
            with anyio.fail_after(30):
                return await s.call_tool("send_note", {"to": "ops", "body": body})
    finally:
        server.stop()


async def test_the_caller_is_never_asked_and_no_decision_in_time_times_out(
    tmp_path: Path,
) -> None:
    config, _ = configs(tmp_path, approval_timeout=1.5)
    asked: list[str] = []
    result = await call_once(config, "unattended", asked)
    assert asked == []
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error is True and text.startswith("approval timeout:")
    assert not (tmp_path / "notes.txt").exists()
    assert json.loads(toolcards(config, "approvals", "list").stdout) == []


async def test_without_any_approver_the_call_fails_closed_at_once(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(ALLOW_ALL, encoding="utf-8")
    config = write_config(
        tmp_path, local=CLERK, tokens=[AGENT], policy=policy, tools=["approval_tools:TOOLS"]
    )
    result = await call_once(config, "nobody")  # bounded: nobody could ever decide it
    assert result.is_error is True
    assert result.meta is not None
    assert result.meta["toolcards/outcome"]["outcome"] == "needs_approval"
    assert json.loads(toolcards(config, "approvals", "list").stdout) == []


async def test_approval_client_still_asks_the_calling_client(tmp_path: Path) -> None:
    config, _ = configs(tmp_path, approval="client")
    asked: list[str] = []
    result = await call_once(config, "elicited", asked)
    assert len(asked) == 1 and "send_note" in asked[0]
    assert result.is_error is False
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "ops: elicited\n"


def test_a_cli_call_that_fails_closed_leaves_nothing_in_the_inbox(served: Served) -> None:
    done = toolcards(served.config, "call", "send_note", "to=ops", "body=from the cli")
    assert done.returncode == ExitCode.APPROVAL
    assert json.loads(toolcards(served.config, "approvals", "list").stdout) == []
    assert served.sent("from the cli") == []
