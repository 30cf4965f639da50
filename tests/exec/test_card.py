"""The ExecTool card: configuration, tools, descriptions, jobs, concurrency, singleton."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic import ValidationError
from tests.exec.support import BWRAP_REASON, RUNNABLE, needs_bwrap, sync, tools_of
from tests.support.scripted import wait_until

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.errors import RetriableError
from toolcards.core.factory import ToolFactory
from toolcards.core.identity import Identity, calling_principal
from toolcards.core.spec import annotations_of
from toolcards.governance import CapabilityRegistry, Executor, Outcome, Policy
from toolcards.tools.exec import backends
from toolcards.tools.exec.backends import BackendUnavailable
from toolcards.tools.exec.card import ExecTool
from toolcards.tools.exec.limits import ExecLimits

T = TypeVar("T")


def _tools(card: ExecTool) -> dict[str, Any]:
    return tools_of(card)


class _Member:
    def __init__(self, team_id: str, address: str | None = None) -> None:
        self.team_id = team_id
        self.address = address


def test_card_round_trips_through_json() -> None:
    card = ExecTool(
        mode="local",
        workspace_id="w1",
        timeout_s=5,
        limits=ExecLimits(cpu_seconds=3, output_bytes=1000),
        allowed_commands=["ls"],
        env_allow=["LANG"],
        network=True,
        max_concurrent=2,
    )
    again = ExecTool.model_validate(json.loads(card.model_dump_json()))
    assert again == card


@pytest.mark.parametrize(
    "bad",
    [
        {"mode": "chroot"},
        {"timeout_s": 0},
        {"allowed_commands": ["/bin/ls"]},
        {"allowed_commands": ["-x"]},
        {"max_concurrent": 0},
        {"sandbox": True},
    ],
)
def test_card_rejects_bad_configuration(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ExecTool.model_validate(bad)


def test_tool_names_and_annotations() -> None:
    tools = _tools(ExecTool(mode="local", limits=RUNNABLE))
    assert list(tools) == ["exec_command", "exec_start", "exec_result"]
    assert annotations_of(tools["exec_command"]).destructive
    assert annotations_of(tools["exec_command"]).open_world  # local reaches everything
    assert annotations_of(tools["exec_result"]).readonly


def test_capabilities_can_be_switched_off() -> None:
    assert list(_tools(ExecTool(mode="local", limits=RUNNABLE, exec_jobs=False))) == [
        "exec_command"
    ]
    assert (
        ExecTool(mode="local", limits=RUNNABLE, exec_command=False, exec_jobs=False).get_tools()
        == []
    )


def test_local_description_says_unconfined() -> None:
    doc = _tools(ExecTool(mode="local", limits=RUNNABLE))["exec_command"].__doc__ or ""
    assert "UNCONFINED" in doc


@needs_bwrap
def test_bwrap_description_says_sandboxed_without_network() -> None:
    tool = _tools(ExecTool(mode="bwrap", limits=RUNNABLE, allowed_commands=["pytest"]))[
        "exec_command"
    ]
    doc = tool.__doc__ or ""
    assert "sandboxed (bwrap)" in doc and "no network" in doc and "Allowed: pytest" in doc
    assert not annotations_of(tool).open_world


def test_auto_without_sandbox_fails_closed_at_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (backends.BwrapBackend, backends.DockerBackend, backends.SeatbeltBackend):
        monkeypatch.setattr(cls, "unavailable_reason", classmethod(lambda c: "missing"))
    with pytest.raises(BackendUnavailable, match="never falls back"):
        ToolFactory([ExecTool()])


def test_runs_in_the_team_workspace(workspaces: Path) -> None:
    member = _Member("team-a")  # cards hold their observer weakly
    card = ExecTool(mode="local", limits=RUNNABLE).observer(member)
    out = _tools(card)["exec_command"]("pwd")
    assert str(workspaces / "team-a") in out


def test_refused_command_is_retriable_and_nothing_runs(workspaces: Path) -> None:
    tools = _tools(
        ExecTool(mode="local", limits=RUNNABLE, allowed_commands=["ls"], workspace_id="w")
    )
    with pytest.raises(RetriableError, match="not allowed"):
        tools["exec_command"]("touch made")
    assert not (workspaces / "w" / "made").exists()


def test_no_shell_means_metacharacters_are_literal(workspaces: Path) -> None:
    tools = _tools(ExecTool(mode="local", limits=RUNNABLE, workspace_id="w"))
    out = tools["exec_command"]("echo $(touch pwned) ;ls")
    assert "$(touch pwned) ;ls" in out
    assert not (workspaces / "w" / "pwned").exists()


def test_job_start_and_result() -> None:
    tools = _tools(ExecTool(mode="local", limits=RUNNABLE))
    started = tools["exec_start"]("echo from-job")
    job_id = started.split("job_id: ")[1].split()[0]
    out = tools["exec_result"](job_id, wait_s=10)
    assert "status: finished" in out and "from-job" in out


def test_job_result_reports_running_then_unknown_ids_retry() -> None:
    tools = _tools(ExecTool(mode="local", limits=RUNNABLE, timeout_s=5, allowed_commands=["sleep"]))
    job_id = tools["exec_start"]("sleep 3").split("job_id: ")[1].split()[0]
    assert "status: running" in tools["exec_result"](job_id)
    with pytest.raises(RetriableError, match="unknown job id"):
        tools["exec_result"]("nope")
    with pytest.raises(RetriableError, match="must be a string"):
        tools["exec_result"](42)


def test_bad_job_command_fails_before_starting() -> None:
    with pytest.raises(RetriableError, match="shell operators"):
        _tools(ExecTool(mode="local", limits=RUNNABLE))["exec_start"]("ls | wc")


def test_calls_run_concurrently(workspaces: Path) -> None:
    """Two commands that each wait for the other's file: serialized runs would time out."""
    tools = _tools(
        ExecTool(mode="local", limits=RUNNABLE, workspace_id="c", timeout_s=20, max_concurrent=2)
    )
    wait_for = "import os,time,sys\nopen(sys.argv[1],'w')\nwhile not os.path.exists(sys.argv[2]):"
    script = workspaces / "c" / "meet.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(wait_for + " time.sleep(0.02)\nprint('met')\n")
    results: list[str] = []
    threads = [
        threading.Thread(
            target=lambda a=a, b=b: results.append(
                tools["exec_command"](f"python3 meet.py {a} {b}")
            )
        )
        for a, b in (("a", "b"), ("b", "a"))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 2
    assert all("met" in r and "killed" not in r for r in results)


def test_one_service_per_team_and_settings() -> None:
    m1, m2, m3 = _Member("t1"), _Member("t1"), _Member("t2")
    a1 = ExecTool(mode="local", limits=RUNNABLE).observer(m1)
    a2 = ExecTool(mode="local", limits=RUNNABLE).observer(m2)
    b = ExecTool(mode="local", limits=RUNNABLE).observer(m3)
    assert a1.service() is a2.service()
    assert a1.service() is not b.service()
    assert (
        ExecTool(mode="local", limits=RUNNABLE, timeout_s=9).service()
        is not ExecTool(mode="local", limits=RUNNABLE).service()
    )


def test_a_service_no_tool_holds_ends_its_threads() -> None:
    """A team's service lives while a bound tool holds it; once none does, its job threads end
    and the registry lets it go (a host that starts and stops many teams keeps no threads)."""

    def exec_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("toolcards-exec")}

    before = exec_threads()
    tools = _tools(ExecTool(mode="local", limits=RUNNABLE, allowed_commands=["true"]))
    job_id = tools["exec_start"]("true").split("job_id: ")[1].split()[0]
    assert "exit_code: 0" in tools["exec_result"](job_id, wait_s=30)
    assert exec_threads() - before, "the job ran on a thread of the service"
    del tools
    gc.collect()
    assert wait_until(lambda: not exec_threads() - before, 10), exec_threads() - before


