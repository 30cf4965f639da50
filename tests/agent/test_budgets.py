"""Budgets in real pydantic-ai runs (FunctionModel with usage and a priced model name): a spent
tokens or cost budget stops the next model request with one line and one audit row; the
model's tool calls past a calls budget read "over budget: ..."; a team's members share one
store; a response replayed under the same run step counts once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RequestUsage

from support.scripted import SequenceScript, tool_results
from toolcards import PlanningTool
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.governance.toolset.budget import BudgetExceeded
from toolcards.runtime import RoleProfile, Team
from toolcards.stores.open import open_budgets
from toolcards.surfaces.agent import GovernedCards

WRITER = Identity("agent.writer", "agent")


def usage() -> RequestUsage:
    """1,500 tokens (0.0075 USD of gpt-4o): a new object each response (pydantic-ai fills in
    its cost)."""
    return RequestUsage(input_tokens=1000, output_tokens=500)


def priced(reply: str = "done") -> FunctionModel:
    """A model that answers ``reply``, each response 1,500 tokens of gpt-4o."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(reply)], usage=usage(), provider_name="openai")

    return FunctionModel(respond, model_name="gpt-4o")


def cards(rules: dict[str, Any], audit: AuditLog | None = None, **kw: Any) -> GovernedCards:
    policy = Policy.from_dict({"default_effect": "allow", **rules})
    return GovernedCards([PlanningTool(vector_store=False)], policy=policy, identity=WRITER,
                     audit=audit, **kw)  # fmt: skip


@pytest.mark.parametrize(
    ("budget", "line"),
    [
        ({"tokens": 3000}, "over budget: 'spend' allows 3000 tokens per principal (agent.writer)"),
        ({"cost": 0.01}, "over budget: 'spend' allows 0.01 USD of model cost per principal"),
    ],
)
def test_a_spent_model_budget_stops_the_next_request_with_one_line_and_one_row(
    tmp_path: Path, budget: dict[str, Any], line: str
) -> None:
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        capability = cards({"budgets": [{"name": "spend", **budget}]}, audit)
        agent = Agent(priced(), capabilities=[capability])
        runs = [agent.run_sync("go").output for _ in range(2)]  # 3,000 tokens, 0.015 USD
        with pytest.raises(BudgetExceeded) as stopped:
            agent.run_sync("once more")
        rows = audit.query(outcome="over_budget")
    assert runs == ["done", "done"]
    assert str(stopped.value).startswith(line) and "\n" not in str(stopped.value)
    assert "pydantic.dev" not in str(stopped.value)
    assert [(r.tool, r.principal, r.error) for r in rows] == [
        ("model_request", WRITER.id, str(stopped.value))
    ]


def test_a_model_without_price_data_counts_tokens_and_no_cost() -> None:
    rules = {"budgets": [{"name": "spend", "per": "team", "cost": 0.001, "tokens": 10**6}]}
    capability = cards(rules)
    unpriced = FunctionModel(lambda m, i: ModelResponse([TextPart("x")], usage=usage()))
    for _ in range(3):
        Agent(unpriced, capabilities=[capability]).run_sync("go")
    spent = {line.metric: line.spent for line in capability.executor.budgets.report(
        capability.executor.policy)}  # fmt: skip
    assert spent == {"cost": 0.0, "tokens": 4500.0}


def test_the_model_reads_over_budget_for_a_call_past_a_calls_budget() -> None:
    rules = {"budgets": [{"name": "plans", "targets": ["update_planning"], "calls": 1}]}
    script = SequenceScript([
        ("update_planning", {"create": [{"description": "one"}]}),
        ("update_planning", {"create": [{"description": "two"}]}),
    ])  # fmt: skip
    result = Agent(script.model, capabilities=[cards(rules)]).run_sync("plan")
    texts = tool_results(result.all_messages())
    assert len(texts) == 2 and "over budget: 'plans' allows 1 calls" in texts[1]
    assert "over budget" not in texts[0]


