"""Persist one mutation, this checkout beside another revision, on SQLite and PostgreSQL.

Run: .venv/bin/python benchmarks/bench_persist_versions.py [--against REV] [--rounds N]

The other revision (default ``HEAD~1``) is checked out into a temporary worktree; both trees
measure in alternating subprocesses against one throwaway PostgreSQL server (fsync on: the
server's default, as in production) and fresh SQLite files, so load on the machine hits both
alike. Prints the p50 of each tree and the change in percent.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from support.servers import PostgresServer  # noqa: E402

MEASURE = textwrap.dedent(
    """
    import json, sys, time
    from toolcards.runtime import Team, ToolActor

    class Counter(ToolActor):
        def add(self, i):
            with self.state.batch():
                self.state.put(f"k{i:08d}", {"i": i})

    store, team_id, n, warm = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with Team(team_id, store=store) as team:
        counter = team.tool_actor("#Counter", Counter)
        for i in range(warm):
            counter.ask(Counter.add, i)
        samples = []
        for i in range(warm, warm + n):
            t = time.perf_counter()
            counter.ask(Counter.add, i)
            samples.append(time.perf_counter() - t)
    samples.sort()
    print(json.dumps(samples[len(samples) // 2] * 1e6))
    """
)


def _measure(tree: Path, store: str, team_id: str, n: int, warm: int = 20) -> float:
    """The p50 of ``n`` mutations after ``warm`` unmeasured ones, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, store, team_id, str(n), str(warm)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="HEAD~1", help="the revision to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-n", type=int, default=300, help="mutations per measurement")
    parser.add_argument(
        "--quick", action="store_true", help="one round of 10 mutations after 2 unmeasured"
    )
    args = parser.parse_args()
    warm = 20
    if args.quick:
        args.rounds, args.n, warm = 1, 10, 2
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(other), args.against],
            check=True,
            capture_output=True,
        )
        server = PostgresServer(fsync=True).start()
        try:
            figures: dict[tuple[str, str], list[float]] = {}
            made = 0
            for r in range(args.rounds):
                for name, tree in (("this", ROOT), (args.against, other)):
                    made += 1
                    pg = server.fresh_database(f"v{made}")
                    lite = str(Path(tmp) / f"v{made}.db")
                    for backend, store in (("PostgreSQL", pg), ("SQLite", lite)):
                        p50 = _measure(tree, store, f"t{r}", args.n, warm)
                        figures.setdefault((backend, name), []).append(p50)
        finally:
            server.stop()
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(other)],
                check=False,
                capture_output=True,
            )
    for backend in ("SQLite", "PostgreSQL"):
        mine = statistics.median(figures[(backend, "this")])
        theirs = statistics.median(figures[(backend, args.against)])
        change = (mine - theirs) / theirs * 100
        print(
            f"persist one mutation, {backend}: this checkout p50 {mine:.0f} us, "
            f"{args.against} p50 {theirs:.0f} us ({change:+.1f}%)"
        )


if __name__ == "__main__":
    main()
