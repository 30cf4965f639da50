"""Tools the host runs (pydantic-ai's ``kind="external"``, as ``ExternalToolset`` lists them)
under a GovernedToolset: each call is decided, approved, limited and audited like any other,
and handed to the host (``DeferredToolRequests.calls``) only once governance admitted it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import (
    DeferredToolRequests,
    DeferredToolResults,
    ToolApproved,
    ToolDefinition,
)
from pydantic_ai.toolsets import ExternalToolset

from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.governance.capability import surface_context
from toolcards.governance.toolset.layers import (
    APPROVAL_NOTE,
    ApprovalMarkedToolset,
    DescribedToolset,
    SafeNamedToolset,
    SelectedToolset,
    listed_tools,
)

CAROL = Identity("carol")
SEND = ToolDefinition(
    name="send_payment",
    description="Send money (the client runs it).",
    parameters_json_schema={
        "type": "object",
        "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
        "required": ["amount", "to"],
    },
)
CALLED = {"amount": 50, "to": "bob"}
DENY_MALLORY = {
    "callers": ["carol"], "targets": ["send_payment"], "effect": "deny",
    "conditions": {"arguments": {"to": {"glob": "mallory*"}}},
}  # fmt: skip


def _policy(effect: str, **more: Any) -> Policy:
    rules = [DENY_MALLORY, {"callers": ["carol"], "targets": ["send_payment"], "effect": effect}]
    return Policy.from_dict({"default_effect": "deny", "rules": rules, **more})


def _agent(
    policy: Policy, audit: AuditLog, calls: Sequence[dict[str, Any]]
) -> tuple[Agent[None, Any], GovernedToolset]:
    """An agent whose model makes ``calls`` (ids p0, p1, ...) in its first response, then
    ends with the tool results it read."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            made = [ToolCallPart(SEND.name, a, tool_call_id=f"p{i}") for i, a in enumerate(calls)]
            return ModelResponse(parts=made)
        read = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(f"read: {read}")])

    governed = GovernedToolset(ExternalToolset([SEND]), policy=policy, identity=CAROL, audit=audit)
    outputs: list[Any] = [str, DeferredToolRequests]
    return Agent(FunctionModel(model), toolsets=[governed], output_type=outputs), governed


def _rows(audit: AuditLog) -> list[tuple[str | None, str | None, dict[str, Any] | None]]:
    return [(row.call_id, row.outcome, row.args) for row in audit.query()]


def test_an_approve_rule_holds_for_an_external_tool(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        agent, governed = _agent(_policy("approve"), audit, [CALLED])
        first = agent.run_sync("pay")
        asked = first.output
        assert isinstance(asked, DeferredToolRequests)
        assert asked.calls == [] and [c.tool_call_id for c in asked.approvals] == ["p0"]
        assert [r.tool_id for r in governed.executor.approvals.pending()] == ["send_payment"]

        granted = DeferredToolResults(approvals={"p0": True})
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=granted)
        handed = second.output
        assert isinstance(handed, DeferredToolRequests) and handed.approvals == []
        assert [(c.tool_call_id, c.args) for c in handed.calls] == [("p0", CALLED)]

        ran = DeferredToolResults(calls={"p0": "paid"})
        done = agent.run_sync(message_history=second.all_messages(), deferred_tool_results=ran)
        assert done.output == "read: ['paid']"
        assert _rows(audit) == [
            ("p0", "needs_approval", CALLED),
            ("p0", "deferred", CALLED),
        ]


def test_an_argument_conditioned_deny_holds_for_an_external_tool(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db") as audit:
        agent, governed = _agent(_policy("approve"), audit, [{"amount": 9000, "to": "mallory"}])
        result = agent.run_sync("pay")
        assert isinstance(result.output, str)  # nothing handed to the host, nothing asked
        assert result.output.startswith("read: ['denied: send_payment")
        assert governed.executor.approvals.pending() == []
        assert _rows(audit) == [("p0", "denied", {"amount": 9000, "to": "mallory"})]


def test_each_external_call_has_one_row_and_the_rate_limit_holds(tmp_path: Path) -> None:
    policy = _policy("allow", limits=[{"targets": ["send_payment"], "rate": "2/hour"}])
    calls = [{"amount": n, "to": "bob"} for n in (1, 2, 3)]
    with AuditLog(tmp_path / "audit.db") as audit:
        agent, _ = _agent(policy, audit, calls)
        handed = agent.run_sync("pay").output
        assert isinstance(handed, DeferredToolRequests)
        assert [c.tool_call_id for c in handed.calls] == ["p0", "p1"]
        assert sorted(_rows(audit), key=str) == [
            ("p0", "deferred", calls[0]),
            ("p1", "deferred", calls[1]),
            ("p2", "rate_limited", calls[2]),
        ]


def test_an_edited_approval_of_an_external_call_is_not_handed_on(tmp_path: Path) -> None:
    """The host runs the call as the model made it: an approver's edit cannot reach it, so
    the call is not handed on rather than run with the arguments nobody approved."""
    with AuditLog(tmp_path / "audit.db") as audit:
        agent, _ = _agent(_policy("approve"), audit, [{"amount": 9000, "to": "bob"}])
        first = agent.run_sync("pay")
        edit = DeferredToolResults(
            approvals={"p0": ToolApproved(override_args={"amount": 5, "to": "bob"})}
        )
        second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=edit)
        assert isinstance(second.output, str) and "not handed on" in second.output
        assert [(c, o) for c, o, _ in _rows(audit)] == [("p0", "needs_approval"), ("p0", "error")]


@pytest.mark.anyio
async def test_the_layers_and_the_one_pass_list_external_tools_as_governed_calls() -> None:
    marked = replace(SEND, name="refund", metadata={"requires_approval": True})
    inner = ExternalToolset([SEND, marked])
    stack = ApprovalMarkedToolset(DescribedToolset(SafeNamedToolset(SelectedToolset(inner))))
    ctx = surface_context()
    layered = await stack.get_tools(ctx)
    one_pass = await listed_tools(stack, ctx)
    for name in ("send_payment", "refund"):
        assert layered[name].tool_def == one_pass[name][0]
        assert one_pass[name][0].kind == "function"
        assert one_pass[name][2].tool_def.kind == "external"  # the call is handed on
    refund = one_pass["refund"][0]
    assert refund.metadata is not None and refund.metadata["requires_approval"] is True
    assert refund.description == f"{SEND.description}\n\n{APPROVAL_NOTE}"