@pytest.mark.parametrize("wait", [float("nan"), "soon", True])
def test_job_result_rejects_bad_wait(wait: object) -> None:
    tools = _tools(ExecTool(mode="local", limits=RUNNABLE, allowed_commands=["true"]))
    job_id = tools["exec_start"]("true").split("job_id: ")[1].split()[0]
    with pytest.raises(RetriableError, match="wait_s"):
        tools["exec_result"](job_id, wait_s=wait)


def test_members_of_a_runtime_team_share_one_service_and_workspace(workspaces: Path) -> None:
    from toolcards.runtime import Team

    with Team("exec-team", store=":memory:") as team:
        alice = team.bind([ExecTool(mode="local", limits=RUNNABLE)], member="alice")
        bob = team.bind([ExecTool(mode="local", limits=RUNNABLE)], member="bob")
        a_cards, b_cards = alice.cards, bob.cards
        assert isinstance(a_cards[0], ExecTool) and isinstance(b_cards[0], ExecTool)
        assert a_cards[0].service() is b_cards[0].service()
        run = tools_of(alice)["exec_command"]
        assert str(workspaces / "exec-team") in run("pwd")


def _pair(
    team: str, names: tuple[str, str], **fields: Any
) -> tuple[list[_Member], dict[str, Any], dict[str, Any]]:
    """The tools of two members of ``team``, one ExecTool each, and the members (the cards
    hold them weakly: the caller keeps them)."""
    members = [_Member(team, name) for name in names]
    first, second = (
        _tools(ExecTool(mode="local", limits=RUNNABLE, **fields).observer(m)) for m in members
    )
    return members, first, second


