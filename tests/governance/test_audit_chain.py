"""Each team's audit rows form a hash chain: a check names the first row changed, removed
or reordered (and rows removed from the end, or written around the trail), in one line, on
SQLite and PostgreSQL; many processes writing one team's rows to PostgreSQL at once keep one
valid chain; `toolcards audit verify` prints the line and exits non-zero when it is broken."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from surfaces.surface_support import write_config
from toolcards.governance import AuditLog, AuditRecord, Identity
from toolcards.stores import audit_sql
from toolcards.surfaces.commands import app
from toolcards.surfaces.outcomes import ExitCode


def _record(n: int, team_note: str = "") -> AuditRecord:
    return AuditRecord(
        ts=time.time(), principal="alice", principal_type="user", roles=("ops",),
        surface="python", tool="pay", call_id=f"c{n}", args={"n": n, "note": team_note},
        decision="allow", outcome="ok", duration=0.001,
    )  # fmt: skip


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "audit.db")


class Table:
    """Plain SQL on the audit table, as someone editing it by hand would write it."""

    def __init__(self, location: str) -> None:
        self.postgres = location.startswith("postgresql://")
        if self.postgres:
            import psycopg

            self.db: Any = psycopg.connect(location, autocommit=True)
        else:
            self.db = sqlite3.connect(location, isolation_level=None)
        self.name = "toolcards_audit" if self.postgres else "audit"

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        sql = sql.replace("audit", self.name, 1)
        if self.postgres:
            sql = sql.replace("?", "%s")
        cur = self.db.execute(sql, params)
        return list(cur.fetchall()) if cur.description else []

    def swap(self, first: str, second: str) -> None:
        """Exchange every value but the id between the rows of two calls."""
        columns = f"{audit_sql.COLUMNS}, chain_seq, chain_digest"
        names = [c.strip() for c in columns.split(",")]
        a, b = (self.run(f"SELECT {columns} FROM audit WHERE call_id = ?", (c,))[0]
                for c in (first, second))  # fmt: skip
        sets = ", ".join(f"{name} = ?" for name in names)
        self.run("UPDATE audit SET call_id = ? WHERE call_id = ?", ("swap", first))
        self.run(f"UPDATE audit SET {sets} WHERE call_id = ?", (*a, second))
        self.run(f"UPDATE audit SET {sets} WHERE call_id = ?", (*b, "swap"))

    def close(self) -> None:
        self.db.close()


@pytest.fixture
def trail(location: str) -> Iterator[tuple[str, Table]]:
    """Ten rows of team ``a`` (call ids c0..c9), with team ``b``'s rows between them."""
    a = AuditLog(location, durability="sync", team_id="a")
    b = AuditLog(location, durability="sync", team_id="b")
    try:
        for n in range(10):
            a.record(_record(n))
            b.record(_record(100 + n))
    finally:
        a.close()
        b.close()
    table = Table(location)
    yield location, table
    table.close()


def _verify(location: str, team: str = "a") -> Any:
    with AuditLog(location, durability="sync", team_id=team) as log:
        return log.verify()


def test_an_untouched_chain_holds_for_each_team(trail: tuple[str, Table]) -> None:
    location, _ = trail
    for team in ("a", "b"):
        report = _verify(location, team)
        assert report.ok, report.message
        assert report.rows == 10 and report.head is not None and report.head[0] == 10
        assert report.message.startswith(f"audit chain of team '{team}' holds: 10 rows, head #10")


FORGED = (
    "INSERT INTO audit (ts, principal, principal_type, roles, surface, tool, call_id, "
    "args_digest, args, decision, outcome, duration_ms, team_id) VALUES "
    "(1.0, 'mallory', 'user', '', 'sql', 'pay', 'forged', 'd', '{}', 'allow', 'ok', 1.0, 'a')"
)
FORGED_AT = FORGED.replace("audit (", "audit (id, ").replace("VALUES (", "VALUES (?, ")
"""A forged row given its id: below the chain's first row, where older rows would be."""
EDITS: dict[str, tuple[Callable[[Table], object], str]] = {
    "a changed outcome": (
        lambda t: t.run("UPDATE audit SET outcome = 'denied' WHERE call_id = 'c3'"),
        "row id {c3} (#4, call c3) was changed",
    ),
    "a changed argument": (
        lambda t: t.run("UPDATE audit SET args = ? WHERE call_id = 'c6'", ('{"n":6}',)),
        "row id {c6} (#7, call c6) was changed",
    ),
    "a removed row": (
        lambda t: t.run("DELETE FROM audit WHERE call_id = 'c5'"),
        "row id {c6} (#7, call c6): row #6 before it was removed",
    ),
    "rows removed from the end": (
        lambda t: t.run("DELETE FROM audit WHERE call_id IN ('c8', 'c9')"),
        "row #9-#10 at its end was removed",
    ),
    "reordered rows": (  # row #3 now stored where #4 was, and #4 where #3 was
        lambda t: t.swap("c2", "c3"),
        "row #3 (id {c3}) is stored after row id {c2} (#4, call c3): rows reordered",
    ),
    "a row written around the trail": (
        lambda t: t.run(FORGED),
        "row id {forged} carries no chain position: written around the trail",
    ),
    "a row written around the trail with id 0": (
        lambda t: t.run(FORGED_AT, (0,)),
        "row id 0 carries no chain position: written around the trail",
    ),
    "a row written around the trail with id -1": (
        lambda t: t.run(FORGED_AT, (-1,)),
        "row id -1 carries no chain position: written around the trail",
    ),
}


