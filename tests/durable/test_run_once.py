"""Governed calls with recorded results (``GovernedToolset(call_results=...)``), in real
pydantic-ai runs with a FunctionModel: a call replayed under its run id and tool call id is
answered from the record; a call whose process died while it ran is repeated only when the
tool is idempotent; a key reused with other arguments, or a call waiting for approval, is
never answered from a record; a call whose process was killed while it waited for a human runs
once the human grants it; a record that cannot be read, or a key another team claimed, is
answered with an error and never run."""

from __future__ import annotations

import asyncio
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RequestUsage
from pydantic_core import PydanticSerializationError

from support.launch import PYTHON
from support.processes import kill_at
from toolcards.core.identity import durable_call_key
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.governance.executor import replay
from toolcards.governance.executor.replay import UNRECORDED
from toolcards.governance.redaction.redactor import args_digest
from toolcards.stores.call_results import MAX_VALUE_BYTES, TOO_LARGE, SqliteCallResults

RUN_ID = "wf-7:2"  # what DBOS makes: <workflow id>:<step>, the same on every replay
CALL_ID = "pyd_ai_call_1"
STEP = 1  # the run step whose model response made the call (its first)
writes: list[str] = []


def append_line(text: str) -> str:
    """Append a line (a side effect)."""
    writes.append(text)
    return f"appended {text!r}"


def set_flag(value: str) -> str:
    """Set a flag (the same effect however often it runs)."""
    writes.append(value)
    return f"set {value}"


def looped() -> dict[str, Any]:
    """Take a snapshot that holds itself (a cycle: it has no JSON form)."""
    writes.append("looped")
    state: dict[str, Any] = {"items": ["one"]}
    state["self"] = state
    return state


USAGE = RequestUsage(input_tokens=1, output_tokens=1)
"""What the scripted model says it used (pydantic-ai's estimate writes the arguments as JSON,
which a lone surrogate fails)."""


def _scripted(tool: str, args: dict[str, Any], call_id: str = CALL_ID) -> FunctionModel:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            part = ToolCallPart(tool, args, tool_call_id=call_id)
            return ModelResponse(parts=[part], usage=USAGE)
        content = str(messages[-1].parts[0].content)  # type: ignore[union-attr]
        return ModelResponse(parts=[TextPart(content)], usage=USAGE)

    return FunctionModel(model)


def _two_turns(first: str, second: str) -> FunctionModel:
    """``append_line(first)``, then ``append_line(second)`` in the next turn under the same
    tool call id (a model may reuse one: the durable key has the run step)."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(message, ModelResponse) for message in messages)
        if turn < 2:
            args = {"text": (first, second)[turn]}
            return ModelResponse(parts=[ToolCallPart("append_line", args, tool_call_id=CALL_ID)])
        return ModelResponse(parts=[TextPart(str(messages[-1].parts[0].content))])  # type: ignore[union-attr]

    return FunctionModel(model)


@pytest.fixture
def world(tmp_path: Path) -> Any:
    writes.clear()
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    results = SqliteCallResults(tmp_path / "calls.db")
    policy = Policy.from_dict({"default_effect": "allow"})

    def run(tool: str, args: dict[str, Any], **options: Any) -> str:
        run_id, call_id = options.pop("run_id", RUN_ID), options.pop("call_id", CALL_ID)
        model = options.pop("model", None)
        governed = GovernedToolset(
            FunctionToolset([append_line, looped, Tool(set_flag, metadata={"idempotent": True})]),
            policy=options.pop("policy", policy),
            identity=options.pop("identity", Identity("agent.writer", type="agent")),
            audit=audit,
            call_results=options.pop("call_results", results),
            **options,
        )
        agent = Agent(model or _scripted(tool, args, call_id), toolsets=[governed])
        return str(agent.run_sync("go", run_id=run_id).output)

    yield run, audit, results
    audit.close()
    results.close()


def _outcomes(audit: AuditLog, tool: str) -> list[str]:
    return [row.outcome for row in audit.query(tool=tool)]


def _model_id(row_id: str | None) -> str | None:
    """The model's tool call id of a row's call id (``<call id>#<claim>`` for a call that held
    its durable claim)."""
    return None if row_id is None else row_id.partition("#")[0]


def test_a_replayed_call_returns_its_recorded_result_without_running(world: Any) -> None:
    run, audit, _ = world
    first = run("append_line", {"text": "one"})
    again = run("append_line", {"text": "one"})
    assert again == first == "appended 'one'"
    assert writes == ["one"]
    assert _outcomes(audit, "append_line") == ["ok", "replayed"]
    replay = audit.query(tool="append_line")[-1]
    assert replay.call_id == CALL_ID and f"recorded result of call {CALL_ID}" in (
        replay.error or ""
    )


def test_a_call_its_process_died_in_is_refused_and_audited_once(world: Any) -> None:
    run, audit, results = world
    # what a process killed while the tool ran leaves: the key claimed, never settled
    key = durable_call_key(RUN_ID, STEP, CALL_ID)
    results.claim(key, "append_line", args_digest({"text": "one"}), "agent.writer")
    answer = run("append_line", {"text": "one"})
    assert answer.startswith("error: append_line was interrupted")
    assert writes == []
    assert _outcomes(audit, "append_line") == ["interrupted"]


def _killed_in_the_second_turn(results: SqliteCallResults, text: str) -> None:
    """What a process killed inside the second turn's ``append_line(text)`` leaves."""
    key = durable_call_key(RUN_ID, STEP + 1, CALL_ID)
    assert key is not None
    results.claim(key, "append_line", args_digest({"text": text}), "agent.writer", CALL_ID)


