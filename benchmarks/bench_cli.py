"""The ``toolcards`` command's cost per invocation, beside ``python -c pass`` in the same run.

Commands on a SQLite config with one PlanningTool card (store, audit log and a policy
that lets the local principal call it): ``toolcards --help``, ``toolcards list`` and a
``toolcards call`` of ``update_planning`` in both argument forms (``key=value`` pairs, which
are typed by the tool's schema, and one ``--args`` JSON object). Each is run as a whole
process several times; the figure is the median CPU time (user + system of the child) and
its ratio to the median of ``python -c pass`` from the same interpreter. Goals (ratios):
``--help`` <= 2x, ``list`` <= 5x, ``call`` <= 8x. CPU time is used because wall time on a
loaded machine measures the machine; the median wall time is printed beside it.

``list`` is read from the listing cache written by the run before it (the config and policy
are unchanged); ``list (no listing cache)`` removes the cache's entry before each run, as an
edit of the config or the policy would, and makes the listing afresh.

Beside them, a Python that imports pydantic and builds one model: the least any command that
validates its input with pydantic pays before doing anything of its own.

Then ``list`` and the ``call`` again while a real ``toolcards serve --transport http`` runs on
the same config (the commands forward to it over its control socket; the figure is the
command's CPU time, not the server's), with the same goals; the server is stopped after.

Run: .venv/bin/python benchmarks/bench_cli.py [--quick]

``--quick`` runs each command once, without the warm-up run (a smoke run: cold caches).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _results import record

TOOLCARDS = Path(sys.executable).parent / "toolcards"
PYDANTIC_FLOOR = "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int\nM(x=1)"
"""What any command that validates its input with pydantic pays before its own work."""
GOALS = {
    "--help": 2.0,
    "list": 5.0,
    "list (no listing cache)": 5.0,
    "call key=value": 8.0,
    "call --args": 8.0,
    "list (forwarded)": 5.0,
    "call key=value (forwarded)": 8.0,
    "call --args (forwarded)": 8.0,
}
CONFIG = """\
team_id: bench-cli
store: team.db
cards:
  - {type: PlanningTool, vector_store: false}
policy: policy.yaml
audit: audit.db
principals:
  local: {id: alice, type: user, roles: [planner]}
"""
POLICY = """\
default_effect: deny
rules:
  - description: Planners plan
    callers: ["alice"]
    targets: ["*_planning*"]
    effect: allow
    conditions: {roles: [planner]}
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of ``argv`` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} failed ({done.returncode}): {done.stderr[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def _median(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    runs: int,
    warm: bool = True,
    before: Callable[[], None] = lambda: None,
) -> tuple[float, float]:
    """Median (CPU, wall) of ``runs`` runs, each after ``before()``."""
    if warm:
        before()
        _run(argv, cwd, env)  # one warm-up run: page cache, bytecode, the help cache
    samples = []
    for _ in range(runs):
        before()
        samples.append(_run(argv, cwd, env))
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def _forget_listings(cache: Path) -> Callable[[], None]:
    """Remove the listing cache's entries (a ``list`` made afresh, as after an edit)."""

    def forget() -> None:
        for entry in (cache / "toolcards").glob("list-*.json"):
            entry.unlink()

    return forget


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(config: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A real ``toolcards serve`` on ``config``, once its control socket answers."""
    from toolcards.surfaces.cli.control import find_server

    argv = [str(TOOLCARDS), "serve", "-c", str(config), "--transport", "http"]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [*argv, "--port", str(_free_port())],
            cwd=config.parent,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    deadline = time.monotonic() + 120
    while find_server(config) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc)
            raise SystemExit(f"toolcards serve did not start: {log.read_text()[-400:]}")
        time.sleep(0.1)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _report(name: str, cpu: float, wall: float, base_cpu: float) -> None:
    ratio = cpu / base_cpu
    goal = GOALS[name]
    verdict = "meets" if ratio <= goal else "misses"
    print(
        f"toolcards {name}: {cpu * 1000:.0f} ms CPU ({wall * 1000:.0f} ms wall), "
        f"{ratio:.2f}x python -c pass ({verdict} the goal of <= {goal:g}x)"
    )
    record(
        f"toolcards {name} CPU",
        cpu * 1000,
        "ms",
        peer="python -c pass",
        peer_value=base_cpu * 1000,
        goal=f"<= {goal:g}x",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="1 run each, no warm-up, instead of a warm-up and 7"
    )
    args = parser.parse_args()
    runs, warm = (1, False) if args.quick else (7, True)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        team = Path(tmp) / "team"
        team.mkdir()
        (team / "toolcards.yaml").write_text(CONFIG, encoding="utf-8")
        (team / "policy.yaml").write_text(POLICY, encoding="utf-8")
        past = time.time() - 60  # files edited a while ago (the cache takes no fresh edit)
        for name in ("toolcards.yaml", "policy.yaml"):
            os.utime(team / name, (past, past))
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"), COLUMNS="100")
        # bytecode as an installed package has it: the warm-up run writes what it compiled
        # (with PYTHONDONTWRITEBYTECODE set every run compiles the sources again)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        config = ["-c", str(team / "toolcards.yaml")]
        tasks = '[{"description": "Measure the command line"}]'
        call = [str(TOOLCARDS), "call", "update_planning"]
        commands = {
            "--help": [str(TOOLCARDS), "--help"],
            "list": [str(TOOLCARDS), "list", *config],
            "call key=value": [*call, f"create={tasks}", *config],
            "call --args": [*call, "--args", f'{{"create": {tasks}}}', *config],
        }
        base_cpu, base_wall = _median([sys.executable, "-c", "pass"], team, env, runs, warm)
        print(f"python -c pass: {base_cpu * 1000:.0f} ms CPU ({base_wall * 1000:.0f} ms wall)")
        record("python -c pass CPU", base_cpu * 1000, "ms")
        floor_cpu, floor_wall = _median(
            [sys.executable, "-c", PYDANTIC_FLOOR], team, env, runs, warm
        )
        print(
            f"python importing pydantic and building one model: {floor_cpu * 1000:.0f} ms CPU "
            f"({floor_wall * 1000:.0f} ms wall), {floor_cpu / base_cpu:.2f}x python -c pass "
            "(the least a command that validates with pydantic can cost)"
        )
        record(
            "pydantic import + one model CPU",
            floor_cpu * 1000,
            "ms",
            peer="python -c pass",
            peer_value=base_cpu * 1000,
        )
        for name, argv in commands.items():
            _report(name, *_median(argv, team, env, runs, warm), base_cpu)
        forget = _forget_listings(Path(env["XDG_CACHE_HOME"]))
        cpu, wall = _median(commands["list"], team, env, runs, warm, before=forget)
        _report("list (no listing cache)", cpu, wall, base_cpu)
        server = _serve(team / "toolcards.yaml", env, Path(tmp) / "serve.log")
        try:
            for name in ("list", "call key=value", "call --args"):
                cpu, wall = _median(commands[name], team, env, runs, warm)
                _report(f"{name} (forwarded)", cpu, wall, base_cpu)
        finally:
            _stop(server)


if __name__ == "__main__":
    main()
