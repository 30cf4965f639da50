"""MCP task rows (SQLite and PostgreSQL): a row belongs to its team and is read only by the
principal that created it, a principal holds a bounded number, rows expire, and a row whose
server stopped renewing its lease reads ``failed`` with that reason."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.stores import tasks as rows
from toolcards.stores.open import open_tasks
from toolcards.stores.tasks import SqliteTasks, SqlTasks, TaskRecord, TooManyTasks


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "tasks.db")


@pytest.fixture
def teams(location: str) -> Iterator[tuple[SqlTasks, SqlTasks]]:
    a, b = open_tasks(location, "a"), open_tasks(location, "b")
    yield a, b
    a.close()
    b.close()


def task(
    task_id: str, principal: str = "carol", *, ttl: float = 60, lease: float = 60
) -> TaskRecord:
    now = time.time()
    return TaskRecord(task_id, principal, "exec_command", f"call-{task_id}", rows.WORKING, None,
                      now, now, now + ttl, "owner-1", now + lease)  # fmt: skip


def test_a_task_is_read_only_by_its_principal_in_its_team(teams: tuple[SqlTasks, SqlTasks]) -> None:
    a, b = teams
    a.create(task("t1"), per_principal=10)
    assert a.get("t1", "carol") is not None
    assert a.get("t1", "mallory") is None
    assert b.get("t1", "carol") is None
    assert b.page("carol", None, 10) == []
    assert not b.update("t1", status=rows.CANCELLED)
    assert a.get("t1", "carol").status == rows.WORKING  # type: ignore[union-attr]


def test_a_principal_holds_a_bounded_number_of_tasks(teams: tuple[SqlTasks, SqlTasks]) -> None:
    a, b = teams
    for n in range(3):
        a.create(task(f"t{n}"), per_principal=3)
    with pytest.raises(TooManyTasks):
        a.create(task("t3"), per_principal=3)
    a.create(task("other", principal="dave"), per_principal=3)  # another principal's count
    b.create(task("t3"), per_principal=3)  # another team's count


def test_expired_ended_tasks_are_gone_and_free_their_place(
    teams: tuple[SqlTasks, SqlTasks],
) -> None:
    a, _ = teams
    a.create(task("old", ttl=-1), per_principal=1)
    assert a.update("old", status=rows.COMPLETED, result="{}")
    assert a.get("old", "carol") is None
    assert a.page("carol", None, 10) == []
    a.create(task("new"), per_principal=1)  # the expired one no longer counts


def test_an_expired_live_task_is_kept_and_counted(teams: tuple[SqlTasks, SqlTasks]) -> None:
    a, _ = teams
    a.create(task("running", ttl=-1), per_principal=1)
    with pytest.raises(TooManyTasks):  # its call still runs: it holds its place
        a.create(task("next"), per_principal=1)
    assert a.get("running", "carol") is not None
    assert [t.task_id for t in a.page("carol", None, 10)] == ["running"]
    assert a.get("running", "mallory") is None
    assert a.update("running", status=rows.CANCELLED)
    a.create(task("next"), per_principal=1)  # ended and expired: gone


def test_an_expired_task_of_a_stopped_server_frees_its_place(
    teams: tuple[SqlTasks, SqlTasks],
) -> None:
    a, _ = teams
    a.create(task("orphan", ttl=-1, lease=-1), per_principal=1)
    a.create(task("next"), per_principal=1)
    assert a.get("orphan", "carol") is None


def test_a_task_whose_server_stopped_reads_failed_with_the_reason(
    teams: tuple[SqlTasks, SqlTasks],
) -> None:
    a, _ = teams
    a.create(task("orphan", lease=-1), per_principal=10)
    a.create(task("alive"), per_principal=10)
    orphan, alive = a.get("orphan", "carol"), a.get("alive", "carol")
    assert orphan is not None and orphan.status == rows.FAILED
    assert orphan.status_message == rows.ORPHANED
    assert alive is not None and alive.status == rows.WORKING


def test_an_ended_task_keeps_its_end(teams: tuple[SqlTasks, SqlTasks]) -> None:
    a, _ = teams
    a.create(task("t"), per_principal=10)
    assert a.update("t", status=rows.CANCELLED)
    assert not a.update("t", status=rows.COMPLETED, result="{}")
    assert a.get("t", "carol").status == rows.CANCELLED  # type: ignore[union-attr]


def test_pages_list_a_principals_tasks_in_order(teams: tuple[SqlTasks, SqlTasks]) -> None:
    a, _ = teams
    for n in range(5):
        a.create(task(f"t{n}"), per_principal=10)
    first = a.page("carol", None, 3)
    rest = a.page("carol", first[-1], 3)
    assert [t.task_id for t in first + rest] == [f"t{n}" for n in range(5)]


def test_a_cancel_is_a_request_its_owner_hears_and_the_owners_end_is_kept(
    teams: tuple[SqlTasks, SqlTasks],
) -> None:
    """A cancel marks the live row (in its team only) for the owner, which ends it with what
    its call did; that end reads back even past the ttl (what the canceller answers)."""
    a, b = teams
    since = time.time() - 1.0
    a.create(task("t", ttl=-1), per_principal=10)
    assert not b.update("t", answer=rows.CANCEL)
    assert a.update("t", answer=rows.CANCEL)
    assert a.get("t", "carol").status == rows.WORKING  # type: ignore[union-attr]
    assert a.changed("owner-1", since) == [("t", rows.CANCEL)]
    assert a.update("t", status=rows.COMPLETED, result="{}")
    assert a.get("t", "carol") is None  # ended past its ttl
    kept = a.get("t", "carol", expired=True)
    assert kept is not None and kept.status == rows.COMPLETED
    assert a.get("t", "mallory", expired=True) is None


def test_a_creation_waits_for_no_other_teams_principal(postgres_url: str) -> None:
    """Team ``acme`` with principal ``prod/alice`` and team ``acme/prod`` with ``alice`` took
    one lock (``acme/prod/alice``): one team's creations waited for the other's."""
    a, b = open_tasks(postgres_url, "acme"), open_tasks(postgres_url, "acme/prod")
    created = threading.Event()
    try:
        with a._tx() as cur:  # team a is creating a task of 'prod/alice'
            a._lock_principal(cur, "prod/alice")
            worker = threading.Thread(
                target=lambda: (b.create(task("t1", "alice"), per_principal=3), created.set())
            )
            worker.start()
            assert created.wait(30)
        worker.join()
    finally:
        a.close()
        b.close()


def test_a_listing_and_a_status_read_no_result(teams: tuple[SqlTasks, SqlTasks]) -> None:
    """A result (up to a mebibyte) is read only by the call that answers it; a listing still
    fails a task whose server stopped renewing its lease."""
    a, _ = teams
    kept = '"' + "x" * 100_000 + '"'
    a.create(task("done"), per_principal=10)
    assert a.update("done", status=rows.COMPLETED, result=kept)
    a.create(task("orphan", lease=-1), per_principal=10)
    listed = [(t.task_id, t.status, t.result) for t in a.page("carol", None, 10)]
    assert listed == [("done", rows.COMPLETED, None), ("orphan", rows.FAILED, None)]
    assert a.get("done", "carol").result is None  # type: ignore[union-attr]
    assert a.get("done", "carol", result=True).result == kept  # type: ignore[union-attr]


def test_reads_wait_for_no_writer(tmp_path: Path) -> None:
    """Listing, reading and hearing of tasks take no write lock: another process's write
    transaction, open meanwhile, delays none of them."""
    store = SqliteTasks(tmp_path / "tasks.db", "a")
    store.create(task("t"), per_principal=10)
    store._db.execute("PRAGMA busy_timeout = 0")  # a wait for the write lock fails at once
    writer = sqlite3.connect(tmp_path / "tasks.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert [t.task_id for t in store.page("carol", None, 10)] == ["t"]
        assert store.get("t", "carol", result=True) is not None
        assert store.changed("owner-1", 0.0) == [("t", None)]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        store.close()