@pytest.mark.parametrize("second", ["second", "first"])
def test_a_call_killed_in_a_later_turn_is_not_answered_by_the_rows_of_its_reused_call_id(
    world: Any, second: str
) -> None:
    run, audit, results = world
    run("append_line", {"text": "first"})  # the first turn ran to its end
    _killed_in_the_second_turn(results, second)
    answer = run("append_line", {}, model=_two_turns("first", second))  # the recovery
    # the first turn's `ok` row is older than the claim, its replay writes `replayed`: the
    # killed call has neither, so it was interrupted (before: "ran to its end (replayed)")
    assert answer.startswith("error: append_line was interrupted")
    assert writes == ["first"]
    assert _outcomes(audit, "append_line") == ["ok", "replayed", "interrupted"]


def test_a_call_killed_mid_run_is_not_answered_by_another_calls_row_under_its_call_id(
    world: Any,
) -> None:
    run, audit, results = world
    run("append_line", {"text": "first"})
    _killed_in_the_second_turn(results, "second")
    run("append_line", {"text": "other"}, run_id="wf-8:2")  # same call id, other run and args
    answer = run("append_line", {}, model=_two_turns("first", "second"))
    assert answer.startswith("error: append_line was interrupted")
    assert writes == ["first", "other"]
    assert _outcomes(audit, "append_line") == ["ok", "ok", "replayed", "interrupted"]


def test_a_killed_call_is_not_answered_by_another_runs_row_under_its_call_id(world: Any) -> None:
    """Another run (another workflow) made the same call under the same model tool call id
    after the killed call's claim and ended ``ok``: the recovery took that row for the killed
    call's ending (``replayed``, "ran to its end (ok)"): the model was told the call ran."""
    run, audit, results = world
    key = durable_call_key(RUN_ID, STEP, CALL_ID)
    digest = args_digest({"text": "one"})  # what the killed process left: its claim, no row
    results.claim(key, "append_line", digest, "agent.writer", f"{CALL_ID}#0123456789abcdef")
    assert run("append_line", {"text": "one"}, run_id="wf-other:2") == "appended 'one'"
    answer = run("append_line", {"text": "one"})  # the killed run, recovered
    assert answer.startswith("error: append_line was interrupted")
    assert writes == ["one"]
    assert _outcomes(audit, "append_line") == ["ok", "interrupted"]
    ran, interrupted = audit.query(tool="append_line")
    assert ran.call_id is not None and ran.call_id.startswith(f"{CALL_ID}#")  # its own claim's
    assert interrupted.call_id == CALL_ID  # an answer, not a claim's run


