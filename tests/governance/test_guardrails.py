"""Guardrail hooks in the executor's pipeline: after the policy, before and after the tool,
fail closed, audited with the hook's name (a real executor and a real SQLite audit log)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolcards.core.spec import annotate
from toolcards.governance import (
    ApprovalRequest,
    AuditLog,
    CapabilityRegistry,
    Executor,
    HookContext,
    Identity,
    Outcome,
    Policy,
    Refuse,
    SecretScanner,
    ToolHook,
    input_guardrail,
    output_guardrail,
)

pytestmark = pytest.mark.anyio
FINANCE = Identity("carol", roles=["finance"])
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"

POLICY = {
    "default_effect": "deny",
    "rules": [
        {
            "description": "Finance may make small transfers",
            "targets": ["transfer"],
            "effect": "allow",
            "conditions": {"roles": ["finance"], "arguments": {"amount": {"max": 100}}},
        },
        {"targets": ["transfer"], "effect": "approve", "conditions": {"roles": ["finance"]}},
        {"targets": ["lookup"], "effect": "deny", "conditions": {"arguments": {"name": ["root"]}}},
        {"targets": ["lookup", "fetch_config", "profile", "tag", "account"], "effect": "allow"},
    ],
}

ran: list[tuple[str, dict[str, Any]]] = []


def transfer(amount: int, to: str) -> str:
    """Transfer money."""
    ran.append(("transfer", {"amount": amount, "to": to}))
    return f"sent {amount} to {to}"


def lookup(name: str, limit: int = 10) -> str:
    """Look a name up."""
    ran.append(("lookup", {"name": name, "limit": limit}))
    return f"{name}: {limit} rows"


def fetch_config(service: str) -> dict[str, Any]:
    """A service's configuration."""
    return {"service": service, "env": f"AWS_ACCESS_KEY_ID={AWS_KEY}", "region": "eu-west-1"}


class Profile(BaseModel):
    name: str
    note: str


def profile(name: str) -> Profile:
    """A user's profile."""
    return Profile(name=name, note=f"deploy key {AWS_KEY}")


def tag(names: list[str]) -> str:
    """Tag names."""
    ran.append(("tag", {"names": names}))
    return ",".join(names)


def account(name: str) -> dict[str, Any]:
    """An account's record."""
    return {
        "name": name,
        "password": ["hunter2", "s3cret-old"],
        "pin": 4321,
        "card": {"pin": "0000", "last4": "1234"},
        "export": '{"password": ["hunter2"], "pin": 4321, "user": "ada"}',
    }


TOOLS = [transfer, lookup, fetch_config, profile, tag, account]


