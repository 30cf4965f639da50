"""Which Ray cluster a team's actors live on: a shared store never gets a private cluster per
process, and a spawn tells the process that started an actor from one that joined it (real
Ray, real PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from support.servers import RayCluster
from toolcards.runtime import RayActorSystem

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
