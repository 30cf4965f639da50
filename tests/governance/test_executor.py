"""The executor pipeline, called directly as a surface other than pydantic-ai would."""

from __future__ import annotations

import asyncio
import time
from datetime import date
from enum import Enum
from typing import Any

import pytest
from pydantic import BaseModel

from toolcards.core.errors import RetriableError
from toolcards.core.spec import annotate
from toolcards.governance import (
    ApprovalRequest,
    CapabilityRegistry,
    Executor,
    Identity,
    Outcome,
    Policy,
)

pytestmark = pytest.mark.anyio
ALICE = Identity("alice", roles=["admin"])


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Window(BaseModel):
    start: date
    days: int


seen: list[Any] = []


def book(day: date, color: Color, window: Window) -> str:
    """Book a day."""
    seen.append((day, color, window))
    return f"{day.isoformat()} {color.value} {window.days}"


async def ping(n: int) -> int:
    """Async tool."""
    return n + 1


def slow(seconds: float) -> str:
    """A sync tool that takes a while."""
    time.sleep(seconds)
    return "done"


def flaky(x: int) -> str:
    """Raises a fixable error."""
    raise RetriableError("x must be even")


def broken(password: str) -> str:
    """Raises with a secret in the message."""
    raise RuntimeError(f"cannot log in with {password} sk-abcdefghijklmnopqrstuvwxyz")


def wire(amount: float) -> str:
    """Needs approval by declaration."""
    seen.append(("wire", amount))
    return f"wired {amount:g}"


annotate(wire, requires_approval=True, destructive=True)


def _executor(default: str = "allow", **kwargs: Any) -> Executor:
    registry = CapabilityRegistry.from_tools([book, ping, slow, flaky, broken, wire])
    return Executor(registry, Policy.from_dict({"default_effect": default}), **kwargs)


async def test_arguments_are_parsed_into_python_types() -> None:
    seen.clear()
    args = {"day": "2026-01-31", "color": "red", "window": {"start": "2026-02-01", "days": 3}}
    result = await _executor().call("book", args, ALICE)
    assert result.outcome is Outcome.OK
    day, color, window = seen[-1]
    assert day == date(2026, 1, 31) and color is Color.RED
    assert isinstance(window, Window) and window.start == date(2026, 2, 1)


async def test_extra_arguments_are_rejected_without_running() -> None:
    seen.clear()
    args = {"day": "2026-01-31", "color": "red", "window": {"start": "2026-02-01", "days": 3}}
    result = await _executor().call("book", {**args, "approved": True}, ALICE)
    assert result.outcome is Outcome.INVALID_ARGS
    assert "approved" in result.message
    assert seen == []


async def test_wrong_types_are_invalid_args_without_echoing_values() -> None:
    result = await _executor().call("ping", {"n": "sk-abcdefghijklmnopqrstuvwxyz"}, ALICE)
    assert result.outcome is Outcome.INVALID_ARGS
    assert "sk-abc" not in result.message


async def test_non_mapping_arguments_are_invalid() -> None:
    result = await _executor().call("ping", ["n", 1], ALICE)  # type: ignore[arg-type]
    assert result.outcome is Outcome.INVALID_ARGS


async def test_async_tool_is_awaited() -> None:
    result = await _executor().call("ping", {"n": 1}, ALICE)
    assert result.ok and result.value == 2


async def test_sync_tool_over_its_deadline_is_an_error_result() -> None:
    result = await _executor(timeout=0.05).call("slow", {"seconds": 0.5}, ALICE)
    assert result.outcome is Outcome.ERROR
    assert "timed out" in result.message


async def test_async_tool_over_its_deadline_is_cancelled() -> None:
    cancelled: list[bool] = []

    async def hang(n: int) -> int:
        """Never answers in time."""
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return n

    executor = Executor(CapabilityRegistry.from_tools([hang]), Policy.allow_all(), timeout=0.05)
    result = await executor.call("hang", {"n": 1}, ALICE)
    assert result.outcome is Outcome.ERROR and "timed out" in result.message
    assert cancelled == [True]


async def test_async_tool_that_awaits_still_returns_its_value() -> None:
    async def twice(n: int) -> int:
        """Awaits before answering."""
        await asyncio.sleep(0)
        await asyncio.sleep(0.001)
        return n * 2

    executor = Executor(CapabilityRegistry.from_tools([twice]), Policy.allow_all(), timeout=5)
    assert (await executor.call("twice", {"n": 4}, ALICE)).value == 8


async def test_retriable_error_becomes_retry() -> None:
    result = await _executor().call("flaky", {"x": 1}, ALICE)
    assert result.outcome is Outcome.RETRY
    assert result.message == "x must be even"


async def test_unexpected_exception_is_error_without_secrets_or_trace() -> None:
    result = await _executor().call("broken", {"password": "hunter2"}, ALICE)
    assert result.outcome is Outcome.ERROR
    assert result.message == "error: broken failed (RuntimeError)"


