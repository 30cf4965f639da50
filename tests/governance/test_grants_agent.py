"""Remembered approvals in real pydantic-ai runs (FunctionModel): a deferred call that the
approver grants and remembers for the conversation lets the model's later covered calls in
that conversation run without a deferral; another conversation is asked again."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from support.scripted import SequenceScript
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.governance.approvals.grants import Remember

from .conftest import Recorder

CAROL = Identity("carol", roles=["finance"])
RITA = Identity("rita", roles=["approver"])
POLICY = Policy.from_dict({
    "default_effect": "deny",
    "rules": [{"targets": ["send_email"], "callers": ["carol"], "effect": "approve"}],
})  # fmt: skip


def _agent(toolset: GovernedToolset, calls: list[tuple[str, dict[str, Any]]]) -> Agent[None, Any]:
    return Agent(
        SequenceScript(calls).model, toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )


def test_a_grant_remembered_for_the_conversation_covers_its_later_calls(
    recorder: Recorder, tmp_path: Any
) -> None:
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        toolset = GovernedToolset(recorder.toolset, policy=POLICY, audit=audit, identity=CAROL)
        broker = toolset.executor.approvals
        mail = {"to": "ops@example.com", "body": "status"}
        first = _agent(toolset, [("send_email", mail)]).run_sync("mail ops")
        assert isinstance(first.output, DeferredToolRequests)
        [waiting] = broker.pending()
        pattern = {"body": "any"}  # any body, to ops only, in this conversation
        grant = broker.remember(waiting, approver=RITA, remember=Remember(600, True, pattern))
        call_id = first.output.approvals[0].tool_call_id
        resumed = _agent(toolset, [("send_email", {**mail, "body": "again"})]).run_sync(
            message_history=first.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={call_id: True}),
        )
        assert resumed.output.count("send_email: success: mailed ops@example.com") == 2
        assert [c[1]["body"] for c in recorder.calls] == ["status", "again"]
        later = {**mail, "body": "later"}  # the model's call ids repeat across runs: new args
        elsewhere = _agent(toolset, [("send_email", later)]).run_sync("a new conversation")
        assert isinstance(elsewhere.output, DeferredToolRequests)
        covered = [e for e in audit.query(limit=100) if e.grant_id == grant.grant_id]
        assert [e.outcome for e in covered] == ["approval_granted", "grant_created", "ok", "ok"]
        assert [e.args["body"] for e in covered[2:]] == ["status", "again"]
