"""Idempotency keys in the team store, on SQLite, PostgreSQL and the pure-Python double: a key
belongs to its team, commits or vanishes with its transaction, expires, is bounded per team,
and a store written before the table existed gains it when opened."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from toolcards.stores import MemoryStore, applied_calls
from toolcards.stores.base import Store
from toolcards.stores.postgres.team import PostgresStore
from toolcards.stores.sqlite.team import TeamStore


def _opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        opened: Store = TeamStore(tmp_path / "team.db")
    elif request.param == "memory":
        opened = MemoryStore()
    else:
        opened = PostgresStore(request.getfixturevalue("postgres_url"))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from _opened(request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store whose rows a test reads with SQL."""
    yield from _opened(request, tmp_path)


def _record(store: Store, team: str, key: str, result: str = '{"value":1}') -> None:
    with store.transaction():
        store.record_applied(team, key, "#A", "d1", result)


def test_a_recorded_key_is_found_by_its_team_only(store: Store) -> None:
    _record(store, "a", "k1")
    found = store.applied_call("a", "k1")
    assert found is not None and (found.actor, found.digest, found.result) == (
        "#A",
        "d1",
        '{"value":1}',
    )
    assert store.applied_call("b", "k1") is None


def test_a_key_recorded_in_a_rolled_back_transaction_is_not_kept(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction():
        store.record_applied("a", "k1", "#A", "d1", "{}")
        raise RuntimeError("the call's writes failed")
    assert store.applied_call("a", "k1") is None


def test_a_key_older_than_the_keep_time_is_not_found(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    past = time.time() - applied_calls.KEEP_SECONDS - 60
    monkeypatch.setattr(applied_calls.time, "time", lambda: past)
    _record(store, "a", "old")
    monkeypatch.undo()
    assert store.applied_call("a", "old") is None


def test_recording_drops_the_teams_expired_keys(
    sql_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    past = time.time() - applied_calls.KEEP_SECONDS - 60
    monkeypatch.setattr(applied_calls.time, "time", lambda: past)
    _record(sql_store, "a", "old")
    _record(sql_store, "b", "old")
    monkeypatch.undo()
    _record(sql_store, "a", "new")
    assert _keys(sql_store) == [("a", "new"), ("b", "old")]  # b's wait for b's next record


def test_a_team_keeps_at_most_the_newest_keys_of_its_bound(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(applied_calls, "KEEP_PER_TEAM", 3)
    monkeypatch.setattr(applied_calls, "PRUNE_EVERY", 1)
    for n in range(5):
        _record(store, "a", f"k{n}")
    _record(store, "b", "k0")
    kept = [(t, f"k{n}") for t in "ab" for n in range(5) if store.applied_call(t, f"k{n}")]
    assert kept == [("a", "k2"), ("a", "k3"), ("a", "k4"), ("b", "k0")]


def test_two_teams_written_in_turn_each_keep_their_bound(
    sql_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(applied_calls, "KEEP_PER_TEAM", 3)
    monkeypatch.setattr(applied_calls, "PRUNE_EVERY", 2)
    for n in range(40):  # a count of the whole process gave every enforcement to one team
        _record(sql_store, "a", f"k{n:02}")
        _record(sql_store, "b", f"k{n:02}")
    kept = _keys(sql_store)
    for team in "ab":
        assert 3 <= sum(1 for t, _ in kept if t == team) <= 3 + 2
        assert (team, "k39") in kept


def _keys(store: Store) -> list[tuple[str, str]]:
    sql = "SELECT team_id, call_key FROM {}applied_calls ORDER BY team_id, call_key"
    if isinstance(store, TeamStore):
        return [(str(a), str(b)) for a, b in store.conn.execute(sql.format(""))]
    assert isinstance(store, PostgresStore)
    with psycopg.connect(store.secret_location()) as conn:
        return [(str(a), str(b)) for a, b in conn.execute(sql.format("toolcards_"))]


def test_a_sqlite_store_written_before_the_key_table_gains_it(tmp_path: Path) -> None:
    TeamStore(tmp_path / "team.db").close()
    with sqlite3.connect(tmp_path / "team.db") as conn:
        conn.execute("DROP TABLE applied_calls")
    store = TeamStore(tmp_path / "team.db")
    try:
        _record(store, "a", "k1")
        assert store.applied_call("a", "k1") is not None
    finally:
        store.close()


def test_a_postgres_store_written_before_the_key_table_gains_it(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE toolcards_applied_calls")
    store = PostgresStore(postgres_url)
    try:
        _record(store, "a", "k1")
        assert store.applied_call("a", "k1") is not None
    finally:
        store.close()
