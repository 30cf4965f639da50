"""MCPTool answers a server's requests (elicitation, sampling, roots), governed and audited.

An MCP server (``servers/asking_server.py``, the official SDK) asks while its tools run (MCP
2026-07-28 by default, the handshake era with ``protocol: legacy``): a real process over stdio
and streamable HTTP on 127.0.0.1 for each kind of request, each era, the flood bound and a
server that drops its connection; the same server in this process, over the SDK's in-memory
streams (:func:`memory_card`), where what is tested is how the client decides, not how the
request travels. The card is bound through ToolFactory and governed by a GovernedToolset; the
model is a FunctionModel; the inbox is answered through the approvals API by a human approver.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_support import IN_MEMORY, ServerProcess, serve_in_memory
from server_requests_support import (
    APPROVER,
    ASKING,
    CALLER,
    ONLY_TOOLS,
    Run,
    asking_card,
    governed_agent,
    run_once,
)

from toolcards import ToolFactory
from toolcards.governance import AuditLog, Policy
from toolcards.governance.approvals.broker import ApprovalBroker, ApprovalError
from toolcards.governance.approvals.elicitation import answer_elicitation
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import Executor
from toolcards.tools.mcp import MCPSampling, MCPTool

ERAS = ["auto", "legacy"]
# the handshake era's sampling and roots are deprecated in 2026-07-28 (the server process
# ignores the warning; in this process it is the server's, not the client's)
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


@pytest.fixture(autouse=True)
def in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    serve_in_memory(monkeypatch)


def memory_card(tmp_path: Path, **fields: Any) -> MCPTool:
    """An asking card like :func:`asking_card`'s, whose server runs in this process."""
    fields.setdefault("name", "asker")
    card = MCPTool(transport="stdio", command=IN_MEMORY, args=[str(ASKING)], **fields)
    card.use_workspaces_root(tmp_path / "workspaces")
    return card


@pytest.fixture
def audit(tmp_path: Path) -> Any:
    with AuditLog(tmp_path / "audit.db", durability="sync") as log:
        yield log


def one_run(card: Any, calls: list[tuple[str, dict[str, Any]]], audit: AuditLog, **kw: Any) -> Any:
    run = Run(calls)
    agent, _ = governed_agent(card, run, audit, **kw)
    return asyncio.run(run_once(agent)), run


@pytest.mark.parametrize("protocol", ERAS)
def test_elicitation_is_declined_by_default(tmp_path: Path, audit: AuditLog, protocol: str) -> None:
    card = asking_card(tmp_path, protocol=protocol)
    (answer,), _ = one_run(card, [("book", {})], audit)
    assert answer == {"action": "decline", "content": None}
    (row,) = audit.query(tool="mcp.asker.elicit")
    assert (row.principal, row.decision, row.outcome) == (CALLER.id, "deny", "denied")
    assert "elicitation: refuse" in (row.reason or "")


async def _answer_when_asked(broker: ApprovalBroker, content: dict[str, Any]) -> str:
    """The human's side: wait for the question, refuse the caller's own answer, answer."""
    while not broker.pending():
        await asyncio.sleep(0.01)
    (question,) = broker.pending()
    with pytest.raises(ApprovalError, match="cannot approve its own call"):
        caller_as_approver = type(CALLER)(CALLER.id, CALLER.type, roles=["approver"])
        answer_elicitation(broker, question, approver=caller_as_approver, content=content)
    answer_elicitation(broker, question, approver=APPROVER, content=content)
    return question.tool_id


@pytest.mark.parametrize("protocol", ERAS)
def test_inbox_question_is_answered_by_a_human_not_the_caller(
    tmp_path: Path, audit: AuditLog, protocol: str
) -> None:
    card = memory_card(tmp_path, protocol=protocol, elicitation="inbox")
    run = Run([("book", {})])
    agent, governed = governed_agent(card, run, audit)
    broker = governed.executor.approvals

    async def main() -> tuple[list[Any], str]:
        human = asyncio.create_task(_answer_when_asked(broker, {"city": "Oslo", "nights": 2}))
        results = await run_once(agent)
        return results, await human

    (answer,), asked = asyncio.run(main())
    assert answer == {"action": "accept", "content": {"city": "Oslo", "nights": 2}}
    assert asked == "mcp.asker.elicit"
    (row,) = audit.query(tool="mcp.asker.elicit", outcome="ok")
    assert (row.principal, row.decision) == (CALLER.id, "allow")
    granted = audit.query(tool="mcp.asker.elicit", outcome="approval_granted")
    assert [r.principal for r in granted] == [APPROVER.id]


