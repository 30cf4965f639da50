"""Resume a team whose plan holds many tasks: ``Team.resume`` + bind + the first call.

Run: .venv/bin/python benchmarks/bench_resume.py [--quick] [--sizes 1000,100000,1000000]
     [--rounds N] [--timeout S] [--create]

For each size a fresh SQLite store gets ``#PlanningTool`` task rows: the first ones through
the tool (``update_planning``), the rest as bulk inserts through the public state API
(``team.state_of("#PlanningTool").put`` inside ``batch()``, 20k rows per transaction). The
team is stopped; then each round (a fresh process, so no cache of this one helps; imports
and first-use costs are paid on a throwaway in-memory team before the clock starts) times
``Team.resume`` + ``bind`` + the first ``get_planning_task`` of a task in the middle; with
``--create``, then the first ``update_planning`` that creates one task (its id continues from
the largest; the first round reads every row once, as the rows were written around the tool).
Sizes default to 1k, 100k and 1M rows (``--quick``: 300 and 3k, one round). The goal: at 1M
rows, within 2x the 1k figure and under 50 ms.
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

from _results import record, record_scaling

from toolcards import PlanningTool
from toolcards.runtime import Team
from toolcards.tools.planning.models import Task

TEAM = "bench-resume"
VIA_TOOL = 200
CHUNK = 20_000
STATUSES = ("pending", "started", "completed")

MEASURE = textwrap.dedent(
    """
    import json, sys, time
    from toolcards import PlanningTool
    from toolcards.runtime import Team
    store, team_id, probe, create = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
    with Team("warm-up", store=":memory:") as warm:  # imports and first-use costs, not timed
        warm_tools = {fn.__name__: fn for fn in warm.bind([PlanningTool()], "w").get_tools()}
        warm_tools["update_planning"](create=[{"description": "warm up"}])
        warm_tools["get_planning_task"](id=1)
    for module in ("knowledge_graph", "vector_store", "notification"):
        __import__(f"toolcards.tools.{module}.actor")
    __import__("toolcards.tools.team.activity")
    out = {}
    t = time.perf_counter()
    team = Team.resume(team_id, store=store)
    out["resume"] = time.perf_counter() - t
    try:
        factory = team.bind([PlanningTool()], member="bench")
        tools = {fn.__name__: fn for fn in factory.get_tools()}
        text = tools["get_planning_task"](id=probe)
        out["first_call"] = time.perf_counter() - t
        assert text.startswith(f"ID {probe} "), text[:200]
        if create:
            t = time.perf_counter()
            out["created"] = tools["update_planning"](create=[{"description": "after resume"}])
            out["first_create"] = time.perf_counter() - t
    finally:
        team.stop()
    print(json.dumps(out))
    """
)


def build(store: str, rows: int) -> None:
    """A stopped team whose plan holds ``rows`` tasks."""
    with Team(TEAM, store=store) as team:
        tools = {fn.__name__: fn for fn in team.bind([PlanningTool()], "bench").get_tools()}
        made = 0
        while made < min(rows, VIA_TOOL):
            batch = min(100, min(rows, VIA_TOOL) - made)
            tools["update_planning"](
                create=[{"description": f"task {made + i} via the tool"} for i in range(batch)]
            )
            made += batch
        state = team.state_of("#PlanningTool")
        for first in range(made + 1, rows + 1, CHUNK):
            with state.batch():
                for task_id in range(first, min(rows, first + CHUNK - 1) + 1):
                    task = Task(
                        id=task_id,
                        description=f"bulk task {task_id}",
                        status=STATUSES[task_id % 3],
                        owner=f"member-{task_id % 17}",
                        creator="bench",
                    )
                    state.put(f"task:{task_id}", task.model_dump())
        team.checkpoint()


def measure(store: str, probe: int, timeout: float, create: bool) -> dict[str, object]:
    """One resume in a fresh process; ``{"error": ...}`` when it failed or ran out of time."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, store, TEAM, str(probe), "1" if create else "0"],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"more than {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:200]}
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000", help="task rows, commas")
    parser.add_argument("--quick", action="store_true", help="sizes 300 and 3k, one round")
    parser.add_argument("--rounds", type=int, default=3, help="resumes per size (median)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per resume")
    parser.add_argument(
        "--create", action="store_true", help="then time the first update_planning create too"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.quick:
        sizes, args.rounds = [300, 3_000], 1  # above VIA_TOOL: the bulk rows are written too
    figures: dict[int, float] = {}
    for rows in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            store = str(Path(tmp) / "team.db")
            start = time.perf_counter()
            build(store, rows)
            print(f"{rows:>9,} rows: built in {time.perf_counter() - start:.1f} s")
            runs = [
                measure(store, rows // 2 or 1, args.timeout, args.create)
                for _ in range(args.rounds)
            ]
        failed = [r["error"] for r in runs if "error" in r]
        if failed:
            print(f"{rows:>9,} rows: resume + bind + first get_planning_task: {failed[0]}")
            continue
        first = statistics.median(float(str(r["first_call"])) for r in runs)
        resume = statistics.median(float(str(r["resume"])) for r in runs)
        figures[rows] = first
        print(
            f"{rows:>9,} rows: resume + bind + first get_planning_task {first * 1000:9.1f} ms "
            f"(Team.resume {resume * 1000:.1f} ms)"
        )
        if args.create:  # the first round loads the board (rows written around the tool)
            made = ", ".join(f"{float(str(r['first_create'])) * 1000:.1f} ms" for r in runs)
            print(
                f"{'':>16}first update_planning create per round: {made} -> {runs[-1]['created']}"
            )
        record(f"resume + first call, {rows} task rows", first * 1000, "ms")
        record_scaling("resume + first call", rows, first * 1000, "ms", size_unit="task rows")
    if len(figures) > 1:
        small, large = min(figures), max(figures)
        ratio = figures[large] / figures[small]
        print(f"{large:,} rows / {small:,} rows: {ratio:.2f}x (goal: <= 2x, and < 50 ms at 1M)")


if __name__ == "__main__":
    main()
