"""Audit rows = started calls, exactly, through the faults that used to add or lose rows:

- the answer to an audit insert's COMMIT is lost (a real TCP proxy in front of a real
  PostgreSQL withholds it): the rows go to the spill, whose replay finds them written and
  leaves them out (before: written twice);
- a process is SIGKILLed while its calls are answered (real subprocesses, forked by the
  worker's fork server, :mod:`support.launch`; the default batched log): every call its
  caller saw answered has its row, written from the killed process's journal by the next
  process of the trail (before: the rows still queued were lost);
- a durable run is SIGKILLed between a call's audit row and the record of its result: the
  replay reads the trail and answers from the row with a ``replayed`` row (before: a second,
  contradictory ``interrupted`` row, or none at all).
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from signal import SIGKILL

import pytest

from support.launch import PYTHON
from support.pg_proxy import CommitCuttingProxy, commit_cutting_proxy
from support.processes import kill_at
from toolcards.governance import AuditLog, AuditRecord
from toolcards.governance.redaction.redactor import storable

TIMEOUT = 180.0


def _record(call_id: str) -> AuditRecord:
    return AuditRecord(
        ts=time.time(), principal="alice", principal_type="user", roles=(), surface="python",
        tool="pay", call_id=call_id, args={"call": call_id}, decision="allow", outcome="ok",
    )  # fmt: skip


@pytest.fixture
def pg_url(postgres_url: str) -> str:
    """A new, empty database on the session's server (the proxy cuts a connection, never the
    server: this module needs no private server of its own)."""
    return postgres_url


def _reaped(proc: subprocess.Popen[str], pid: int) -> str:
    """What ``proc`` (the launcher of process ``pid``) wrote to its stdout, read to its end,
    once process ``pid`` is gone: the fork server's child outlives its killed launcher by a
    moment, and a dead process not yet reaped still reads as alive to the next process of its
    trail, which then leaves its journal alone."""
    out = proc.stdout.read() if proc.stdout else ""  # after what readline() took, to the end
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 60
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return out
        assert time.monotonic() < deadline, f"process {pid} outlived its launcher"
        time.sleep(0.02)


@pytest.fixture
def proxy(pg_url: str) -> Iterator[CommitCuttingProxy]:
    with commit_cutting_proxy(pg_url) as running:
        yield running


def _calls(url: str, team: str = "exact") -> Counter[str]:
    with AuditLog(url, durability="sync", team_id=team) as log:
        assert log.verify().ok
        return Counter(e.call_id or "" for e in log.query(limit=10_000))


@pytest.mark.parametrize("durability", ["sync", "batched"])
def test_a_lost_commit_answer_leaves_exactly_one_row(
    pg_url: str, proxy: CommitCuttingProxy, tmp_path: Path, durability: str
) -> None:
    log = AuditLog(proxy.url, durability=durability, team_id="exact", spill_dir=tmp_path)  # type: ignore[arg-type]
    try:
        log.record(_record("before"))
        assert log.flush(60)
        proxy.arm("answer-lost")
        log.record(_record("answer-lost"))  # committed; the answer never arrives
        assert log.flush(60)
        assert proxy.cuts == 1 and log.spill.spilled == 1
        log.record(_record("after"))  # the spill is written first: its row is there already
        assert log.flush(60)
    finally:
        log.close()
    assert _calls(pg_url) == {"before": 1, "answer-lost": 1, "after": 1}
    assert list(tmp_path.iterdir()) == []


def test_a_lost_commit_answer_for_a_batch_leaves_each_row_once(
    pg_url: str, proxy: CommitCuttingProxy, tmp_path: Path
) -> None:
    log = AuditLog(proxy.url, team_id="exact", spill_dir=tmp_path, linger=0.2)
    try:
        proxy.arm("batch-7")
        for n in range(20):  # one batch, its COMMIT's answer lost
            log.record(_record(f"batch-{n}"))
        assert log.flush(60)
        assert proxy.cuts == 1
        for n in range(20, 25):
            log.record(_record(f"batch-{n}"))
        assert log.flush(60)
    finally:
        log.close()
    assert _calls(pg_url) == {f"batch-{n}": 1 for n in range(25)}


CALLER = textwrap.dedent(
    """
    import asyncio, os, sys
    from toolcards.governance import AuditLog, CapabilityRegistry, Executor, Identity, Policy

    def pay(n: int) -> str:
        return f"paid {n}"

    audit = AuditLog(sys.argv[1], linger=float(sys.argv[2]))
    executor = Executor(CapabilityRegistry.from_tools([pay]), Policy.allow_all(), audit=audit)

    async def main():
        print("pid", os.getpid(), flush=True)
        n = 0
        while True:
            print("start", n, flush=True)
            result = await executor.call("pay", {"n": n}, Identity("alice"), call_id=f"k{n}")
            assert result.ok, result.message
            print("answered", n, flush=True)
            n += 1

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("linger", [0.05, 30.0])
def test_every_answered_call_of_a_killed_process_has_its_row(tmp_path: Path, linger: float) -> None:
    path = tmp_path / "audit.db"
    child = subprocess.Popen(
        [PYTHON, "-c", CALLER, str(path), str(linger)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    try:
        assert child.stdout is not None
        pid = int(child.stdout.readline().split()[1])
        deadline = time.monotonic() + TIMEOUT
        while sum(line.startswith("answered") for line in lines) < 300:
            assert time.monotonic() < deadline, "the calls never got going"
            lines.append(child.stdout.readline())
        child.send_signal(SIGKILL)  # just after an answer (the launcher: its process next)
        child.wait(timeout=60)
        lines += _reaped(child, pid).splitlines()  # what it printed before it died
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -SIGKILL
    calls = [line.split() for line in lines if line.strip()]
    whole = [(word, int(n)) for word, n in (c for c in calls if len(c) == 2)]
    started = {f"k{n}" for word, n in whole if word == "start"}
    answered = {f"k{n}" for word, n in whole if word == "answered"}
    if len(whole) < len(calls):  # the kill cut the last line short: the next call may have begun
        started.add(f"k{max(n for _, n in whole) + 1}")
    with AuditLog(path) as log:  # the next process of the trail writes the journal's rows
        rows = Counter(e.call_id or "" for e in log.query(limit=100_000))
        assert log.verify().ok
    assert answered <= set(rows) <= started  # every answered call; no call that never started
    assert set(rows.values()) == {1}


DURABLE_RUN = textwrap.dedent(
    '''
    import json, os, sys, time
    from pathlib import Path
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.toolsets import FunctionToolset
    from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
    from toolcards.governance.executor import replay
    from toolcards.stores.call_results import SqliteCallResults

    base, durability, stop = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "stop"
    replay.LEASE_SECONDS = 2.0  # the replay waits out the killed claim's lease: 2 s, not 10
    call_id = json.loads(sys.argv[4])  # JSON: a NUL cannot be an argument

    def append_line(text: str) -> str:
        """Append a line to the notes (a side effect: running it twice shows)."""
        with (base / "notes.txt").open("a") as notes:
            notes.write(text + "\\n")
        return f"appended {text!r}"

    class StopsBeforeTheRecord(SqliteCallResults):
        def settle(self, key, outcome, message, value):
            (base / "pid").write_text(str(os.getpid()))  # the row is written, not the result
            (base / "pid").rename(base / "ready")
            time.sleep(600)  # the test kills this process here

    def model(messages, info):
        if len(messages) == 1:
            call = ToolCallPart("append_line", {"text": "one"}, tool_call_id=call_id)
            return ModelResponse(parts=[call])
        return ModelResponse(parts=[TextPart(str(messages[-1].parts[0].content))])

    results = (StopsBeforeTheRecord if stop else SqliteCallResults)(base / "calls.db")
    audit = AuditLog(base / "audit.db", durability=durability)
    governed = GovernedToolset(
        FunctionToolset([append_line]),
        policy=Policy.from_dict({"default_effect": "allow"}),
        identity=Identity("agent.writer", type="agent"),
        audit=audit,
        call_results=results,
    )
    answer = Agent(FunctionModel(model), toolsets=[governed]).run_sync("go", run_id="run-1")
    print(answer.output, flush=True)
    audit.close()
    '''
)


def _durable_run(
    base: Path, durability: str, stop: str, call_id: str = "call-1"
) -> subprocess.Popen[str]:
    argv = [PYTHON, "-c", DURABLE_RUN, str(base), durability, stop, json.dumps(call_id)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("durability", ["sync", "batched"])
def test_a_durable_call_killed_between_its_row_and_its_record_is_not_audited_twice(
    tmp_path: Path, durability: str
) -> None:
    first = _durable_run(tmp_path, durability, "stop")
    kill_at(first, tmp_path / "ready", TIMEOUT, "the run never reached the record")
    _reaped(first, int((tmp_path / "ready").read_text()))  # gone before its replay starts
    replay = _durable_run(tmp_path, durability, "go")  # the durable engine runs it again
    out, err = replay.communicate(timeout=TIMEOUT)
    assert replay.returncode == 0, err[-3000:]
    with AuditLog(tmp_path / "audit.db") as log:
        rows = [(e.call_id, e.outcome) for e in log.query(tool="append_line")]
        replayed = log.query(outcome="replayed")
    ran = rows[0][0]  # the row of the call that held the claim names it: call-1#<claim>
    assert ran is not None and ran.startswith("call-1#")
    assert rows == [(ran, "ok"), ("call-1", "replayed")]  # one row per started call
    assert replayed[0].error == f"answered from the audit row of call {ran} (ok)"
    assert out.startswith("error: append_line ran to its end (ok) before its process ended")
    assert "it is not run again" in out
    assert (tmp_path / "notes.txt").read_text().splitlines() == ["one"]


@pytest.mark.parametrize("call_id", ["call\x00x", "call\ud800x"], ids=["nul", "lone-surrogate"])
def test_a_killed_durable_call_whose_id_no_store_keeps_as_is_is_answered_from_its_row(
    tmp_path: Path, call_id: str
) -> None:
    """The row keeps the model's call id with its NUL or lone surrogate escaped: the replay
    finds it by that form (before: looked up by the raw id, it found no row and wrote
    ``interrupted`` beside ``ok`` (NUL), or failed the whole run (a lone surrogate))."""
    first = _durable_run(tmp_path, "sync", "stop", call_id)
    kill_at(first, tmp_path / "ready", TIMEOUT, "the run never reached the record")
    _reaped(first, int((tmp_path / "ready").read_text()))  # gone before its replay starts
    replay = _durable_run(tmp_path, "sync", "go", call_id)
    out, err = replay.communicate(timeout=TIMEOUT)
    assert replay.returncode == 0, err[-3000:]
    kept = storable(call_id)
    with AuditLog(tmp_path / "audit.db") as log:
        rows = [(e.call_id, e.outcome) for e in log.query(tool="append_line")]
    ran = rows[0][0]  # the row of the call that held the claim names it
    assert ran is not None and ran.startswith(f"{kept}#")
    assert rows == [(ran, "ok"), (kept, "replayed")]
    assert out.startswith("error: append_line ran to its end (ok) before its process ended")
    assert (tmp_path / "notes.txt").read_text().splitlines() == ["one"]


FORKS = textwrap.dedent(
    """
    import os, sys, time
    from toolcards.governance import AuditLog, AuditRecord

    def record(log, call_id):
        log.record(AuditRecord(time.time(), "alice", "user", (), "python", "pay", call_id,
                               {"call": call_id}, decision="allow", outcome="ok"))

    log = AuditLog(sys.argv[1], linger=30.0)  # nothing committed before the kill
    for n in range(20):
        record(log, f"parent-{n}")
    child = os.fork()
    if child == 0:  # a forked worker (multiprocessing's default on Linux) records too
        for n in range(20):
            record(log, f"child-{n}")
        os._exit(0)
    os.waitpid(child, 0)
    for n in range(20, 40):
        record(log, f"parent-{n}")
    print("recorded", os.getpid(), flush=True)
    time.sleep(600)
    """
)


def test_a_forked_child_journals_apart_from_its_killed_parent(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    parent = subprocess.Popen([PYTHON, "-c", FORKS, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        said, pid = parent.stdout.readline().split()
        assert said == "recorded"
        parent.send_signal(SIGKILL)
        parent.wait(timeout=60)
        _reaped(parent, int(pid))
    finally:
        if parent.poll() is None:
            parent.kill()
    with AuditLog(path) as log:  # the next process writes both journals
        rows = Counter(e.call_id or "" for e in log.query(limit=1000))
    expected = {f"parent-{n}" for n in range(40)} | {f"child-{n}" for n in range(20)}
    assert rows == dict.fromkeys(expected, 1)
