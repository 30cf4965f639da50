"""Distributed teams: Ray vs Pykka asks, PostgreSQL vs SQLite persistence, throughput from many
processes, and live event latency across processes.

Run: .venv/bin/python benchmarks/bench_distributed.py [--quick] [--part all|mixed]

``--part mixed`` runs only the mixed load: 2, 4 and 8 processes of one team each creating
tasks and graph entities and changing entities as fast as they can (plain tool calls), on
Pykka copies (each process its own copy of each tool actor) beside the one cluster-wide Ray
actor of each tool, in the same run: total mutations/s, p50 and p99 of one mutation, and
total throughput at 8 processes over 2 (goal >= 1.0: adding processes never loses throughput),
and the server's WAL flushes per mutation (one each: a team's commits never share a flush).

Starts its own throwaway PostgreSQL server (initdb into a temp dir, 127.0.0.1, with the server's
default ``fsync=on``: every figure is for commits that reach the disk) and a local one-node
Ray; needs the ``postgres`` and ``ray`` extras and the PostgreSQL server binaries.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import psycopg

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

from _results import record, record_scaling

from toolcards.runtime import Team, ToolActor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.servers import PostgresServer


class Echo(ToolActor):
    def ping(self, value: Any) -> Any:
        return value


class Index(ToolActor):
    def fill(self, start: int, count: int) -> int:
        with self.state.batch():
            for i in range(start, start + count):
                self.state.put(f"doc:{i:09d}", {"text": f"document {i}"})
        return count

    def add(self, i: int) -> None:
        with self.state.batch():
            self.state.put(f"doc:{i:09d}", {"text": f"document {i}"})
            self.emit({"added": [i]})


def p50_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def ask_p50(team: Team, n: int) -> float:
    echo = team.tool_actor("#Echo", Echo)
    for _ in range(min(n, 200)):
        echo.ask(Echo.ping, 1)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        echo.ask(Echo.ping, 1)
        samples.append(time.perf_counter() - t)
    return p50_us(samples)


def send_p50_ms(team: Team, n: int) -> float:
    """``team.send`` round trips to its one member (a TestModel turn each), p50 in ms."""
    name = team.hire("m")
    for _ in range(3):
        team.send(name, "hello", timeout=60)
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        team.send(name, "hello", timeout=60)
        samples.append(time.perf_counter() - start)
    team.fire(name)
    return p50_us(samples) / 1000


def member_profile(placement: str) -> Any:
    from toolcards.runtime import RoleProfile

    return RoleProfile(role="m", model="test", messaging=False, max_history=4, placement=placement)


def persist_p50(store: str, team_id: str, size: int, n: int) -> float:
    with Team(team_id, store=store) as team:
        index = team.tool_actor("#Index", Index)
        for start in range(0, size, 5000):
            index.within(300).ask(Index.fill, start, min(5000, size - start))
        for i in range(size, size + 20):
            index.ask(Index.add, i)
        samples = []
        for i in range(size + 20, size + 20 + n):
            t = time.perf_counter()
            index.ask(Index.add, i)
            samples.append(time.perf_counter() - t)
    return p50_us(samples)


WORKER = textwrap.dedent(
    """
    import asyncio, sys, time
    from toolcards.core import ToolCard
    from toolcards.governance import GovernedToolset, Identity, Policy
    from toolcards.runtime import Team
    from toolcards.tools._common.team import team_observer
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    class Slow(ToolCard):
        def get_tools(self):
            def slow_io(n: int) -> int:
                '''Wait on I/O for 20 ms (a network call), then note it on the team.'''
                time.sleep(0.02)
                team_observer(self).notify_event({"done": n})
                return n
            return [slow_io]

    url, seconds = sys.argv[1], float(sys.argv[2])
    team = Team("throughput", store=url)
    factory = team.bind([Slow()], member=f"w{sys.argv[3]}")
    policy = Policy.from_dict({"default_effect": "allow", "rules": []})
    governed = GovernedToolset(factory.toolset(), policy=policy, identity=Identity("agent.w"))

    async def main() -> int:
        ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        tools = await governed.get_tools(ctx)
        tool = tools["slow_io"]
        print("ready", flush=True)
        sys.stdin.readline()
        done, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            await governed.call_tool("slow_io", {"n": done}, ctx, tool)
            done += 1
        return done

    print(asyncio.run(main()), flush=True)
    team.stop()
    """
)


def started(
    script: str, argvs: list[list[str]], quiet: bool = False
) -> list[subprocess.Popen[str]]:
    """One process of ``script`` per argument list, each started once all are ready."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if quiet else None,
            text=True,
        )
        for argv in argvs
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


