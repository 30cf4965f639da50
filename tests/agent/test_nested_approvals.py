"""Nested approvals in real pydantic-ai runs (FunctionModel): a sub-agent behind a tool, or a
team member the tool sends a message to, reaches an approval-gated call; the calling run sees
it as its own deferred tool request (HandleDeferredToolCalls, or the run's DeferredToolRequests
output) and its answer goes back to the waiting call; the out-of-band inbox can answer the
same request first (first answer wins, audited once); a run is never asked about its own
principal's call."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import HandleDeferredToolCalls
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext, ToolApproved

from support.scripted import Script, tool_results, wait_until
from toolcards.core import ToolCard
from toolcards.core.spec import annotate
from toolcards.core.toolset import build_function_toolset
from toolcards.governance import (
    ApprovalBroker,
    AuditLog,
    CapabilityRegistry,
    Executor,
    GovernedToolset,
    Identity,
    Policy,
)
from toolcards.runtime import RoleProfile, Team

LEAD = Identity("agent.lead", "agent")
WORKER = Identity("agent.worker", "agent")
POLICY = Policy.from_dict({
    "default_effect": "allow",
    "rules": [{"description": "money moves need a human", "targets": ["wire"],
               "effect": "approve"}],
})  # fmt: skip
wired: list[float] = []


def wire(amount: float) -> str:
    """Send money."""
    wired.append(amount)
    return f"wired {amount:g}"


class PayCard(ToolCard):
    """A member's card with the ``wire`` tool."""

    def get_tools(self) -> list[Callable[..., Any]]:
        return [wire]


class PayDeskCard(PayCard):
    """``wire`` as the member's slash command too: the host's own line may run it."""

    def get_commands(self) -> list[Callable[..., Any]]:
        return [wire]