def test_none_given_as_empty_text_is_stored_and_chained_as_none(location: str) -> None:
    """A row's grant, approved digest, error and hook are bound as empty text made NULL by
    the INSERT: one given as empty text is none, stored and chained alike (the chain holds)."""
    empty = _record(1)._replace(grant_id="", approved_args_digest="", error="", hook="")
    with AuditLog(location, team_id="a") as log:
        log.record(empty)
        log.record(_record(2)._replace(grant_id="g-1", error="boom"))
        log.flush()
        rows = {row.call_id: row for row in log.query()}
        assert log.verify().ok, log.verify().message
    none = rows["c1"]
    assert (none.grant_id, none.approved_args_digest, none.error, none.hook) == (None,) * 4
    assert (rows["c2"].grant_id, rows["c2"].error) == ("g-1", "boom")
    table = Table(location)
    try:
        nulls = table.run("SELECT count(*) FROM audit WHERE call_id = 'c1' AND grant_id IS NULL")
    finally:
        table.close()
    assert nulls[0][0] == 1


def test_text_no_store_takes_is_kept_escaped_and_holds_up_no_row(location: str) -> None:
    """A NUL (PostgreSQL's text refuses it) or a lone surrogate (text decoded from bytes that
    are not UTF-8: JSON's ``\\udcff``) in a caller's tool name, identity, call id, arguments or
    error is stored as its escape: its row is written and chained, and so are the rows
    around it (one unstorable row held up every row of its batch, then every later one)."""
    odd = _record(2)._replace(
        tool="pay\udcff", principal="al\x00ice", call_id="c\udcc3\udca9", roles=("o\x00",),
        args={"path": "d\udcc3\udca9x", "nul": "a\x00b"}, error="no tool pay\udcff",
    )  # fmt: skip
    with AuditLog(location, team_id="a") as log:
        log.record(_record(1))
        log.record(odd)
        log.record(_record(3))
        log.flush()
        rows = log.query()
        assert log.verify().ok, log.verify().message
    assert [row.call_id for row in rows] == ["c1", "c\\udcc3\\udca9", "c3"]
    kept = rows[1]
    assert (kept.tool, kept.principal, kept.error) == (
        "pay\\udcff",
        "al\\u0000ice",
        "no tool pay\\udcff",
    )
    assert kept.roles == ("o\\u0000",)
    assert kept.args == {"path": "d\udcc3\udca9x", "nul": "a\x00b"}  # JSON: its escapes read back


@pytest.mark.parametrize("edit", EDITS)
def test_an_edit_of_the_table_is_named_in_one_line(trail: tuple[str, Table], edit: str) -> None:
    location, table = trail
    change, expected = EDITS[edit]
    ids = {c: table.run("SELECT id FROM audit WHERE call_id = ?", (c,)) for c in ("c2", "c3", "c6")}
    change(table)
    forged = table.run("SELECT id FROM audit WHERE call_id = 'forged'")
    named = {c: rows[0][0] for c, rows in {**ids, "forged": forged}.items() if rows}
    report = _verify(location)
    assert not report.ok
    assert report.message == f"audit chain of team 'a' broken: {expected.format(**named)}"
    assert _verify(location, "b").ok  # the other team's chain is its own


def _old_trail(path: Path) -> None:
    """An audit table of a version before the chain, holding rows 1 and 3 (row 2 removed)."""
    old = sqlite3.connect(path)
    before = [line for line in audit_sql.TABLE.split(";")[0].splitlines()
              if not line.strip().startswith(("row_key", "chain_", "grant_id"))]  # fmt: skip
    old.execute("\n".join(before).replace("hook TEXT,", "hook TEXT"))  # the table before
    for n in range(3):
        old.execute(FORGED.replace("'forged'", f"'c-old{n}'"))
    old.execute("DELETE FROM audit WHERE call_id = 'c-old1'")
    old.commit()
    old.close()


def test_rows_written_before_the_chain_are_counted_and_the_chain_follows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_trail(path)
    with AuditLog(path, durability="sync", team_id="a") as log:
        log.record(_record(1))
        report = log.verify()
        assert [e.call_id for e in log.tail()] == ["c-old0", "c-old2", "c1"]
    assert report.ok and report.rows == 1 and report.unchained == 2, report.message
    assert "2 older rows written before the chain are not covered" in report.message
    table = Table(str(path))
    table.run(FORGED_AT, (2,))  # where a removed older row was
    table.close()
    report = _verify(str(path))
    assert not report.ok and report.row_id is None
    assert report.message == (
        "audit chain of team 'a' broken: 3 rows carry no chain position, 2 did when it "
        "began: rows written around the trail"
    )