async def test_an_exception_that_cannot_say_itself_is_still_the_calls_error() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("no message")

    def broken_twice() -> str:
        """Fails with an exception whose message raises."""
        raise Unprintable()

    executor = Executor(CapabilityRegistry.from_tools([broken_twice]), Policy.allow_all())
    result = await executor.call("broken_twice", {}, ALICE)
    assert (result.outcome, result.message) == (
        Outcome.ERROR,
        "error: broken_twice failed (Unprintable)",
    )


async def test_denied_call_names_tool_and_principal_only() -> None:
    policy = Policy.from_dict(
        {"rules": [{"targets": ["ping"], "effect": "allow", "conditions": {"arguments": {"n": 0}}}]}
    )
    result = await Executor(CapabilityRegistry.from_tools([ping]), policy).call(
        "ping", {"n": 1}, ALICE
    )
    assert result.outcome is Outcome.DENIED
    assert result.message == "denied: ping is not permitted for alice"


async def test_no_identity_means_anonymous() -> None:
    policy = Policy.from_dict(
        {"rules": [{"targets": ["*"], "effect": "allow", "conditions": {"roles": ["admin"]}}]}
    )
    executor = Executor(CapabilityRegistry.from_tools([ping]), policy)
    assert (await executor.call("ping", {"n": 1})).outcome is Outcome.UNKNOWN_TOOL
    assert (await executor.call("ping", {"n": 1}, ALICE)).ok


async def test_unknown_tool_under_allow_all_is_unknown_not_denied() -> None:
    result = await _executor().call("nope", {}, ALICE)
    assert result.outcome is Outcome.UNKNOWN_TOOL
    assert result.message == "unknown tool: nope"


async def test_unknown_tool_suggests_close_names_the_caller_may_see() -> None:
    result = await _executor().call("pnig", {"n": 1}, ALICE)
    assert result.outcome is Outcome.UNKNOWN_TOOL
    assert result.message == "unknown tool: pnig; did you mean ping?"


async def test_hidden_tool_reads_exactly_like_an_unknown_one() -> None:
    policy = Policy.from_dict(
        {"default_effect": "allow", "rules": [{"targets": ["slow"], "effect": "deny"}]}
    )
    executor = Executor(CapabilityRegistry.from_tools([ping, slow]), policy)
    hidden = await executor.call("slow", {"seconds": 0}, ALICE)
    missing = await executor.call("slwo", {"seconds": 0}, ALICE)
    assert (hidden.outcome, missing.outcome) == (Outcome.UNKNOWN_TOOL, Outcome.UNKNOWN_TOOL)
    assert hidden.message == "unknown tool: slow"
    assert missing.message == "unknown tool: slwo"  # the hidden "slow" is never suggested


async def test_an_overlong_unknown_name_is_cut_in_the_message() -> None:
    result = await _executor().call("x" * 5000, {}, ALICE)
    assert result.outcome is Outcome.UNKNOWN_TOOL
    assert len(result.message) < 200


async def test_rate_limit_says_when_to_retry() -> None:
    policy = Policy.from_dict(
        {"default_effect": "allow", "limits": [{"targets": ["ping"], "rate": "2/min"}]}
    )
    executor = Executor(CapabilityRegistry.from_tools([ping]), policy)
    outcomes = [(await executor.call("ping", {"n": 1}, ALICE)).outcome for _ in range(3)]
    assert outcomes == [Outcome.OK, Outcome.OK, Outcome.RATE_LIMITED]
    limited = await executor.call("ping", {"n": 1}, ALICE)
    assert limited.retry_after is not None and 0 < limited.retry_after <= 60
    assert "again in" in limited.message


async def test_rate_limit_is_per_caller() -> None:
    policy = Policy.from_dict({"default_effect": "allow", "limits": {"rate": "1/hour"}})
    executor = Executor(CapabilityRegistry.from_tools([ping]), policy)
    assert (await executor.call("ping", {"n": 1}, ALICE)).ok
    assert (await executor.call("ping", {"n": 1}, Identity("bob"))).ok
    assert (await executor.call("ping", {"n": 1}, ALICE)).outcome is Outcome.RATE_LIMITED


async def test_approval_required_without_approver_fails_closed() -> None:
    seen.clear()
    result = await _executor().call("wire", {"amount": 5}, ALICE)
    assert result.outcome is Outcome.NEEDS_APPROVAL
    assert result.approval is not None and result.approval.tool_id == "wire"
    assert seen == []


async def test_approver_yes_runs_and_no_denies() -> None:
    seen.clear()
    asked: list[ApprovalRequest] = []

    async def yes(req: ApprovalRequest) -> bool:
        asked.append(req)
        return True

    async def no(req: ApprovalRequest) -> bool:
        return False

    executor = _executor()
    assert (await executor.call("wire", {"amount": 5}, ALICE, approver=yes)).ok
    refused = await executor.call("wire", {"amount": 6}, ALICE, approver=no)
    assert refused.outcome is Outcome.DENIED
    assert seen == [("wire", 5.0)]
    assert asked[0].principal == "alice" and asked[0].args == {"amount": 5}


