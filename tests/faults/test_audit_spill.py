"""Nothing governed goes unaudited while the audit database is down: the rows the writer
cannot commit are kept in a local spill file and written once the trail is back, also by
the next process when the first one ended before (real PostgreSQL, stopped and started)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from support.servers import PostgresServer
from toolcards.governance import AuditLog
from toolcards.governance.audit.log import AuditRecord
from toolcards.governance.audit.spill import AuditSpill


def _row(n: int, tool: str = "crm_read") -> AuditRecord:
    return AuditRecord(
        ts=time.time(),
        principal="alice",
        principal_type="user",
        roles=("sales",),
        surface="python",
        tool=tool,
        call_id=f"c{n}",
        args={"n": n},
        decision="allow",
        reason=None,
        outcome="ok",
        duration=0.001,
        error=None,
    )


def _calls(url: str) -> set[str]:
    with AuditLog(url, durability="sync", team_id="spill") as log:
        return {e.call_id or "" for e in log.query(limit=10_000)}


def test_rows_written_while_the_database_is_down_reach_it_when_it_is_back(
    pg: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    log = AuditLog(pg_url, team_id="spill", spill_dir=tmp_path)
    try:
        for n in range(20):
            log.record(_row(n))
        assert log.flush()
        pg.stop()
        for n in range(20, 120):
            log.record(_row(n))
        assert log.flush(60)
        assert log.spill.spilled == 100 and log.spill.dropped == 0
        pg.start()
        log.record(_row(120))
        assert log.flush(60)
    finally:
        log.close()
    assert _calls(pg_url) == {f"c{n}" for n in range(121)}
    assert list(tmp_path.iterdir()) == []  # the spill file is gone once written


ENDS_EARLY = textwrap.dedent(
    """
    import sys, time
    from toolcards.governance import AuditLog
    from toolcards.governance.audit.log import AuditRecord
    log = AuditLog(sys.argv[1], durability="sync", team_id="spill", spill_dir=sys.argv[2])
    print("open", flush=True)
    sys.stdin.readline()  # the server is stopped now
    for n in range(500, 530):
        log.record(AuditRecord(time.time(), "alice", "user", (), "python", "while_down",
                               f"c{n}", {"n": n}, decision="allow", outcome="ok"))
    log.close()
    print(log.spill.spilled, flush=True)
    """
)


def test_the_next_process_writes_what_an_ended_one_kept(
    pg: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    with AuditLog(pg_url, durability="sync", team_id="spill") as log:
        log.record(_row(1))  # the table exists
    child = subprocess.Popen(
        [sys.executable, "-c", ENDS_EARLY, pg_url, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    try:
        assert child.stdout.readline().strip() == "open"
        pg.stop()
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err[-2000:]
    assert out.strip() == "30"
    assert len(list(tmp_path.iterdir())) == 1  # its spill file outlived it
    pg.start()
    with AuditLog(pg_url, durability="sync", team_id="spill", spill_dir=tmp_path) as log:
        assert log.spill.pending
        log.record(_row(2))
    assert _calls(pg_url) == {"c1", "c2", *(f"c{n}" for n in range(500, 530))}
    assert list(tmp_path.iterdir()) == []


def test_a_full_spill_counts_what_it_could_not_keep(tmp_path: Path) -> None:
    spill = AuditSpill("trail", "team", tmp_path, max_bytes=2_000)
    rows = [(float(n), "alice", "user", "", "python", "t", f"c{n}", "d", "{}",
             "allow", None, "ok", 1.0, None) for n in range(100)]  # fmt: skip
    spill.add(rows)
    assert 0 < spill.spilled < 100 and spill.spilled + spill.dropped == 100
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 2_000


def test_rows_taken_before_a_failed_replay_are_not_offered_again(tmp_path: Path) -> None:
    spill = AuditSpill("trail", "team", tmp_path)
    rows = [(float(n), "alice", "user", "", "python", "t", f"c{n}", "d", "{}",
             "allow", None, "ok", 1.0, None) for n in range(1200)]  # fmt: skip
    spill.add(rows)
    taken: list[tuple[object, ...]] = []

    def flaky(batch: list[tuple[object, ...]]) -> None:
        if len(taken) >= 500:
            raise ConnectionError("down again")
        taken.extend(batch)

    with contextlib.suppress(ConnectionError):
        spill.replay(flaky)
    spill.replay(taken.extend)
    assert [r[6] for r in taken] == [f"c{n}" for n in range(1200)]
    assert not spill.pending


_ENDED = 5_000_000  # past any pid_max: no process has these ids


def _kept(n: int) -> tuple[object, ...]:
    return (float(n), "alice", "user", "", "python", "t", f"c{n}", "d", "{}",
            "allow", None, "ok", 1.0, None)  # fmt: skip


def _down(batch: list[tuple[object, ...]]) -> None:
    raise ConnectionError("the trail is down")


def _as_process(monkeypatch: pytest.MonkeyPatch, pid: int, tmp_path: Path) -> AuditSpill:
    monkeypatch.setattr(os, "getpid", lambda: pid)
    return AuditSpill("trail", "team", tmp_path)


def test_a_file_taken_over_by_process_after_process_keeps_a_short_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(20):  # each process of a long outage takes the files over, then ends
        spill = _as_process(monkeypatch, _ENDED + n, tmp_path)
        with contextlib.suppress(ConnectionError):
            spill.replay(_down)
        spill.add([_kept(n)])
        assert max(len(p.name) for p in tmp_path.iterdir()) < 100
    taken: list[tuple[object, ...]] = []
    _as_process(monkeypatch, _ENDED + 20, tmp_path).replay(taken.extend)  # the trail is back
    assert sorted(str(r[6]) for r in taken) == sorted(f"c{n}" for n in range(20))
    assert list(tmp_path.iterdir()) == []


def test_a_file_named_by_an_older_version_past_the_longest_name_is_taken_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spill = _as_process(monkeypatch, _ENDED, tmp_path)
    spill.add([_kept(1)])
    name = spill.path.name
    for n in range(1, 8):  # the name grew at each takeover, to 253 characters
        name = f"{spill.prefix}{_ENDED + n}.{name}"
    spill.path.rename(tmp_path / name)
    taken: list[tuple[object, ...]] = []
    _as_process(monkeypatch, _ENDED + 10, tmp_path).replay(taken.extend)
    assert [r[6] for r in taken] == ["c1"]
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_cannot_be_taken_over_holds_up_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = _as_process(monkeypatch, _ENDED, tmp_path)
    stuck.add([_kept(1)])
    os.utime(stuck.path, (0, 0))  # the oldest file: replayed first
    _as_process(monkeypatch, _ENDED + 1, tmp_path).add([_kept(2)])
    spill = _as_process(monkeypatch, _ENDED + 2, tmp_path)
    spill.add([_kept(3)])  # this process's own rows
    rename = os.rename

    def failing(source: Path, target: Path) -> None:
        if Path(source) == stuck.path:
            raise OSError(errno.EIO, "I/O error", str(source))
        rename(source, target)

    monkeypatch.setattr(os, "rename", failing)
    taken: list[tuple[object, ...]] = []
    with caplog.at_level(logging.ERROR):
        spill.replay(taken.extend)
        spill.replay(taken.extend)
    assert sorted(str(r[6]) for r in taken) == ["c2", "c3"]
    assert [p.name for p in tmp_path.iterdir()] == [stuck.path.name]
    assert spill.pending  # its rows wait for a later try
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
