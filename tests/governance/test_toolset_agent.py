"""GovernedToolset in real agent runs (FunctionModel): the acceptance behaviours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied

from support.scripted import SequenceScript as Script
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.governance.approvals.broker import ApprovalError

from .conftest import POLICY_PATH, Recorder

ALICE = Identity("alice", roles=["data_admin"])
BOB = Identity("bob", roles=["sales"])
CAROL = Identity("carol", roles=["finance"])


def _agent(script: Script, toolset: GovernedToolset) -> Agent[None, Any]:
    return Agent(script.model, toolsets=[toolset], output_type=[str, DeferredToolRequests])


def _governed(recorder: Recorder, **kwargs: Any) -> GovernedToolset:
    kwargs.setdefault("policy", Policy.from_yaml(POLICY_PATH))
    return GovernedToolset(recorder.toolset, **kwargs)


def test_denied_call_is_read_by_the_model_and_the_run_ends_normally(recorder: Recorder) -> None:
    script = Script([("crm_delete", {"id": 1})])
    toolset = _governed(recorder, identity=BOB, hide_denied=False)
    result = _agent(script, toolset).run_sync("delete record 1")
    assert result.output == "crm_delete: success: denied: crm_delete is not permitted for bob"
    assert recorder.count("crm_delete") == 0


def test_allowed_call_runs(recorder: Recorder) -> None:
    script = Script([("crm_delete", {"id": 1})])
    result = _agent(script, _governed(recorder, identity=ALICE)).run_sync("delete record 1")
    assert result.output == "crm_delete: success: deleted 1"
    assert recorder.calls == [("crm_delete", {"id": 1})]


def test_denied_tools_are_not_listed(recorder: Recorder) -> None:
    script = Script([])
    _agent(script, _governed(recorder, identity=BOB)).run_sync("hi")
    assert script.seen_tools[0] == ["crm_read", "send_email"]


def test_anonymous_caller_sees_nothing_and_is_denied(recorder: Recorder) -> None:
    script = Script([("crm_read", {"id": 1})])
    toolset = _governed(recorder, hide_denied=False)
    result = _agent(script, toolset).run_sync("read")
    assert "denied: crm_read is not permitted for anonymous" in result.output
    listing = Script([])
    _agent(listing, _governed(recorder)).run_sync("hi")
    assert listing.seen_tools[0] == []
    assert recorder.calls == []


def test_identity_comes_from_the_resolver_not_the_arguments(recorder: Recorder) -> None:
    def resolver(ctx: RunContext[Any]) -> Identity | None:
        return ALICE if ctx.deps == "alice-session" else BOB

    script = Script([("crm_delete", {"id": 1, "identity": "alice", "principal": "alice"})])
    toolset = _governed(recorder, identity=resolver, hide_denied=False)
    agent = Agent(script.model, toolsets=[toolset], deps_type=str)
    result = agent.run_sync("delete", deps="bob-session")
    assert result.output == "crm_delete: success: denied: crm_delete is not permitted for bob"
    assert recorder.calls == []
    allowed = Script([("crm_delete", {"id": 1})])
    agent = Agent(allowed.model, toolsets=[toolset], deps_type=str)
    assert agent.run_sync("delete", deps="alice-session").output.endswith("deleted 1")


def test_role_condition_enforced_in_a_run(recorder: Recorder) -> None:
    for who in (BOB, ALICE, BOB):
        script = Script([("crm_delete", {"id": 9})])
        _agent(script, _governed(recorder, identity=who, hide_denied=False)).run_sync("go")
    assert recorder.count("crm_delete") == 1


def test_argument_condition_allows_small_and_defers_large(recorder: Recorder) -> None:
    args = {"currency": "EUR", "to": "acme"}
    small = Script([("transfer_money", {"amount": 20, **args})])
    result = _agent(small, _governed(recorder, identity=CAROL)).run_sync("pay")
    assert result.output == "transfer_money: success: sent 20 EUR to acme"
    large = Script([("transfer_money", {"amount": 2000, **args})])
    deferred = _agent(large, _governed(recorder, identity=CAROL)).run_sync("pay")
    assert isinstance(deferred.output, DeferredToolRequests)
    assert recorder.count("transfer_money") == 1


def _approval_run(recorder: Recorder, toolset: GovernedToolset, amount: float = 2000) -> Any:
    script = Script([("transfer_money", {"amount": amount, "currency": "EUR", "to": "acme"})])
    agent = _agent(script, toolset)
    return agent, agent.run_sync("pay")


def test_approval_flow_runs_the_tool_exactly_once(recorder: Recorder) -> None:
    toolset = _governed(recorder, identity=CAROL)
    agent, first = _approval_run(recorder, toolset)
    requests = first.output
    assert isinstance(requests, DeferredToolRequests)
    call = requests.approvals[0]
    meta = requests.metadata[call.tool_call_id]
    assert meta["principal"] == "carol" and meta["tool"] == "transfer_money"
    assert recorder.count("transfer_money") == 0
    results = DeferredToolResults(approvals={call.tool_call_id: True})
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert resumed.output == "transfer_money: success: sent 2000 EUR to acme"
    assert recorder.count("transfer_money") == 1
    replay = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert isinstance(replay.output, DeferredToolRequests)
    assert recorder.count("transfer_money") == 1


def test_approval_is_bound_to_the_principal(recorder: Recorder) -> None:
    carol_toolset = _governed(recorder, identity=CAROL)
    _, first = _approval_run(recorder, carol_toolset)
    call_id = first.output.approvals[0].tool_call_id
    other = Identity("mallory", roles=["finance"])
    mallory_toolset = GovernedToolset(
        recorder.toolset, identity=other, executor=carol_toolset.executor
    )
    agent = _agent(Script([]), mallory_toolset)
    results = DeferredToolResults(approvals={call_id: True})
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert isinstance(resumed.output, DeferredToolRequests)
    assert recorder.count("transfer_money") == 0


def test_no_argument_name_can_switch_approval_off(recorder: Recorder) -> None:
    smuggled = {
        "amount": 2000,
        "currency": "EUR",
        "to": "acme",
        "approved": True,
        "approval": "granted",
        "requires_approval": False,
        "_approval_token": "x",
    }
    script = Script([("transfer_money", smuggled)])
    result = _agent(script, _governed(recorder, identity=CAROL)).run_sync("pay")
    assert not isinstance(result.output, str) or "sent" not in result.output
    assert recorder.count("transfer_money") == 0


def test_declared_requires_approval_defers_even_when_policy_allows(recorder: Recorder) -> None:
    from pydantic_ai.toolsets import FunctionToolset

    ran: list[str] = []
    inner: FunctionToolset[Any] = FunctionToolset()

    @inner.tool_plain(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return "deployed"

    toolset = GovernedToolset(inner, policy=Policy.allow_all(), identity=ALICE)
    script = Script([("deploy", {"env": "prod"})])
    agent = _agent(script, toolset)
    first = agent.run_sync("ship")
    assert isinstance(first.output, DeferredToolRequests) and ran == []
    call_id = first.output.approvals[0].tool_call_id
    results = DeferredToolResults(approvals={call_id: True})
    agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    assert ran == ["prod"]


def test_rate_limit_result_says_when_and_run_continues(recorder: Recorder) -> None:
    policy = Policy.from_dict(
        {
            "default_effect": "allow",
            "limits": [{"targets": ["crm_read"], "rate": "2/min"}],
        }
    )
    script = Script([("crm_read", {"id": i}) for i in range(3)])
    result = _agent(script, _governed(recorder, policy=policy, identity=BOB)).run_sync("read")
    lines = result.output.splitlines()
    assert lines[:2] == ["crm_read: success: record 0", "crm_read: success: record 1"]
    assert lines[2].startswith("crm_read: success: rate limited: crm_read may be called again in")
    assert recorder.count("crm_read") == 2


@pytest.mark.parametrize("store", ["memory", "postgres"])
def test_a_deferred_call_takes_its_rate_limit_token_only_once_approved(
    store: str, request: pytest.FixtureRequest
) -> None:
    """``rate: 1/hour`` on a deploy that needs approval: before, the pause took the only
    token and the approved call, resumed, ended ``rate_limited`` and never ran."""
    from pydantic_ai.toolsets import FunctionToolset

    from toolcards.governance import CapabilityRegistry, Executor, RateLimiter
    from toolcards.stores.base import RateLimits
    from toolcards.stores.postgres.governance import PostgresRateLimiter

    ran: list[str] = []
    inner: FunctionToolset[Any] = FunctionToolset()

    @inner.tool_plain
    def deploy(env: str) -> str:
        """Deploy."""
        ran.append(env)
        return f"deployed {env}"

    policy = Policy.from_dict(
        {
            "default_effect": "allow",
            "rules": [{"targets": ["deploy"], "effect": "approve"}],
            "limits": [{"targets": ["deploy"], "rate": "1/hour"}],
        }
    )
    limiter: RateLimits = RateLimiter()
    if store == "postgres":
        limiter = PostgresRateLimiter(request.getfixturevalue("postgres_url"), "t")
        request.addfinalizer(limiter.close)
    executor = Executor(CapabilityRegistry(), policy, rate_limiter=limiter)
    toolset = GovernedToolset(inner, identity=ALICE, executor=executor)
    agent = _agent(Script([("deploy", {"env": "prod"})]), toolset)
    first = agent.run_sync("ship")
    assert isinstance(first.output, DeferredToolRequests) and ran == []
    yes = DeferredToolResults(approvals={first.output.approvals[0].tool_call_id: True})
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=yes)
    assert resumed.output == "deploy: success: deployed prod" and ran == ["prod"]
    again = _agent(Script([("deploy", {"env": "dev"})]), toolset).run_sync("ship again")
    assert again.output.startswith("deploy: success: rate limited: deploy may be called again")
    assert ran == ["prod"] and executor.approvals.pending() == []  # nobody asked


def test_include_and_exclude_select_tools(recorder: Recorder) -> None:
    policy = Policy.allow_all()
    script = Script([])
    toolset = _governed(
        recorder, policy=policy, identity=ALICE, include=["crm_*"], exclude=["crm_delete"]
    )
    _agent(script, toolset).run_sync("hi")
    assert script.seen_tools[0] == ["crm_read"]


def test_bad_arguments_become_a_retry_and_the_run_continues(recorder: Recorder) -> None:
    script = Script([("crm_read", {"id": "not-a-number"}), ("crm_read", {"id": 2})])
    result = _agent(script, _governed(recorder, identity=BOB)).run_sync("read")
    lines = result.output.splitlines()
    assert lines[0].startswith("crm_read: retried: invalid arguments for crm_read: id:")
    assert lines[-1] == "crm_read: success: record 2"


def test_tool_exception_becomes_error_result_without_secrets() -> None:
    from pydantic_ai.toolsets import FunctionToolset

    inner: FunctionToolset[Any] = FunctionToolset()

    @inner.tool_plain
    def connect(url: str) -> str:
        """Connect."""
        raise ConnectionError(f"cannot reach {url} with key sk-abcdefghijklmnopqrstuv")

    script = Script([("connect", {"url": "postgres://u:pw@db"})])
    toolset = GovernedToolset(inner, policy=Policy.allow_all(), identity=ALICE)
    result = _agent(script, toolset).run_sync("go")
    assert result.output == "connect: success: error: connect failed (ConnectionError)"


def test_destructive_tools_are_sequential_with_a_warning(recorder: Recorder) -> None:
    script = Script([])
    _agent(script, _governed(recorder, identity=ALICE)).run_sync("hi")
    defs = {d.name: d for d in script.seen_defs[0]}
    assert defs["crm_delete"].sequential
    assert "Warning: destructive" in (defs["crm_delete"].description or "")
    assert not defs["crm_read"].sequential
    assert defs["crm_delete"].metadata is not None
    assert defs["crm_delete"].metadata["tool_id"] == "crm_delete"


def test_audit_has_one_correct_row_per_decision(recorder: Recorder, tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.db")
    policy = Policy.from_dict(
        {
            "rules": [
                {"targets": ["crm_read"], "effect": "allow"},
                {"targets": ["transfer_money"], "effect": "approve"},
            ]
        }
    )
    calls = [
        ("crm_read", {"id": 1}),
        ("crm_delete", {"id": 1}),
        ("transfer_money", {"amount": 5, "currency": "EUR", "to": "x", "api_key": "k-123"}),
    ]
    toolset = _governed(recorder, policy=policy, identity=BOB, audit=audit, hide_denied=False)
    _agent(Script(calls), toolset).run_sync("go")
    rows = audit.query()
    audit.close()
    summary = [(r.tool, r.decision, r.outcome, r.principal, r.surface) for r in rows]
    assert summary == [
        ("crm_read", "allow", "ok", "bob", "pydantic-ai"),
        ("crm_delete", "deny", "denied", "bob", "pydantic-ai"),
        ("transfer_money", "approve", "needs_approval", "bob", "pydantic-ai"),
    ]
    assert rows[2].args["api_key"] == "[REDACTED]"
    assert rows[2].args["to"] == "x"


def _with_deferred_purge(recorder: Recorder) -> Any:
    """The recorder's tools plus ``purge``, a ``defer_loading`` tool nobody may call."""
    from pydantic_ai.toolsets import CombinedToolset, FunctionToolset

    deferred: FunctionToolset[Any] = FunctionToolset()

    @deferred.tool_plain(defer_loading=True)
    def purge(id: int) -> str:
        """Purge one record."""
        recorder.calls.append(("purge", {"id": id}))
        return "purged"

    return CombinedToolset([recorder.toolset, deferred])


