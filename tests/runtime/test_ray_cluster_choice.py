"""Which Ray cluster a team's actors live on: a shared store never gets a private cluster per
process, and a spawn tells the process that started an actor from one that joined it (real
Ray, real PostgreSQL). A team records its cluster: a process joining it from another cluster
is refused while that one answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from support.servers import RayCluster
from toolcards.runtime import RayActorSystem, Team, open_store
from toolcards.runtime.team_key import claim_cluster

pytestmark = pytest.mark.timeout(240)


def test_the_second_spawn_of_a_named_actor_joins_it(ray_cluster: RayCluster) -> None:
    system = RayActorSystem(namespace=f"join-{time.monotonic_ns()}")
    first = system.spawn("#Notes", list)
    second = system.spawn("#Notes", list)
    try:
        assert (first.started_here, second.started_here) == (True, False)
        first.ask("append", "from the first")
        assert second.ask("copy") == ["from the first"]  # one actor
    finally:
        system.stop(["#Notes"], 30)


PRIVATE = textwrap.dedent(
    """
    import sys
    from toolcards.runtime import Team
    try:
        Team("private", store=sys.argv[1], system="ray")
    except ValueError as exc:
        print(exc)
        sys.exit(3)
    """
)


def test_ray_with_a_shared_store_and_no_cluster_address_is_refused(postgres_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(
        [sys.executable, "-c", PRIVATE, postgres_url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 3, done.stderr[-2000:]
    line = done.stdout.strip()
    assert "\n" not in line and "private Ray cluster" in line and "RAY_ADDRESS" in line


def _record_cluster(url: str, team_id: str, cluster: str) -> None:
    """The team's store says its actors run on ``cluster`` (as a process there wrote)."""
    store = open_store(url)
    try:
        claim_cluster(store, team_id, cluster, reachable=lambda _: False)
    finally:
        store.close()


def test_a_process_on_another_cluster_is_refused_while_the_teams_cluster_answers(
    ray_cluster: RayCluster, postgres_url: str
) -> None:
    with socket.socket() as other:  # the team's cluster: something answers at its address
        other.bind(("127.0.0.1", 0))
        other.listen()
        elsewhere = f"127.0.0.1:{other.getsockname()[1]}"
        _record_cluster(postgres_url, "split", elsewhere)
        system = RayActorSystem(address=ray_cluster.address, namespace="split")
        with pytest.raises(ValueError, match=f"runs its actors on the Ray cluster at {elsewhere}"):
            Team("split", store=postgres_url, system=system)


def test_a_team_whose_cluster_is_gone_moves_to_the_cluster_of_the_process_joining(
    ray_cluster: RayCluster, postgres_url: str
) -> None:
    with socket.socket() as gone:
        gone.bind(("127.0.0.1", 0))
        elsewhere = f"127.0.0.1:{gone.getsockname()[1]}"  # nothing listens there
    _record_cluster(postgres_url, "moved", elsewhere)
    system = RayActorSystem(address=ray_cluster.address, namespace="moved")
    with Team("moved", store=postgres_url, system=system):
        pass
    store = open_store(postgres_url)
    try:
        assert store.state_get("moved", "~team", "ray_cluster") == system.cluster()
    finally:
        store.close()
    with Team("moved", store=postgres_url, system=system):
        pass  # the recorded cluster is this one: joined again, not refused
