"""One contract, every store: SQLite (memory and file), PostgreSQL and the pure-Python double
pass the same tests. The state half and the event half each have their own tests, which a
half written alone passes too (:class:`MemoryStateStore`, :class:`MemoryEventStore`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolcards.runtime import StateNamespace, Store, StoreClosedError, open_store
from toolcards.stores.base import EventStore, SchemaTooNew, StateStore
from toolcards.stores.memory_team import MemoryEventStore, MemoryStateStore, MemoryStore
from toolcards.stores.sqlite.team import TeamStore

BACKENDS = ["sqlite-memory", "sqlite-file", "postgres", "memory"]


def _open(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if backend == "memory":
        return MemoryStore()
    if backend == "postgres":
        location = request.getfixturevalue("postgres_url")
    elif backend == "sqlite-file":
        location = str(tmp_path / "team.db")
    else:
        location = ":memory:"
    return open_store(location)


def _opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The store of ``request.param``, or one half alone; closed after the test."""
    if request.param == "memory-events":
        yield MemoryEventStore()
        return
    opened = (
        MemoryStateStore()
        if request.param == "memory-state"
        else _open(request.param, request, tmp_path)
    )
    opened.open_team("t")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    yield from _opened(request, tmp_path)


@pytest.fixture(params=[*BACKENDS, "memory-state"])
def state_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    """A whole store, or the state half alone."""
    yield from _opened(request, tmp_path)


@pytest.fixture(params=[*BACKENDS, "memory-events"])
def event_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    """A whole store, or the event half alone."""
    yield from _opened(request, tmp_path)


def _append(
    store: EventStore, tool: str, payload: object, kind: str | None = None
) -> tuple[int, int]:
    return store.append_event("t", tool, json.dumps(payload), kind, time.time())


# ---- state -----------------------------------------------------------------------------------


def test_state_round_trips_json_values(state_store: StateStore) -> None:
    state = StateNamespace(state_store, "t", "#A")
    state.put("k", {"n": [1, 2], "s": "é"})
    assert state.get("k") == {"n": [1, 2], "s": "é"}
    assert state.get("missing") is None
    state.delete("k")
    state.delete("k")  # absent: no error
    assert state.get("k") is None


def test_state_items_by_prefix_in_key_order(state_store: StateStore) -> None:
    state = StateNamespace(state_store, "t", "#A")
    for key in ("task:3", "task:1", "meta", "task:2", "tasl"):
        state.put(key, key)
    assert [k for k, _ in state.items("task:")] == ["task:1", "task:2", "task:3"]
    assert state.count("task:") == 3
    assert state.count() == 5
    assert StateNamespace(state_store, "t", "#B").count() == 0


def test_iter_items_reads_in_batches_without_missing_a_row(state_store: StateStore) -> None:
    state = StateNamespace(state_store, "t", "#A")
    with state.batch():
        for i in range(25):
            state.put(f"row:{i:03d}", i)
    assert [v for _, v in state.iter_items("row:", batch=4)] == list(range(25))


def test_a_prefix_reads_every_key_it_starts_whatever_characters_follow(
    state_store: StateStore,
) -> None:
    """A key may hold U+10FFFF (a model names an entity ``\\U0010ffff...``): read as the range
    from the prefix to the prefix followed by U+10FFFF, its row was neither read nor counted,
    so the graph forgot the entity on a restart while loading its relations."""
    state = StateNamespace(state_store, "t", "#A")
    top = "\U0010ffff"
    under = ["e:a", f"e:{top}", f"e:{top}{top}x"]
    others = ["e", f"e{top}", "f", "\ud7ffz", "\ue000", top, f"{top}{top}"]
    with state.batch():
        for key in (*under, *others):
            state.put(key, key)
    assert [k for k, _ in state.items("e:")] == under and state.count("e:") == 3
    assert [k for k, _ in state.iter_items("e:", batch=1)] == under
    assert [k for k, _ in state.items(f"e:{top}")] == under[1:]
    assert [k for k, _ in state.items("\ud7ff")] == ["\ud7ffz"]  # the bound skips surrogates
    assert [k for k, _ in state.items(top)] == [top, f"{top}{top}"]
    assert [k for k, _ in state.items()] == sorted([*under, *others]) and state.count() == 10


DEEP = "[" * 100_000 + "]" * 100_000


def _plant(store: StateStore, actor: str, key: str, text: str) -> None:
    """Overwrite the stored text of ``key`` around the store (a row written by hand)."""
    if isinstance(store, MemoryStateStore):
        store._rows["t", actor].put(key, text)
    elif isinstance(store, TeamStore):
        with store.lock:
            sql = "UPDATE state SET value=? WHERE team_id='t' AND actor=? AND key=?"
            store.conn.execute(sql, (text, actor, key))
    else:
        import psycopg

        with psycopg.connect(store.secret_location(), autocommit=True) as conn:
            sql = "UPDATE toolcards_state SET value=%s WHERE team_id='t' AND actor=%s AND key=%s"
            conn.execute(sql, (text, actor, key))


