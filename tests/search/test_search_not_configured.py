"""A SearchTool without a Tavily key is an error outcome on every surface (never a success)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic_ai import Agent
from typer.testing import CliRunner

from support.scripted import SequenceScript
from toolcards import SearchTool, ToolFactory
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import Executor
from toolcards.governance.outcomes import Outcome
from toolcards.surfaces.commands import app
from toolcards.surfaces.outcomes import ExitCode

ALICE = Identity("alice")


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)


def test_executor_reports_error_with_the_variable_to_set(tmp_path: Path) -> None:
    registry = CapabilityRegistry.from_factory(ToolFactory([SearchTool()]))
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        result = asyncio.run(executor.call("web_search", {"query": "pydantic"}, ALICE))
        rows = audit.tail(1)
    assert result.outcome is Outcome.ERROR
    assert result.message.startswith("error: web_search is not configured")
    assert "TAVILY_API_KEY" in result.message
    assert (rows[0].outcome, rows[0].tool) == ("error", "web_search")


def test_a_governed_agent_reads_the_error_and_the_run_goes_on() -> None:
    script = SequenceScript([("web_search", {"query": "pydantic"})])
    governed = GovernedToolset(
        ToolFactory([SearchTool()]).toolset(), policy=Policy.allow_all(), identity=ALICE
    )
    result = Agent(script.model, toolsets=[governed]).run_sync("search")
    assert "error: web_search is not configured" in result.output  # the run went on
    assert "TAVILY_API_KEY" in result.output


def test_cli_call_exits_one_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n")
    (tmp_path / "toolcards.yaml").write_text(
        "store: ':memory:'\ncards: [{type: SearchTool}]\npolicy: policy.yaml\n"
        "principals: {local: {id: alice}}\n"
    )
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(app, ["call", "web_search", "query=pydantic"])
    assert done.exit_code == ExitCode.FAILED
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "TAVILY_API_KEY" in lines[0], done.stderr
    assert done.stdout == ""