def test_a_result_too_large_to_keep_is_replayed_as_that_error_not_run_again(world: Any) -> None:
    """Every result was kept whole (4 MB each, forever: 160 MB from one run of 40 reads)."""
    run, audit, results = world
    text = "x" * MAX_VALUE_BYTES
    assert run("append_line", {"text": text}) == f"appended {text!r}"  # the run gets it whole
    record = results.find(durable_call_key(RUN_ID, STEP, CALL_ID))
    assert record is not None and (record.outcome, record.value) == ("error", None)
    assert run("append_line", {"text": text}) == TOO_LARGE
    assert writes == [text]
    assert _outcomes(audit, "append_line") == ["ok", "replayed"]


def test_a_result_holding_a_lone_surrogate_is_recorded_and_replayed_as_it_was(
    world: Any,
) -> None:
    """A workspace file whose name is not UTF-8 (``report-\\xff.txt``, read as
    ``report-\\udcff.txt``): its listing failed the durable run after the tool had run, and
    left the key claimed and never settled."""
    run, audit, results = world
    name = "report-\udcff.txt"
    assert run("set_flag", {"value": name}) == f"set {name}"
    record = results.find(durable_call_key(RUN_ID, STEP, CALL_ID))
    assert record is not None and (record.outcome, record.value) == (
        "ok",
        '"set report-\\udcff.txt"',
    )
    assert run("set_flag", {"value": name}) == f"set {name}"  # replayed: the same string
    assert writes == [name]
    assert _outcomes(audit, "set_flag") == ["ok", "replayed"]


def test_a_result_with_no_json_form_is_settled_as_an_error_saying_so(world: Any) -> None:
    """A result holding itself: its settle raised after the tool had run, and left the key
    claimed and never settled (a recovered run waited out the lease for it)."""
    run, audit, results = world
    with pytest.raises(PydanticSerializationError):  # pydantic-ai cannot send it to the model
        run("looped", {})
    record = results.find(durable_call_key(RUN_ID, STEP, CALL_ID))
    assert record is not None and (record.outcome, record.message, record.value) == (
        "error",
        UNRECORDED,
        None,
    )
    assert run("looped", {}) == UNRECORDED  # the recovered run: told so, not run again
    assert writes == ["looped"]
    assert _outcomes(audit, "looped") == ["ok", "replayed"]


def test_an_idempotent_call_its_process_died_in_runs_again(world: Any) -> None:
    run, audit, results = world
    key = durable_call_key(RUN_ID, STEP, CALL_ID)
    results.claim(key, "set_flag", args_digest({"value": "on"}), "agent.writer")
    assert run("set_flag", {"value": "on"}) == "set on"
    assert writes == ["on"]
    assert _outcomes(audit, "set_flag") == ["ok"]


def test_a_call_key_reused_with_other_arguments_is_refused(world: Any) -> None:
    run, audit, _ = world
    run("append_line", {"text": "one"})
    answer = run("append_line", {"text": "two"})
    assert answer.startswith("error: call") and "another tool or arguments" in answer
    assert writes == ["one"]
    assert _outcomes(audit, "append_line") == ["ok", "error"]


def test_a_call_waiting_for_approval_is_not_recorded(world: Any) -> None:
    run, _, _ = world
    policy_says_approve = Policy.from_dict(
        {
            "default_effect": "deny",
            "rules": [{"callers": ["*"], "targets": ["*"], "effect": "approve"}],
        }
    )
    for _ in range(2):  # asked both times: no approval, no run, nothing replayed
        answer = run("append_line", {"text": "one"}, policy=policy_says_approve, approver="refuse")
        assert answer.startswith("approval required")
    assert writes == []


MALLORY = Identity("mallory", type="agent")
ALICE_ONLY = Policy.from_dict(
    {
        "default_effect": "allow",
        "rules": [{"callers": ["mallory"], "targets": ["append_line"], "effect": "deny"}],
    }
)


def test_a_principal_the_policy_denies_never_gets_anothers_recorded_result(world: Any) -> None:
    run, audit, _ = world
    assert run("append_line", {"text": "alice's secret"}) == 'appended "alice\'s secret"'
    answer = run(
        "append_line",
        {"text": "alice's secret"},
        identity=MALLORY,
        policy=ALICE_ONLY,
        hide_denied=False,
    )
    assert "secret" not in answer and "appended" not in answer
    rows = audit.query(tool="append_line")
    assert [(r.principal, r.outcome) for r in rows] == [
        ("agent.writer", "ok"),
        ("mallory", "denied"),
    ]