def test_a_head_made_before_it_recorded_older_rows_still_holds(location: str) -> None:
    """A chain head made by a version that did not record the rows written before the chain
    gains the columns empty: its older rows are counted, rows with an id the table never
    gives or stored after the chain began are named."""
    if not location.startswith("postgresql://"):
        _old_trail(Path(location))  # and rows written before the chain
    with AuditLog(location, durability="sync", team_id="a") as log:
        log.record(_record(1))
    table = Table(location)
    try:
        table.run("ALTER TABLE audit_chain DROP COLUMN older_rows")  # as that version left it
        table.run("ALTER TABLE audit_chain DROP COLUMN older_id")
        with AuditLog(location, durability="sync", team_id="a") as log:
            log.record(_record(2))
            report = log.verify()
        assert report.ok and report.rows == 2, report.message
        assert report.unchained == (0 if table.postgres else 2)
        assert table.run("SELECT older_rows, older_id FROM audit_chain") == [(None, None)]
        table.run(FORGED_AT, (-1,))
        report = _verify(location)
        assert not report.ok and report.row_id == -1, report.message
        table.run("DELETE FROM audit WHERE id = -1")
        table.run(FORGED)  # stored after the chain's first row
        forged = table.run("SELECT id FROM audit WHERE call_id = 'forged'")[0][0]
        report = _verify(location)
        assert not report.ok and report.row_id == forged, report.message
    finally:
        table.close()


def test_older_rows_of_no_team_given_to_the_team_later_are_counted(location: str) -> None:
    """A shared PostgreSQL table keeps the rows of versions before teams in no team until an
    operator gives them theirs (docs/distributed.md), maybe after the team's chain began:
    they were in the table then, and are counted, not named."""
    with AuditLog(location, durability="sync", team_id="a"):
        pass  # the table, as a version before teams left it
    table = Table(location)
    try:
        table.run(FORGED.replace("'forged'", "'c-old'").replace("'a')", "'')"))
        with AuditLog(location, durability="sync", team_id="a") as log:
            log.record(_record(1))
        table.run("UPDATE audit SET team_id = 'a' WHERE team_id = ''")
    finally:
        table.close()
    report = _verify(location)
    assert report.ok and report.rows == 1 and report.unchained == 1, report.message


WRITER = textwrap.dedent(
    """
    import sys, time
    from toolcards.governance import AuditLog, AuditRecord
    url, name, durability = sys.argv[1], sys.argv[2], sys.argv[3]
    log = AuditLog(url, durability=durability, team_id="shared", linger=0.002)
    print("open", flush=True)
    sys.stdin.readline()
    for n in range(150):
        log.record(AuditRecord(time.time(), "agent", "agent", (), "python", "write",
                               f"{name}-{n}", {"n": n}, decision="allow", outcome="ok"))
    log.close()
    """
)


def _writer(url: str, name: str, durability: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", WRITER, url, name, durability]
    pipe = subprocess.PIPE
    return subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=pipe, text=True)


def test_many_processes_writing_one_team_to_postgresql_keep_one_chain(postgres_url: str) -> None:
    with AuditLog(postgres_url, durability="sync", team_id="shared"):
        pass  # the tables exist before the writers race
    writers = [_writer(postgres_url, f"w{i}", "sync" if i % 2 else "batched") for i in range(6)]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
        for writer in writers:  # all start writing at once
            assert writer.stdin is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
        for writer in writers:
            _, err = writer.communicate(timeout=240)
            assert writer.returncode == 0, err[-2000:]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
    with AuditLog(postgres_url, durability="sync", team_id="shared") as log:
        report = log.verify()
        rows = log.query(limit=10_000)
    assert report.ok and report.rows == 900, report.message
    assert sorted(e.call_id or "" for e in rows) == sorted(
        f"w{i}-{n}" for i in range(6) for n in range(150)
    )


def test_toolcards_audit_verify_prints_one_line_and_fails_on_a_broken_chain(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.db"
    config = write_config(tmp_path, local=Identity("me"), audit=path, team_id="crm")
    with AuditLog(path, durability="sync", team_id="crm") as log:
        for n in range(3):
            log.record(_record(n))
    runner = CliRunner()
    held = runner.invoke(app, ["--config", str(config), "audit", "verify"])
    assert held.exit_code == ExitCode.OK, held.output
    assert held.stdout.startswith("audit chain of team 'crm' holds: 3 rows, head #3 sha256:")
    assert held.stdout.count("\n") == 1
    Table(str(path)).run("UPDATE audit SET principal = 'bob' WHERE call_id = 'c1'")
    broken = runner.invoke(app, ["--config", str(config), "audit", "verify"])
    assert broken.exit_code == ExitCode.FAILED
    assert broken.stderr.strip().endswith("(#2, call c1) was changed")
    assert broken.stderr.count("\n") == 1
