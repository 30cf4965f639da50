"""The policy decision table on every surface: same principal, tool and arguments give the
same decision and the same audit rows on the executor, MCP (stdio, HTTP) and the CLI."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_clients import http_session, stdio_session
from typer.testing import CliRunner

from surfaces.surface_support import (
    SURFACE_ENV,
    TOOLCARDS,
    HttpServer,
    audit_rows,
    token_for,
    write_config,
)
from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity
from toolcards.governance.policy.table import PolicyTable, PolicyTableRow, decision_of
from toolcards.surfaces.commands import app
from toolcards.surfaces.mcp_server.server import META_KEY
from toolcards.surfaces.outcomes import ExitCode, table_decision

Outcomes = dict[str, str]  # row name -> decision seen


def by_principal(table: PolicyTable) -> dict[Identity, list[PolicyTableRow]]:
    groups: dict[Identity, list[PolicyTableRow]] = defaultdict(list)
    for row in table.rows:
        groups[row.identity].append(row)
    return groups


def mcp_decision(result: Any) -> str:
    if not result.is_error:
        return "allow"
    return table_decision(result.meta[META_KEY]["kind"])


def mismatches(table: PolicyTable, seen: Outcomes) -> list[tuple[str, str, str]]:
    return [(r.name, r.expect, seen[r.name]) for r in table.rows if seen[r.name] != r.expect]


@pytest.fixture(scope="module")
def reference(table: PolicyTable, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The executor in process (the governance reference), with its audit rows."""
    path = tmp_path_factory.mktemp("reference") / "audit.db"
    audit = AuditLog(path)
    executor = Executor(CapabilityRegistry.from_tools(table.tools), table.policy, audit=audit)

    async def run() -> None:
        for row in table.rows:
            result = await executor.call(row.tool, dict(row.args), row.identity, surface="py")
            assert decision_of(result) == row.expect, row.name

    anyio.run(run)
    audit.close()
    return path


@pytest.fixture(scope="module")
def stdio_run(
    table: PolicyTable, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Outcomes, Path]:
    """One `toolcards serve` (stdio) per principal, as its local principal; the servers
    start side by side."""
    base = tmp_path_factory.mktemp("stdio")
    audit = base / "audit.db"
    seen: Outcomes = {}

    async def one(who: Identity, rows: list[PolicyTableRow]) -> None:
        config = write_config(base / who.id, local=who, audit=audit)
        async with stdio_session(config) as s:
            for row in rows:
                seen[row.name] = mcp_decision(await s.call_tool(row.tool, dict(row.args)))

    async def run() -> None:
        async with anyio.create_task_group() as tasks:
            for who, rows in by_principal(table).items():
                tasks.start_soon(one, who, rows)

    anyio.run(run)
    return seen, audit


@pytest.fixture(scope="module")
def http_run(table: PolicyTable, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcomes, Path]:
    """One `toolcards serve --transport http`; each principal presents its bearer token,
    the anonymous rows present none."""
    base = tmp_path_factory.mktemp("http")
    audit = base / "audit.db"
    named = [i for i in by_principal(table) if not i.is_anonymous]
    server = HttpServer(write_config(base, tokens=named, audit=audit))
    seen: Outcomes = {}

    async def run() -> None:
        for who, rows in by_principal(table).items():
            token = None if who.is_anonymous else token_for(who)
            async with http_session(server.url, token) as s:
                for row in rows:
                    seen[row.name] = mcp_decision(await s.call_tool(row.tool, dict(row.args)))

    try:
        anyio.run(run)
    finally:
        server.stop()
    return seen, audit


def cli_decision(code: int) -> str:
    decisions = {ExitCode.DENIED: "deny", ExitCode.UNKNOWN_TOOL: "deny"}
    decisions |= {ExitCode.APPROVAL: "approve", ExitCode.INVALID: "invalid"}
    return decisions.get(ExitCode(code), "allow")


@pytest.fixture(scope="module")
def cli_run(table: PolicyTable, tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcomes, Path]:
    """`toolcards call TOOL --json ARGS` (in process) with a config per principal."""
    base = tmp_path_factory.mktemp("cli")
    audit = base / "audit.db"
    seen: Outcomes = {}
    runner = CliRunner()
    for who, rows in by_principal(table).items():
        config = write_config(base / who.id, local=who, audit=audit)
        for row in rows:
            args = ["call", row.tool, "--json", json.dumps(dict(row.args)), "--config", str(config)]
            result = runner.invoke(app, args)
            assert result.exit_code in set(ExitCode) - {ExitCode.USAGE}, result.output
            seen[row.name] = cli_decision(result.exit_code)
    return seen, audit


def test_table_holds_on_mcp_stdio(table: PolicyTable, stdio_run: tuple[Outcomes, Path]) -> None:
    assert mismatches(table, stdio_run[0]) == []


def test_table_holds_on_mcp_http(table: PolicyTable, http_run: tuple[Outcomes, Path]) -> None:
    assert mismatches(table, http_run[0]) == []


def test_table_holds_on_the_cli(table: PolicyTable, cli_run: tuple[Outcomes, Path]) -> None:
    assert mismatches(table, cli_run[0]) == []


def test_mcp_stdio_audit_rows_equal_the_executors(
    reference: Path, stdio_run: tuple[Outcomes, Path]
) -> None:
    expected = audit_rows(reference)
    assert len(expected) == len(stdio_run[0])
    assert audit_rows(stdio_run[1]) == expected


def test_mcp_http_audit_rows_equal_the_executors(
    reference: Path, http_run: tuple[Outcomes, Path]
) -> None:
    assert audit_rows(http_run[1]) == audit_rows(reference)


def test_cli_audit_rows_equal_the_executors(
    reference: Path, cli_run: tuple[Outcomes, Path]
) -> None:
    assert audit_rows(cli_run[1]) == audit_rows(reference)


@pytest.mark.parametrize("expect", ["allow", "deny", "approve"])
def test_table_rows_hold_through_the_installed_command(
    table: PolicyTable, tmp_path: Path, expect: str
) -> None:
    row = next(r for r in table.rows if r.expect == expect and not r.identity.is_anonymous)
    config = write_config(tmp_path, local=row.identity)
    args = json.dumps(dict(row.args))
    proc = subprocess.run(
        [str(TOOLCARDS), "--config", str(config), "call", row.tool, "--json", args],
        env=SURFACE_ENV, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert cli_decision(proc.returncode) == expect, proc.stderr
    assert proc.returncode != ExitCode.USAGE
