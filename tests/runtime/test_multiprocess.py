"""One team, four OS processes: planning mutations from every process land once, in order.

Runs on PostgreSQL with both actor systems: Pykka (each process has its own copy of
``#PlanningTool``, kept coherent through the store) and Ray (one actor for the cluster, which
survives a SIGKILL of its worker).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support.servers import RayCluster
from toolcards import PlanningTool
from toolcards.runtime import Team
from toolcards.tools.planning.actor import PlanningActor

TESTS = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent(
    """
    import sys, time
    from toolcards import PlanningTool
    from toolcards.core.errors import RetriableError
    from toolcards.runtime import Team

    url, system, who, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    team = Team("multi", store=url, system=system)
    tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)], who).get_tools()}
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for i in range(count):
        for attempt in range(20):
            try:
                tools["update_planning"](create=[{"description": f"{who} task {i}"}])
                break
            except RetriableError:
                time.sleep(0.05)
    team.stop()
    print("done", flush=True)
    """
)


def _run_workers(url: str, system: str, env: dict[str, str]) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, system, f"w{n}", "50"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(4)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            # a Ray driver prints its cluster's errors to stdout (a worker killed by an
            # earlier test, on the same cluster): the line that counts is the worker's own
            lines = (line.strip() for line in proc.stdout)
            assert next((line for line in lines if line == "ready"), None) == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.wait(timeout=240) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def _check_board(team: Team, events: int = 200) -> None:
    handle = team.tool_actor("#PlanningTool", PlanningActor, _config())
    tasks = handle.ask(PlanningActor.tasks)
    assert len(tasks) == 200
    assert sorted(t.id for t in tasks)[:200] == list(range(1, 201))  # unique, none lost
    descriptions = {t.description for t in tasks}
    assert descriptions == {f"w{n} task {i}" for n in range(4) for i in range(50)}
    seqs = [e.seq for e in team.events() if e.tool_id == "#PlanningTool"]
    assert seqs == list(range(1, events + 1))  # one event per mutation, gap-free


def _config() -> object:
    from toolcards.tools.planning.actor import PlanningConfig

    return PlanningConfig(vector_store=None)


def test_four_processes_on_one_store_with_local_actors(postgres_url: str) -> None:
    _run_workers(postgres_url, "pykka", dict(os.environ))
    with Team("multi", store=postgres_url) as team:
        _check_board(team)


@pytest.mark.timeout(600)
def test_four_processes_on_ray_and_a_killed_worker_loses_nothing(
    postgres_url: str, ray_cluster: RayCluster
) -> None:
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.address}
    _run_workers(postgres_url, "ray", env)
    team = Team("multi", store=postgres_url, system="ray")
    try:
        _check_board(team)
        handle = team.actor("#PlanningTool")
        assert handle is not None
        pid = handle.ask(PlanningActor.pid)
        os.kill(pid, signal.SIGKILL)
        _wait_restarted(team, pid)
        tools = {
            t.__name__: t for t in team.bind([PlanningTool(vector_store=False)], "z").get_tools()
        }
        created = tools["update_planning"](create=[{"description": "after the kill"}])
        assert created == "created ids: [201]"  # the very next call is served
        team.tool_actor("#PlanningTool", PlanningActor, _config()).ask(
            PlanningActor.apply, "z", [], [], [201]
        )
        _check_board(team, events=202)  # every acknowledged mutation is there
    finally:
        team.stop(everywhere=True)


def _wait_restarted(team: Team, old_pid: int, timeout: float = 180.0) -> None:
    """A bound, not a measurement: a loaded machine starts the replacement worker slowly."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        handle = team.actor("#PlanningTool")
        if handle is not None:
            try:
                if handle.within(5).ask(PlanningActor.pid) != old_pid:
                    return
            except Exception:
                pass
        time.sleep(0.2)
    raise AssertionError("the actor was not restarted in time")