def test_another_principal_reusing_a_key_is_refused_without_the_record(world: Any) -> None:
    run, audit, _ = world
    run("append_line", {"text": "alice's secret"})
    answer = run("append_line", {"text": "alice's secret"}, identity=MALLORY)
    assert answer.startswith("error: call") and "secret" not in answer
    assert writes == ["alice's secret"]
    assert [(r.principal, r.outcome) for r in audit.query(tool="append_line")] == [
        ("agent.writer", "ok"),
        ("mallory", "error"),
    ]


def test_durable_keys_join_their_parts_unambiguously() -> None:
    assert durable_call_key("r/1", 1, "x") != durable_call_key("r", 1, "1/x")
    assert durable_call_key("r:1", 1, "x") != durable_call_key("r", 1, "1:x")
    assert durable_call_key("r", 1, "x") != durable_call_key("r", 2, "x")


def test_a_long_call_id_is_hashed_and_still_runs_once(world: Any) -> None:
    run, audit, _ = world
    long_id = "call-" + "x" * 1000
    key = durable_call_key(RUN_ID, STEP, long_id)
    assert (
        key is not None and len(key) < 100 and key != durable_call_key(RUN_ID, STEP, long_id + "y")
    )
    first = run("append_line", {"text": "once"}, call_id=long_id)
    again = run("append_line", {"text": "once"}, call_id=long_id)
    assert first == again and writes == ["once"]
    assert _outcomes(audit, "append_line") == ["ok", "replayed"]


async def _replayed_while_running(tmp_path: Path) -> tuple[list[Any], list[str]]:
    """A durable call replayed while its first run still runs (an engine that took the run
    for dead), then once more after it ended: the three answers and the audit outcomes."""
    import asyncio

    from toolcards.governance import CapabilityRegistry, Executor
    from toolcards.governance.executor.replay import DurableCall

    started, finish = asyncio.Event(), asyncio.Event()

    async def transfer(amount: int) -> str:
        """Move money (not idempotent)."""
        writes.append(str(amount))
        started.set()
        await finish.wait()
        return f"moved {amount}"

    with AuditLog(tmp_path / "audit.db", durability="sync") as audit:
        results = SqliteCallResults(tmp_path / "calls.db")
        executor = Executor(
            CapabilityRegistry.from_tools([transfer]), Policy.allow_all(), audit=audit
        )
        cap = executor.registry.get("transfer")
        assert cap is not None
        who, key = Identity("agent.writer", type="agent"), durable_call_key(RUN_ID, STEP, CALL_ID)

        def again() -> Any:
            durable = DurableCall(results, key)
            return executor.run(cap, {"amount": 5}, who, call_id=CALL_ID, durable=durable)

        first = asyncio.create_task(again())
        await started.wait()
        second = await again()
        finish.set()
        answers = [await first, second, await again()]
        results.close()
        return answers, [row.outcome for row in audit.query(tool="transfer")]


def test_a_call_replayed_while_it_still_runs_is_told_to_retry_and_not_judged_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    monkeypatch.setattr(replay, "LEASE_SECONDS", 1.0)  # the replay waits one lease for it
    writes.clear()
    (first, second, third), outcomes = asyncio.run(_replayed_while_running(tmp_path))
    assert writes == ["5"]
    assert first.value == third.value == "moved 5"
    assert "still running" in second.message and "interrupted" not in second.message
    assert outcomes == ["error", "ok", "replayed"]  # no `interrupted` row for a live call


