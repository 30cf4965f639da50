"""Costs that must not grow with history: resuming a team, and an actor's first call.

Run: .venv/bin/python benchmarks/bench_history.py [--quick]

``--quick``: sizes 100, 1k and 10k, 3 resumes per size (a smoke run of every section).

- ``Team.resume`` on a SQLite store holding 1k, 100k and 1M events (goal: 1M within 1.2x of
  1k). The log is never scanned on resume: each tool's last seq and the team's last
  position are single rows.
- A resumed actor's first call at 1k, 100k and 1M state rows: an actor that loads every row
  in ``on_start`` (the eager way) beside one that reads on demand through its
  ``StateNamespace`` (``get``, ``count``, ``iter_items``): goal < 50 ms at 1M rows.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from _results import record, record_scaling

from toolcards.runtime import Team, ToolActor


class Ledger(ToolActor):
    """On demand: a counter row, and one row per entry read only when asked for."""

    def add(self, key: str) -> int:
        with self.state.batch():
            size = int(self.state.get("meta:size") or 0) + 1
            self.state.put(f"doc:{key}", {"key": key})
            self.state.put("meta:size", size)
        return size

    def size(self) -> int:
        return int(self.state.get("meta:size") or 0)


class EagerLedger(Ledger):
    """The eager way: every row into memory before the first call."""

    def on_start(self) -> None:
        self.rows = dict(self.state.iter_items("doc:"))

    def size(self) -> int:
        return len(self.rows)


def _fill_events(path: Path, team: str, count: int) -> None:
    """Write ``count`` events straight into the store file (fast bulk load)."""
    with Team(team, store=path) as live:
        live.tool_actor("#Ledger", Ledger)
    db = sqlite3.connect(path)
    pos = db.execute("SELECT last_pos FROM teams WHERE team_id=?", (team,)).fetchone()[0]
    now = time.time()
    batch = 50_000
    for start in range(0, count, batch):
        rows = [
            (team, "#Ledger", i + 1, json.dumps({"i": i}), now, None, pos + i + 1)
            for i in range(start, min(start + batch, count))
        ]
        db.executemany(
            "INSERT INTO events (team_id, tool_id, seq, payload, timestamp, payload_type, "
            "team_pos) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    db.execute("INSERT OR REPLACE INTO tool_seqs VALUES (?, '#Ledger', ?)", (team, count))
    db.execute("UPDATE teams SET last_pos=? WHERE team_id=?", (pos + count, team))
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def _fill_rows(path: Path, team: str, count: int) -> None:
    with Team(team, store=path) as live:
        live.tool_actor("#Ledger", Ledger)
    db = sqlite3.connect(path)
    batch = 50_000
    for start in range(0, count, batch):
        rows = [
            (team, "#Ledger", f"doc:{i:09d}", json.dumps({"key": i}))
            for i in range(start, min(start + batch, count))
        ]
        db.executemany("INSERT INTO state VALUES (?, ?, ?, ?)", rows)
    db.execute(
        "INSERT OR REPLACE INTO state VALUES (?, '#Ledger', 'meta:size', ?)", (team, str(count))
    )
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def resume_ms(path: Path, team: str, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        resumed = Team.resume(team, path)
        samples.append(time.perf_counter() - t)
        resumed.stop()
    return min(samples) * 1000  # the least disturbed run: the machine is shared


def first_call_ms(path: Path, team: str, actor: type[Ledger]) -> float:
    with Team(team, store=path) as live:
        t = time.perf_counter()
        size = live.tool_actor("#Ledger", actor).within(600).ask(actor.size)
        elapsed = time.perf_counter() - t
    assert size > 0
    return elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 / 1k / 10k, 3 resumes each")
    quick = parser.parse_args().quick
    sizes = [100, 1_000, 10_000] if quick else [1_000, 100_000, 1_000_000]
    with tempfile.TemporaryDirectory() as tmp:
        resumes = {}
        for size in sizes:
            path = Path(tmp) / f"events-{size}.db"
            _fill_events(path, f"e{size}", size)
            resumes[size] = resume_ms(path, f"e{size}", 3 if quick else 9)
            print(f"Team.resume with {size:>9,} events: {resumes[size]:.2f} ms")
            record_scaling("Team.resume", size, resumes[size], "ms", size_unit="events")
        ratio = resumes[sizes[-1]] / resumes[sizes[0]]
        print(f"  ratio {sizes[-1]:,} / {sizes[0]:,}: {ratio:.2f}x (goal <= 1.2x)")
        record(f"Team.resume at {sizes[-1]:,} events", resumes[sizes[-1]], "ms")
        record(f"Team.resume ratio {sizes[-1]:,} / {sizes[0]:,} events", ratio, "x",
               goal="<= 1.2x")  # fmt: skip
        for size in sizes:
            path = Path(tmp) / f"rows-{size}.db"
            _fill_rows(path, f"r{size}", size)
            lazy = first_call_ms(path, f"r{size}", Ledger)
            eager = first_call_ms(path, f"r{size}", EagerLedger)
            print(f"first call of a resumed actor at {size:>9,} rows: on demand {lazy:.2f} ms, "
                  f"loading everything in on_start {eager:.1f} ms")  # fmt: skip
            record_scaling("resumed actor's first call, on demand", size, lazy, "ms",
                           size_unit="state rows")  # fmt: skip
            if size == sizes[-1]:
                record(f"actor first call at {size:,} state rows (on demand)", lazy, "ms",
                       peer="the same actor loading every row in on_start", peer_value=eager,
                       goal="< 50 ms")  # fmt: skip


if __name__ == "__main__":
    main()
