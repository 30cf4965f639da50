"""Members placed on the cluster: a member that runs as a Ray actor, on a real two-node cluster
with PostgreSQL. It answers from its worker process, uses the team's shared tool actors,
survives a SIGKILL of its worker with its conversation, is fired from the hiring process,
answers ``send`` from a process that does not hold it, and hires within the host's cap."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest
from pydantic_ai.models.function import FunctionModel

from runtime.cluster_models import hire, respond
from support.scripted import wait_until
from support.servers import RayCluster
from toolcards import PlanningTool, TeamTool
from toolcards.governance import AuditLog, Policy
from toolcards.runtime import RayActorSystem, RoleProfile, Team
from toolcards.runtime.cluster_member import ClusterMember
from toolcards.tools.planning.actor import PlanningActor, PlanningConfig


def _profile(**extra: Any) -> RoleProfile:
    return RoleProfile(
        role="remote",
        model=FunctionModel(respond),
        cards=[PlanningTool(vector_store=False)],
        messaging=False,
        placement="cluster",
        **extra,
    )


@pytest.fixture
def ray_team(postgres_url: str, ray_cluster: RayCluster) -> Any:
    teams: list[Team] = []

    def make(team_id: str, *, resume: str | None = None, **kwargs: Any) -> Team:
        namespace = resume or f"cm-{team_id}-{time.monotonic_ns()}"
        # a bound, not a measurement: a loaded machine starts a worker process slowly
        system = RayActorSystem(namespace=namespace, start_timeout=180)
        opener = Team.resume if resume else Team
        team = opener(team_id, store=postgres_url, system=system, **kwargs)
        teams.append(team)
        return team

    yield make
    for team in teams:
        team.stop(everywhere=True)


def _pid_of(team: Team, name: str) -> int:
    handle = team.system.lookup(name)
    assert handle is not None
    return int(handle.within(30).ask(ClusterMember.pid))


@pytest.mark.timeout(480)
def test_a_member_placed_on_the_cluster_runs_in_a_worker_and_survives_its_death(
    ray_team: Any,
) -> None:
    team = ray_team("placed", profiles=[_profile()])
    name = team.hire("remote", "rita")
    assert name == "@rita"
    assert [(m.name, m.role) for m in team.members()] == [("@rita", "remote")]
    first = team.send(name, "where are you?", timeout=60)
    pid = _pid_of(team, name)
    assert first == f"pid {pid} prompts 1"
    assert pid != os.getpid()  # the model ran in the worker process

    assert team.send(name, "plan ship it", timeout=60) == "planned: created ids: [1]"
    board = team.tool_actor("#PlanningTool", PlanningActor, PlanningConfig(vector_store=None))
    assert [t.description for t in board.ask(PlanningActor.tasks)] == ["ship it"]

    os.kill(pid, signal.SIGKILL)  # Ray restarts the actor; it adopts the member again

    def restarted() -> bool:
        try:
            return _pid_of(team, name) != pid
        except Exception:
            return False

    # a bound, not a measurement: on a loaded machine Ray starts the replacement worker as
    # slowly as the first one (the system's start_timeout above)
    assert wait_until(restarted, timeout=180)
    again = team.send(name, "still there?", timeout=60)
    assert again == f"pid {_pid_of(team, name)} prompts 3"  # the conversation was kept

    assert team.fire(name) is True
    assert team.members() == []
    assert team.system.lookup(name) is None
    kinds = [e.payload["event"] for e in team.events() if e.tool_id == "team"]
    assert {"member_hired", "member_adopted", "member_fired"} <= set(kinds)


@pytest.mark.timeout(300)
def test_a_stopped_cluster_member_is_placed_again_on_resume(ray_team: Any) -> None:
    team = ray_team("placed4", profiles=[_profile()])
    name = team.hire("remote", "rex")
    first_pid = _pid_of(team, name)
    assert team.send(name, "hello", timeout=60) == f"pid {first_pid} prompts 1"
    team.stop()  # the member belongs to the cluster: it keeps running
    assert team.system.lookup(name) is not None
    team.system.stop([name], 10)  # as `stop(everywhere=True)` does for placed members
    resumed = ray_team("placed4", resume=team.system.namespace, profiles=[_profile()])
    assert resumed.is_member(name)
    pid = _pid_of(resumed, name)
    assert pid != first_pid
    assert resumed.send(name, "again", timeout=60) == f"pid {pid} prompts 2"
    restored = [e.payload for e in resumed.events() if e.tool_id == "team"]
    assert {"event": "member_restored", "name": name, "role": "remote"}.items() <= next(
        p for p in restored if p.get("event") == "member_restored"
    ).items()


OTHER = textwrap.dedent(
    """
    import sys, threading
    from toolcards.runtime import Team

    team = Team(sys.argv[2], store=sys.argv[1])  # Pykka: another holder of the same team
    print(team.is_member(sys.argv[3]), flush=True)
    print(team.send(sys.argv[3], "hello", timeout=60), flush=True)
    message = team.post(sys.argv[3], "plan from afar")
    done = threading.Event()
    replies = []

    def watch(event):
        if isinstance(event.payload, dict) and event.payload.get("reply_to") == message.id:
            replies.append(event.payload["text"])
            done.set()

    sub = team.subscribe(watch)
    done.wait(60)
    sub.close()
    print(replies[0] if replies else "no reply", flush=True)
    team.stop()
    """
)


@pytest.mark.timeout(300)
def test_a_post_and_a_send_from_another_process_reach_the_cluster_member(
    ray_team: Any, postgres_url: str
) -> None:
    audit = AuditLog(postgres_url, team_id="placed2")
    policy = Policy.from_dict({"default_effect": "allow"})
    team = ray_team("placed2", profiles=[_profile()], policy=policy, audit=audit)
    name = team.hire("remote")
    assert name == "@remote-1"
    with pytest.raises(ValueError, match="already taken"):
        team.hire("remote", "remote-1")
    other = subprocess.run(
        [sys.executable, "-c", OTHER, postgres_url, "placed2", name],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert other.returncode == 0, other.stderr[-2000:]
    member, answer, reply = other.stdout.splitlines()
    assert member == "True"
    assert answer == f"pid {_pid_of(team, name)} prompts 1"  # whole, from the worker
    assert reply == "planned: created ids: [1]"

    def audited() -> bool:  # governed in the worker, written to the one trail
        rows = audit.query(principal=f"agent.{name}", tool="update_planning")
        return [(r.decision, r.outcome) for r in rows] == [("allow", "ok")]

    try:
        assert wait_until(audited, timeout=30)
    finally:
        audit.close()
    team.stop(everywhere=True)  # placed members stop too (they stay on the roster)
    assert team.system.lookup(name) is None


@pytest.mark.timeout(300)
def test_a_member_on_the_cluster_hires_within_the_hosts_cap(ray_team: Any) -> None:
    # before: the worker joined the team with the default cap (64) and hired past the host's
    profile = RoleProfile(
        role="remote",
        model=FunctionModel(hire),
        cards=[TeamTool()],
        messaging=False,
        placement="cluster",
    )
    team = ray_team("capped", profiles=[profile], max_members=1)
    name = team.hire("remote")
    answer = team.send(name, "hire 2", timeout=180)
    assert answer.startswith("tool said: hired 0 of 2"), answer
    assert answer.count("limited to 1 members") == 2, answer
    assert [m.name for m in team.members()] == [name]
    assert team.system.names() == [name]


def test_cluster_placement_needs_a_distributed_team(tmp_path: Any, postgres_url: str) -> None:
    with Team("solo", store=str(tmp_path / "t.db"), profiles=[_profile()]) as team:
        with pytest.raises(ValueError, match="placement='cluster'"):
            team.hire("remote", "x")
        assert team.members() == []
        assert not team.is_member("@x")
    with Team("pg-solo", store=postgres_url, profiles=[_profile()]) as team:
        with pytest.raises(ValueError, match="system='ray'"):
            team.hire("remote", "x")
        assert team.members() == []


def test_what_cannot_travel_to_a_worker_is_named(ray_team: Any) -> None:
    lock = threading.Lock()

    async def approver(request: Any) -> bool:
        with lock:
            return False

    team = ray_team("placed3", profiles=[_profile()], policy=Policy.allow_all(), approver=approver)
    with pytest.raises(ValueError, match="the team's approver cannot be sent"):
        team.hire("remote", "y")
    assert team.members() == []