def test_inbox_question_denied_is_a_decline(tmp_path: Path, audit: AuditLog) -> None:
    card = memory_card(tmp_path, elicitation="inbox")
    agent, governed = governed_agent(card, Run([("book", {})]), audit)
    broker = governed.executor.approvals

    async def deny() -> None:
        while not broker.pending():
            await asyncio.sleep(0.01)
        broker.deny(broker.pending()[0], approver=APPROVER)

    async def main() -> list[Any]:
        human = asyncio.create_task(deny())
        results = await run_once(agent)
        await human
        return results

    (answer,) = asyncio.run(main())
    assert answer == {"action": "decline", "content": None}


def test_an_answer_that_does_not_fit_the_question_is_refused(
    tmp_path: Path, audit: AuditLog
) -> None:
    broker = ApprovalBroker()
    question = broker.request(
        tool_id="mcp.asker.elicit",
        args={
            "server": "asker",
            "message": "Where?",
            "requested_schema": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
        identity=CALLER,
        reason="a question",
    )
    for content in ({"nights": 2}, {"city": 3}, {}):
        with pytest.raises(ValueError):
            answer_elicitation(broker, question, approver=APPROVER, content=content)
    assert broker.pending() == [question]


NO_FORMS = [
    {"type": "object", "properties": {"env": {"type": "string", "enum": None}}},
    {"type": "object", "properties": {"env": {"type": "string", "enum": "staging-only"}}},
    {"type": "object", "properties": {"env": {"type": "string", "enum": [{"a": 1}]}}},
    {"type": "object", "properties": {"env": {"type": "string", "enum": 5}}},
    {"type": "object", "properties": {"env": 5}},
]
"""Schemas that are no flat form; the client library refuses the last two itself before
its handler is called (the server's request gets an error), the first three reach it."""


@pytest.mark.parametrize("form", NO_FORMS, ids=["null", "text", "objects", "int", "field"])
def test_a_question_that_is_no_flat_form_is_never_put_to_a_human(
    tmp_path: Path, audit: AuditLog, form: dict[str, Any]
) -> None:
    # the server's schema is hostile: answering it raised TypeError out of the question
    # (a human's accepted answer was lost), and a text enum took any part of the text
    card = memory_card(tmp_path, elicitation="inbox")
    run = Run([("book_with", {"form": json.dumps(form)})])
    agent, governed = governed_agent(card, run, audit)
    (answer,) = asyncio.run(run_once(agent))
    if form in NO_FORMS[:3]:
        assert answer == {"action": "decline", "content": None}
    else:
        assert isinstance(answer, str) and answer.startswith("book_with failed")
    assert governed.executor.approvals.pending() == []
    assert audit.query(tool="mcp.asker.elicit", outcome="ok") == []
    broker = ApprovalBroker()  # a question recorded by another process, answered here
    args = {"server": "asker", "message": "Where?", "requested_schema": form}
    question = broker.request(tool_id="mcp.asker.elicit", args=args, identity=CALLER, reason="")
    for content in ({"env": "g-o"}, {"env": ""}, {"env": 5}):
        with pytest.raises(ValueError, match="cannot be answered"):
            answer_elicitation(broker, question, approver=APPROVER, content=content)


@pytest.mark.parametrize("protocol", ERAS)
def test_sampling_is_off_by_default(tmp_path: Path, audit: AuditLog, protocol: str) -> None:
    card = memory_card(tmp_path, protocol=protocol)
    (answer,), run = one_run(card, [("summarize", {"text": "a long text"})], audit)
    assert "refused" in str(answer) and run.sampled == []
    (row,) = audit.query(tool="mcp.asker.sample")
    assert (row.decision, row.outcome) == ("deny", "denied")


@pytest.mark.parametrize("protocol", ERAS)
def test_sampling_on_uses_the_agents_model_within_the_token_cap(
    tmp_path: Path, audit: AuditLog, protocol: str
) -> None:
    card = asking_card(
        tmp_path, protocol=protocol, sampling=MCPSampling(mode="agent", max_tokens=20)
    )
    calls = [("summarize", {"text": "a long text", "max_tokens": 500})]
    (answer,), run = one_run(card, calls, audit)
    assert answer["text"] == "a short summary" and answer["model"].startswith("function:")
    (sampled,) = run.sampled
    assert "a long text" in str(sampled)
    (row,) = audit.query(tool="mcp.asker.sample")
    assert (row.principal, row.outcome) == (CALLER.id, "ok")
    assert row.args["output_limit"] == 500 and run.limits == [20]


def test_sampling_requests_beyond_the_session_count_are_refused(
    tmp_path: Path, audit: AuditLog
) -> None:
    card = memory_card(tmp_path, sampling=MCPSampling(mode="agent", max_requests=1))
    calls = [("summarize", {"text": "one"})]
    run = Run(calls)
    agent, _ = governed_agent(card, run, audit)

    async def main() -> list[Any]:
        async with agent:  # one connection for both runs
            return [*(await run_once(agent)), *(await run_once(agent))]

    first, second = asyncio.run(main())
    assert first["text"] == "a short summary" and "refused" in str(second)
    assert [r.outcome for r in audit.query(tool="mcp.asker.sample")] == ["ok", "denied"]


def test_a_server_that_drops_its_connection_gets_no_new_sampling_allowance(
    tmp_path: Path, audit: AuditLog
) -> None:
    """The count is the card's, not the connection's: a server that samples its quota and
    drops the connection is refused on the next one (it got a fresh quota each time)."""
    sampling = MCPSampling(mode="agent", max_requests=1)
    card = asking_card(tmp_path, protocol="legacy", sampling=sampling, retry_interval_seconds=0)
    run = Run([("summarize_and_leave", {"text": "one"})])
    agent, _ = governed_agent(card, run, audit)

    async def main() -> list[Any]:
        async with agent:
            await run_once(agent)
            run.calls = [("summarize", {"text": "two"})]
            return await run_once(agent)

    (second,) = asyncio.run(main())
    assert "refused" in str(second) and card.get_toolsets()[0].connections == 2
    assert [r.outcome for r in audit.query(tool="mcp.asker.sample")] == ["ok", "denied"]
    assert len(run.sampled) == 1


@pytest.mark.parametrize("protocol", ERAS)
def test_roots_are_the_cards_workspace(tmp_path: Path, audit: AuditLog, protocol: str) -> None:
    card = asking_card(tmp_path, protocol=protocol, roots="workspace", workspace_id="trip")
    (answer,), _ = one_run(card, [("where", {})], audit)
    workspace = (tmp_path / "workspaces" / "trip").resolve()
    assert answer == [workspace.as_uri()]
    (row,) = audit.query(tool="mcp.asker.roots")
    assert (row.principal, row.outcome) == (CALLER.id, "ok")


def test_roots_are_refused_by_default(tmp_path: Path, audit: AuditLog) -> None:
    (answer,), _ = one_run(memory_card(tmp_path), [("where", {})], audit)
    assert "refused" in str(answer)
    assert [r.outcome for r in audit.query(tool="mcp.asker.roots")] == ["denied"]


def test_a_flood_of_requests_during_one_call_is_refused_with_a_bounded_trail(
    tmp_path: Path, audit: AuditLog
) -> None:
    """300 roots requests during one call: the first 32 are decided (and audited) as usual,
    the rest refused at once with one row saying so (each made a row: 3,000 made 3,000)."""
    card = asking_card(tmp_path, protocol="legacy")
    (answer,), _ = one_run(card, [("flood", {"times": 300})], audit)
    assert answer == "300 of 300 refused"
    rows = audit.query(tool="mcp.asker.roots", limit=1000)
    assert len(rows) == 33 and {r.outcome for r in rows} == {"denied"}
    assert "more than 32 requests during one tool call" in (rows[-1].reason or "")


@pytest.mark.parametrize(
    ("fields", "tool", "pseudo"),
    [
        ({"elicitation": "inbox"}, "book", "mcp.asker.elicit"),
        ({"sampling": {"mode": "agent"}}, "summarize", "mcp.asker.sample"),
        ({"roots": "workspace"}, "where", "mcp.asker.roots"),
    ],
)
def test_a_policy_that_does_not_allow_the_request_blocks_it(
    tmp_path: Path, audit: AuditLog, fields: dict[str, Any], tool: str, pseudo: str
) -> None:
    card = memory_card(tmp_path, **fields)
    (answer,), run = one_run(
        card,
        [(tool, {})] if tool != "summarize" else [(tool, {"text": "x"})],
        audit,
        policy=ONLY_TOOLS,
    )
    assert "Oslo" not in str(answer) and run.sampled == []
    assert "accept" not in str(answer) and "file://" not in str(answer)
    (row,) = audit.query(tool=pseudo)
    assert (row.principal, row.decision, row.outcome) == (CALLER.id, "deny", "denied")
    assert audit.query(tool=tool)  # the server's tool itself was allowed


def test_requests_over_streamable_http_are_answered(
    tmp_path: Path, audit: AuditLog, start_server: type[ServerProcess]
) -> None:
    server = start_server(ASKING, "http").start()
    card = asking_card(
        tmp_path, url=server.url, roots="workspace", sampling=MCPSampling(mode="agent")
    )
    calls = [("where", {}), ("summarize", {"text": "t"})]
    (roots, summary), _ = one_run(card, calls, audit)
    assert roots == [(tmp_path / "workspaces" / "default").resolve().as_uri()]
    assert summary["text"] == "a short summary"


def test_an_unanswered_question_is_cancelled_and_leaves_the_inbox(
    tmp_path: Path, audit: AuditLog
) -> None:
    card = memory_card(tmp_path, elicitation="inbox", elicitation_timeout_seconds=0.2)
    agent, governed = governed_agent(card, Run([("book", {})]), audit)
    (answer,) = asyncio.run(run_once(agent))
    assert answer == {"action": "cancel", "content": None}
    assert governed.executor.approvals.pending() == []


def test_an_answer_landing_as_the_wait_ends_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The question was withdrawn whatever its state: an answer given between the last look
    and the withdraw was audited as given, then thrown away (the server was told cancel)."""
    from toolcards.governance.approvals.elicitation import ask_inbox

    broker = ApprovalBroker()
    real_settle = broker.settle_record

    def settle_then_answer(*args: Any, **kwargs: Any) -> Any:
        record = real_settle(*args, **kwargs)
        for question in broker.pending():  # the human answers just after the last look
            answer_elicitation(broker, question, approver=APPROVER, content={"city": "Oslo"})
        return record

    monkeypatch.setattr(broker, "settle_record", settle_then_answer)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    reply = asyncio.run(
        ask_inbox(broker, tool_id="mcp.asker.elicit", server="asker", message="Where?",
                  schema=schema, identity=CALLER, call_id="c1", surface="mcp", timeout=0.01)
    )  # fmt: skip
    assert (reply.action, reply.content) == ("accept", {"city": "Oslo"})
    assert broker.pending() == []


async def _served_call(card: Any, audit: AuditLog, tool: str, args: dict[str, Any]) -> Any:
    """A call as the MCP server and CLI surfaces make it: no agent run, so no agent model."""
    toolset = ToolFactory([card]).toolset()
    async with toolset:
        registry = await CapabilityRegistry.from_toolset(toolset)
        executor = Executor(registry, Policy.allow_all(), audit=audit)
        return await executor.call(tool, args, CALLER, surface="mcp")


def test_sampling_outside_an_agent_run_needs_a_sampling_model(
    tmp_path: Path, audit: AuditLog
) -> None:
    card = memory_card(tmp_path, sampling=MCPSampling(mode="agent"))
    refused = asyncio.run(_served_call(card, audit, "summarize", {"text": "t"}))
    assert "refused" in refused.message
    (row,) = audit.query(tool="mcp.asker.sample")
    assert row.outcome == "denied" and "no agent model" in (row.reason or "")
    card = memory_card(tmp_path, sampling=MCPSampling(mode="agent", model="test"))
    served = asyncio.run(_served_call(card, audit, "summarize", {"text": "t"}))
    assert served.ok and '"model": "test"' in str(served.value)


def test_a_server_asks_one_question_at_a_time(tmp_path: Path, audit: AuditLog) -> None:
    card = memory_card(tmp_path, elicitation="inbox")
    agent, governed = governed_agent(card, Run([("book_twice", {})]), audit)
    broker = governed.executor.approvals

    async def main() -> tuple[list[Any], int]:
        human = asyncio.create_task(_answer_when_asked(broker, {"city": "Oslo"}))
        results = await run_once(agent)
        await human
        return results, len(audit.query(tool="mcp.asker.elicit", outcome="ok"))

    (answers,), answered = asyncio.run(main())
    assert answers == ["accept", "decline"] and answered == 1


def test_each_of_two_calls_at_once_gets_its_own_answer(tmp_path: Path, audit: AuditLog) -> None:
    card = memory_card(tmp_path, roots="workspace")
    (first, second), _ = one_run(card, [("where", {}), ("where", {})], audit)
    assert first == second == [(tmp_path / "workspaces" / "default").resolve().as_uri()]
    rows = audit.query(tool="mcp.asker.roots")
    calls = {r.call_id.rsplit(".", 1)[0] for r in rows if r.call_id}
    assert len(rows) == 2 and calls == {r.call_id for r in audit.query(tool="where")}


def test_a_request_during_two_calls_of_the_handshake_era_is_refused(
    tmp_path: Path, audit: AuditLog
) -> None:
    """Over a wire, a handshake-era request names no call it belongs to (the SDK's in-memory
    streams carry the call along, so this runs the server as a process)."""
    card = asking_card(tmp_path, roots="workspace", protocol="legacy")
    answers, _ = one_run(card, [("where", {}), ("where", {})], audit)
    assert "file://" not in str(answers)
    assert audit.query(tool="mcp.asker.roots") == []


def test_a_granted_answer_that_does_not_fit_the_form_cancels_the_question(
    tmp_path: Path, audit: AuditLog
) -> None:
    card = memory_card(tmp_path, elicitation="inbox")
    agent, governed = governed_agent(card, Run([("book", {})]), audit)
    broker = governed.executor.approvals

    async def grant_a_bad_answer() -> None:  # as the CLI or the dashboard would, unchecked
        while not broker.pending():
            await asyncio.sleep(0.01)
        edit = {"content": {"city": "Oslo", "nights": "many"}}
        broker.grant(broker.pending()[0], approver=APPROVER, args=edit)

    async def main() -> list[Any]:
        human = asyncio.create_task(grant_a_bad_answer())
        results = await run_once(agent)
        await human
        return results

    (answer,) = asyncio.run(main())
    assert answer == {"action": "cancel", "content": None}


def test_the_audit_of_a_sampling_request_shows_a_few_messages_cut() -> None:
    """A refused request is not bounded by the card: its audit row shows how many messages it
    has and the first few, cut (every message recorded made one tool call write 335 MB)."""
    from mcp import types

    from toolcards.tools.mcp.sampling import sampling_args

    text = types.TextContent(type="text", text="x" * 100_000)
    messages = [types.SamplingMessage(role="user", content=text)] * 500
    params = types.CreateMessageRequestParams(
        messages=messages, system_prompt="s" * 100_000, max_tokens=5
    )
    args = sampling_args(params)

    assert args["messages"] == 500 and 0 < len(args["shown"]) <= 5
    assert args["shown"][0]["text"].startswith("xxx")
    assert len(str(args)) < 20_000