@pytest.mark.parametrize("hide_denied", [True, False])
def test_a_call_to_a_hidden_tool_has_exactly_one_row(
    recorder: Recorder, tmp_path: Path, hide_denied: bool
) -> None:
    """pydantic-ai answers a name it was not offered itself and never calls the toolset: the
    hidden call left no row (the MCP and CLI surfaces write ``deny``/``unknown_tool``). A name
    another toolset of the agent answers is not recorded, nor one no toolset knows."""
    from pydantic_ai.toolsets import FunctionToolset

    other: FunctionToolset[Any] = FunctionToolset()

    @other.tool_plain
    def weather(city: str) -> str:
        return "sunny"

    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    inner = _with_deferred_purge(recorder)
    toolset = GovernedToolset(
        inner, policy=Policy.from_yaml(POLICY_PATH), identity=BOB, audit=audit,
        hide_denied=hide_denied,
    )  # fmt: skip
    calls = [("crm_delete", {"id": 1}), ("purge", {"id": 2}), ("weather", {"city": "x"}),
             ("made_up", {})]  # fmt: skip
    result = Agent(Script(calls).model, toolsets=[toolset, other]).run_sync("go")
    rows = audit.query()
    audit.close()
    assert "weather: success: sunny" in result.output
    crm_delete = ("deny", "unknown_tool") if hide_denied else ("deny", "denied")
    assert [(r.tool, r.decision, r.outcome, r.call_id) for r in rows] == [
        ("crm_delete", *crm_delete, "call-1"),
        ("purge", "deny", "unknown_tool", "call-2"),  # never listed to bob, even when not hiding
    ]
    assert rows[1].args == {"id": 2} and rows[1].surface == "pydantic-ai"
    assert recorder.calls == []