class Spy(ToolHook):
    """Records what it saw, passes everything through."""

    def __init__(self, name: str = "spy") -> None:
        self.name = name
        self.seen: list[tuple[str, HookContext, Any]] = []

    def before_call(self, ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(("before", ctx, dict(args)))
        return args

    def after_call(self, ctx: HookContext, result: Any) -> Any:
        self.seen.append(("after", ctx, result))
        return result


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    ran.clear()
    yield
    ran.clear()


@pytest.fixture
def audit(tmp_path: Path) -> Iterator[AuditLog]:
    log = AuditLog(tmp_path / "audit.db", durability="sync")
    yield log
    log.close()


def _executor(audit: AuditLog, *hooks: ToolHook, timeout: float | None = 30.0) -> Executor:
    registry = CapabilityRegistry.from_tools(TOOLS)
    return Executor(registry, Policy.from_dict(POLICY), audit=audit, hooks=hooks, timeout=timeout)


async def test_a_denied_call_never_reaches_a_hook(audit: AuditLog) -> None:
    spy = Spy()
    result = await _executor(audit, spy).call("lookup", {"name": "root"}, FINANCE)
    assert result.outcome is Outcome.DENIED
    assert spy.seen == []
    row = audit.tail(1)[0]
    assert (row.outcome, row.hook) == ("denied", None)


async def test_a_call_to_a_hidden_tool_never_reaches_a_hook(audit: AuditLog) -> None:
    spy = Spy()
    result = await _executor(audit, spy).call("transfer", {"amount": 5, "to": "x"}, Identity("eve"))
    assert result.outcome is Outcome.UNKNOWN_TOOL  # hidden from eve, so unknown to her
    assert spy.seen == []


async def test_a_call_needing_approval_reaches_no_hook_before_a_human_said_yes(
    audit: AuditLog,
) -> None:
    spy = Spy()
    result = await _executor(audit, spy).call("transfer", {"amount": 500, "to": "x"}, FINANCE)
    assert result.outcome is Outcome.NEEDS_APPROVAL
    assert spy.seen == []


async def test_a_hook_sees_the_principal_the_tool_the_arguments_and_the_call_id(
    audit: AuditLog,
) -> None:
    spy = Spy()
    await _executor(audit, spy).call("lookup", {"name": "ada"}, FINANCE, call_id="c-1")
    stage, ctx, args = spy.seen[0]
    assert (stage, ctx.tool_id, ctx.principal, ctx.call_id, args) == (
        "before",
        "lookup",
        FINANCE,
        "c-1",
        {"name": "ada"},
    )
    assert ctx.decision.effect == "allow"
    remaining = ctx.remaining()
    assert remaining is not None and 0 < remaining <= 30.0


async def test_an_input_hook_rewrite_is_what_the_tool_runs_with(audit: AuditLog) -> None:
    @input_guardrail
    def cap_limit(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        args["limit"] = min(args.get("limit", 10), 5)
        return args

    result = await _executor(audit, cap_limit).call(
        "lookup", {"name": "ada", "limit": 900}, FINANCE
    )
    assert result.value == "ada: 5 rows"
    assert ran == [("lookup", {"name": "ada", "limit": 5})]
    row = audit.tail(1)[0]
    assert (row.outcome, row.hook, row.args) == ("ok", "cap_limit", {"name": "ada", "limit": 900})


async def test_a_hook_changing_nested_arguments_in_place_leaves_the_audited_ones(
    audit: AuditLog,
) -> None:
    @input_guardrail
    def add_reviewed(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        args["names"].append("reviewed")
        return args

    result = await _executor(audit, add_reviewed).call("tag", {"names": ["a"]}, FINANCE)
    assert result.value == "a,reviewed"
    assert audit.tail(1)[0].args == {"names": ["a"]}


async def test_hooks_run_in_order_each_seeing_the_one_before(audit: AuditLog) -> None:
    @input_guardrail
    def first(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "name": args["name"] + "-1"}

    @input_guardrail
    async def second(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {**args, "name": args["name"] + "-2"}

    result = await _executor(audit, first, second).call("lookup", {"name": "a"}, FINANCE)
    assert result.value == "a-1-2: 10 rows"
    assert audit.tail(1)[0].hook == "first,second"


async def test_a_rewrite_into_a_call_the_policy_decides_otherwise_is_refused(
    audit: AuditLog,
) -> None:
    @input_guardrail
    def add_fee(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "amount": args["amount"] + 200}  # past what the policy allows unasked

    result = await _executor(audit, add_fee).call("transfer", {"amount": 50, "to": "x"}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    assert ran == []
    row = audit.tail(1)[0]
    assert (row.outcome, row.hook) == ("refused", "add_fee")
    assert "policy decides differently" in (row.error or "")


async def test_a_rewrite_that_breaks_the_schema_is_refused(audit: AuditLog) -> None:
    @input_guardrail
    def wrong_type(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "limit": "many"}

    result = await _executor(audit, wrong_type).call("lookup", {"name": "a"}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    assert ran == []
    assert "invalid ones" in (audit.tail(1)[0].error or "")


async def test_a_hook_may_not_rewrite_a_call_a_human_approved(audit: AuditLog) -> None:
    @input_guardrail
    def halve(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "amount": args["amount"] // 2}

    async def yes(request: Any) -> bool:
        return True

    executor = _executor(audit, halve)
    args = {"amount": 500, "to": "x"}
    result = await executor.call("transfer", args, FINANCE, approver=yes)
    assert result.outcome is Outcome.REFUSED
    assert ran == []
    assert "a human approved" in (audit.tail(1)[0].error or "")


async def test_a_hook_may_not_rewrite_what_an_approver_edited_either(audit: AuditLog) -> None:
    """The approver's edit (50, which the policy alone would allow) is what the human
    approved: a hook's change of it is refused, as of any call a human approved."""

    @input_guardrail
    def add_fee(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "amount": args["amount"] + 1}

    executor = _executor(audit, add_fee)
    args = {"amount": 500, "to": "x"}
    asked = await executor.call("transfer", args, FINANCE, call_id="edited")
    assert asked.approval is not None
    executor.approvals.grant_record(
        asked.approval, approver=Identity("rita", roles=["approver"]), args={**args, "amount": 50}
    )
    result = await executor.call("transfer", args, FINANCE, call_id="edited")
    assert result.outcome is Outcome.REFUSED, result.message
    assert ran == []
    row = audit.tail(1)[0]
    assert "a human approved" in (row.error or "")
    assert (row.outcome, row.hook) == ("refused", "add_fee")


async def test_an_input_refusal_is_audited_with_the_hooks_name(audit: AuditLog) -> None:
    @input_guardrail(name="no_weekend_transfers")
    def closed(ctx: HookContext, args: dict[str, Any]) -> Refuse:
        return Refuse("transfers are closed today")

    executor = _executor(audit, closed)
    result = await executor.call("transfer", {"amount": 5, "to": "x"}, FINANCE)
    assert (result.outcome, result.message) == (
        Outcome.REFUSED,
        "refused: transfers are closed today",
    )
    assert ran == []
    row = audit.tail(1)[0]
    assert (row.outcome, row.decision, row.hook) == ("refused", "allow", "no_weekend_transfers")


async def test_an_input_hook_that_raises_fails_closed(audit: AuditLog) -> None:
    @input_guardrail
    def broken(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("scanner database unreachable at 10.0.0.7")

    result = await _executor(audit, broken).call("transfer", {"amount": 5, "to": "x"}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    assert "10.0.0.7" not in result.message and "RuntimeError" not in result.message
    assert ran == []
    row = audit.tail(1)[0]
    assert row.hook == "broken" and "RuntimeError" in (row.error or "")


# a failure's log line says what its audit row says: the redacted text, not the traceback
# whose last line repeats the exception's message (an argument in clear)
PIN, CODE = "8214-Zeta", "door-code-77x1"


def unlock(door: str, pin: str, code: str) -> str:
    """Unlock a door."""
    return "open"


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    assert all(record.exc_info is None for record in caplog.records)
    return caplog.text


async def test_a_hook_failing_on_a_secret_argument_logs_it_redacted(
    audit: AuditLog, caplog: pytest.LogCaptureFixture
) -> None:
    @input_guardrail
    def pin_is_numeric(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        raise ValueError(f"bad pin {args['pin']} or code {args['code']}")

    registry = CapabilityRegistry.from_tools([annotate(unlock, sensitive=["code"])])
    executor = Executor(registry, Policy.allow_all(), audit=audit, hooks=[pin_is_numeric])
    with caplog.at_level(logging.DEBUG, logger="toolcards"):
        result = await executor.call("unlock", {"door": "f", "pin": PIN, "code": CODE}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    logged = _logged(caplog)
    assert "ValueError: bad pin [REDACTED] or code [REDACTED]" in logged
    assert PIN not in logged and CODE not in logged


async def test_an_approver_failing_on_a_secret_argument_logs_it_redacted(
    audit: AuditLog, caplog: pytest.LogCaptureFixture
) -> None:
    async def approver(request: ApprovalRequest) -> bool:
        raise RuntimeError(f"cannot show {PIN}")

    registry = CapabilityRegistry.from_tools([annotate(unlock, requires_approval=True)])
    executor = Executor(registry, Policy.allow_all(), audit=audit)
    with caplog.at_level(logging.DEBUG, logger="toolcards"):
        args = {"door": "f", "pin": PIN, "code": "1"}
        result = await executor.call("unlock", args, FINANCE, approver=approver)
    assert result.outcome is Outcome.DENIED
    logged = _logged(caplog)
    assert "RuntimeError: cannot show [REDACTED]" in logged and PIN not in logged


async def test_a_failure_outside_the_tool_logs_its_argument_redacted(
    audit: AuditLog, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def evaluate(*args: Any) -> Any:
        raise KeyError(f"no rule for {PIN}")

    monkeypatch.setattr(Policy, "evaluate", evaluate)
    executor = Executor(CapabilityRegistry.from_tools([unlock]), Policy.allow_all(), audit=audit)
    with caplog.at_level(logging.DEBUG, logger="toolcards"), pytest.raises(KeyError):
        await executor.call("unlock", {"door": "f", "pin": PIN, "code": "1"}, FINANCE)
    logged = _logged(caplog)
    assert "failed outside the tool: KeyError: 'no rule for [REDACTED]'" in logged
    assert PIN not in logged and PIN not in (audit.tail(1)[0].error or "")


async def test_an_output_hook_that_raises_withholds_the_result(audit: AuditLog) -> None:
    @output_guardrail
    def broken(ctx: HookContext, result: Any) -> Any:
        raise ValueError("cannot parse")

    result = await _executor(audit, broken).call("lookup", {"name": "ada"}, FINANCE)
    assert result.outcome is Outcome.REFUSED and result.value is None
    assert "ada" not in result.message
    assert audit.tail(1)[0].hook == "broken"


async def test_a_hook_returning_no_arguments_fails_closed(audit: AuditLog) -> None:
    @input_guardrail
    def forgot_return(ctx: HookContext, args: dict[str, Any]) -> None:
        args["limit"] = 1

    result = await _executor(audit, forgot_return).call("lookup", {"name": "ada"}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    assert ran == []


async def test_a_hook_still_running_at_the_deadline_refuses_the_call(audit: AuditLog) -> None:
    never = asyncio.Event()

    @input_guardrail
    async def stuck(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        await never.wait()
        return args

    result = await _executor(audit, stuck, timeout=0.2).call("lookup", {"name": "a"}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    assert ran == []
    row = audit.tail(1)[0]
    assert row.hook == "stuck" and "deadline" in (row.error or "")


async def test_a_hook_whose_turn_comes_after_the_deadline_refuses_the_call(
    audit: AuditLog,
) -> None:
    @input_guardrail
    def slow(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        while ctx.remaining():  # a sync hook runs to its end: it uses the call's whole time
            time.sleep(0.01)
        return args

    @input_guardrail
    def late(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return args

    executor = _executor(audit, slow, late, timeout=0.2)
    result = await executor.call("lookup", {"name": "a"}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    assert ran == []
    assert audit.tail(1)[0].hook == "late"


async def test_an_output_refusal_withholds_a_result_the_tool_produced(audit: AuditLog) -> None:
    @output_guardrail
    def no_rows(ctx: HookContext, result: Any) -> Any:
        return Refuse("row counts are private") if "rows" in result else result

    result = await _executor(audit, no_rows).call("lookup", {"name": "ada"}, FINANCE)
    assert (result.outcome, result.value) == (Outcome.REFUSED, None)
    assert ran == [("lookup", {"name": "ada", "limit": 10})]  # it ran; its value is withheld
    assert audit.tail(1)[0].hook == "no_rows"


async def test_a_hook_guards_only_the_tools_it_names(audit: AuditLog) -> None:
    spy = Spy()
    spy.tools = ["transfer"]
    await _executor(audit, spy).call("lookup", {"name": "ada"}, FINANCE)
    assert spy.seen == []


def test_two_hooks_of_one_name_are_an_error() -> None:
    with pytest.raises(ValueError, match="two hooks are named 'spy'"):
        Executor(CapabilityRegistry(), Policy.allow_all(), hooks=[Spy(), Spy()])


async def test_the_secret_scanner_redacts_an_aws_key_in_a_result(audit: AuditLog) -> None:
    result = await _executor(audit, SecretScanner()).call(
        "fetch_config", {"service": "db"}, FINANCE
    )
    assert result.value == {
        "service": "db",
        "env": "AWS_ACCESS_KEY_ID=[REDACTED]",
        "region": "eu-west-1",
    }
    row = audit.tail(1)[0]
    assert (row.outcome, row.hook) == ("ok", "secret_scanner")


async def test_the_secret_scanner_redacts_inside_a_model_result(audit: AuditLog) -> None:
    result = await _executor(audit, SecretScanner()).call("profile", {"name": "ada"}, FINANCE)
    assert result.value == {"name": "ada", "note": "deploy key [REDACTED]"}


async def test_the_secret_scanner_redacts_lists_and_numbers_under_secret_names(
    audit: AuditLog,
) -> None:
    result = await _executor(audit, SecretScanner()).call("account", {"name": "ada"}, FINANCE)
    assert result.value == {
        "name": "ada",
        "password": "[REDACTED]",
        "pin": "[REDACTED]",
        "card": {"pin": "[REDACTED]", "last4": "1234"},
        "export": '{"password": [REDACTED], "pin": [REDACTED], "user": "ada"}',
    }


async def test_the_secret_scanner_passes_a_clean_result_as_it_is(audit: AuditLog) -> None:
    result = await _executor(audit, SecretScanner()).call("lookup", {"name": "ada"}, FINANCE)
    assert result.value == "ada: 10 rows"
    assert audit.tail(1)[0].hook is None


async def test_the_secret_scanner_may_refuse_instead(audit: AuditLog) -> None:
    scanner = SecretScanner(action="refuse")
    result = await _executor(audit, scanner).call("fetch_config", {"service": "db"}, FINANCE)
    assert result.outcome is Outcome.REFUSED
    assert AWS_KEY not in result.message


def test_the_secret_scanner_redacts_past_the_audit_rows_length_bound() -> None:
    long = "x" * 10_000 + f" {AWS_KEY} " + "y" * 10_000
    ctx_policy = Policy.allow_all()
    scanned = SecretScanner(redactor=ctx_policy.redaction).after_call(_ctx(), long)
    assert scanned == "x" * 10_000 + " [REDACTED] " + "y" * 10_000


def _ctx() -> HookContext:
    from toolcards.governance.policy.policy import Decision

    return HookContext("t", FINANCE, {}, "c", "python", Decision("allow", "test"), None)
