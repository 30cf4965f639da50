"""``toolcards`` in a pydantic-ai agent spec, loaded with ``Agent.from_file`` and run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.agent.spec import AgentSpec

from support.scripted import SequenceScript, wait_until
from toolcards.governance import AuditLog
from toolcards.governance.audit.log import AuditRecord
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
    (spec_dir / "agent.yaml").write_text(SPEC.replace("policy.yaml", "nope.yaml"))
    with pytest.raises(ValueError, match="toolcards policy: file 'nope.yaml' not found"):
        Agent.from_file("agent.yaml", model="test", custom_capability_types=[GovernedCards])


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
        ({"identity": {"id": 7}}, r"toolcards identity\.id: must be a string"),
        ({"identity": {"id": "x", "type": ["user"]}}, r"toolcards identity\.type: must be a"),
    ],
)
def test_a_spec_error_names_the_key_as_the_yaml_spells_it(
    spec_dir: Path, args: dict[str, Any], message: str
) -> None:
    given = {"cards": [{"type": "WorkspaceTool"}], "policy": {"default_effect": "deny"}, **args}
    spec = {"capabilities": [{"toolcards": {k: v for k, v in given.items() if v is not None}}]}
    with pytest.raises(ValueError, match=message) as raised:
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])
    assert "keyword argument" not in str(raised.value)


def _host_trail(path: Path) -> list[tuple[str, str]]:
    with AuditLog(path, team_id="prod") as log:
        return [(e.principal, e.tool) for e in log.query()]


def test_a_spec_cannot_write_the_hosts_audit_trail(tmp_path: Path, root: Path) -> None:
    """A spec named the host's audit database and team: its calls were appended to team prod's
    trail, chained after the host's rows, as the principal and roles the spec chose."""
    host, spec = tmp_path / "host", tmp_path / "evil"
    host.mkdir()
    spec.mkdir()
    with AuditLog(host / "audit.db", team_id="prod", durability="sync") as log:
        log.record(AuditRecord(ts=1.0, principal="deploy-bot", principal_type="agent", roles=(),
                               surface="cli", tool="deploy", call_id="h1", args={},
                               decision="allow", outcome="ok"))  # fmt: skip
    (spec / "agent.yaml").write_text(
        "capabilities:\n  - toolcards:\n      cards: [{type: WorkspaceTool}]\n"
        "      policy: {default_effect: allow}\n"
        "      identity: {id: alice, type: user, roles: [approver]}\n"
        f"      audit: {host / 'audit.db'}\n      team: prod\n"
    )
    script = SequenceScript([("workspace_write", {"path": "a.md", "content": "x"})])
    with pytest.raises(ValueError, match=r"toolcards audit: '.*' lies outside the spec") as no:
        Agent.from_file(spec / "agent.yaml", model=script.model,
                        custom_capability_types=[GovernedCards])  # fmt: skip
    assert "\n" not in str(no.value)
    assert _host_trail(host / "audit.db") == [("deploy-bot", "deploy")]


@pytest.mark.parametrize(
    ("key", "value"),
    [("audit", "{out}/audit.db"), ("call_results", "../host/runs.db"), ("audit", "~/audit.db"),
     ("policy", "{out}/policy.yaml"), ("call_results", "link/runs.db")],
    ids=["audit", "call_results-up", "audit-home", "policy", "call_results-through-a-link"],
)  # fmt: skip
def test_a_spec_keeps_its_files_in_its_own_folder(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str
) -> None:
    """Files a spec names were opened wherever it said: a host folder's database written, the
    host's own policy read as the spec's; a link in the spec's folder leads there too."""
    out, folder = tmp_path / "host", tmp_path / "spec"
    out.mkdir()
    folder.mkdir()
    (folder / "link").symlink_to(out)
    (out / "policy.yaml").write_text(POLICY)
    (folder / "policy.yaml").write_text(POLICY)
    monkeypatch.setenv("HOME", str(out))
    args = {"cards": [{"type": "WorkspaceTool"}], "policy": "policy.yaml", "team": "prod"}
    refused = {"capabilities": [{"toolcards": {**args, key: value.format(out=out)}}]}
    (folder / "agent.yaml").write_text(json.dumps(refused))
    with pytest.raises(ValueError, match=rf"toolcards {key}: .* lies outside the spec file's"):
        Agent.from_file(
            folder / "agent.yaml", model="test", custom_capability_types=[GovernedCards]
        )
    assert sorted(p.name for p in out.iterdir()) == ["policy.yaml"]
    inside = {"capabilities": [{"toolcards": {**args, key: "own.yaml" if key == "policy"
                                              else "own/x.db"}}]}  # fmt: skip
    (folder / "own").mkdir()
    (folder / "own.yaml").write_text(POLICY)
    (folder / "agent.yaml").write_text(json.dumps(inside))
    Agent.from_file(folder / "agent.yaml", model="test", custom_capability_types=[GovernedCards])