LIVE_CALL = textwrap.dedent(
    '''
    import sys, time
    from pathlib import Path
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset
    from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
    from toolcards.governance.executor import replay
    from toolcards.stores.call_results import SqliteCallResults

    base, worker = Path(sys.argv[1]), sys.argv[2]
    replay.LEASE_SECONDS = 2.0  # a replay waits one lease: two seconds, not ten

    def send_payment(amount: int) -> str:
        """Send a payment (not idempotent); it runs until the test opens the gate."""
        (base / "started").write_text(worker)
        while not (base / "gate").exists():
            time.sleep(0.05)
        with (base / "effects.txt").open("a") as effects:
            effects.write(f"paid {amount} by {worker}\\n")
        return f"paid {amount}"

    def model(messages, info):
        if len(messages) == 1:
            call = ToolCallPart("send_payment", {"amount": 100}, tool_call_id="c1")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(str(messages[-1].parts[0].content))])

    audit = AuditLog(base / "audit.db", durability="sync")
    governed = GovernedToolset(
        FunctionToolset([send_payment]),
        policy=Policy.from_dict({"default_effect": "allow"}),
        identity=Identity("agent.payer", type="agent"),
        audit=audit,
        call_results=SqliteCallResults(base / "calls.db"),
    )
    answer = Agent(FunctionModel(model), toolsets=[governed]).run_sync("go", run_id="wf-9:1")
    print(answer.output, flush=True)
    audit.close()
    '''
)


def _worker(base: Path, name: str) -> subprocess.Popen[str]:
    """A worker process, forked by the worker's fork server (:mod:`support.launch`)."""
    argv = [PYTHON, "-c", LIVE_CALL, str(base), name]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _answer(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=180.0)
    assert proc.returncode == 0, err[-3000:]
    return out.strip()


def test_a_call_running_in_another_process_is_not_judged_dead(tmp_path: Path) -> None:
    """Two workers answer one durable call key (an activity retried on another worker while
    the first still runs): the second found the claim unsettled and, the call not running in
    its own process, wrote ``interrupted`` and settled that answer, while the call was alive
    and ended ``ok``; every later replay was told it had been interrupted."""
    first = _worker(tmp_path, "worker1")
    try:
        deadline = time.monotonic() + 180.0
        while not (tmp_path / "started").exists():  # worker1's tool runs now
            assert first.poll() is None, first.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "worker1's tool never started"
            time.sleep(0.05)
        second = _answer(_worker(tmp_path, "worker2"))
    finally:
        (tmp_path / "gate").write_text("open")
    assert _answer(first) == "paid 100"
    later = _answer(_worker(tmp_path, "worker3"))  # the run replayed once more
    assert second.startswith("error: call c1#") and "is still running; retry" in second
    assert later == "paid 100"
    assert (tmp_path / "effects.txt").read_text() == "paid 100 by worker1\n"
    with AuditLog(tmp_path / "audit.db") as log:
        assert [r.outcome for r in log.query(tool="send_payment")] == ["error", "ok", "replayed"]


stopping: list[str] = []
"""How ``pay`` is stopped once it has had its effect: ``interrupt`` (Ctrl-C) or ``cancel``."""


async def pay(amount: str) -> str:
    """Pay (a side effect), then be stopped when the test says so."""
    writes.append(amount)
    if stopping == ["interrupt"]:
        raise KeyboardInterrupt
    if stopping == ["cancel"]:
        await asyncio.Event().wait()  # the run is cancelled while it waits here
    return f"paid {amount}"


def _stopped_then_replayed(tmp_path: Path, how: str, idempotent: bool) -> tuple[str, Any]:
    """A durable run whose ``pay`` call is stopped after its effect, then the same run
    replayed (what a durable engine's recovery does); the replay's answer and the rows.
    (asyncio lets a KeyboardInterrupt out of its loop at once, as a process's Ctrl-C.)"""
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    results = SqliteCallResults(tmp_path / "calls.db")

    def agent() -> Agent[None, str]:
        governed = GovernedToolset(
            FunctionToolset([Tool(pay, metadata={"idempotent": idempotent})]),
            policy=Policy.from_dict({"default_effect": "allow"}),
            identity=Identity("agent.writer", type="agent"),
            audit=audit,
            call_results=results,
        )
        return Agent(_scripted("pay", {"amount": "100"}), toolsets=[governed])

    async def cancelled() -> None:
        first = asyncio.ensure_future(agent().run("go", run_id=RUN_ID))
        while not writes:
            await asyncio.sleep(0.01)
        first.cancel()
        await first

    stopping[:] = [how]
    with pytest.raises((KeyboardInterrupt, asyncio.CancelledError)):
        asyncio.run(cancelled() if how == "cancel" else agent().run("go", run_id=RUN_ID))
    stopping.clear()
    answer = agent().run_sync("go", run_id=RUN_ID).output
    rows = [(_model_id(row.call_id), row.outcome) for row in audit.query(tool="pay")]
    audit.close()
    results.close()
    return answer, rows