def _hidden_beside_paused(recorder: Recorder, audit: AuditLog) -> Agent[None, Any]:
    """An agent (as carol) whose first response calls the hidden ``crm_delete`` (id
    ``hidden``) beside a ``transfer_money`` that pauses for approval, then says "done"."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    def model(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("done")])
        transfer = {"amount": 2000, "currency": "EUR", "to": "acme"}
        return ModelResponse(parts=[
            ToolCallPart("crm_delete", {"id": 1}, tool_call_id="hidden"),
            ToolCallPart("transfer_money", transfer, tool_call_id="pay"),
        ])  # fmt: skip

    toolset = _governed(recorder, identity=CAROL, audit=audit)
    return Agent(FunctionModel(model), toolsets=[toolset], output_type=[str, DeferredToolRequests])


def test_a_hidden_call_beside_a_paused_one_is_recorded_once_across_resumes(
    recorder: Recorder, tmp_path: Path
) -> None:
    """The run pauses on the approval before the hidden call's row could be written; the resume
    writes it, and a second resume of the same history does not write it again."""
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    agent = _hidden_beside_paused(recorder, audit)
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    results = DeferredToolResults(approvals={"pay": False})
    for _ in range(2):
        agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    hidden = [(r.decision, r.outcome) for r in audit.query() if r.call_id == "hidden"]
    audit.close()
    assert hidden == [("deny", "unknown_tool")]


def test_a_hidden_call_is_recorded_once_across_resumes_in_new_processes(
    recorder: Recorder, tmp_path: Path
) -> None:
    """Each resume of a stored history runs in a new agent and toolset over the trail reopened
    (a restart, an agent built per request): the toolset's memory of the rows it wrote was
    empty there, and each resume wrote the hidden call's row again. Two runs making the same
    call (the same id) are two calls: a row each."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    path = tmp_path / "audit.db"
    stored = []
    for _ in range(2):
        with AuditLog(path) as audit:
            first = _hidden_beside_paused(recorder, audit).run_sync("go")
        stored.append(ModelMessagesTypeAdapter.dump_json(first.all_messages()))
    results = DeferredToolResults(approvals={"pay": False})
    for raw in (stored[0], stored[0], stored[1], stored[1]):
        with AuditLog(path) as audit:
            history = ModelMessagesTypeAdapter.validate_json(raw)
            agent = _hidden_beside_paused(recorder, audit)
            agent.run_sync(message_history=history, deferred_tool_results=results)
    with AuditLog(path) as audit:
        hidden = [(r.decision, r.outcome) for r in audit.query() if r.call_id == "hidden"]
    assert hidden == [("deny", "unknown_tool")] * 2


