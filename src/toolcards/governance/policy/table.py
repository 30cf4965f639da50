"""Policy decision tables: (principal, tool, args) -> expected decision, kept as data.

A table is a YAML file naming its policy, its principals, the tools it exercises (declared
by parameter types and annotations, so any surface can build the same tools) and its rows
(see ``tests/governance/policy_table.yaml``). To run it on a surface::

    table = load_policy_table("tests/governance/policy_table.yaml")
    # 1. serve table.tools under table.policy on the surface, for example
    #    Executor(CapabilityRegistry.from_tools(table.tools), table.policy) behind an MCP
    #    server, or GovernedToolset(build_function_toolset(table.tools), policy=table.policy)
    # 2. a caller performs one row as row.identity (set the way the surface sets callers,
    #    never through the arguments), with no approver, and reports the decision it saw:
    async def call(row: PolicyTableRow) -> str:
        outcome = ...  # call row.tool with dict(row.args) as row.identity
        return "deny" if denied else "approve" if approval was required else "allow"
    assert await run_policy_table(table, call) == []

A call that got past the ACL counts as ``allow`` even if it then failed validation or
raised: the table checks decisions, not tools. :func:`executor_caller` is the caller for
the executor itself; :func:`decision_of` maps an :class:`ExecutionResult` for surfaces that
hold one.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.core.spec import annotate
from toolcards.core.yaml_safe import load_yaml
from toolcards.governance.executor.pipeline import ExecutionResult, Executor
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Policy

_TYPES: dict[str, type] = {
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "list": list,
    "dict": dict,
}


@dataclass(frozen=True, slots=True)
class PolicyTableRow:
    """One expectation: ``identity`` calling ``tool`` with ``args`` gets ``expect``."""

    name: str
    identity: Identity
    tool: str
    args: Mapping[str, Any]
    expect: str  # allow | deny | approve | invalid (the schema refused the arguments first)


@dataclass(slots=True)
class PolicyTable:
    policy: Policy
    rows: list[PolicyTableRow]
    tools: list[Callable[..., Any]]


def decision_of(result: ExecutionResult) -> str:
    """The policy decision an executor outcome reveals: a call that got past the ACL (even
    if it then failed validation or raised) is ``allow``; waiting for a human is ``approve``;
    a tool the caller may not see (unknown to it) is ``deny``; arguments refused by the schema
    before the policy looked at them are ``invalid``."""
    if result.outcome is Outcome.INVALID_ARGS and result.decision is None:
        return "invalid"
    if result.outcome is Outcome.DENIED or result.outcome is Outcome.UNKNOWN_TOOL:
        return "deny"
    if result.outcome is Outcome.NEEDS_APPROVAL:
        return "approve"
    return "allow"


def _make_tool(name: str, spec: Mapping[str, Any]) -> Callable[..., Any]:
    params = spec.get("params") or {}
    annotations = {k: _TYPES[v] for k, v in params.items()}

    def tool(**kwargs: Any) -> dict[str, Any]:
        return {"tool": name, "args": kwargs}

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = str(spec.get("description") or f"Table tool {name}.")
    tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=t)
            for k, t in annotations.items()
        ]
    )
    tool.__annotations__ = {**annotations, "return": dict[str, Any]}
    return annotate(tool, **(spec.get("annotations") or {}))


def _identity(spec: Any) -> Identity:
    if spec == "anonymous":
        return ANONYMOUS
    return Identity(
        spec["id"], spec.get("type", "user"), spec.get("roles") or (), spec.get("attrs")
    )


def load_policy_table(path: str | Path) -> PolicyTable:
    """Read a table file; its ``policy`` path is relative to the table file."""
    path = Path(path)
    data = load_yaml(path.read_text(encoding="utf-8"), str(path))
    policy = Policy.from_yaml(path.parent / data["policy"])
    principals = {name: _identity(spec) for name, spec in data["principals"].items()}
    principals.setdefault("anonymous", ANONYMOUS)
    tools = [_make_tool(name, spec or {}) for name, spec in data["tools"].items()]
    rows = []
    for i, row in enumerate(data["rows"]):
        expect = row["expect"]
        if expect not in ("allow", "deny", "approve", "invalid"):
            raise ValueError(f"row {i}: expect must be allow, deny, approve or invalid")
        rows.append(
            PolicyTableRow(
                name=row.get("name") or f"row{i}:{row['principal']}:{row['tool']}",
                identity=principals[row["principal"]],
                tool=row["tool"],
                args=row.get("args") or {},
                expect=expect,
            )
        )
    return PolicyTable(policy, rows, tools)


RowCaller = Callable[[PolicyTableRow], Awaitable[str]]


def executor_caller(executor: Executor, surface: str = "table") -> RowCaller:
    """A row caller for the executor itself (no approver, so approval fails closed)."""

    async def call(row: PolicyTableRow) -> str:
        result = await executor.call(row.tool, dict(row.args), row.identity, surface=surface)
        return decision_of(result)

    return call


async def run_policy_table(table: PolicyTable, call: RowCaller) -> list[tuple[PolicyTableRow, str]]:
    """Run every row through ``call``; returns the rows whose decision differed, with it."""
    mismatches = []
    for row in table.rows:
        got = await call(row)
        if got != row.expect:
            mismatches.append((row, got))
    return mismatches
