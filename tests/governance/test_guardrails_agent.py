"""Guardrail hooks in real pydantic-ai agent runs (FunctionModel) through GovernedToolset: what
the model reads is what the hooks let through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.toolsets import FunctionToolset

from support.scripted import SequenceScript as Script
from toolcards.governance import (
    AuditLog,
    GovernedToolset,
    HookContext,
    Identity,
    Policy,
    Refuse,
    SecretScanner,
    input_guardrail,
)

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
ALICE = Identity("alice", roles=["ops"])
POLICY = Policy.from_dict(
    {
        "default_effect": "deny",
        "rules": [{"targets": ["read_env", "search"], "effect": "allow", "callers": ["alice"]}],
    }
)


def _tools(ran: list[dict[str, Any]]) -> FunctionToolset[Any]:
    tools: FunctionToolset[Any] = FunctionToolset()

    @tools.tool_plain
    def read_env(service: str) -> str:
        """A service's environment file."""
        return f"SERVICE={service}\nAWS_ACCESS_KEY_ID={AWS_KEY}\n"

    @tools.tool_plain
    def search(query: str, limit: int = 10) -> str:
        """Search the docs."""
        ran.append({"query": query, "limit": limit})
        return f"{limit} hits for {query}"

    return tools


def _run(script: Script, toolset: GovernedToolset) -> str:
    return str(Agent(script.model, toolsets=[toolset]).run_sync("go").output)


def test_the_model_reads_a_result_with_the_aws_key_redacted(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        toolset = GovernedToolset.with_policy(
            _tools([]), POLICY, identity=ALICE, audit=audit, hooks=[SecretScanner()]
        )
        output = _run(Script([("read_env", {"service": "db"})]), toolset)
        assert AWS_KEY not in output
        assert "AWS_ACCESS_KEY_ID=[REDACTED]" in output
        row = audit.tail(1)[0]
        assert (row.tool, row.outcome, row.hook) == ("read_env", "ok", "secret_scanner")


def test_the_tool_runs_with_the_arguments_an_input_hook_rewrote() -> None:
    @input_guardrail
    def small_pages(ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "limit": min(args.get("limit", 10), 3)}

    ran: list[dict[str, Any]] = []
    toolset = GovernedToolset.with_policy(_tools(ran), POLICY, identity=ALICE, hooks=[small_pages])
    output = _run(Script([("search", {"query": "hooks", "limit": 50})]), toolset)
    assert ran == [{"query": "hooks", "limit": 3}]
    assert "3 hits for hooks" in output


def test_the_model_reads_a_refusal_and_the_run_goes_on() -> None:
    @input_guardrail
    def no_secrets_in_queries(ctx: HookContext, args: dict[str, Any]) -> Any:
        return Refuse("queries may not hold keys") if "AKIA" in args["query"] else args

    ran: list[dict[str, Any]] = []
    toolset = GovernedToolset.with_policy(
        _tools(ran), POLICY, identity=ALICE, hooks=[no_secrets_in_queries]
    )
    output = _run(Script([("search", {"query": AWS_KEY})]), toolset)
    assert output == "search: success: refused: queries may not hold keys"
    assert ran == []
