"""Processes that open one new shared SQLite file at the same moment (two `toolcards serve` on
one config opening its audit log) all open it: the switch to WAL answered "database is
locked" at once, without the busy timeout, to every opener but one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

OPENERS = 3
ROUNDS = 12

OPENER = textwrap.dedent(
    """
    import sys, time
    from toolcards.stores.audit_sql import SqliteAuditTable

    print("ready", flush=True)
    for line in sys.stdin:  # "<path> <start>": open the file at that instant
        path, start = line.rsplit(" ", 1)
        while time.time() < float(start):
            pass
        try:
            SqliteAuditTable(path, sync=False).close()
            print("ok", flush=True)
        except Exception as exc:
            print(f"{type(exc).__name__}: {exc}", flush=True)
    """
)


def test_openers_of_one_new_file_at_the_same_moment_all_open_it(tmp_path: Path) -> None:
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(OPENERS)
    ]
    try:
        for opener in openers:
            assert opener.stdout is not None and opener.stdout.readline() == "ready\n"
        failures: list[str] = []
        for round_ in range(ROUNDS):
            line = f"{tmp_path / f'audit-{round_}.db'} {time.time() + 0.2}\n"
            for opener in openers:
                assert opener.stdin is not None
                opener.stdin.write(line)
                opener.stdin.flush()
            for opener in openers:
                assert opener.stdout is not None
                answer = opener.stdout.readline().strip()
                if answer != "ok":
                    failures.append(answer)
        assert failures == []
    finally:
        for opener in openers:
            opener.kill()
            opener.wait(timeout=10)
