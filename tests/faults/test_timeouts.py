"""No PostgreSQL fault blocks a caller without bound: every connection sets server timeouts
and keepalives, a frozen server fails a call within the statement timeout, and a read right
after a restart reconnects by itself. A statement the server ends (the statement timeout,
waiting on another session's lock) says so and keeps its connection."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import psycopg
import pytest

from support.servers import PostgresServer
from toolcards import PlanningTool
from toolcards.core.errors import TransientError
from toolcards.runtime import Team
from toolcards.stores.errors import DatabaseBusy
from toolcards.stores.postgres.connections import Connections


def _settings(url: str) -> dict[str, str]:
    db = Connections(url)
    try:
        with db.cursor() as cur:
            cur.execute(
                "SELECT name, setting, unit FROM pg_settings WHERE name IN "
                "('statement_timeout', 'idle_in_transaction_session_timeout')"
            )
            found = {str(n): f"{s}{u}" for n, s, u in cur.fetchall()}
        found.update(db.connection().info.get_parameters())
    finally:
        db.close()
    return found


def test_every_connection_sets_timeouts_and_keepalives(pg_url: str) -> None:
    found = _settings(pg_url)
    assert found["statement_timeout"] == "30000ms"
    assert found["idle_in_transaction_session_timeout"] == "60000ms"
    assert found["keepalives"] == "1" and found["keepalives_idle"] == "10"
    assert int(found["tcp_user_timeout"]) > 0


def test_timeouts_given_in_the_url_win(pg_url: str) -> None:
    url = pg_url + "?keepalives_idle=3&options=-c%20statement_timeout%3D5s"
    found = _settings(url)
    assert found["statement_timeout"] == "5000ms"
    assert found["keepalives_idle"] == "3"
    assert Connections(url).statement_bound == 5.0 + 2.0


def _call_in_thread(fn: Any) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


def test_a_frozen_server_fails_a_call_within_the_statement_timeout(
    pg: PostgresServer, pg_url: str
) -> None:
    url = pg_url + "?options=-c%20statement_timeout%3D1s"
    with Team("t", store=url) as team:
        tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)]).get_tools()}
        tools["update_planning"](create=[{"description": "before"}])
        pg.freeze()
        try:
            call, errors = _call_in_thread(lambda: tools["search_planning"]())
            call.join(60)  # a bound far above 1 s + grace, not a measurement
            assert not call.is_alive(), "the call still waits on the frozen server"
        finally:
            pg.thaw()
        assert len(errors) == 1 and isinstance(errors[0], TransientError), errors
        assert "no answer within 3s" in str(errors[0])
        assert "before" in tools["search_planning"]()  # served again once it thawed


def test_a_read_right_after_a_restart_reconnects_by_itself(pg: PostgresServer, pg_url: str) -> None:
    with Team("t", store=pg_url) as team:
        tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)]).get_tools()}
        tools["update_planning"](create=[{"description": "kept"}])
        before = len(team.events())
        pg.restart("immediate")
        assert len(team.events()) == before  # the first read after it, no retry error
        pg.restart("immediate")
        assert "kept" in tools["search_planning"]()


def test_a_thread_that_ended_leaves_no_connection_open(pg_url: str) -> None:
    import gc

    db = Connections(pg_url)
    seen: list[Any] = []

    def work() -> None:
        with db.cursor() as cur:
            cur.execute("SELECT 1")
        seen.append(db.connection())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=30)
    try:
        gc.collect()
        assert seen and seen[0].closed  # closed with the thread's state, not left to the finaliser
    finally:
        db.close()


def _sessions(url: str) -> set[int]:
    """The backend pids of every session on ``url``'s database but this one."""
    with psycopg.connect(url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
    return {int(pid) for (pid,) in rows}


def test_a_statement_held_up_by_another_sessions_lock_says_so_and_keeps_its_connection(
    pg_url: str,
) -> None:
    url = pg_url + "?options=-c%20statement_timeout%3D1s"
    with Team("t", store=url) as team:
        tools = {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)]).get_tools()}
        tools["update_planning"](create=[{"description": "before"}])
        before = _sessions(pg_url)
        with psycopg.connect(pg_url) as other:  # another session, in a transaction
            other.execute("LOCK TABLE toolcards_state IN EXCLUSIVE MODE")  # writes wait
            held = other.info.backend_pid
            with pytest.raises(TransientError) as caught:
                tools["update_planning"](create=[{"description": "held up"}])
            other.rollback()
        message = str(caught.value)
        assert "statement timeout" in message and "lock" in message, message
        assert "start the server" not in message and "unavailable" not in message
        assert _sessions(pg_url) - {held} == before  # no connection closed, none opened
        assert "created ids: [2]" in tools["update_planning"](create=[{"description": "after"}])
        board = tools["search_planning"]()
    assert "held up" not in board and "after" in board


def test_a_transaction_whose_statement_the_server_ended_commits_nothing_on_the_same_connection(
    pg_url: str,
) -> None:
    url = pg_url + "?options=-c%20statement_timeout%3D1s"
    db = Connections(url)
    try:
        with db.transaction(), db.cursor() as cur:
            cur.execute("CREATE TABLE rows (id INT PRIMARY KEY, note TEXT)")
            cur.execute("INSERT INTO rows VALUES (1, 'kept')")
        backend = db.connection().info.backend_pid
        with psycopg.connect(pg_url) as other:
            other.execute("SELECT 1 FROM rows WHERE id = 1 FOR UPDATE")  # a row lock, held
            with pytest.raises(DatabaseBusy, match="statement timeout") as caught, db.transaction():
                with db.cursor() as cur:
                    cur.execute("INSERT INTO rows VALUES (2, 'lost')")
                with contextlib.suppress(DatabaseBusy), db.cursor() as cur:  # swallowed
                    cur.execute("UPDATE rows SET note = 'waited' WHERE id = 1")
            other.rollback()
        assert "start the server" not in str(caught.value)
        assert db.connection().info.backend_pid == backend  # the same session goes on
        with db.cursor() as cur:
            cur.execute("SELECT id, note FROM rows ORDER BY id")
            assert cur.fetchall() == [(1, "kept")]  # nothing of the failed transaction
    finally:
        db.close()
