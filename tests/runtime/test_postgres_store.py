"""What only the PostgreSQL store has to get right: secrets, faults, many processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import psycopg
import pytest

from support.processes import free_port
from support.servers import PostgresServer
from toolcards.runtime import StoreUnavailable, Team, open_store
from toolcards.stores.postgres.team import PostgresStore


def test_the_password_never_shows(postgres_url: str, postgres_server: PostgresServer) -> None:
    store = PostgresStore(postgres_url)
    try:
        assert postgres_server.password in postgres_url
        for text in (store.location, repr(store)):
            assert postgres_server.password not in text and "***" in text
        with Team("secret", store=postgres_url) as team:
            assert postgres_server.password not in repr(team)
    finally:
        store.close()


def test_a_wrong_password_is_one_clear_error_without_it(postgres_server: PostgresServer) -> None:
    url = postgres_server.url.replace(postgres_server.password, "hunter2-wrong")
    with pytest.raises(StoreUnavailable) as caught:
        open_store(url)
    assert "hunter2-wrong" not in str(caught.value)
    assert "127.0.0.1" in str(caught.value)


def test_an_unreachable_server_fails_fast_naming_the_url() -> None:
    url = f"postgresql://u:pw-xyz@127.0.0.1:{free_port()}/nothing"
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1.*start the server") as caught:
        Team("t", store=url)
    assert time.monotonic() - started < 10  # bounded, never a hang
    assert "pw-xyz" not in str(caught.value)


def _kill_connections(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def test_a_write_after_a_lost_connection_reconnects_and_nothing_acknowledged_is_lost(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url)
    try:
        store.open_team("t")
        store.state_put("t", "#A", "kept", 1)
        _kill_connections(postgres_url)
        store.state_put("t", "#A", "after", 3)  # BEGIN found the connection lost: reopened
        assert store.state_get("t", "#A", "kept") == 1
        assert store.state_get("t", "#A", "after") == 3
    finally:
        store.close()


def test_a_transaction_broken_by_a_lost_connection_commits_nothing(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    try:
        store.open_team("t")
        with pytest.raises(StoreUnavailable), store.transaction():
            store.state_put("t", "#A", "half", 1)
            _kill_connections(postgres_url)
            store.state_put("t", "#A", "other-half", 2)
        assert store.state_get("t", "#A", "half") is None
    finally:
        store.close()


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from toolcards.stores.postgres.team import PostgresStore
    store = PostgresStore(sys.argv[1])
    store.open_team("t")
    for i in range(int(sys.argv[3])):
        store.append_event("t", sys.argv[2], json.dumps({"i": i}), None, time.time())
    store.close()
    """
)


def test_processes_appending_at_once_leave_no_gap(postgres_url: str) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, postgres_url, f"#T{n % 2}", "50"])
        for n in range(4)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    store = PostgresStore(postgres_url)
    try:
        rows = store.read_events("t", 0, limit=1000)
        assert [r.position for r in rows] == list(range(1, 201))
        for tool in ("#T0", "#T1"):
            assert sorted(r.seq for r in rows if r.tool_id == tool) == list(range(1, 101))
            assert [json.loads(r.payload)["i"] for r in rows if r.tool_id == tool].count(0) == 2
    finally:
        store.close()


def test_a_commit_in_another_process_wakes_a_watcher_without_polling(postgres_url: str) -> None:
    import threading

    store = PostgresStore(postgres_url)
    woken = threading.Event()
    try:
        store.open_team("t")
        stop = store.watch("t", woken.set)
        assert woken.wait(10)  # the listener connected: once it listens it wakes every watcher
        woken.clear()
        subprocess.run([sys.executable, "-c", WRITER, postgres_url, "#X", "1"], check=True)
        assert woken.wait(10)
        stop()
    finally:
        store.close()