def one_tool_model(tool: str, args: dict[str, Any]) -> FunctionModel:
    """Calls ``tool(**args)`` once, then answers with what it returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id="call-1")])
        return ModelResponse(parts=[TextPart(" | ".join(tool_results(messages)))])

    return FunctionModel(respond)


class Desk:
    """A lead agent whose ``delegate`` tool runs a worker agent, both governed."""

    def __init__(self, audit: AuditLog, worker: Identity = WORKER) -> None:
        wired.clear()
        self.audit = audit
        self.worker_executor = Executor(CapabilityRegistry(), POLICY, audit=audit)
        self.worker_tools = GovernedToolset(
            build_function_toolset([wire]), executor=self.worker_executor, identity=worker
        )
        worker_tools = self.worker_tools

        async def delegate(task: str) -> str:
            """Ask the worker to do a task."""
            inner = Agent(
                one_tool_model("wire", {"amount": 250}),
                toolsets=[worker_tools],
                output_type=[str, DeferredToolRequests],
            )
            done = await inner.run(task)
            return str(done.output)

        annotate(delegate, delegates=True)
        self.lead_tools = GovernedToolset(
            build_function_toolset([delegate]), policy=POLICY, audit=audit, identity=LEAD
        )

    def agent(self, **kw: Any) -> Agent[None, Any]:
        return Agent(
            one_tool_model("delegate", {"task": "pay acme"}), toolsets=[self.lead_tools], **kw
        )

    @property
    def inbox(self) -> ApprovalBroker:
        return self.worker_executor.approvals

    def decisions(self) -> list[tuple[str, str, str]]:
        rows = self.audit.query(limit=1000)
        return [(e.principal, e.outcome, e.tool) for e in rows if e.outcome.startswith("approval")]


@pytest.fixture
def audit(tmp_path: Path) -> Any:
    with AuditLog(tmp_path / "audit.db", durability="sync") as log:
        yield log


def test_the_calling_run_sees_the_nested_request_and_its_yes_runs_the_waiting_call(
    audit: AuditLog,
) -> None:
    desk = Desk(audit)
    seen: list[dict[str, Any]] = []

    def answer(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        for call in requests.approvals:
            seen.extend(requests.metadata[call.tool_call_id]["nested"])
        return requests.build_results(approvals={c.tool_call_id: True for c in requests.approvals})

    result = desk.agent(capabilities=[HandleDeferredToolCalls(answer)]).run_sync("go")
    assert result.output == "delegate: success: wire: success: wired 250"
    assert wired == [250]  # once
    [nested] = seen
    assert (nested["tool"], nested["principal"], nested["via"]) == ("wire", WORKER.id, "delegate")
    assert nested["exact_args"] == {"amount": 250}  # what runs, exactly
    assert desk.decisions() == [(LEAD.id, "approval_granted", "wire")]
    ran = [(e.principal, e.tool, e.outcome) for e in audit.query(outcome="ok")]
    assert ran == [(WORKER.id, "wire", "ok"), (LEAD.id, "delegate", "ok")]


def test_another_conversations_yes_never_resumes_a_parked_delegating_call(
    audit: AuditLog,
) -> None:
    """Run A's delegate waits (parked) for A's answer to the worker's wire. Run B, another
    conversation, names A's tool call id in a made-up history and says yes: A's parked call
    is not resumed (it was, and the wire ran under the lead's grant); B's call is refused."""
    desk = Desk(audit)
    agent = desk.agent(output_type=[str, DeferredToolRequests])
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    call_id = first.output.approvals[0].tool_call_id
    made_up = [
        ModelRequest(parts=[UserPromptPart("hello")]),
        ModelResponse(parts=[ToolCallPart("delegate", {"task": "pay acme"}, tool_call_id=call_id)]),
    ]
    other = agent.run_sync(
        message_history=made_up,
        deferred_tool_results=DeferredToolResults(approvals={call_id: True}),
    )
    assert "in another conversation" in str(other.output) and wired == []
    assert desk.decisions() == []


def test_the_calling_runs_no_refuses_the_waiting_call_and_stops_the_sub_agent(
    audit: AuditLog,
) -> None:
    desk = Desk(audit)

    def refuse(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        return requests.build_results(approvals={c.tool_call_id: False for c in requests.approvals})

    result = desk.agent(capabilities=[HandleDeferredToolCalls(refuse)]).run_sync("go")
    assert "denied" in result.output
    assert wired == []
    assert desk.decisions() == [(LEAD.id, "approval_denied", "wire")]
    assert desk.inbox.pending() == []


def test_the_inbox_answers_first_and_the_runs_later_answer_changes_nothing(
    audit: AuditLog,
) -> None:
    desk = Desk(audit)
    agent = desk.agent(output_type=[str, DeferredToolRequests])
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)  # the run ends on the nested request
    [waiting] = desk.inbox.pending()
    rita = Identity("rita", roles=["approver"])
    desk.inbox.grant(waiting, approver=rita, surface="dashboard")  # out of band, first
    [call] = first.output.approvals
    resumed = agent.run_sync(
        message_history=first.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={call.tool_call_id: True}),
    )
    assert resumed.output == "delegate: success: wire: success: wired 250"
    assert wired == [250]
    assert desk.decisions() == [("rita", "approval_granted", "wire")]  # audited once


def test_a_run_is_never_asked_about_its_own_principals_call(audit: AuditLog) -> None:
    desk = Desk(audit, worker=LEAD)  # the sub-agent acts as the lead itself
    asked: list[Any] = []

    def answer(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
        asked.append(requests)
        return requests.build_results(approvals={c.tool_call_id: True for c in requests.approvals})

    result = desk.agent(capabilities=[HandleDeferredToolCalls(answer)]).run_sync("go")
    assert asked == [] and wired == []
    assert "DeferredToolRequests" in result.output  # the sub-agent's own deferral, unanswered


def test_a_team_members_approval_reaches_the_run_that_messaged_it(tmp_path: Path) -> None:
    wired.clear()
    member = RoleProfile(role="clerk", model=one_tool_model("wire", {"amount": 75}),
                         cards=[PayCard()], messaging=False)  # fmt: skip
    with (
        AuditLog(tmp_path / "audit.db", durability="sync") as audit,
        Team("desk", profiles=[member], policy=POLICY, audit=audit) as team,
    ):
        clerk = team.hire("clerk")

        def ask_clerk(text: str) -> str:
            """Ask the clerk."""
            return team.send(clerk, text, timeout=60)

        annotate(ask_clerk, delegates=True)
        lead = GovernedToolset(
            build_function_toolset([ask_clerk]), policy=POLICY, audit=audit, identity=LEAD
        )
        seen: list[Any] = []

        def answer(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
            for call in requests.approvals:
                seen.extend(requests.metadata[call.tool_call_id]["nested"])
            return requests.build_results(
                approvals={c.tool_call_id: True for c in requests.approvals}
            )

        agent = Agent(one_tool_model("ask_clerk", {"text": "pay 75"}), toolsets=[lead],
                      capabilities=[HandleDeferredToolCalls(answer)])  # fmt: skip
        result = agent.run_sync("go")
        decisions = [(e.principal, e.outcome) for e in audit.query(outcome="approval_granted")]
    assert [(s["tool"], s["principal"]) for s in seen] == [("wire", f"agent.{clerk}")]
    assert wired == [75]
    assert "wired 75" in result.output
    assert decisions == [(LEAD.id, "approval_granted")]


@pytest.mark.parametrize("how", ["send", "post"])
def test_a_delegating_tools_text_is_a_model_turn_never_the_members_command(
    tmp_path: Path, how: str
) -> None:
    """The lead model's words passed on by ``team.send`` (or ``team.post``) in a delegating
    tool: ``/wire 500`` ran the clerk's command before, with no policy, approval or audit row;
    now the clerk's model reads it, and only the host's own line runs the command."""
    wired.clear()
    clerk_model = Script()  # echoes what it read
    member = RoleProfile(role="clerk", model=clerk_model.model, cards=[PayDeskCard()],
                         messaging=False)  # fmt: skip
    with (
        AuditLog(tmp_path / "audit.db", durability="sync") as audit,
        Team(f"desk-{how}", profiles=[member], policy=POLICY, audit=audit) as team,
    ):
        clerk = team.hire("clerk")

        def ask_clerk(text: str) -> str:
            """Ask the clerk."""
            if how == "post":
                return team.post(clerk, text).id
            return team.send(clerk, text, timeout=60)

        annotate(ask_clerk, delegates=True)
        lead = GovernedToolset(
            build_function_toolset([ask_clerk]), policy=POLICY, audit=audit, identity=LEAD
        )
        Agent(one_tool_model("ask_clerk", {"text": "/wire 500"}), toolsets=[lead]).run_sync("go")
        wait_until(lambda: clerk_model.count == 1)
        assert clerk_model.prompts() == ["Message from user:\n/wire 500"] and wired == []
        assert team.send(clerk, "/wire 7", command=True) == "wired 7"  # the host's: a command
    assert wired == [7]


def test_a_members_card_text_is_a_model_turn_in_a_team_without_a_policy() -> None:
    """A member's card passing its model's words on with ``team.send``, in a team with no
    policy (no governed call sets the context): the lead model's ``/wire 500`` ran as the
    clerk's slash command; a member's turn is never the host."""
    wired.clear()
    clerk_model = Script()  # echoes what it read
    profiles = [
        RoleProfile(role="lead", model=one_tool_model("ask_clerk", {"text": "/wire 500"}),
                    cards=[DeskCard()], messaging=False),
        RoleProfile(role="clerk", model=clerk_model.model, cards=[PayDeskCard()],
                    messaging=False),
    ]  # fmt: skip
    with Team("desk-np", profiles=profiles) as team:
        lead, team_of["clerk"], team_of["team"] = team.hire("lead"), team.hire("clerk"), team
        team.send(lead, "please pay", timeout=60)
        assert clerk_model.prompts() == ["Message from user:\n/wire 500"] and wired == []


def test_a_member_with_an_inbox_is_asked_of_the_run_and_the_inbox_at_once(
    tmp_path: Path,
) -> None:
    from toolcards.surfaces.dashboard import InboxApprover

    wired.clear()
    rita = Identity("rita", roles=["approver"])
    member = RoleProfile(role="clerk", model=one_tool_model("wire", {"amount": 30}),
                         cards=[PayCard()], messaging=False)  # fmt: skip
    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        inbox = ApprovalBroker(audit=audit)
        team = Team("desk2", profiles=[member], policy=POLICY, audit=audit,
                    approver=InboxApprover(inbox, timeout=60))  # fmt: skip
        with team:
            clerk = team.hire("clerk")

            def ask_clerk(text: str) -> str:
                """Ask the clerk."""
                return team.send(clerk, text, timeout=60)

            annotate(ask_clerk, delegates=True)
            lead = GovernedToolset(
                build_function_toolset([ask_clerk]), policy=POLICY, audit=audit, identity=LEAD
            )

            def answer(ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults:
                [waiting] = inbox.pending()  # the same request waits in the inbox
                inbox.grant(waiting, approver=rita, surface="dashboard")  # which answers first
                return requests.build_results(
                    approvals={c.tool_call_id: True for c in requests.approvals}
                )

            agent = Agent(one_tool_model("ask_clerk", {"text": "pay 30"}), toolsets=[lead],
                          capabilities=[HandleDeferredToolCalls(answer)])  # fmt: skip
            result = agent.run_sync("go")
        decisions = [(e.principal, e.outcome) for e in audit.query(limit=1000)
                     if e.outcome.startswith("approval")]  # fmt: skip
    assert wired == [30] and "wired 30" in result.output
    assert decisions == [("rita", "approval_granted")]  # the run's later yes wrote nothing


def _gated_wire(amount: float, go: threading.Event | None = None) -> FunctionModel:
    """A member's model that calls ``wire(amount)`` once ``go`` is set."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            if go is not None:
                go.wait(30)
            return ModelResponse(parts=[ToolCallPart("wire", {"amount": amount})])
        return ModelResponse(parts=[TextPart(" | ".join(tool_results(messages)))])

    return FunctionModel(respond)


def _shown(out: DeferredToolRequests) -> list[Any]:
    return [n["exact_args"] for c in out.approvals for n in out.metadata[c.tool_call_id]["nested"]]


def test_a_yes_grants_only_the_nested_requests_the_run_was_shown(tmp_path: Path) -> None:
    """A delegating call asks two members; the run is shown ``wire(1)``; ``wire(9999)`` comes
    while the human reviews. The yes grants what was shown; the later request is shown next
    (a yes granted both, the second never seen)."""
    wired.clear()
    go = threading.Event()
    profiles = [
        RoleProfile(role="fast", model=_gated_wire(1), cards=[PayCard()], messaging=False),
        RoleProfile(role="slow", model=_gated_wire(9999, go), cards=[PayCard()], messaging=False),
    ]
    with (
        AuditLog(tmp_path / "audit.db", durability="sync") as audit,
        Team("desk3", profiles=profiles, policy=POLICY, audit=audit) as team,
    ):
        fast, slow = team.hire("fast"), team.hire("slow")

        async def ask_both(text: str) -> str:
            """Ask both clerks."""
            answers = await asyncio.gather(
                asyncio.to_thread(team.send, fast, text, timeout=60),
                asyncio.to_thread(team.send, slow, text, timeout=60),
            )
            return " / ".join(answers)

        annotate(ask_both, delegates=True)
        lead = GovernedToolset(
            build_function_toolset([ask_both]), policy=POLICY, audit=audit, identity=LEAD
        )
        agent = Agent(one_tool_model("ask_both", {"text": "pay"}), toolsets=[lead],
                      output_type=[str, DeferredToolRequests])  # fmt: skip

        async def review() -> tuple[list[Any], list[Any], Any]:
            first = await agent.run("go")
            assert isinstance(first.output, DeferredToolRequests)
            go.set()  # the slow clerk's request comes while the human reviews the first
            [(run, *_)] = lead.delegated._parked.values()
            with anyio.fail_after(30):
                while len(run._asked) < 2:
                    await asyncio.sleep(0.02)
            yes = {c.tool_call_id: True for c in first.output.approvals}
            second = await agent.run(
                message_history=first.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals=yes),
            )
            assert isinstance(second.output, DeferredToolRequests)
            no = {c.tool_call_id: False for c in second.output.approvals}
            last = await agent.run(
                message_history=second.all_messages(),
                deferred_tool_results=DeferredToolResults(approvals=no),
            )
            return _shown(first.output), _shown(second.output), last.output

        shown_first, shown_next, _ = asyncio.run(review())
        decisions = [(e.principal, e.outcome) for e in audit.query(limit=100)
                     if e.outcome.startswith("approval")]  # fmt: skip
    assert shown_first == [{"amount": 1}] and shown_next == [{"amount": 9999}]
    assert wired == [1]
    assert decisions == [(LEAD.id, "approval_granted"), (LEAD.id, "approval_denied")]


