"""A server's question answered from another process: `toolcards approvals grant ID --args
'{"content": {...}}'` (a real CLI process sharing the approvals file) answers an MCP
server's elicitation with that content while the agent's call waits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from server_requests_support import APPROVER, CALLER, Run, asking_card, run_once

from surfaces.surface_support import toolcards_in_process, toolcards_json, write_config
from toolcards import ToolFactory
from toolcards.governance import AuditLog, GovernedToolset, Policy
from toolcards.governance.approvals.broker import ApprovalBroker
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import Executor
from toolcards.stores.sqlite.approvals import SqliteApprovalStore


async def _grant_from_the_cli(config: Path, content: dict[str, Any]) -> Any:
    """The human's side: the inbox listed until it holds the question (the command line in
    this process, so the wait starts no process per look), then the grant, a separate
    process."""
    while True:
        listed = await asyncio.to_thread(toolcards_in_process, config, "approvals", "list")
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        if rows:
            break
        await asyncio.sleep(0.1)
    (row,) = rows
    edit = json.dumps({"content": content})
    grant = ("approvals", "grant", row["approval_id"], "--args", edit)
    done = await asyncio.to_thread(toolcards_json, config, *grant)
    assert done.returncode == 0, done.stderr
    return row


def test_a_question_is_answered_with_content_from_the_cli(tmp_path: Path) -> None:
    approvals = tmp_path / "approvals.db"
    config = write_config(tmp_path / "human", local=APPROVER, approvals=str(approvals))
    broker = ApprovalBroker(store=SqliteApprovalStore(approvals, team_id="surfaces"))
    card = asking_card(tmp_path, elicitation="inbox")
    run = Run([("book", {})])
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        executor = Executor(CapabilityRegistry(), Policy.allow_all(), audit=audit, approvals=broker)
        governed = GovernedToolset(
            ToolFactory([card]).toolset(), executor=executor, identity=CALLER
        )
        agent: Agent[None, str] = Agent(FunctionModel(run.model), toolsets=[governed])

        async def main() -> tuple[list[Any], Any]:
            human = asyncio.create_task(_grant_from_the_cli(config, {"city": "Bergen"}))
            results = await run_once(agent)
            return results, await human

        (answer,), row = asyncio.run(main())
    assert answer == {"action": "accept", "content": {"city": "Bergen"}}
    assert row["tool"] == "mcp.asker.elicit" and CALLER.id in json.dumps(row)