def test_a_row_that_does_not_read_as_json_reads_as_absent(state_store: StateStore) -> None:
    """One row of ``[[[[...`` planted in the store raised RecursionError from every read of
    its actor's state: the actor never started, and binding its card raised every time."""
    state = StateNamespace(state_store, "t", "#A")
    with state.batch():
        for i in range(6):
            state.put(f"row:{i}", i)
    _plant(state_store, "#A", "row:2", DEEP)
    _plant(state_store, "#A", "row:3", "{broken")
    assert state.get("row:2") is None and state.get("row:3") is None
    assert [v for _, v in state.items("row:")] == [0, 1, 4, 5]
    assert [v for _, v in state.iter_items("row:", batch=2)] == [0, 1, 4, 5]  # a full page
    assert state.count("row:") == 6
    state.put("row:2", 2)
    assert state.get("row:2") == 2


def test_changes_read_a_row_that_does_not_read_as_deleted(store: Store) -> None:
    since = store.state_version("t", "#A")
    with store.transaction():
        store.state_put("t", "#A", "a", 1)
        store.state_put("t", "#A", "b", 2)
    _plant(store, "#A", "b", DEEP)
    assert store.state_changes("t", "#A", since) in (None, ([("a", 1)], ["b"]))


def test_batch_commits_together_or_not_at_all(store: Store) -> None:
    state = StateNamespace(store, "t", "#A")
    with pytest.raises(RuntimeError), state.batch():
        state.put("a", 1)
        _append(store, "#A", {"x": 1})
        raise RuntimeError("abort")
    assert state.get("a") is None
    assert store.read_events("t", 0) == []
    assert store.last_seq("t", "#A") == 0
    with state.batch(), state.batch():  # nested blocks join the outer one
        state.put("a", 2)
        _append(store, "#A", {"x": 2})
    assert state.get("a") == 2
    assert [e.seq for e in store.read_events("t", 0)] == [1]


def test_after_commit_runs_after_the_commit_and_never_after_a_rollback(
    state_store: StateStore,
) -> None:
    seen: list[str] = []
    with state_store.transaction():
        state_store.after_commit(lambda: seen.append("committed"))
        assert seen == []
    assert seen == ["committed"]
    with pytest.raises(ValueError), state_store.transaction():
        state_store.after_commit(lambda: seen.append("rolled back"))
        raise ValueError
    state_store.after_commit(lambda: seen.append("now"))
    assert seen == ["committed", "now"]


def test_a_state_version_moves_once_per_committed_transaction_of_its_actor(store: Store) -> None:
    assert store.state_version("t", "#A") == 0
    with store.transaction():
        store.state_put("t", "#A", "k", 1)
        store.state_delete("t", "#A", "j")
        assert store.writes_pending("t", "#A") and not store.writes_pending("t", "#B")
    assert store.state_version("t", "#A") == 1
    _append(store, "#A", {"x": 1})  # its events count too
    assert store.state_version("t", "#A") == 2
    with pytest.raises(RuntimeError), store.transaction():
        store.state_put("t", "#A", "k", 2)
        raise RuntimeError("abort")
    assert store.state_version("t", "#A") == 2
    assert store.state_version("t", "#B") == 0 and store.state_get("t", "#A", "k") == 1


# ---- events ----------------------------------------------------------------------------------


def test_positions_and_per_tool_seqs_are_assigned_without_gaps(event_store: EventStore) -> None:
    got = [_append(event_store, tool, {"i": i}) for i, tool in enumerate(["#A", "#B", "#A", "#A"])]
    assert got == [(1, 1), (2, 1), (3, 2), (4, 3)]
    assert event_store.last_seq("t", "#A") == 3 and event_store.last_seq("t", "#B") == 1
    assert event_store.last_seq("t", "#C") == 0
    assert event_store.last_position("t") == 4


def test_read_events_after_a_position_in_order_with_a_limit(event_store: EventStore) -> None:
    for i in range(5):
        _append(event_store, "#A", {"i": i}, "Tag" if i == 2 else None)
    rows = event_store.read_events("t", 2, limit=2)
    assert [(r.position, r.seq, json.loads(r.payload)["i"]) for r in rows] == [(3, 3, 2), (4, 4, 3)]
    assert rows[0].payload_type == "Tag" and rows[1].payload_type is None
    assert event_store.read_events("t", 5) == []


def test_teams_keep_their_own_positions(store: Store) -> None:
    store.open_team("u")
    _append(store, "#A", {})
    store.append_event("u", "#A", "{}", None, time.time())
    assert store.last_position("t") == 1 and store.last_position("u") == 1


