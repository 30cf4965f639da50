"""A namespace is not a boundary on Ray: a second driver of the same real two-node cluster,
in another namespace, finds team a's tool actor by name, but every call without team a's key
is refused, so it can neither read nor change the board (real Ray, real PostgreSQL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from support.servers import RayCluster
from toolcards import PlanningTool
from toolcards.runtime import RayActorSystem, Team

pytestmark = pytest.mark.timeout(240)

INTRUDER = textwrap.dedent(
    """
    import json, sys
    import ray
    from toolcards.runtime import RayActorSystem
    from toolcards.tools.planning.models import TaskCreate

    address, namespace = sys.argv[1], sys.argv[2]
    ray.init(address=address, namespace="intruder", include_dashboard=False, log_to_driver=False)
    found = ray.get_actor("#PlanningTool", namespace=namespace)
    outcomes = {}
    attempts = {
        "read": lambda: found.call.remote("tasks", (), {}),
        "change": lambda: found.call.remote(
            "apply", ("intruder", [TaskCreate(description="planted")], [], []), {}
        ),
        "guessed_key": lambda: found.call.remote("tasks", (), {}, "guess"),
        "ping": lambda: found.ping.remote(),
        "stop": lambda: found.stop.remote(),
    }
    for what, attempt in attempts.items():
        try:
            ray.get(attempt(), timeout=30)
            outcomes[what] = "served"
        except Exception as exc:
            outcomes[what] = "refused" if "team key" in str(exc) else f"other: {exc!r}"
    handle = RayActorSystem(address=address, namespace=namespace).lookup("#PlanningTool")
    try:
        handle.within(30).ask(lambda self: None)
        outcomes["system_lookup"] = "served"
    except Exception as exc:
        outcomes["system_lookup"] = "refused" if "team key" in str(exc) else repr(exc)
    print(json.dumps(outcomes), flush=True)
    """
)


RESUMER = textwrap.dedent(
    """
    import sys
    from toolcards import PlanningTool
    from toolcards.runtime import RayActorSystem, Team
    address, ns, url = sys.argv[1], sys.argv[2], sys.argv[3]
    team = Team("key-b", store=url, system=RayActorSystem(address=address, namespace=ns))
    tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)]).get_tools()}
    print(tools["search_planning"]())
    team.stop()
    """
)


def _planning_team(team_id: str, url: str, namespace: str, task: str) -> tuple[Team, Any]:
    team = Team(team_id, store=url, system=RayActorSystem(namespace=namespace))
    tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)]).get_tools()}
    tools["update_planning"](create=[{"description": task}])
    return team, tools


def _driver(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Another Ray driver process on the same cluster."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )


def test_another_drivers_calls_without_the_team_key_are_refused(
    postgres_url: str, ray_cluster: RayCluster
) -> None:
    namespace = f"key-a-{time.monotonic_ns()}"
    team, tools = _planning_team("key-a", postgres_url, namespace, "team a's secret plan")
    try:
        done = _driver(INTRUDER, ray_cluster.address, namespace)
        assert done.returncode == 0, done.stderr[-3000:]
        outcomes: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        board = tools["search_planning"]()
    finally:
        team.stop(everywhere=True)
    assert outcomes == {
        "read": "refused",
        "change": "refused",
        "guessed_key": "refused",
        "ping": "refused",
        "stop": "refused",
        "system_lookup": "refused",
    }
    assert "team a's secret plan" in str(board) and "planted" not in str(board)


def test_a_team_resumed_in_another_process_shares_the_key(
    postgres_url: str, ray_cluster: RayCluster
) -> None:
    namespace = f"key-b-{time.monotonic_ns()}"
    first, _ = _planning_team("key-b", postgres_url, namespace, "shared")
    try:
        second = _driver(RESUMER, ray_cluster.address, namespace, postgres_url)
        started = [
            e.payload
            for e in first.log.events()
            if isinstance(e.payload, dict)
            and e.payload.get("event") == "actor_started"
            and e.payload.get("name") == "#PlanningTool"
        ]
    finally:
        first.stop(everywhere=True)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "shared" in second.stdout
    assert len(started) == 1  # the second process joined the actor; it did not start it