def test_concurrency_cap_holds_back_extra_calls(workspaces: Path) -> None:
    """With one slot, a job waiting for a second job's file can only time out."""
    _members, alice, bob = _pair(
        "t-cap", ("alice", "bob"), workspace_id="cap", timeout_s=2, max_concurrent=1
    )
    script = workspaces / "cap" / "meet.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "import os,sys,time\nopen(sys.argv[1],'w')\n"
        "while not os.path.exists(sys.argv[2]): time.sleep(0.02)\nprint('met')\n"
    )
    first = alice["exec_start"]("python3 meet.py a b").split("job_id: ")[1].split()[0]
    second = bob["exec_start"]("python3 meet.py b a").split("job_id: ")[1].split()[0]
    assert "killed: timeout" in _finished(alice, first)
    assert "met" in _finished(bob, second)


GATED = "import os,sys,time\nwhile not os.path.exists('go'): time.sleep(0.02)\nprint(sys.argv[1])\n"
"""A job that holds its slot until the test creates ``go``, then prints its argument."""


def _gated_workspace(workspaces: Path) -> Path:
    ws = workspaces / "gate"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "gated.py").write_text(GATED)
    return ws


def _job_id(started: str) -> str:
    return started.split("job_id: ")[1].split()[0]


def test_one_member_cannot_queue_the_teams_jobs(workspaces: Path) -> None:
    """Attack: one member queued 256 jobs; another member's exec_start was refused ("256 jobs
    are still running") and its exec_command waited out the backlog (about an hour)."""
    ws = _gated_workspace(workspaces)
    _members, mallory, alice = _pair(
        "t-jobs", ("mallory", "alice"), workspace_id="gate", timeout_s=30, max_concurrent=2
    )
    held = [_job_id(mallory["exec_start"](f"python3 gated.py m{i}")) for i in range(2)]
    with pytest.raises(RetriableError, match="at most 2 of your jobs"):
        mallory["exec_start"]("python3 gated.py m2")
    theirs = _job_id(alice["exec_start"]("python3 gated.py a0"))
    (ws / "go").touch()
    assert "a0" in _finished(alice, theirs)
    assert all("exit_code: 0" in _finished(mallory, j) for j in held)
    again = _job_id(mallory["exec_start"]("python3 gated.py m3"))  # finished jobs free the cap
    assert "m3" in _finished(mallory, again)


def test_jobs_are_capped_per_governed_principal(workspaces: Path) -> None:
    """One card serving several principals (an MCP surface) caps each principal's jobs."""
    ws = _gated_workspace(workspaces)
    tools = _tools(
        ExecTool(mode="local", limits=RUNNABLE, workspace_id="gate", timeout_s=30, max_concurrent=1)
    )

    def start_as(who: str, arg: str) -> str:
        token = calling_principal.set(Identity(who))
        try:
            return _job_id(tools["exec_start"](f"python3 gated.py {arg}"))
        finally:
            calling_principal.reset(token)

    first = start_as("client-1", "c1")
    with pytest.raises(RetriableError, match="at most 1 of your jobs"):
        start_as("client-1", "c1-again")
    second = start_as("client-2", "c2")
    (ws / "go").touch()
    assert "c1" in _as("client-1", lambda: _finished(tools, first))
    assert "c2" in _as("client-2", lambda: _finished(tools, second))


def test_another_principals_job_is_an_unknown_id(workspaces: Path) -> None:
    """Attack: bob read alice's job output through exec_result with its id, which the audit
    rows of alice's own exec_result calls name (viewers read them): the job's recorded caller
    was never checked. Her job now fails for him exactly like an id never issued."""
    tools = _tools(ExecTool(mode="local", limits=RUNNABLE, allowed_commands=["echo"]))
    job = _as("alice", lambda: _job_id(tools["exec_start"]("echo alice-private")))
    assert "alice-private" in _as("alice", lambda: _finished(tools, job))
    with pytest.raises(RetriableError) as theirs:
        _as("bob", lambda: tools["exec_result"](job, wait_s=1))
    with pytest.raises(RetriableError) as never:
        _as("bob", lambda: tools["exec_result"]("0123456789ab", wait_s=1))
    assert str(theirs.value) == str(never.value).replace("0123456789ab", job)
    with pytest.raises(RetriableError, match="unknown job id"):
        tools["exec_result"](job)  # the unbound card's own caller ("user") is not alice
    assert "alice-private" in _as("alice", lambda: _finished(tools, job))  # still hers


