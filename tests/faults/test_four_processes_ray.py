"""The fault suite under load on Ray (issue #32): four processes of one team write tasks
through governed calls to the one cluster-wide ``#PlanningTool`` actor (a real Ray cluster, a
real PostgreSQL store), while the actor's worker is SIGKILLed (Ray restarts it; it reloads from
the store) and then the raylet of the node it runs on (a node added for the test: the actor
comes back on another node), and two more processes of the team join without ``RAY_ADDRESS``
(each refused in one line). A process retries a call that answered "retry", or timed out
while Ray had yet to declare the lost node dead (it may yet commit), under the same call id.
After recovery the store and the actor hold exactly the acknowledged writes (no phantom, no
loss, no duplicate), a subscriber in the test's process received every event once, and every
call a writer started has exactly one audit row.

The actor asks for a custom resource that only nodes added for the test offer: it starts on
the first; a second is added before the first one's raylet is killed, so the restart has a
node to go to (a soft node affinity, tried first, let Ray place the actor, and restart it
after its worker's SIGKILL, on another node while the chosen one was alive)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from faults.writers import Writer, check_events_once, check_exactly_acknowledged, progress
from support.scripted import wait_until
from support.servers import RayCluster
from toolcards.runtime import RayActorSystem, Team
from toolcards.tools.planning.actor import ACTOR_NAME as PLAN
from toolcards.tools.planning.actor import PlanningActor

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROCESSES = 4
TEAM = "ray-fault-team"
RESTART = 180.0
"""The bound for a worker to be replaced (a loaded machine starts a Ray worker slowly)."""

PRIVATE = textwrap.dedent(
    """
    import sys
    from toolcards.runtime import Team
    try:
        Team(sys.argv[2], store=sys.argv[1], system="ray")
    except ValueError as exc:
        print(exc)
        sys.exit(3)
    """
)


def _parent(pid: int) -> int:
    """The parent of ``pid`` (for a Ray worker: its node's raylet)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _raylet(node: Any) -> int:
    """The pid of a node's raylet, as ``ray.cluster_utils`` started it."""
    return int(node.all_processes["raylet"][0].process.pid)


def _serving(team: Team, old: int) -> int:
    """Wait for the actor to answer from a worker other than ``old``; its pid."""
    found: list[int] = []

    def answered() -> bool:
        handle = team.actor(PLAN)
        with contextlib.suppress(Exception):  # restarting: unavailable, or a timeout
            pid = handle.within(5).ask(PlanningActor.pid) if handle is not None else old
            if pid != old:
                found.append(pid)
        return bool(found)

    assert wait_until(answered, RESTART), "the actor was not restarted in time"
    return found[0]


def _join_without_ray_address(url: str) -> list[str]:
    """Two more processes of the team with the same store and no cluster address: each is
    refused (it would start a private Ray, a second copy of every actor); their one lines."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PRIVATE, url, TEAM],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    lines = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 3, err[-2000:]
        lines.append(out.strip())
    return lines


def _add_node(cluster: Any, resource: str) -> Any:
    """A node offering ``resource`` (the actor asks for a sliver of it), once it is up."""
    node = cluster.add_node(
        num_cpus=1, resources={resource: 1}, object_store_memory=100 * 1024 * 1024
    )
    cluster.wait_for_nodes()
    return node


class Phases:
    """Acknowledged calls and retries of the writers in each phase of the run."""

    def __init__(self, writers: list[Writer]) -> None:
        self.writers = writers
        self.counts: list[tuple[str, int, int]] = []
        self._mark = (0, 0)

    def end(self, phase: str) -> None:
        now = (sum(len(w.acked) for w in self.writers), sum(w.retries for w in self.writers))
        self.counts.append((phase, now[0] - self._mark[0], now[1] - self._mark[1]))
        self._mark = now


def test_four_ray_processes_through_worker_and_raylet_kills_hold_exactly_the_acknowledged(
    ray_cluster: RayCluster, postgres_url: str, tmp_path: Path
) -> None:
    cluster: Any = ray_cluster.cluster
    resource = f"faults-{tmp_path.name}"
    nodes = [_add_node(cluster, resource)]  # the actor can run on the nodes added here only
    events: list[tuple[str, int]] = []
    watcher = Team(
        TEAM,
        store=postgres_url,
        system=RayActorSystem(address=ray_cluster.address, namespace=resource),
    )
    try:
        subscription = watcher.subscribe(lambda e: events.append((e.tool_id, e.seq)))
        ray = {"address": ray_cluster.address, "namespace": resource, "resource": resource}
        writers = [Writer(postgres_url, f"w{n}", tmp_path, TEAM, ray=ray) for n in range(PROCESSES)]
        phases = Phases(writers)
        try:
            progress(writers, 5, RESTART)
            phases.end("start")
            pid = _serving(watcher, -1)
            assert _parent(pid) == _raylet(nodes[0]), "the actor is not on the added node"
            os.kill(pid, signal.SIGKILL)  # its worker: Ray restarts it, it reloads the store
            pid = _serving(watcher, pid)
            progress(writers, 5, RESTART)
            phases.end("worker SIGKILL")
            assert _parent(pid) == _raylet(nodes[0])  # restarted on its node
            nodes.append(_add_node(cluster, resource))  # where it can go once its node is lost
            os.kill(_raylet(nodes[0]), signal.SIGKILL)  # the node is lost, its worker fenced
            pid = _serving(watcher, pid)
            progress(writers, 5, RESTART)
            phases.end("raylet SIGKILL")
            assert _parent(pid) == _raylet(nodes[1]), "the actor did not move to the other node"
            refusals = _join_without_ray_address(postgres_url)
            progress(writers, 5, RESTART)
            phases.end("two processes without RAY_ADDRESS")
        finally:
            (tmp_path / "stop").touch()
            for writer in writers:
                writer.finish()
        assert all("\n" not in line and "private Ray cluster" in line for line in refusals)
        check_events_once(postgres_url, TEAM, events, subscription)
        stored = check_exactly_acknowledged(postgres_url, TEAM, writers)
        handle = watcher.actor(PLAN)
        assert handle is not None
        answered = {t.id: t.description for t in handle.within(60).ask(PlanningActor.tasks)}
        assert answered == stored, "the actor's board differs from the store"
        rows = 0
        for writer in writers:  # every call it started: exactly one row
            found = Counter(row.call_id for row in writer.audit_rows())
            started = Counter({call_id: 1 for call_id in writer.acked})
            started.update(line.split()[1] for line in writer.lines if line.startswith("retry "))
            assert found == started, writer.me
            rows += found.total()
        retries = sum(w.retries for w in writers)
        timeouts = sum(w.timeouts for w in writers)
        print(f"per phase (acknowledged, retries): {phases.counts}; {len(stored)} acknowledged "
              f"and stored, {retries} retries ({timeouts} after a timeout), "
              f"{len(events)} events received once, {rows} audit rows")  # fmt: skip
        assert retries > 0  # the faults did reach the writers
    finally:
        watcher.stop(everywhere=True)
        for node in nodes:
            with contextlib.suppress(Exception):
                cluster.remove_node(node, allow_graceful=False)
