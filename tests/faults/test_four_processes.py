"""The fault suite under load (issue #32): four processes of one team write tasks through
governed calls on a real PostgreSQL (Pykka copies of the planning actor in each), while the
server is crash-restarted (`pg_ctl restart -m immediate`), stopped for ten seconds, frozen
(SIGSTOP), and a TCP proxy in front of it cuts a COMMIT (its answer lost, or the COMMIT
itself). A process retries a call that answered "retry" under the same call id, as an
agent's durable run does. After recovery the store, every process's actor and the audit
trails hold exactly the acknowledged writes: no phantom, no loss, no duplicate; and a
subscriber of the team's events, in the test's own process, received every event once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from support.pg_proxy import CommitCuttingProxy
from support.scripted import wait_until
from support.servers import PostgresServer
from toolcards.governance import AuditLog
from toolcards.runtime import Team
from toolcards.runtime.events import EventLog
from toolcards.stores.postgres.team import PostgresStore
from toolcards.tools.planning.actor import ACTOR_NAME as PLAN

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PROCESSES = 4
TEAM = "fault-team"

WRITER = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from toolcards import PlanningTool
    from toolcards.governance import AuditLog, Identity, Policy
    from toolcards.governance.capability import CapabilityRegistry
    from toolcards.governance.executor import Executor, Outcome
    from toolcards.runtime import Team

    url, me, audit_path, stop = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    team = Team(sys.argv[5], store=url)
    factory = team.bind([PlanningTool(vector_store=False)], member=me)
    audit = AuditLog(audit_path, durability="sync")
    executor = Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all(),
                        audit=audit, timeout=30)

    async def once(call_id, description):
        args = {"create": [{"description": description}]}
        deadline = time.monotonic() + 120
        while True:  # a retry keeps the call id: the store answers a committed one from its key
            result = await executor.call("update_planning", args, Identity(me), call_id=call_id)
            if result.outcome is Outcome.OK:
                return result.value
            if result.outcome is not Outcome.RETRY or time.monotonic() > deadline:
                raise SystemExit(f"{call_id}: {result.outcome} {result.message}")
            print(f"retry {call_id}", flush=True)
            await asyncio.sleep(0.2)

    async def main():
        i, mine = 0, {}
        while not stop.exists():
            call_id = f"{me}-{i}"
            value = await once(call_id, call_id)
            print(f"ack {call_id} {value}", flush=True)
            mine[int(value.split("[", 1)[1].split("]", 1)[0])] = call_id
            i += 1
        matched = 0  # this process's actor answers each of its tasks as the store holds it
        for task_id, call_id in mine.items():
            read = await executor.call("get_planning_task", {"id": task_id}, Identity(me))
            matched += read.outcome is Outcome.OK and call_id in read.value
        print(f"board {matched}", flush=True)

    try:
        asyncio.run(main())
    finally:
        audit.close()
        team.stop()
    """
)


class Writer:
    """One writer process; its acknowledged call ids, as it prints them."""

    def __init__(self, url: str, me: str, tmp: Path) -> None:
        self.me = me
        self.audit = tmp / f"{me}-audit.db"
        self.acked: dict[str, int] = {}
        self.retries = 0
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, url, me, str(self.audit), str(tmp / "stop"), TEAM],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.errors: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._errors = threading.Thread(target=self._read_errors, daemon=True)
        self._errors.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())
            if line.startswith("ack "):
                _, call_id, value = line.split(" ", 2)
                self.acked[call_id] = int(value.split("[", 1)[1].split("]", 1)[0])
            elif line.startswith("retry "):
                self.retries += 1

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        self.errors.extend(self.proc.stderr)

    def finish(self) -> str:
        """Wait for the process and for its last lines (each pipe has one reader)."""
        self.proc.wait(timeout=180)
        self._reader.join(30)
        self._errors.join(30)
        err = "".join(self.errors)
        assert self.proc.returncode == 0, err[-3000:]
        return err


