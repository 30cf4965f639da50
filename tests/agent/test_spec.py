"""``toolcards`` in a pydantic-ai agent spec, loaded with ``Agent.from_file`` and run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
    wrong = "toolcards identity: unknown key 'admin'; its keys are id, type, roles"
    with pytest.raises(ValueError, match=wrong):
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])


def test_a_missing_policy_file_is_one_clear_error(spec_dir: Path) -> None:
    spec = {"capabilities": [{"toolcards": {"cards": [], "policy": "nope.yaml"}}]}
    with pytest.raises(ValueError, match="toolcards policy: file 'nope.yaml' not found"):
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])


DENY_ALL = "default_effect: deny\nrules: []\n"


def test_a_spec_file_reads_its_relative_paths_from_its_own_folder(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here, elsewhere = tmp_path / "agents", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (here / "policy.yaml").write_text(POLICY)
    (here / "agent.yaml").write_text(SPEC)
    (elsewhere / "policy.yaml").write_text(DENY_ALL)  # the working directory's: not the spec's
    monkeypatch.chdir(elsewhere)
    script = SequenceScript([("workspace_write", {"path": "notes/a.md", "content": "hi"})])
    agent = Agent.from_file(
        "../agents/agent.yaml", model=script.model, custom_capability_types=[GovernedCards]
    )
    agent.run_sync("write")
    assert (root / "default" / "notes" / "a.md").read_text() == "hi"
    assert (here / "audit.db").exists() and not (elsewhere / "audit.db").exists()


def test_a_spec_file_names_the_folder_its_missing_policy_was_looked_for_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "agent.yaml").write_text(SPEC)
    (tmp_path / "policy.yaml").write_text(POLICY)  # beside the working directory only
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"policy: file 'policy.yaml' not found \(relative to "
                       r"the spec file's folder .*agents\)"):  # fmt: skip
        Agent.from_file("agents/agent.yaml", model="test", custom_capability_types=[GovernedCards])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"identiy": "agent.x"}, r"toolcards: unknown key 'identiy' \(did you mean identity\?\)"),
        ({"polcy": "p.yaml"}, r"toolcards: unknown key 'polcy' \(did you mean policy\?\)"),
        (
            {"identity": {"id": "x", "rols": ["a"]}},
            r"toolcards identity: unknown key 'rols' \(did you mean roles\?\)",
        ),
        (
            {"secret_scanner": {"actoin": "refuse"}},
            r"toolcards secret_scanner: unknown key 'actoin' \(did you mean action\?\)",
        ),
        (
            {"cards": [{"type": "WorkspaceTol"}]},
            r"toolcards cards\[0\]\.type: unknown card type 'WorkspaceTol' \(did you mean "
            r"WorkspaceTool\?\)",
        ),
        ({"cards": ["WorkspaceTool"]}, r"toolcards cards\[0\]: must be a mapping with a type"),
        ({"cards": None}, r"toolcards: needs cards"),
    ],
)
def test_a_spec_error_names_the_key_as_the_yaml_spells_it(
    spec_dir: Path, args: dict[str, Any], message: str
) -> None:
    given = {"cards": [{"type": "WorkspaceTool"}], "policy": "policy.yaml", **args}
    spec = {"capabilities": [{"toolcards": {k: v for k, v in given.items() if v is not None}}]}
    with pytest.raises(ValueError, match=message) as raised:
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])
    assert "keyword argument" not in str(raised.value)