def test_another_members_job_is_an_unknown_id(workspaces: Path) -> None:
    _members, alice, bob = _pair("t-own", ("alice", "bob"), allowed_commands=["echo"])
    job = _job_id(alice["exec_start"]("echo alice-private"))
    with pytest.raises(RetriableError, match="unknown job id"):
        bob["exec_result"](job, wait_s=1)
    assert "alice-private" in _finished(alice, job)


def _as(who: str, call: Callable[[], T]) -> T:
    """``call()`` in a governed call of principal ``who``."""
    token = calling_principal.set(Identity(who))
    try:
        return call()
    finally:
        calling_principal.reset(token)


def _finished(tools: dict[str, Any], job_id: str) -> str:
    for _ in range(30):
        out = str(tools["exec_result"](job_id, wait_s=2))
        if "status: finished" in out:
            return out
    raise AssertionError(f"job {job_id} never finished")


def test_unenforceable_process_cap_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolcards.tools.exec import service

    monkeypatch.setattr(service, "process_cap_method", lambda limits: "none")
    with pytest.raises(BackendUnavailable, match="max_processes cannot be enforced"):
        ExecTool(mode="local", limits=ExecLimits(max_processes=64)).get_tools()
    assert ExecTool(mode="local", limits=ExecLimits(max_processes=None)).get_tools()


def test_workspace_is_fixed_at_binding(workspaces: Path) -> None:
    member = _Member("team-z")
    run = _tools(ExecTool(mode="local", limits=RUNNABLE).observer(member))["exec_command"]
    del member  # the owner goes away; the bound tool keeps its team's workspace
    assert str(workspaces / "team-z") in run("pwd")


def test_capabilities_are_not_slash_commands() -> None:
    assert ExecTool(mode="local", limits=RUNNABLE).get_commands() == []


MODES = [
    pytest.param("local"),
    pytest.param("bwrap", marks=pytest.mark.skipif(BWRAP_REASON is not None, reason="no bwrap")),
]
RM_SPELLINGS = [
    "rm victim",
    "'rm' victim",
    "r''m victim",
    '"rm" victim',
    " rm victim",
    "rm\tvictim",
]


def _governed(mode: str, effect: str) -> tuple[Executor, Path]:
    """An executor whose one rule gives ``effect`` to exec calls matching ``rm *``, and the
    workspace holding the file ``victim``."""
    card = ExecTool(mode=mode, limits=RUNNABLE, workspace_id="w", allowed_commands=["ls", "rm"])
    rule: dict[str, Any] = {"targets": ["exec_command", "exec_start"], "effect": effect}
    rule["conditions"] = {"arguments": {"command": {"glob": "rm *"}}}
    policy = Policy.from_dict({"default_effect": "allow", "rules": [rule]})
    victim = card.workspace() / "victim"
    victim.write_text("data")
    return Executor(CapabilityRegistry.from_factory(ToolFactory([card])), policy), victim


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool", ["exec_command", "exec_start"])
@pytest.mark.parametrize("command", RM_SPELLINGS)
@sync
async def test_a_rule_on_the_command_holds_for_every_spelling_of_it(
    mode: str, tool: str, command: str
) -> None:
    """The policy decides on the argv that would run, joined back: quoting and spacing
    cannot carry a denied command past a rule written on its plain spelling."""
    executor, victim = _governed(mode, "deny")
    result = await executor.call(tool, {"command": command}, Identity("alice"))
    assert result.outcome is Outcome.DENIED
    assert victim.exists()


@pytest.mark.parametrize("mode", MODES)
@sync
async def test_an_ordinary_command_runs_as_sent(mode: str) -> None:
    executor, _ = _governed(mode, "deny")
    result = await executor.call("exec_command", {"command": "ls -a ."}, Identity("alice"))
    assert result.ok and "victim" in result.value


@sync
async def test_the_approver_is_shown_the_command_that_runs() -> None:
    executor, victim = _governed("local", "approve")
    shown: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        shown.append(json.loads(request.args_json)["command"])
        return True

    call = {"command": "r''m   'victim'"}
    result = await executor.call("exec_command", call, Identity("alice"), approver=approver)
    assert shown == ["rm victim"]
    assert result.ok and not victim.exists()  # what was approved ran


@sync
async def test_a_command_that_cannot_be_parsed_is_refused_before_the_policy() -> None:
    executor, _ = _governed("local", "deny")
    result = await executor.call("exec_command", {"command": "rm 'victim"}, Identity("alice"))
    assert result.outcome is Outcome.INVALID_ARGS
    assert "cannot parse command" in result.message and "\n" not in result.message