async def test_approver_that_raises_counts_as_no() -> None:
    async def boom(req: ApprovalRequest) -> bool:
        raise RuntimeError("ui down")

    result = await _executor().call("wire", {"amount": 5}, ALICE, approver=boom)
    assert result.outcome is Outcome.DENIED


async def test_time_waiting_for_a_human_is_not_the_tools_deadline() -> None:
    async def slow_human(req: ApprovalRequest) -> bool:
        await asyncio.sleep(0.3)
        return True

    executor = _executor(timeout=0.2)
    result = await executor.call("wire", {"amount": 5}, ALICE, approver=slow_human)
    assert result.ok


async def test_policy_approve_effect_requires_approval_for_any_tool() -> None:
    policy = Policy.from_dict({"rules": [{"targets": ["ping"], "effect": "approve"}]})
    executor = Executor(CapabilityRegistry.from_tools([ping]), policy)
    assert (await executor.call("ping", {"n": 1}, ALICE)).outcome is Outcome.NEEDS_APPROVAL


APPROVER = Identity("rita", roles=["approver"])


async def test_granted_approval_is_single_use() -> None:
    seen.clear()
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    assert pending.outcome is Outcome.NEEDS_APPROVAL and pending.approval is not None
    executor.approvals.grant(pending.approval, approver=APPROVER)
    assert (await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")).ok
    again = await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    assert again.outcome is Outcome.NEEDS_APPROVAL
    assert seen == [("wire", 5.0)]


async def test_approval_does_not_cover_changed_arguments() -> None:
    seen.clear()
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    assert pending.approval is not None
    executor.approvals.grant(pending.approval, approver=APPROVER)
    changed = await executor.call("wire", {"amount": 5000}, ALICE, call_id="c1")
    assert changed.outcome is Outcome.NEEDS_APPROVAL
    assert seen == []


async def test_approval_does_not_cover_another_principal() -> None:
    executor = _executor()
    pending = await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    assert pending.approval is not None
    executor.approvals.grant(pending.approval, approver=APPROVER)
    other = await executor.call("wire", {"amount": 5}, Identity("mallory"), call_id="c1")
    assert other.outcome is Outcome.NEEDS_APPROVAL


async def test_expired_approval_is_not_honoured() -> None:
    now = [1000.0]
    executor = _executor()
    executor.approvals._clock = lambda: now[0]
    pending = await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    assert pending.approval is not None
    executor.approvals.grant(pending.approval, approver=APPROVER)
    now[0] += executor.approvals.ttl + 1
    late = await executor.call("wire", {"amount": 5}, ALICE, call_id="c1")
    assert late.outcome is Outcome.NEEDS_APPROVAL


async def test_approval_claim_for_unknown_call_id_is_not_honoured() -> None:
    seen.clear()
    result = await _executor().call("wire", {"amount": 5}, ALICE, call_id="forged", approved=True)
    assert result.outcome is Outcome.NEEDS_APPROVAL
    assert seen == []


async def test_registry_from_factory_keeps_card_annotations() -> None:
    from toolcards import ToolFactory
    from toolcards.tools.skills.card import Skill, SkillTool

    card = SkillTool(skills=[Skill(name="s", summary="x", content="body")])
    registry = CapabilityRegistry.from_factory(ToolFactory([card]))
    cap = registry["use_skill"]
    assert cap.annotations.readonly
    result = await Executor(registry, Policy.allow_all()).call("use_skill", {"name": "s"}, ALICE)
    assert result.ok and "body" in result.value


async def test_use_skill_loads_the_name_the_policy_decided_on() -> None:
    """A deny rule on skill "prod-deploy" was passed with " prod-deploy": the tool stripped the
    name and returned the denied skill."""
    from toolcards.tools.skills.card import Skill, SkillTool

    skills = [Skill(name="prod-deploy", summary="deploy", content="SECRET RUNBOOK")]
    deny = {"arguments": {"name": {"eq": "prod-deploy"}}}
    rule = {"targets": ["use_skill"], "effect": "deny", "conditions": deny}
    policy = Policy.from_dict({"default_effect": "allow", "rules": [rule]})
    executor = Executor(CapabilityRegistry.from_tools(SkillTool(skills=skills).get_tools()), policy)
    for spelling in (" prod-deploy", "prod-deploy\u3000", "\tprod-deploy\n", "prod-deploy\u2029"):
        result = await executor.call("use_skill", {"name": spelling}, ALICE)
        assert result.outcome is Outcome.RETRY
        assert result.message.endswith(f"blank space: {spelling!r}")
    result = await executor.call("use_skill", {"name": "prod-deploy"}, ALICE)
    assert result.outcome is Outcome.DENIED


async def test_registry_from_any_toolset(recorder: Any) -> None:
    registry = await CapabilityRegistry.from_toolset(recorder.toolset)
    assert registry["crm_delete"].annotations.destructive
    result = await Executor(registry, Policy.allow_all()).call("crm_read", {"id": "3"}, ALICE)
    assert result.ok and result.value == "record 3"