def test_a_model_reusing_one_tool_call_id_is_counted_for_each_call(tmp_path: Path) -> None:
    """Every turn calls ``update_planning`` under the same tool call id: each is a new call
    (the history answered the id before), so the second is over the budget (all six ran, the
    first key taken for each)."""
    turns = iter(range(6))

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        n = next(turns, None)
        if n is None:
            return ModelResponse(parts=[TextPart("done")])
        args = {"create": [{"description": f"deploy {n}"}]}
        return ModelResponse(parts=[ToolCallPart("update_planning", args, tool_call_id="same")])

    rules = {"budgets": [{"name": "plans", "per": "run", "targets": ["update_planning"],
                          "calls": 1}]}  # fmt: skip
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        Agent(FunctionModel(respond), capabilities=[cards(rules, audit)]).run_sync("plan")
        outcomes = [row.outcome for row in audit.query(tool="update_planning")]
    assert outcomes == ["ok"] + ["over_budget"] * 5


def window(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A host's sliding window of the history: the prompt and the last four messages."""
    return [messages[0], *messages[-4:]] if len(messages) > 5 else messages


def reusing_past_the_window(tool: str, args: list[dict[str, Any]]) -> FunctionModel:
    """A model that calls ``tool`` with each of ``args`` under one tool call id, two other
    calls between them: each call's answer has left the window when the next one comes."""
    parts: list[ToolCallPart] = []
    for n, each in enumerate(args):
        parts.append(ToolCallPart(tool, each, tool_call_id="same"))
        parts += [ToolCallPart("search_planning", {}, tool_call_id=f"look-{n}-{k}") for k in (1, 2)]
    steps = iter(parts)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = next(steps, None)
        return ModelResponse(parts=[part if part is not None else TextPart("done")])

    return FunctionModel(respond)


def test_a_tool_call_id_reused_past_a_history_window_is_counted_for_each_call(
    tmp_path: Path,
) -> None:
    """Before, a call's key counted the answers to its id still in the history: once they left
    the window the key repeated the first call's, which the budget took as counted (all three
    ran past a budget of one)."""
    args = [{"create": [{"description": f"deploy {n}"}]} for n in range(3)]
    rules = {"budgets": [{"name": "plans", "per": "run", "targets": ["update_planning"],
                          "calls": 1}]}  # fmt: skip
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        model = reusing_past_the_window("update_planning", args)
        Agent(model, capabilities=[cards(rules, audit), ProcessHistory(window)]).run_sync("plan")
        outcomes = [row.outcome for row in audit.query(tool="update_planning")]
    assert outcomes == ["ok", "over_budget", "over_budget"]


def test_a_replayed_model_response_is_counted_once() -> None:
    capability = cards({"budgets": [{"name": "spend", "per": "team", "tokens": 10**6}]})
    agent = Agent(priced(), capabilities=[capability])
    agent.run_sync("go", run_id="durable-run-1")
    agent.run_sync("go", run_id="durable-run-1")  # the same run replayed: same steps
    [line] = capability.executor.budgets.report(capability.executor.policy)
    assert line.spent == 1500.0


def test_members_of_a_team_share_its_budget_store(tmp_path: Path) -> None:
    store, close = open_budgets(tmp_path / "budgets.db", "crew")
    policy = Policy.from_dict({
        "default_effect": "allow",
        "budgets": [{"name": "crew", "per": "team", "tokens": 2000}],
    })  # fmt: skip
    profile = RoleProfile(role="writer", model=priced("ok"), cards=[], messaging=False)
    with Team("crew", profiles=[profile], policy=policy, budgets=store) as team:
        first, second = team.hire("writer"), team.hire("writer")
        assert team.send(first, "hi") == "ok"  # 1,500 of 2,000
        assert team.send(second, "hi") == "ok"  # 3,000: spent, by two members
        refused = team.send(first, "again")
    assert refused.startswith("error: BudgetExceeded: over budget: 'crew' allows 2000 tokens")
    if close is not None:
        close()


def test_a_tool_call_in_a_run_counts_its_run(tmp_path: Path) -> None:
    rules = {"budgets": [{"name": "per run", "per": "run", "calls": 1}]}
    capability = cards(rules)
    calls = [ToolCallPart("search_planning", {}, tool_call_id=f"c{i}") for i in range(2)]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart("\n".join(tool_results(messages)))])

    agent = Agent(FunctionModel(respond), capabilities=[capability])
    first = agent.run_sync("twice").output.splitlines()
    second = agent.run_sync("twice").output.splitlines()
    assert sum("over budget: 'per run'" in line for line in first) == 1
    assert sum("over budget: 'per run'" in line for line in second) == 1  # a new run