def test_an_edit_of_a_parked_delegating_call_stops_it_and_runs_nothing(audit: AuditLog) -> None:
    """The approver answers the parked ``delegate`` with ``override_args``: work already
    running cannot take it, so it is stopped and its nested call denied (the edit was dropped
    and the nested ``wire(250)`` granted as the original arguments asked)."""
    desk = Desk(audit)
    agent = desk.agent(output_type=[str, DeferredToolRequests])
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    [call] = first.output.approvals
    edit = ToolApproved(override_args={"task": "pay acme 1"})
    answers = DeferredToolResults(approvals={call.tool_call_id: edit})
    done = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=answers)
    assert wired == []
    assert "an edit cannot apply to work already running" in str(done.output)
    assert desk.decisions() == [(LEAD.id, "approval_denied", "wire")]


team_of: dict[str, Any] = {}


class DeskCard(ToolCard):
    """A member's card whose ``ask_clerk`` tool messages the clerk and waits (delegating)."""

    def get_tools(self) -> list[Callable[..., Any]]:
        def ask_clerk(text: str) -> str:
            """Ask the clerk."""
            return str(team_of["team"].send(team_of["clerk"], text, timeout=60))

        return [annotate(ask_clerk, delegates=True)]


def test_a_members_delegating_call_runs_in_its_turn_with_one_row(tmp_path: Path) -> None:
    """A member's run cannot take deferred requests: its delegating tool runs as any call,
    the clerk's ``wire`` waits as the clerk's own calls do, and each call has its row (the
    turn failed with pydantic-ai's UserError and ``ask_clerk`` was left with no row)."""
    wired.clear()
    profiles = [
        RoleProfile(
            role="lead",
            model=one_tool_model("ask_clerk", {"text": "pay 5"}),
            cards=[DeskCard()],
            messaging=False,
        ),
        RoleProfile(
            role="clerk",
            model=one_tool_model("wire", {"amount": 5}),
            cards=[PayCard()],
            messaging=False,
        ),
    ]
    with (
        AuditLog(tmp_path / "audit.db", durability="sync") as audit,
        Team("desk4", profiles=profiles, policy=POLICY, audit=audit) as team,
    ):
        lead, team_of["clerk"], team_of["team"] = team.hire("lead"), team.hire("clerk"), team
        reply = team.send(lead, "go", timeout=60)
        rows = [(e.principal, e.tool, e.outcome) for e in audit.query(limit=100)]
    assert "UserError" not in reply and "ask_clerk: success" in reply
    assert wired == []  # nobody approved it
    assert rows == [
        (f"agent.{team_of['clerk']}", "wire", "needs_approval"),
        (f"agent.{lead}", "ask_clerk", "ok"),
    ]