@pytest.mark.parametrize(("how", "row"), [("interrupt", "interrupted"), ("cancel", "cancelled")])
def test_a_call_stopped_after_its_tool_started_is_not_run_again_on_replay(
    tmp_path: Path, how: str, row: str
) -> None:
    """Ctrl-C or a cancellation after the tool had its effect: the replay of the run answers
    that it may have had its effect (it ran the payment a second time, audited ``ok``)."""
    writes.clear()
    answer, rows = _stopped_then_replayed(tmp_path, how, idempotent=False)
    assert writes == ["100"]
    assert answer.startswith("error: pay was stopped (cancelled or interrupted) while it ran")
    assert rows == [(CALL_ID, row), (CALL_ID, "replayed")]


def test_an_idempotent_call_stopped_while_it_ran_runs_again_on_replay(tmp_path: Path) -> None:
    writes.clear()
    answer, rows = _stopped_then_replayed(tmp_path, "interrupt", idempotent=True)
    assert writes == ["100", "100"]
    assert answer == "paid 100"
    assert rows == [(CALL_ID, "interrupted"), (CALL_ID, "ok")]


@pytest.mark.parametrize(
    ("outcome", "value"),
    [("ok", "[" * 100_000 + "]" * 100_000), ("ok", "not json"), ("no such outcome", "null")],
)
def test_a_recorded_result_that_cannot_be_read_is_an_error_not_a_crash_or_a_rerun(
    world: Any, outcome: str, value: str
) -> None:
    """A planted row (a store is outside input): the replay raised RecursionError out of the
    run, on every recovery of the workflow."""
    run, audit, results = world
    key = durable_call_key(RUN_ID, STEP, CALL_ID)
    results.claim(key, "append_line", args_digest({"text": "one"}), "agent.writer", CALL_ID)
    results.settle(key, outcome, "", value)
    answer = run("append_line", {"text": "one"})
    assert answer == "error: the recorded result of append_line cannot be read; it is not run again"
    assert writes == []
    assert _outcomes(audit, "append_line") == ["replayed"]


def test_a_key_another_team_claimed_is_refused_and_its_row_left_alone(
    world: Any, tmp_path: Path
) -> None:
    """Two teams on one durable engine and one call-results table: the engine recovered
    alpha's killed run in beta's process, whose claim found nothing of its own and ran the
    tool a second time."""
    run, audit, _ = world
    alpha = SqliteCallResults(tmp_path / "shared.db", "alpha")
    beta = SqliteCallResults(tmp_path / "shared.db", "beta")
    key = durable_call_key(RUN_ID, STEP, CALL_ID)
    assert key is not None
    alpha.claim(key, "append_line", args_digest({"text": "one"}), "agent.writer", CALL_ID)
    answer = run("append_line", {"text": "one"}, call_results=beta)
    again = run("append_line", {"text": "one"}, call_results=beta)  # beta's next recovery
    assert answer == again
    assert answer.startswith("error: call") and "another team started; it is not run here" in answer
    assert "alpha" not in answer
    assert writes == []
    assert _outcomes(audit, "append_line") == ["error", "replayed"]
    left = alpha.find(key)
    assert left is not None and not left.settled  # alpha's claim: neither shown nor touched
    alpha.close()
    beta.close()


def test_a_refusal_naming_a_call_id_with_a_lone_surrogate_is_recorded(
    world: Any, tmp_path: Path
) -> None:
    """A model's tool call id may hold one: the refusal of a key another team claimed failed
    the run (the store took no such text), and left the key claimed and never settled."""
    run, _, _ = world
    alpha = SqliteCallResults(tmp_path / "shared.db", "alpha")
    beta = SqliteCallResults(tmp_path / "shared.db", "beta")
    call_id = "call-\udcff"
    key = durable_call_key(RUN_ID, STEP, call_id)
    assert key is not None
    alpha.claim(key, "append_line", args_digest({"text": "one"}), "agent.writer")
    answer = run("append_line", {"text": "one"}, call_results=beta, call_id=call_id)
    assert answer.startswith(f"error: call {call_id} of append_line belongs to a run")
    mine = beta.find(key)
    assert mine is not None and mine.settled and "call-\\udcff" in (mine.message or "")
    assert writes == []
    alpha.close()
    beta.close()