def throughput(url: str, processes: int, seconds: float) -> float:
    procs = started(WORKER, [[url, str(seconds), str(i)] for i in range(processes)])
    total = 0
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 60)
        total += int(out.strip().splitlines()[-1])
    return total / seconds


MIXED = textwrap.dedent(
    """
    import json, sys, time
    from toolcards import KnowledgeGraphTool, PlanningTool
    from toolcards.runtime import Team

    url, seconds, me = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    ray = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
    system = None
    if ray is not None:  # the cluster's one actor of each tool
        from toolcards.runtime import RayActorSystem
        system = RayActorSystem(address=ray["address"], namespace=ray["namespace"])
    team = Team("mixed", store=url, system=system)
    cards = [PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)]
    tools = {t.__name__: t for t in team.bind(cards, member=me).get_tools()}
    plan, graph = tools["update_planning"], tools["update_graph"]

    def mutate(i):
        if i % 3 == 0:
            plan(create=[{"description": f"task {i} of {me}"}])
        elif i % 3 == 1:
            graph(create_entities=[{"name": f"{me}-{i}", "entity_type": "thing",
                                    "description": f"entity {i} of {me}",
                                    "observations": [f"seen by {me}"]}])
        else:  # an observation on the entity just made, a relation to an earlier one
            graph(update_entities=[{"name": f"{me}-{i - 1}", "add_observations": [f"note {i}"]}],
                  create_relations=[{"from_entity": f"{me}-{i - 1}",
                                     "to_entity": f"{me}-{max(i - 4, 1)}",
                                     "relation_type": "follows"}])

    for i in range(3):
        mutate(i)
    print("ready", flush=True)
    sys.stdin.readline()
    samples, i, deadline = [], 3, time.monotonic() + seconds
    cpu = time.process_time()
    while time.monotonic() < deadline:
        start = time.perf_counter()
        mutate(i)
        samples.append(time.perf_counter() - start)
        i += 1
    print(json.dumps({"samples": samples, "cpu": time.process_time() - cpu}), flush=True)
    team.stop()
    """
)


def mixed_load(
    url: str, processes: int, seconds: float, ray: dict[str, str] | None = None
) -> tuple[float, float, float, float]:
    """Mutations/s of ``processes`` processes together, the p50 and p99 of one (ms), and the
    CPU time the processes spent per mutation (ms; a Ray actor's worker not included)."""
    extra = [json.dumps(ray)] if ray is not None else []
    argvs = [[url, str(seconds), f"w{i}", *extra] for i in range(processes)]
    procs = started(MIXED, argvs, quiet=ray is not None)  # quiet: Ray's connection lines
    samples: list[float] = []
    cpu = 0.0
    for proc in procs:
        out, _ = proc.communicate(timeout=seconds + 120)
        found = json.loads(out.strip().splitlines()[-1])
        samples += found["samples"]
        cpu += found["cpu"]
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    median = statistics.median(samples) * 1000
    return len(samples) / seconds, median, p99 * 1000, cpu / len(samples) * 1000


def wal_flushes(url: str) -> int:
    """The WAL flushes the server made so far (``pg_stat_wal``, for the whole server: one load
    runs at a time)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    return int(row[0]) if row else 0


def mixed_part(server: PostgresServer, quick: bool) -> None:
    """Pykka copies beside Ray's one actor per tool, 2, 4 and 8 processes, same run."""
    import ray

    seconds = 4.0 if quick else 20.0
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    address = ray.get_runtime_context().gcs_address
    rates: dict[str, dict[int, float]] = {"Pykka copies": {}, "Ray": {}}
    try:
        for procs in (2, 4, 8):
            for label in rates:
                url = server.fresh_database(f"mixed{procs}{label[0].lower()}")
                on_ray = {"address": address, "namespace": f"mixed{procs}"}
                flushed = wal_flushes(url)
                rate, p50, p99, cpu = mixed_load(
                    url, procs, seconds, on_ray if label == "Ray" else None
                )
                flushes = (wal_flushes(url) - flushed) / (rate * seconds)
                rates[label][procs] = rate
                print(f"mixed mutations, {procs} processes, {label}: {rate:.1f}/s, "
                      f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, {cpu:.1f} ms CPU each in the "
                      f"callers' processes, {flushes:.2f} WAL flushes each")  # fmt: skip
            record(f"mixed mutations/s from {procs} processes, Pykka copies",
                   rates["Pykka copies"][procs], "/s", peer="Ray (one actor per tool)",
                   peer_value=rates["Ray"][procs])  # fmt: skip
    finally:
        ray.shutdown()
    pykka, on_ray = rates["Pykka copies"], rates["Ray"]
    print(f"total throughput 8 over 2 processes: Pykka copies {pykka[8] / pykka[2]:.2f}x, "
          f"Ray {on_ray[8] / on_ray[2]:.2f}x (goal >= 1.0)")  # fmt: skip
    record("mixed mutations/s, 8 processes over 2, Pykka copies", pykka[8] / pykka[2], "x",
           peer="Ray", peer_value=on_ray[8] / on_ray[2], goal=">= 1.0")  # fmt: skip


