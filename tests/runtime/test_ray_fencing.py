"""Fencing (issue #32 item 9): a worker that lost its node stops. On the real cluster a node is
added for the test, a tool actor is placed on it, and that node's raylet is SIGKILLed: the
actor's worker process ends within seconds instead of serving on beside the copy Ray would
restart elsewhere. The fence itself is checked on plain processes too."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.cluster_models import Whereabouts
from toolcards.runtime import RayActorSystem

pytestmark = pytest.mark.timeout(180)

ORPHAN = textwrap.dedent(
    """
    import subprocess, sys
    child = subprocess.Popen(
        [sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    child.stdout.readline()  # its fence noted this process as its parent
    print(child.pid, flush=True)  # the parent ends here; the child is re-parented
    """
)
FENCED = textwrap.dedent(
    """
    import time
    from toolcards.runtime.ray_fence import NodeFence
    NodeFence("orphan", poll=0.05).watch()
    print("watching", flush=True)
    time.sleep(120)
    """
)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ended_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.1)
    return False


def test_a_process_whose_parent_dies_stops_by_its_fence() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ORPHAN, FENCED], capture_output=True, text=True, timeout=60
    )
    child = int(done.stdout.split()[0])
    try:
        assert _ended_within(child, 30), "the re-parented process kept running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_process_whose_parent_lives_keeps_running() -> None:
    proc = subprocess.Popen([sys.executable, "-c", FENCED])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)  # the fence must not fire while the parent lives
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_actor_options_cannot_override_what_the_system_sets() -> None:
    with pytest.raises(TypeError, match="lifetime, name"):
        RayActorSystem(actor_options={"name": "x", "lifetime": None})


def test_the_worker_of_a_lost_node_stops_at_once(ray_cluster: Any, tmp_path: Path) -> None:
    cluster = ray_cluster.cluster
    node = cluster.add_node(
        num_cpus=1, resources={"fence-node": 1}, object_store_memory=100 * 1024 * 1024
    )
    try:
        cluster.wait_for_nodes()
        system = RayActorSystem(
            address=ray_cluster.address,
            namespace=f"fence-{tmp_path.name}",
            max_restarts=0,
            actor_options={"resources": {"fence-node": 0.01}},
        )
        handle = system.spawn("#fenced", Whereabouts, start_timeout=120)
        pid, raylet = handle.within(60).ask(Whereabouts.where)
        assert "raylet" in Path(f"/proc/{raylet}/cmdline").read_text()
        os.kill(raylet, signal.SIGKILL)  # the node is lost; its worker is re-parented
        assert _ended_within(pid, 30), "the worker of the lost node kept running"
    finally:
        with contextlib.suppress(Exception):
            cluster.remove_node(node, allow_graceful=False)
