"""The GovernedCards capability takes the toolset's guardrail hooks and durable-run call results, in
code and (the built-in secret scanner, a call-results database) in agent specs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from support.scripted import SequenceScript
from toolcards import WorkspaceTool
from toolcards.core.identity import durable_call_key
from toolcards.governance import Identity, Policy, SecretScanner
from toolcards.stores.call_results import SqliteCallResults
from toolcards.surfaces.agent import GovernedCards

WRITER = Identity("agent.writer", type="agent")
POLICY = {"default_effect": "deny", "rules": [{"targets": ["workspace_*"], "effect": "allow"}]}
SECRET = "AKIAIOSFODNN7EXAMPLE"


def _secret_file(root: Path) -> None:
    (root / "default").mkdir(parents=True, exist_ok=True)
    (root / "default" / "keys.txt").write_text(f"aws key {SECRET}\n")


def _read_keys() -> SequenceScript:
    return SequenceScript([("workspace_read", {"path": "keys.txt"})])


def test_a_capabilitys_output_hook_redacts_what_the_model_reads(root: Path) -> None:
    _secret_file(root)
    script = _read_keys()
    cards = GovernedCards(
        [WorkspaceTool()],
        policy=Policy.from_dict(POLICY),
        identity=WRITER,
        hooks=[SecretScanner()],
    )
    output = Agent(script.model, capabilities=[cards]).run_sync("read").output
    assert SECRET not in output
    assert "[REDACTED]" in output


def test_without_the_hook_the_same_run_reads_the_secret(root: Path) -> None:
    _secret_file(root)
    script = _read_keys()
    cards = GovernedCards([WorkspaceTool()], policy=Policy.from_dict(POLICY), identity=WRITER)
    assert SECRET in Agent(script.model, capabilities=[cards]).run_sync("read").output


def _spec(**toolcards: Any) -> dict[str, Any]:
    body = {"cards": [{"type": "WorkspaceTool"}], "policy": POLICY, "identity": "agent.w"}
    return {"capabilities": [{"toolcards": {**body, **toolcards}}]}


@pytest.mark.parametrize(
    ("scanner", "seen"),
    [(True, "[REDACTED]"), ({"action": "refuse"}, "refused:"), (False, SECRET)],
)
def test_an_agent_spec_switches_the_secret_scanner(root: Path, scanner: Any, seen: str) -> None:
    _secret_file(root)
    script = _read_keys()
    agent = Agent.from_spec(
        _spec(secret_scanner=scanner), model=script.model, custom_capability_types=[GovernedCards]
    )
    output = agent.run_sync("read").output
    assert seen in output
    if scanner is not False:
        assert SECRET not in output


@pytest.mark.parametrize(
    ("scanner", "message"),
    [
        (
            {"action": "redact", "module": "os"},
            "toolcards secret_scanner: unknown key 'module'; its keys are action, tools",
        ),
        ({"action": "drop"}, "toolcards secret_scanner.action: must be redact or refuse"),
        ({"tools": "workspace_*"}, "toolcards secret_scanner.tools: must be a list of tool globs"),
        ("yes", "toolcards secret_scanner: must be true, false or a mapping"),
    ],
)
def test_a_spec_scanner_of_the_wrong_shape_is_one_clear_error(scanner: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Agent.from_spec(_spec(secret_scanner=scanner), custom_capability_types=[GovernedCards])


def test_hooks_and_call_results_without_governance_are_a_type_error(tmp_path: Path) -> None:
    results = SqliteCallResults(tmp_path / "calls.db")
    with pytest.raises(TypeError, match="hooks, call_results need policy= or executor="):
        GovernedCards([WorkspaceTool()], hooks=[SecretScanner()], call_results=results)
    results.close()


def test_a_capability_with_call_results_records_each_tool_call_of_a_run(
    root: Path, tmp_path: Path
) -> None:
    script = SequenceScript([("workspace_write", {"path": "a.md", "content": "once"})])
    results = SqliteCallResults(tmp_path / "calls.db")
    cards = GovernedCards(
        [WorkspaceTool()], policy=Policy.from_dict(POLICY), identity=WRITER, call_results=results
    )
    run = Agent(script.model, capabilities=[cards]).run_sync("write")
    recorded = results.claim(durable_call_key(run.run_id, 1, "call-1") or "", "workspace_write", "")
    assert recorded is not None and recorded.settled
    assert (recorded.tool_id, recorded.outcome) == ("workspace_write", "ok")
    results.close()


def test_a_new_call_under_an_id_reused_past_a_history_window_runs(
    root: Path, tmp_path: Path
) -> None:
    """The host keeps a sliding window of the history, and the model reuses the id of its first
    write once that write's answer left it. Before, the second write got the first's key and
    the call-results store refused it as the same call made with other arguments."""
    writes = [{"path": f"{name}.md", "content": name} for name in ("one", "two")]
    parts = [
        ToolCallPart("workspace_write", writes[0], tool_call_id="same"),
        *(ToolCallPart("workspace_list", {}, tool_call_id=f"look-{k}") for k in (1, 2)),
        ToolCallPart("workspace_write", writes[1], tool_call_id="same"),
    ]
    steps = iter(parts)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = next(steps, None)
        return ModelResponse(parts=[part if part is not None else TextPart("done")])

    def window(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [messages[0], *messages[-4:]] if len(messages) > 5 else messages

    results = SqliteCallResults(tmp_path / "calls.db")
    cards = GovernedCards(
        [WorkspaceTool()], policy=Policy.from_dict(POLICY), identity=WRITER, call_results=results
    )
    Agent(FunctionModel(respond), capabilities=[cards, ProcessHistory(window)]).run_sync("go")
    results.close()
    assert (root / "default" / "one.md").read_text() == "one"
    assert (root / "default" / "two.md").read_text() == "two"


def test_a_spec_names_a_call_results_database(root: Path, tmp_path: Path) -> None:
    script = SequenceScript([("workspace_write", {"path": "a.md", "content": "once"})])
    (tmp_path / "agent.yaml").write_text(json.dumps(_spec(call_results="runs.db")))
    agent = Agent.from_file(
        tmp_path / "agent.yaml", model=script.model, custom_capability_types=[GovernedCards]
    )
    run = agent.run_sync("write")
    results = SqliteCallResults(tmp_path / "runs.db")
    recorded = results.claim(durable_call_key(run.run_id, 1, "call-1") or "", "workspace_write", "")
    assert recorded is not None and recorded.outcome == "ok"
    results.close()