def _stored(url: str) -> dict[int, str]:
    store = PostgresStore(url)
    try:
        rows = store.state_items(TEAM, PLAN, "task:")
    finally:
        store.close()
    return {int(value["id"]): str(value["description"]) for _, value in rows}


def _event_position(url: str) -> int:
    store = PostgresStore(url)
    try:
        log = EventLog(store, TEAM)
        try:
            return log.position
        finally:
            log.close()
    finally:
        store.close()


def _progress(writers: list[Writer], more: int) -> None:
    """Wait until every writer acknowledged ``more`` further calls."""
    marks = [len(w.acked) + more for w in writers]
    assert wait_until(
        lambda: all(len(w.acked) >= m for w, m in zip(writers, marks, strict=True)), 120
    ), [w.lines[-3:] for w in writers]


def _cut_commits(proxy: CommitCuttingProxy, writers: list[Writer]) -> None:
    """Cut a COMMIT of a coming write of two writers: its answer lost (it committed), then
    the COMMIT itself (it did not); neither writer can tell which happened to it."""
    for writer, mode in ((writers[0], "answer"), (writers[1], "commit")):
        cuts = proxy.cuts
        proxy.arm(f'"{writer.me}-{len(writer.acked) + 2}"', mode)  # its description, quoted
        assert wait_until(lambda cuts=cuts: proxy.cuts > cuts, 60)


def test_four_processes_through_restart_stop_and_freeze_hold_exactly_the_acknowledged(
    pg: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    events: list[tuple[str, int]] = []
    watcher = Team(TEAM, store=pg_url)
    subscription = watcher.subscribe(lambda e: events.append((e.tool_id, e.seq)))
    proxy = CommitCuttingProxy(pg_url)  # the writers reach the server through it
    writers = [Writer(proxy.url, f"w{n}", tmp_path) for n in range(PROCESSES)]
    try:
        _progress(writers, 5)
        pg.restart("immediate")  # a crash restart mid-run
        _progress(writers, 5)
        pg.stop("fast")  # down for ten seconds
        time.sleep(10)  # the outage itself: nothing to wait for
        pg.start()
        _progress(writers, 5)
        pg.freeze()  # SIGSTOP: a hung server, not a refused connection
        time.sleep(3)
        pg.thaw()
        _progress(writers, 5)
        _cut_commits(proxy, writers)
        _progress(writers, 5)
    finally:
        (tmp_path / "stop").touch()
        pg.thaw()
        if pg.process is None or pg.process.poll() is not None:
            pg.start()  # the writers finish their last call and read the board
        errors = [w.finish() for w in writers]
        proxy.close()
    try:
        last = _event_position(pg_url)
        assert wait_until(lambda: len(events) >= last, 60), (len(events), last)
        assert subscription.active
        assert len(events) == len(set(events)) == last  # every event once, none missing
    finally:
        watcher.stop()
    stored = _stored(pg_url)
    acked = {call_id: task for w in writers for call_id, task in w.acked.items()}
    descriptions = sorted(stored.values())
    assert len(descriptions) == len(set(descriptions)), "a task was written twice"
    assert sorted(acked) == descriptions, "stored and acknowledged differ (phantom or loss)"
    assert all(stored[task] == call_id for call_id, task in acked.items())  # ids as answered
    for writer in writers:  # each process's actor answers what the store holds
        assert f"board {len(writer.acked)}" in writer.lines, writer.lines[-3:]
        with AuditLog(writer.audit) as log:
            rows = log.query(tool="update_planning", limit=100_000)
        ok = defaultdict(int)
        for row in rows:
            ok[row.call_id] += row.outcome == "ok"
        assert all(ok[call_id] == 1 for call_id in writer.acked), "an ack without its one ok row"
    retries = sum(w.retries for w in writers)
    print(f"{len(acked)} acknowledged, {len(stored)} stored, {retries} retries, "
          f"{len(events)} events received once")  # fmt: skip
    assert retries > 0, errors  # the faults did reach the writers
