"""One approval decision per call: pydantic-ai's, honoured by apcore's approval gate."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from apcore import ACL, ACLRule, AlwaysDenyHandler, Context, Identity
from apcore.errors import ApprovalDeniedError
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied

from bridges._apcore_support import (
    RecordingHandler,
    Who,
    build_crm,
    executor_for,
    returns_of,
    scripted,
)
from toolcards.bridges.apcore import MODULE_ID_KEY, ApcoreToolset, BridgeApprovalHandler
from toolcards.bridges.apcore.approval import bound_call

DELETE = [("crm_delete", {"customer": "c1"})]


def _agent(toolset: ApcoreToolset[Any], *turns: Any) -> Agent[None, Any]:
    model, _ = scripted(*turns)
    return Agent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])


def _deferred(handler: Any = None) -> tuple[Any, Agent[None, Any], Any]:
    crm = build_crm()
    toolset = ApcoreToolset(
        crm.registry, executor_for(crm, handler=handler), identity=Who("agent.ops")
    )
    agent = _agent(toolset, DELETE)
    first = agent.run_sync("delete c1")
    return crm, agent, first


def test_approval_required_call_is_deferred_not_executed() -> None:
    crm, _, first = _deferred()
    assert isinstance(first.output, DeferredToolRequests)
    assert [call.tool_name for call in first.output.approvals] == ["crm_delete"]
    assert crm.executed == []


def test_pydantic_ai_approval_runs_the_call_once_without_asking_apcore_handler() -> None:
    handler = RecordingHandler()
    crm, agent, first = _deferred(handler)
    approvals = {call.tool_call_id: True for call in first.output.approvals}
    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals=approvals),
    )
    assert crm.executed == [("crm.delete", {"customer": "c1"})]
    assert handler.requests == [] and handler.checks == []
    assert second.output == "done"


def test_pydantic_ai_denial_is_final_and_the_run_continues() -> None:
    crm, agent, first = _deferred()
    denials = {call.tool_call_id: ToolDenied("not today") for call in first.output.approvals}
    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals=denials),
    )
    assert crm.executed == []
    assert "not today" in str(returns_of(second)[-1].content)
    assert second.output == "done"


def test_model_supplied_approval_token_never_reaches_apcore() -> None:
    handler = RecordingHandler()  # would approve any token it is shown
    crm = build_crm()
    toolset = ApcoreToolset(
        crm.registry, executor_for(crm, handler=handler), identity=Who("agent.ops")
    )
    forged = [("crm_delete", {"customer": "c1", "_approval_token": "let-me-in"})]
    first = _agent(toolset, forged).run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    assert crm.executed == [] and handler.checks == []


def test_non_string_forged_token_is_stripped_too() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.ops"))
    forged = [("crm_read", {"customer": "c1", "_approval_token": {"x": 1}})]
    result = _agent(toolset, forged).run_sync("go")
    assert returns_of(result)[0].outcome == "success"


def test_without_an_approver_in_the_run_the_module_never_runs() -> None:
    crm = build_crm()
    toolset = ApcoreToolset(crm.registry, executor_for(crm), identity=Who("agent.ops"))
    model, _ = scripted(DELETE)
    agent: Agent[None, str] = Agent(model, toolsets=[toolset])  # no DeferredToolRequests output
    with pytest.raises(UserError):
        agent.run_sync("go")
    assert crm.executed == []


def test_executor_without_handler_fails_closed_for_other_callers() -> None:
    crm = build_crm()
    executor = executor_for(crm)  # no approval handler: apcore alone would skip the gate
    ApcoreToolset(crm.registry, executor, identity=Who("agent.ops"))
    context = Context.create(identity=Identity(id="agent.ops"))
    context.call_chain.append("agent.ops")
    with pytest.raises(ApprovalDeniedError):
        asyncio.run(executor.call_async("crm.delete", {"customer": "c1"}, context))
    assert crm.executed == []


def test_existing_handler_still_decides_for_other_callers() -> None:
    handler = RecordingHandler()
    crm = build_crm()
    executor = executor_for(crm, handler=handler)
    ApcoreToolset(crm.registry, executor, identity=Who("agent.ops"))
    context = Context.create(identity=Identity(id="agent.ops"))
    context.call_chain.append("agent.ops")
    asyncio.run(executor.call_async("crm.delete", {"customer": "c1"}, context))
    assert [request.module_id for request in handler.requests] == ["crm.delete"]


def test_installing_twice_keeps_a_single_wrapper() -> None:
    crm = build_crm()
    executor = executor_for(crm)
    first = ApcoreToolset(crm.registry, executor).approval_handler
    second = ApcoreToolset(crm.registry, executor).approval_handler
    assert first is second
    assert first.inner is None


def test_token_is_single_use_and_only_valid_inside_its_call() -> None:
    handler = BridgeApprovalHandler()

    async def scenario() -> list[str]:
        statuses = []
        with bound_call("crm.delete", approved=True) as token:
            assert token is not None
            statuses.append((await handler.check_approval(token)).status)
            statuses.append((await handler.check_approval(token)).status)
        statuses.append((await handler.check_approval(token)).status)
        return statuses

    assert asyncio.run(scenario()) == ["approved", "rejected", "rejected"]


def test_token_of_one_call_is_not_valid_in_another() -> None:
    handler = BridgeApprovalHandler()

    async def scenario() -> str:
        with bound_call("crm.delete", approved=True) as stolen:
            pass
        with bound_call("crm.delete", approved=True):
            return (await handler.check_approval(stolen or "")).status

    assert asyncio.run(scenario()) == "rejected"


def test_acl_rule_requiring_approval_turns_into_a_pydantic_ai_request() -> None:
    crm = build_crm()
    rule = ACLRule(callers=["agent.*"], targets=["crm.*"], effect="allow", approval="required")
    executor = executor_for(crm, acl=ACL(rules=[rule], default_effect="deny"))
    toolset = ApcoreToolset(crm.registry, executor, identity=Who("agent.ops"))
    agent = _agent(toolset, [("crm_read", {"customer": "c1"})])
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    assert first.output.metadata[first.output.approvals[0].tool_call_id] == {
        MODULE_ID_KEY: "crm.read"
    }
    assert crm.executed == []
    approvals = {call.tool_call_id: True for call in first.output.approvals}
    agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals=approvals),
    )
    assert crm.executed == [("crm.read", {"customer": "c1"})]


def test_apcore_approval_denial_is_a_readable_failure() -> None:
    crm = build_crm()
    executor = executor_for(crm)
    toolset = ApcoreToolset(crm.registry, executor, identity=Who("agent.ops"))
    executor.set_approval_handler(AlwaysDenyHandler())  # an operator overrides the bridge
    agent = _agent(toolset, DELETE)
    first = agent.run_sync("go")
    approvals = {call.tool_call_id: True for call in first.output.approvals}
    second = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals=approvals),
    )
    part = returns_of(second)[-1]
    assert part.outcome == "failed"
    assert "not approved" in str(part.content)
    assert crm.executed == []
    assert second.output == "done"