def test_approval_request_shows_redacted_arguments(recorder: Recorder) -> None:
    args = {"amount": 2000, "currency": "EUR", "to": "acme", "api_key": "sk-abcdefghijklmnopqrst"}
    script = Script([("transfer_money", args)])
    result = _agent(script, _governed(recorder, identity=CAROL)).run_sync("pay")
    requests = result.output
    assert isinstance(requests, DeferredToolRequests)
    meta = requests.metadata[requests.approvals[0].tool_call_id]
    assert meta["args"]["api_key"] == "[REDACTED]" and meta["args"]["amount"] == 2000


def test_audit_records_the_request_and_the_approved_run(recorder: Recorder, tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    toolset = _governed(recorder, identity=CAROL, audit=audit)
    agent, first = _approval_run(recorder, toolset)
    call_id = first.output.approvals[0].tool_call_id
    results = DeferredToolResults(approvals={call_id: True})
    agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    rows = audit.query(tool="transfer_money")
    audit.close()
    assert [(r.decision, r.outcome, r.call_id) for r in rows] == [
        ("approve", "needs_approval", call_id),
        ("approve", "ok", call_id),
    ]
    assert rows[0].args_digest == rows[1].args_digest


def test_a_call_the_run_denies_is_denied_in_the_inbox_and_stays_refused(
    recorder: Recorder, tmp_path: Path
) -> None:
    """pydantic-ai writes a ``ToolDenied`` answer itself and never calls the toolset: before,
    the request stayed pending, an approver granted it, and a later run making the same call
    under the same id ran it at once. Now the run's own denial decides it, with one row; the
    later run, another conversation, is refused (the denial is not its to spend)."""
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    toolset = _governed(recorder, identity=CAROL, audit=audit)
    agent, first = _approval_run(recorder, toolset)
    call_id = first.output.approvals[0].tool_call_id
    approval_id = first.output.metadata[call_id]["approval_id"]
    results = DeferredToolResults(approvals={call_id: ToolDenied("not today")})
    agent.run_sync(message_history=first.all_messages(), deferred_tool_results=results)
    broker = toolset.executor.approvals
    assert broker.pending() == []
    with pytest.raises(ApprovalError, match="already denied"):
        broker.grant(approval_id, approver=Identity("boss", roles=["approver"]))
    _, later = _approval_run(recorder, toolset)  # the same call under the same id
    rows = audit.query(tool="transfer_money")
    audit.close()
    assert "was decided in another conversation" in str(later.output)
    assert recorder.count("transfer_money") == 0
    assert [(r.principal, r.outcome) for r in rows] == [
        ("carol", "needs_approval"),
        ("carol", "approval_denied"),
        ("boss", "approval_rejected"),
        ("carol", "denied"),
    ]
    assert rows[1].reason == "requested by carol; denied by its own run: not today"


def test_without_deferred_approvals_an_approval_required_call_is_refused(
    recorder: Recorder,
) -> None:
    toolset = _governed(recorder, identity=CAROL, approver="refuse")
    script = Script([("transfer_money", {"amount": 2000, "currency": "EUR", "to": "acme"})])
    result = Agent(script.model, toolsets=[toolset]).run_sync("pay")
    assert "approval required" in result.output and "not run" in result.output
    assert recorder.count("transfer_money") == 0


def _asking(ran: list[int]) -> Any:
    """A tool that asks for approval itself (pydantic-ai's ``ApprovalRequired``) and runs
    once its call is approved."""
    from pydantic_ai.exceptions import ApprovalRequired
    from pydantic_ai.toolsets import FunctionToolset

    inner: FunctionToolset[Any] = FunctionToolset()

    @inner.tool
    def pay(ctx: RunContext[Any], amount: int) -> str:
        """Pay; a human approves it first."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"why": "a payment"})
        ran.append(amount)
        return f"paid {amount}"

    return inner


def _paused(ran: list[int], **kwargs: Any) -> tuple[GovernedToolset, Agent[None, Any], Any]:
    toolset = GovernedToolset(_asking(ran), policy=Policy.allow_all(), identity=CAROL, **kwargs)
    agent = _agent(Script([("pay", {"amount": 150})]), toolset)
    return toolset, agent, agent.run_sync("pay")


def test_a_tool_asking_for_approval_itself_is_filed_and_runs_once_on_the_yes(
    tmp_path: Path,
) -> None:
    """Its request is in the inbox (exact arguments), the host's yes settles it and the tool
    runs once, approved; one row per call (before: no request, a ``deferred`` row)."""
    ran: list[int] = []
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    toolset, agent, first = _paused(ran, audit=audit)
    assert isinstance(first.output, DeferredToolRequests) and ran == []
    [request] = toolset.executor.approvals.pending()
    call_id = first.output.approvals[0].tool_call_id
    assert (request.tool_id, request.args, request.call_id) == ("pay", {"amount": 150}, call_id)
    assert first.output.metadata[call_id]["approval_id"] == request.approval_id
    yes = DeferredToolResults(approvals={call_id: True})
    resumed = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=yes)
    assert resumed.output == "pay: success: paid 150" and ran == [150]
    assert toolset.executor.approvals.pending() == []
    rows = [(r.outcome, r.call_id) for r in audit.query() if r.tool == "pay"]
    audit.close()
    assert rows == [("needs_approval", call_id), ("ok", call_id)]


def test_a_yes_to_a_tools_own_ask_never_runs_arguments_changed_after_the_pause() -> None:
    """The client holding the history raised the amount between the pause and the yes:
    before, 999999 ran on a yes bound to the call id only; now it is asked anew."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    ran: list[int] = []
    toolset, agent, first = _paused(ran)
    call_id = first.output.approvals[0].tool_call_id
    raw = ModelMessagesTypeAdapter.dump_json(first.all_messages())
    changed = ModelMessagesTypeAdapter.validate_json(
        raw.replace(b'"amount":150', b'"amount":999999')
    )
    yes = DeferredToolResults(approvals={call_id: True})
    resumed = agent.run_sync(message_history=changed, deferred_tool_results=yes)
    assert isinstance(resumed.output, DeferredToolRequests) and ran == []
    asked = {r.args["amount"] for r in toolset.executor.approvals.pending()}
    assert asked == {150, 999999}


def test_a_tools_own_ask_is_refused_without_an_approver() -> None:
    ran: list[int] = []
    toolset, _, first = _paused(ran, approver="refuse")
    assert first.output.startswith("pay: success: approval required: pay needs a human's")
    assert "no approver is configured, so it was not run" in first.output
    assert ran == []
    assert [r.args for r in toolset.executor.approvals.pending()] == [{"amount": 150}]


@pytest.mark.parametrize("answer", [False, True])
def test_a_tools_own_ask_goes_to_the_inline_approver(answer: bool) -> None:
    """Before, the approver was never asked: the run paused and the host's yes ran it."""
    ran: list[int] = []
    asked: list[Any] = []

    async def approver(request: Any) -> bool:
        asked.append((request.tool_id, request.args, request.principal))
        return answer

    _, _, first = _paused(ran, approver=approver)
    assert asked == [("pay", {"amount": 150}, "carol")]
    if answer:
        assert first.output == "pay: success: paid 150" and ran == [150]
    else:
        assert first.output == "pay: success: denied: approval for pay was refused"
        assert ran == []


def test_inline_approver_is_asked_and_its_answer_holds(recorder: Recorder) -> None:
    asked: list[Any] = []

    async def approver(request: Any) -> bool:
        asked.append(request)
        return request.args["amount"] < 5000

    toolset = _governed(recorder, identity=CAROL, approver=approver)
    calls = [
        ("transfer_money", {"amount": 2000, "currency": "EUR", "to": "acme"}),
        ("transfer_money", {"amount": 9000, "currency": "EUR", "to": "acme"}),
    ]
    result = Agent(Script(calls).model, toolsets=[toolset]).run_sync("pay")
    assert result.output.splitlines() == [
        "transfer_money: success: sent 2000 EUR to acme",
        "transfer_money: success: denied: approval for transfer_money was refused",
    ]
    assert len(asked) == 2 and asked[0].principal == "carol"
    assert recorder.count("transfer_money") == 1


def test_slow_sync_tool_times_out_through_the_toolset() -> None:
    import time

    from pydantic_ai.toolsets import FunctionToolset

    inner: FunctionToolset[Any] = FunctionToolset()

    @inner.tool_plain
    def crawl(url: str) -> str:
        """Takes long."""
        time.sleep(1.0)
        return "late"

    toolset = GovernedToolset.with_policy(
        inner, policy=Policy.allow_all(), identity=ALICE, timeout=0.05
    )
    result = Agent(Script([("crawl", {"url": "x"})]).model, toolsets=[toolset]).run_sync("go")
    assert result.output == (
        "crawl: success: error: crawl timed out after 0.05 s; what it started may "
        "still complete: read before you call it again"
    )


def test_a_sync_tool_past_its_deadline_is_answered_before_its_thread_returns() -> None:
    import threading

    from pydantic_ai.toolsets import FunctionToolset

    release = threading.Event()
    finished = threading.Event()
    inner: FunctionToolset[Any] = FunctionToolset()

    @inner.tool_plain
    def stuck(url: str) -> str:
        """Blocks until the test releases it."""
        release.wait(60)
        finished.set()
        return "late"

    toolset = GovernedToolset.with_policy(
        inner, policy=Policy.allow_all(), identity=ALICE, timeout=0.05
    )
    try:
        result = Agent(Script([("stuck", {"url": "x"})]).model, toolsets=[toolset]).run_sync("go")
        # the answer came while the worker thread was still blocked: it was abandoned
        assert not finished.is_set()
        assert result.output == (
            "stuck: success: error: stuck timed out after 0.05 s; what it started may "
            "still complete: read before you call it again"
        )
    finally:
        release.set()
    assert finished.wait(10)


def test_a_function_toolset_subclass_with_its_own_listing_is_listed_its_way() -> None:
    from pydantic_ai.toolsets import FunctionToolset

    class OnlyPublic(FunctionToolset[Any]):
        async def get_tools(self, ctx: RunContext[Any]) -> dict[str, Any]:
            tools = await super().get_tools(ctx)
            return {name: tool for name, tool in tools.items() if not name.startswith("hidden")}

    inner = OnlyPublic()

    @inner.tool_plain
    def shown(x: int) -> int:
        """Listed."""
        return x

    @inner.tool_plain
    def hidden_admin(x: int) -> int:
        """Kept out by the subclass."""
        return x

    from support.scripted import Script as Recording

    toolset = GovernedToolset(inner, policy=Policy.allow_all(), identity=ALICE)
    model = Recording()
    Agent(model.model, toolsets=[toolset]).run_sync("go")
    _, info = model.calls[0]
    assert [tool.name for tool in info.function_tools] == ["shown"]