def test_a_durable_runs_replayed_call_is_not_counted_again(tmp_path: Path) -> None:
    from toolcards.stores.call_results import SqliteCallResults

    results = SqliteCallResults(tmp_path / "runs.db")
    rules = {"budgets": [{"name": "plans", "per": "team", "calls": 1}]}
    capability = cards(rules, call_results=results)
    script = SequenceScript([("update_planning", {"create": [{"description": "once"}]})])
    agent = Agent(script.model, capabilities=[capability])
    first = agent.run_sync("plan", run_id="durable-1")
    script.step = 0  # the run is replayed: the same model calls, the same tool call id
    again = agent.run_sync("plan", run_id="durable-1")
    [line] = capability.executor.budgets.report(capability.executor.policy)
    assert line.spent == 1.0  # the replay was answered from the record, not counted
    assert "over budget" not in first.output and "over budget" not in again.output
    results.close()


def deploying(*envs: str) -> FunctionModel:
    """A model that deploys each of ``envs`` in one step (tool call ids ``d-<env>``), then
    answers with the tool results."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("\n".join(tool_results(messages)) or "done")])
        return ModelResponse(
            parts=[ToolCallPart("deploy", {"env": env}, tool_call_id=f"d-{env}") for env in envs]
        )

    return FunctionModel(respond)


def test_an_approved_deferred_call_is_counted_once_and_a_second_is_over_budget(
    tmp_path: Path,
) -> None:
    """Before, the first pass of a call that only asked for approval took the budget under its
    run's key, and the approved call, resumed in a new run under a new key, was over it: with
    ``calls: 1`` an approved deploy never ran (``needs_approval``, then ``over_budget``)."""
    ran: list[str] = []
    tools: FunctionToolset[Any] = FunctionToolset()

    @tools.tool_plain
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return f"deployed {env}"

    policy = Policy.from_dict({
        "default_effect": "allow",
        "rules": [{"targets": ["deploy"], "effect": "approve"}],
        "budgets": [{"name": "deploys", "targets": ["deploy"], "calls": 1}],
    })  # fmt: skip
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        governed = GovernedToolset(tools, policy=policy, identity=WRITER, audit=audit)
        agent = Agent(deploying("staging", "prod"), toolsets=[governed],
                      output_type=[str, DeferredToolRequests])  # fmt: skip
        first = agent.run_sync("deploy")
        assert isinstance(first.output, DeferredToolRequests) and ran == []
        yes = DeferredToolResults(approvals={c.tool_call_id: True for c in first.output.approvals})
        resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=yes)
        later = Agent(deploying("dev"), toolsets=[governed],
                      output_type=[str, DeferredToolRequests]).run_sync("deploy")  # fmt: skip
        rows = [(r.call_id, r.outcome) for r in audit.query(tool="deploy", limit=100)]
        pending = governed.executor.approvals.pending()
    assert len(ran) == 1 and f"deployed {ran[0]}" in str(resumed.output)
    assert "over budget: 'deploys' allows 1 calls" in str(resumed.output)
    other = "d-prod" if ran == ["staging"] else "d-staging"
    assert sorted(rows, key=lambda row: row[1]) == sorted(
        [("d-staging", "needs_approval"), ("d-prod", "needs_approval"),
         (f"d-{ran[0]}", "ok"), (other, "over_budget"), ("d-dev", "over_budget")],
        key=lambda row: row[1],
    )  # fmt: skip
    assert isinstance(later.output, str) and "over budget" in later.output
    assert pending == []  # nobody was asked to approve the call the budget refused