WAITS_FOR_APPROVAL = textwrap.dedent(
    '''
    import sys
    from pathlib import Path
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset
    from toolcards.governance import AuditLog, Executor, GovernedToolset, Identity, Policy
    from toolcards.governance.approvals.broker import ApprovalBroker
    from toolcards.governance.capability import CapabilityRegistry
    from toolcards.stores.call_results import SqliteCallResults
    from toolcards.stores.sqlite.approvals import SqliteApprovalStore

    base = Path(sys.argv[1])

    def append_line(text: str) -> str:
        """Append a line to the notes (a side effect: running it twice shows)."""
        with (base / "notes.txt").open("a") as notes:
            notes.write(text + "\\n")
        return f"appended {text!r}"

    def model(messages, info):
        if len(messages) == 1:
            call = ToolCallPart("append_line", {"text": "pay 5"}, tool_call_id="call-1")
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(str(messages[-1].parts[0].content))])

    audit = AuditLog(base / "audit.db", durability="sync")
    broker = ApprovalBroker(store=SqliteApprovalStore(base / "approvals.db"), audit=audit)
    policy = Policy.from_dict({"default_effect": "approve"})
    executor = Executor(CapabilityRegistry(), policy, audit=audit, approvals=broker)

    async def approver(request):
        (base / "asked").write_text(request.approval_id)  # the human is asked now
        return await broker.waiter(120.0)(request)

    governed = GovernedToolset(
        FunctionToolset([append_line]),
        executor=executor,
        identity=Identity("agent.writer", type="agent"),
        approver=approver,
        call_results=SqliteCallResults(base / "calls.db"),
    )
    agent = Agent(FunctionModel(model), toolsets=[governed])
    # a durable engine's re-execution keeps the run's ids (pydantic-ai's engines derive the
    # conversation's from the run's): the grant is its conversation's
    answer = agent.run_sync("go", run_id="run-1", conversation_id="conversation-1")
    print(answer.output, flush=True)
    audit.close()
    '''
)


def _waiting_run(base: Path) -> subprocess.Popen[str]:
    """The run, forked by the worker's fork server (:mod:`support.launch`)."""
    argv = [PYTHON, "-c", WAITS_FOR_APPROVAL, str(base)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_a_call_killed_while_it_waited_for_approval_runs_once_the_human_grants_it(
    tmp_path: Path,
) -> None:
    """A process SIGKILLed while its call waited for a human (an inline approver), the
    request granted, the run recovered: the call claimed its key before the gate, so the
    recovery read it as interrupted, never ran the approved call and left the grant unspent."""
    from toolcards.governance.approvals.broker import ApprovalBroker
    from toolcards.stores.sqlite.approvals import SqliteApprovalStore

    first = _waiting_run(tmp_path)
    kill_at(first, tmp_path / "asked", 180.0, "the call never asked for approval")
    first.communicate(timeout=60)  # its pipes' end: the process (not only its launcher) is gone
    broker = ApprovalBroker(store=SqliteApprovalStore(tmp_path / "approvals.db"))
    approval_id = (tmp_path / "asked").read_text()
    broker.grant(approval_id, approver=Identity("human.ann", roles=["approver"]))
    recovered = _waiting_run(tmp_path)  # the durable engine runs it again
    out, err = recovered.communicate(timeout=180.0)
    assert recovered.returncode == 0, err[-3000:]
    assert out.strip() == "appended 'pay 5'"
    assert (tmp_path / "notes.txt").read_text().splitlines() == ["pay 5"]
    with AuditLog(tmp_path / "audit.db") as log:
        assert [r.outcome for r in log.query(tool="append_line", principal="agent.writer")] == [
            "ok"
        ]
    assert broker.pending() == []  # the grant was spent by the call it approved