@pytest.mark.parametrize(
    ("key", "value"), [("policy", "policy.yaml"), ("audit", "audit.db"), ("call_results", "r.db")]
)
def test_a_spec_given_as_a_mapping_names_no_file(spec_dir: Path, key: str, value: str) -> None:
    """A mapping has no folder of its own: the working directory is the host's, not the
    spec's."""
    args = {"cards": [], "policy": {"default_effect": "deny"}, key: value}
    spec = {"capabilities": [{"toolcards": args}]}
    with pytest.raises(ValueError, match=rf"toolcards {key}: '{value}' is a file, and a spec "):
        Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])
    assert not (spec_dir / "audit.db").exists() and not (spec_dir / "r.db").exists()


def test_a_spec_given_as_a_mapping_may_keep_its_stores_in_memory(spec_dir: Path) -> None:
    args = {"cards": [], "policy": {"default_effect": "deny"}, "team": "t",
            "audit": ":memory:", "call_results": ":memory:"}  # fmt: skip
    spec = {"capabilities": [{"toolcards": args}]}
    agent = Agent.from_spec(spec, model="test", custom_capability_types=[GovernedCards])
    assert agent.run_sync("hi").output


def laughs(levels: int = 6, leaf: str = "x" * 7) -> str:
    """Spec keys anchoring l0 .. l<levels - 1>, each a list of nine aliases of the one before:
    the last stands for 9**6 leaves, just past what a policy file may expand to (4.3 million
    characters against ``MAX_EXPANDED``) in a few hundred bytes."""
    lines = [f"x-l0: &l0 [{', '.join([leaf] * 9)}]"]
    lines += [f"x-l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("key", "value"),
    [("policy", "{rules: [{description: *l5, targets: [t], effect: allow}]}"),
     ("identity", "{id: *l5}"), ("team", "*l5")],
    ids=["policy", "identity", "team"],
)  # fmt: skip
def test_a_spec_whose_aliases_stand_for_millions_of_values_is_refused(
    tmp_path: Path, key: str, value: str
) -> None:
    """pydantic-ai's YAML loader hands an aliased value over shared: nine levels of aliases in a
    1 KB spec took two minutes and 3.4 GB to turn into a rule description or an identity id."""
    args = {"cards": "[{type: PlanningTool, vector_store: false}]", "identity": "agent.x",
            "policy": "{default_effect: allow}", key: value}  # fmt: skip
    spec = laughs() + "capabilities:\n  - toolcards:\n"
    spec += "".join(f"      {k}: {v}\n" for k, v in args.items())
    (tmp_path / "agent.yaml").write_text(spec)
    assert len(spec) < 1024
    with pytest.raises(ValueError, match=rf"toolcards {key}: expands to more than 4,000,") as no:
        Agent.from_file(tmp_path / "agent.yaml", custom_capability_types=[GovernedCards])
    assert "\n" not in str(no.value)


def test_a_spec_may_share_a_value_through_an_alias(spec_dir: Path) -> None:
    (spec_dir / "shared.yaml").write_text(
        "capabilities:\n  - toolcards:\n      cards: [{type: WorkspaceTool}]\n"
        "      identity: agent.x\n"
        "      policy: {rules: [\n"
        "        {targets: &reading [workspace_read], callers: [bob], effect: deny},\n"
        "        {targets: *reading, effect: allow}]}\n"
    )
    script = SequenceScript([])
    agent = Agent.from_file("shared.yaml", custom_capability_types=[GovernedCards])
    agent.run_sync("hi", model=script.model)
    assert script.seen_tools[0] == ["workspace_read"]
