"""The writer processes of the fault runs under load (issue #32) and the checks after recovery.

A writer is one OS process of a team: it creates one task per governed call, through the
executor (its own audit trail, a call id per call), and retries a call that answered "retry"
or timed out (it may yet commit) under the same call id, as an agent's durable run does,
until a stop file appears; it then
reads each of its tasks back through its actor. It runs on Pykka copies of the planning actor
(each process its own) or, given a Ray cluster, on the one cluster-wide actor.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.scripted import wait_until
from toolcards.governance import AuditLog
from toolcards.runtime.events import EventLog, Subscription
from toolcards.stores.postgres.team import PostgresStore
from toolcards.tools.planning.actor import ACTOR_NAME as PLAN

WRITER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from pathlib import Path
    from toolcards import PlanningTool
    from toolcards.governance import AuditLog, Identity, Policy
    from toolcards.governance.capability import CapabilityRegistry
    from toolcards.governance.executor.pipeline import Executor, Outcome
    from toolcards.runtime import Team

    url, me, audit_path, stop = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
    ray = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    system, bound = None, 120
    if ray is not None:  # the cluster's one actor, on the nodes that offer its resource
        from toolcards.runtime import RayActorSystem
        options = {"resources": {ray["resource"]: 0.01}} if ray.get("resource") else {}
        system = RayActorSystem(address=ray["address"], namespace=ray["namespace"],
                                start_timeout=180, actor_options=options)
        bound = 240  # a restart on a loaded machine: a worker to start, a node to be lost
    team = Team(sys.argv[5], store=url, system=system)
    factory = team.bind([PlanningTool(vector_store=False)], member=me)
    audit = AuditLog(audit_path, durability="sync")
    executor = Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all(),
                        audit=audit, timeout=30)

    async def once(call_id, description):
        args = {"create": [{"description": description}]}
        deadline = time.monotonic() + bound
        while True:  # a retry keeps the call id: the store answers a committed one from its key
            result = await executor.call("update_planning", args, Identity(me), call_id=call_id)
            if result.outcome is Outcome.OK:
                return result.value
            # a timed-out call may yet commit: as ambiguous as a retry, and as safe to repeat
            timed_out = result.outcome is Outcome.ERROR and "timed out after" in result.message
            if not (result.outcome is Outcome.RETRY or timed_out) or time.monotonic() > deadline:
                raise SystemExit(f"{call_id}: {result.outcome} {result.message}")
            print(f"retry {call_id}{' timeout' if timed_out else ''}", flush=True)
            await asyncio.sleep(0.2)

    async def main():
        i, mine = 0, {}
        print("ready", flush=True)
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
    """One writer process; its acknowledged call ids, as it prints them. ``ray``: the
    cluster's ``address``, the team's ``namespace`` and the custom ``resource`` of the nodes
    its actor may run on (absent: Pykka copies)."""

    def __init__(
        self,
        url: str,
        me: str,
        tmp: Path,
        team: str,
        ray: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.me = me
        self.audit = tmp / f"{me}-audit.db"
        self.acked: dict[str, int] = {}
        self.retries = 0
        self.timeouts = 0
        """Of the retries, those of a call that timed out (its outcome unknown)."""
        self.ready = False
        self.lines: list[str] = []
        argv = [sys.executable, "-c", WRITER, url, me, str(self.audit), str(tmp / "stop"), team]
        self.proc = subprocess.Popen(
            [*argv, json.dumps(ray)] if ray is not None else argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
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
                self.timeouts += line.rstrip().endswith(" timeout")
            elif line.startswith("ready"):
                self.ready = True

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

    def audit_rows(self) -> list[Any]:
        """This process's audit rows of update_planning."""
        with AuditLog(self.audit) as log:
            return list(log.query(tool="update_planning", limit=100_000))


def stored_rows(url: str, team: str, actor: str, prefix: str) -> list[Any]:
    """The values of ``actor``'s state rows under ``prefix``, as the store holds them."""
    store = PostgresStore(url)
    try:
        return [value for _, value in store.state_items(team, actor, prefix)]
    finally:
        store.close()


def stored_tasks(url: str, team: str) -> dict[int, str]:
    """The team's tasks as the store holds them: id -> description."""
    rows = stored_rows(url, team, PLAN, "task:")
    return {int(value["id"]): str(value["description"]) for value in rows}


def event_position(url: str, team: str) -> int:
    """How many events the team's log holds."""
    store = PostgresStore(url)
    try:
        log = EventLog(store, team)
        try:
            return log.position
        finally:
            log.close()
    finally:
        store.close()


def progress(
    writers: list[Writer],
    more: int,
    bound: float = 120,
    count: Callable[[Writer], int] = lambda w: len(w.acked),
) -> None:
    """Wait until every writer's ``count`` (by default its acknowledged calls) grew by
    ``more`` (``bound``: a limit, not a measurement)."""
    marks = [count(w) + more for w in writers]
    assert wait_until(
        lambda: all(count(w) >= m for w, m in zip(writers, marks, strict=True)), bound
    ), [w.lines[-3:] for w in writers]


def check_events_once(
    url: str, team: str, events: list[tuple[str, int]], subscription: Subscription
) -> None:
    """The subscriber received every event of the team's log once, none missing."""
    last = event_position(url, team)
    assert wait_until(lambda: len(events) >= last, 60), (len(events), last)
    assert subscription.active
    assert len(events) == len(set(events)) == last


def check_exactly_acknowledged(url: str, team: str, writers: list[Writer]) -> dict[int, str]:
    """The store holds exactly the acknowledged creates under the ids answered (no phantom,
    no loss, no duplicate), each writer's actor answered each of its tasks as stored, and
    each acknowledged call has its one ok audit row; the stored tasks."""
    stored = stored_tasks(url, team)
    acked = {call_id: task for w in writers for call_id, task in w.acked.items()}
    descriptions = sorted(stored.values())
    assert len(descriptions) == len(set(descriptions)), "a task was written twice"
    assert sorted(acked) == descriptions, "stored and acknowledged differ (phantom or loss)"
    assert all(stored[task] == call_id for call_id, task in acked.items())  # ids as answered
    for writer in writers:  # each process's actor answers what the store holds
        assert f"board {len(writer.acked)}" in writer.lines, writer.lines[-3:]
        ok = Counter(row.call_id for row in writer.audit_rows() if row.outcome == "ok")
        assert all(ok[call_id] == 1 for call_id in writer.acked), "an ack without its one ok row"
    return stored