SUBSCRIBER = textwrap.dedent(
    """
    import sys, threading, time
    from toolcards.runtime import Team
    url, count = sys.argv[1], int(sys.argv[2])
    team = Team("latency", store=url)
    seen, done = [], threading.Event()
    def on_event(event):
        if event.tool_id == "probe":
            seen.append(time.time() - event.payload["at"])
            if len(seen) >= count:
                done.set()
    team.subscribe(on_event, since=team.log.position)
    print("ready", flush=True)
    done.wait(120)
    print(" ".join(f"{s:.6f}" for s in seen), flush=True)
    team.stop()
    """
)


def event_latency(url: str, count: int) -> float:
    with Team("latency", store=url) as writer:
        sub = subprocess.Popen(
            [sys.executable, "-c", SUBSCRIBER, url, str(count)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert sub.stdout is not None and sub.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        for _ in range(count):
            writer.log.append("probe", {"at": time.time()})
            time.sleep(0.02)
        out, _ = sub.communicate(timeout=120)
    samples = [float(x) for x in out.split()]
    return p50_us(samples) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--part", default="all", choices=("all", "mixed"))
    args = parser.parse_args()
    quick = args.quick
    n = 300 if quick else 2000
    server = PostgresServer(fsync=True).start()
    try:
        if args.part == "mixed":
            mixed_part(server, quick)
            return
        import ray

        from toolcards.runtime import RayActorSystem

        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        with Team("bench-pykka") as local:
            pykka = ask_p50(local, n)
        with Team("bench-member", profiles=[member_profile("process")]) as local:
            local_send = send_p50_ms(local, n // 10)
        ray_team = Team(
            "bench-ray",
            store=server.fresh_database("ray"),
            system=RayActorSystem(),
            profiles=[member_profile("cluster")],
        )
        try:
            ray_p50 = ask_p50(ray_team, n)
            placed_send = send_p50_ms(ray_team, n // 10)
        finally:
            ray_team.stop(everywhere=True)
            ray.shutdown()
        print(f"ask round trip p50: Ray {ray_p50:.0f} us, Pykka {pykka:.1f} us (same run)")
        record("ask round trip to a Ray tool actor, p50", ray_p50, "us",
               peer="Pykka (embedded)", peer_value=pykka)  # fmt: skip
        print(f"send to a member (one model turn) p50: placed on Ray {placed_send:.1f} ms, "
              f"a thread of this process {local_send:.1f} ms (same run)")  # fmt: skip
        record("send to a member placed on the cluster (Ray + PostgreSQL), p50", placed_send,
               "ms", peer="member in this process (embedded)", peer_value=local_send)  # fmt: skip

        sizes = [1000, 10_000] if quick else [1000, 100_000]
        with tempfile.TemporaryDirectory() as tmp:
            for size in sizes:
                pg = persist_p50(server.fresh_database(f"p{size}"), f"pg{size}", size, n // 4)
                lite = persist_p50(str(Path(tmp) / f"s{size}.db"), f"sq{size}", size, n // 4)
                record_scaling("persist one mutation (PostgreSQL)", size, pg, "us",
                               size_unit="state rows")  # fmt: skip
                print(f"persist one mutation at {size:>7,} rows: PostgreSQL (fsync on) p50 "
                      f"{pg:.0f} us, SQLite p50 {lite:.0f} us")  # fmt: skip
                record(f"persist one mutation on PostgreSQL (fsync on) at {size:,} rows, p50",
                       pg, "us", peer="SQLite (WAL file)", peer_value=lite)  # fmt: skip

        seconds = 3.0 if quick else 8.0
        url = server.fresh_database("through")
        single = throughput(url, 1, seconds)
        print(f"governed calls, I/O-bound tool (20 ms): 1 process {single:.1f}/s")
        for procs in (2, 4, 8):
            rate = throughput(url, procs, seconds)
            ratio = rate / (single * procs)
            print(
                f"  {procs} processes: {rate:.1f}/s = {ratio:.2f} x {procs} x single (goal >= 0.8)"
            )
            record(f"governed calls/s from {procs} processes, one team", rate, "/s",
                   goal=f">= {0.8 * procs * single:.0f}/s (0.8 x N x single)")  # fmt: skip

        latency = event_latency(server.fresh_database("live"), 50 if quick else 200)
        print(f"live event, process A -> subscriber in process B: p50 {latency:.2f} ms")
        record("live event latency across processes, p50", latency, "ms", goal="< 1000 ms")

        mixed_part(server, quick)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
