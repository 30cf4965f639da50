"""Shared helpers for the apcore bridge tests: a real registry, executor and ACL."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from apcore import ACL, ACLRule, ApprovalRequest, ApprovalResult, Executor, Registry
from apcore.decorator import module
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


@dataclass
class Crm:
    """A registry with a few CRM modules that record every real execution."""

    registry: Registry
    executed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def build_crm() -> Crm:
    registry = Registry()
    crm = Crm(registry)

    @module(id="crm.read", registry=registry, annotations={"readonly": True}, tags=["crm"])
    def read(customer: str) -> dict[str, Any]:
        """Read one customer record.

        Args:
            customer: Customer id.
        """
        crm.executed.append(("crm.read", {"customer": customer}))
        return {"customer": customer, "plan": "gold"}

    @module(
        id="crm.delete",
        registry=registry,
        annotations={"destructive": True, "requires_approval": True},
    )
    def delete(customer: str) -> dict[str, Any]:
        """Delete one customer record.

        Args:
            customer: Customer id.
        """
        crm.executed.append(("crm.delete", {"customer": customer}))
        return {"deleted": customer}

    @module(id="crm.crash", registry=registry)
    def crash(customer: str) -> dict[str, Any]:
        """Always fails.

        Args:
            customer: Customer id.
        """
        raise RuntimeError(f"database offline for {customer}")

    return crm


def allow_agents(targets: Sequence[str] = ("crm.*",), roles: Sequence[str] = ()) -> ACL:
    conditions = {"roles": list(roles)} if roles else None
    rule = ACLRule(
        callers=["agent.*"], targets=list(targets), effect="allow", conditions=conditions
    )
    return ACL(rules=[rule], default_effect="deny")


def executor_for(crm: Crm, acl: ACL | None = None, handler: Any | None = None) -> Executor:
    return Executor(
        crm.registry, acl=acl if acl is not None else allow_agents(), approval_handler=handler
    )


@dataclass
class RecordingHandler:
    """An apcore approval handler that approves everything and records every question."""

    requests: list[ApprovalRequest] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

    async def request_approval(self, request: ApprovalRequest) -> ApprovalResult:
        self.requests.append(request)
        return ApprovalResult(status="approved", approved_by="recording")

    async def check_approval(self, approval_id: str) -> ApprovalResult:
        self.checks.append(approval_id)
        return ApprovalResult(status="approved", approved_by="recording")


@dataclass(frozen=True)
class Who:
    """A duck-typed identity, like the one the governance engine uses."""

    id: str
    type: str = "agent"
    roles: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict)


Call = tuple[str, dict[str, Any]]


def scripted(*turns: Sequence[Call]) -> tuple[FunctionModel, list[list[ToolReturnPart]]]:
    """A model that makes the given tool calls turn by turn, then answers "done".

    Returns the model and a list collecting, per model turn, the tool returns it saw.
    """
    seen: list[list[ToolReturnPart]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)]
            if isinstance(last, ModelRequest)
            else []
        )
        seen.append(returns)
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step < len(turns):
            parts = [
                ToolCallPart(name, args, tool_call_id=f"c{step}_{i}")
                for i, (name, args) in enumerate(turns[step])
            ]
            return ModelResponse(parts=parts)
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond), seen


@dataclass(frozen=True)
class Returned:
    """What the model read back for one tool call."""

    tool_call_id: str
    outcome: str  # "success", "failed" or "retried"
    content: Any


def returns_of(result: Any) -> list[Returned]:
    """Every tool call's answer in the run. A retry is a ``ToolReturnPart`` with outcome
    "retried" in newer pydantic-ai and a ``RetryPromptPart`` in older: both read as "retried"."""
    found = []
    for message in result.all_messages():
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                found.append(Returned(part.tool_call_id, part.outcome, part.content))
            elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
                found.append(Returned(part.tool_call_id, "retried", part.content))
    return found


def run(toolset: Any, *turns: Sequence[Call], deps: Any = None, **agent_kwargs: Any) -> Any:
    """Run an agent driven by :func:`scripted` over ``toolset`` and return the run result."""
    model, _ = scripted(*turns)
    agent: Agent[Any, Any] = Agent(model, toolsets=[toolset], **agent_kwargs)
    return agent.run_sync("go", deps=deps)
