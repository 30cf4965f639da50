"""``toolcards`` in a pydantic-ai agent spec, loaded with ``Agent.from_file`` and run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.agent.spec import AgentSpec

from support.scripted import SequenceScript, wait_until
from toolcards.governance import AuditLog
from toolcards.surfaces.agent import GovernedCards

POLICY = """\
default_effect: deny
rules:
  - callers: ["agent.*"]
    targets: [workspace_write]
    effect: deny
    conditions: {arguments: {path: {glob: "deploy/*"}}}
  - callers: ["agent.*"]
    targets: ["workspace_*"]
    effect: allow
"""
SPEC = """\
name: writer
capabilities:
  - toolcards:
      cards: [{type: WorkspaceTool}]
      policy: policy.yaml
      identity: agent.writer
      audit: audit.db
"""


@pytest.fixture
def spec_dir(tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "policy.yaml").write_text(POLICY)
    (tmp_path / "agent.yaml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_agent_spec_names_governed_cards_and_runs(spec_dir: Path, root: Path) -> None:
    script = SequenceScript([
        ("workspace_write", {"path": "notes/a.md", "content": "hello"}),
        ("workspace_write", {"path": "deploy/prod.env", "content": "x"}),
    ])  # fmt: skip
    types = [GovernedCards]
    agent = Agent.from_file("agent.yaml", model=script.model, custom_capability_types=types)
    output = agent.run_sync("write").output
    assert (root / "default" / "notes" / "a.md").read_text() == "hello"
    assert not (root / "default" / "deploy").exists()
    assert "denied: workspace_write" in output

    def rows() -> list[tuple[str, str, str, str]]:  # the spec's log writes in the background
        with AuditLog(spec_dir / "audit.db") as log:
            return [(e.principal, e.principal_type, e.tool, e.decision) for e in log.tail(10)]

    assert wait_until(lambda: len(rows()) >= 2, timeout=30)
    assert rows() == [
        ("agent.writer", "agent", "workspace_write", "allow"),
        ("agent.writer", "agent", "workspace_write", "deny"),
    ]


def test_the_spec_schema_knows_toolcards() -> None:
    schema = AgentSpec.model_json_schema_with_capabilities([GovernedCards])
    assert "toolcards" in str(schema)


def test_a_spec_identity_may_carry_roles(spec_dir: Path) -> None:
    spec = {"capabilities": [{"toolcards": {
        "cards": [{"type": "WorkspaceTool"}],
        "policy": {"default_effect": "deny", "rules": [
            {"callers": ["*"], "targets": ["workspace_read"], "effect": "allow",
             "conditions": {"roles": ["reader"]}}]},
        "identity": {"id": "bot", "type": "service", "roles": ["reader"]}}}]}  # fmt: skip
    script = SequenceScript([])
    agent = Agent.from_spec(spec, model=script.model, custom_capability_types=[GovernedCards])
    agent.run_sync("hi")
    assert script.seen_tools[0] == ["workspace_read"]


def test_a_spec_cannot_start_a_program_on_this_host(spec_dir: Path) -> None:
    card = {"type": "MCPTool", "transport": "stdio", "command": sys.executable, "args": ["-V"]}
    spec = {"capabilities": [{"toolcards": {"cards": [card], "policy": "policy.yaml"}}]}
    with pytest.raises(ValueError, match=r"MCPTool\.command = `.* -V` would run on this host"):
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])


def test_a_spec_identity_with_unknown_keys_is_refused(spec_dir: Path) -> None:
    identity = {"id": "x", "admin": True}
    spec = {"capabilities": [{"toolcards": {"cards": [], "identity": identity}}]}
    with pytest.raises(ValueError, match="identity takes id, type and roles"):
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])


def test_a_missing_policy_file_is_one_clear_error(spec_dir: Path) -> None:
    spec = {"capabilities": [{"toolcards": {"cards": [], "policy": "nope.yaml"}}]}
    with pytest.raises(ValueError, match="policy file 'nope.yaml' not found"):
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])