def test_a_team_sees_none_of_another_teams_rows(store: Store) -> None:
    store.open_team("u")
    with store.transaction():
        store.state_put("t", "#A", "k", "t's")
        store.record_actor("t", "#A", "mod:A", None)
        store.record_applied("t", "call-1", "#A", "d", "{}")
        _append(store, "#A", {"x": 1})
    assert store.state_get("u", "#A", "k") is None and store.state_count("u", "#A") == 0
    assert store.state_items("u", "#A") == [] and store.recorded_actors("u") == []
    assert store.applied_call("u", "call-1") is None and store.state_version("u", "#A") == 0
    assert store.read_events("u", 0) == [] and store.last_seq("u", "#A") == 0
    assert store.compact_events("u", keep_per_tool=0, before=None) == []
    assert [r.seq for r in store.read_events("t", 0)] == [1]  # u's compaction left t's alone


def test_concurrent_appenders_leave_no_gap(event_store: EventStore) -> None:
    def work(tool: str) -> None:
        for i in range(40):
            _append(event_store, tool, {"i": i})

    threads = [threading.Thread(target=work, args=(f"#T{n % 2}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    rows = event_store.read_events("t", 0, limit=10_000)
    assert [r.position for r in rows] == list(range(1, 161))
    for tool in ("#T0", "#T1"):
        assert sorted(r.seq for r in rows if r.tool_id == tool) == list(range(1, 81))


def test_compaction_keeps_the_newest_and_marks_what_went(event_store: EventStore) -> None:
    for i in range(6):
        _append(event_store, "#A", {"i": i})
    _append(event_store, "team", {"event": "x"})
    done = event_store.compact_events("t", keep_per_tool=2, before=None)
    assert [(c.tool_id, c.through_seq) for c in done] == [("#A", 4)]
    rows = event_store.read_events("t", 0)
    kept = [(r.seq, json.loads(r.payload)) for r in rows if r.tool_id == "#A"]
    assert kept == [(4, {"compacted": {"through_seq": 4}}), (5, {"i": 4}), (6, {"i": 5})]
    assert [r.tool_id for r in rows].count("team") == 1  # lifecycle events stay
    assert event_store.last_seq("t", "#A") == 6
    assert _append(event_store, "#A", {"i": 6}) == (8, 7)  # numbering goes on
    assert event_store.compact_events("t", keep_per_tool=3, before=None) == []  # nothing new
    again = event_store.compact_events("t", keep_per_tool=1, before=None)
    assert [(c.tool_id, c.through_seq) for c in again] == [("#A", 6)]
    assert [r.seq for r in event_store.read_events("t", 0) if r.tool_id == "#A"] == [6, 7]


def test_compaction_by_age(event_store: EventStore) -> None:
    event_store.append_event("t", "#A", "{}", None, time.time() - 3600)
    event_store.append_event("t", "#A", "{}", None, time.time() - 3600)
    event_store.append_event("t", "#A", '{"new":1}', None, time.time())
    done = event_store.compact_events("t", keep_per_tool=None, before=time.time() - 60)
    assert [(c.tool_id, c.through_seq) for c in done] == [("#A", 2)]
    assert [r.seq for r in event_store.read_events("t", 0)] == [2, 3]


# ---- teams, actors, lifecycle ----------------------------------------------------------------


def test_teams_and_recorded_actors(state_store: StateStore) -> None:
    assert state_store.team_exists("t") and not state_store.team_exists("nope")
    state_store.record_actor("t", "#A", "mod:ActorA", '{"x":1}')
    state_store.record_actor("t", "#B", "mod:ActorB", None)
    state_store.record_actor("t", "#A", "mod:ActorA", '{"x":2}')
    assert state_store.recorded_actors("t") == [
        ("#A", "mod:ActorA", '{"x":2}'),
        ("#B", "mod:ActorB", None),
    ]
    state_store.mark_stopped("t")
    assert state_store.team_exists("t")


def test_a_closed_store_refuses_work(state_store: StateStore) -> None:
    state_store.close()
    with pytest.raises(StoreClosedError):
        state_store.state_get("t", "#A", "k")
    state_store.close()  # idempotent


def test_a_store_from_a_newer_version_is_refused(tmp_path: Path, postgres_url: str) -> None:
    for location in (str(tmp_path / "new.db"), postgres_url):
        first = open_store(location)
        first.close()
        _set_schema_version(location, 99)
        with pytest.raises(SchemaTooNew, match="newer than this toolcards"):
            open_store(location)


def _set_schema_version(location: str, version: int) -> None:
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(
                "UPDATE toolcards_meta SET value=%s WHERE key='schema_version'", (str(version),)
            )
        return
    import sqlite3

    with sqlite3.connect(location) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(version),))
