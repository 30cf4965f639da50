"""Event feeds outlive a PostgreSQL restart: a subscriber receives every event once, the
member relay delivers what was queued after the restart, and a relay that died stops
heartbeating so its members can be taken over."""

from __future__ import annotations

import threading

import psycopg

from support.scripted import wait_until
from support.servers import PostgresServer
from toolcards.core.errors import TransientError
from toolcards.runtime import Team
from toolcards.runtime.events import EventLog
from toolcards.runtime.messaging import MemberMessage
from toolcards.runtime.relay import Relay, process_token
from toolcards.stores.base import StateNamespace
from toolcards.stores.postgres.listener import CHANNEL
from toolcards.stores.postgres.team import PostgresStore


def _append_until(log: EventLog, stop: threading.Event) -> None:
    """Append events as fast as the store takes them (a refused append is tried again)."""
    n = 0
    while not stop.is_set():
        try:
            log.append("#writer", {"n": n})
            n += 1
        except TransientError:
            stop.wait(0.05)


def test_a_subscriber_receives_every_event_once_across_a_crash_restart(
    pg: PostgresServer, pg_url: str
) -> None:
    got: list[tuple[str, int]] = []
    writer_store = PostgresStore(pg_url)
    writer_store.open_team("t")
    writer_log = EventLog(writer_store, "t")
    stop = threading.Event()
    with Team("t", store=pg_url) as team:
        sub = team.subscribe(lambda e: got.append((e.tool_id, e.seq)))
        writer = threading.Thread(target=_append_until, args=(writer_log, stop))
        writer.start()
        try:
            wait_until(lambda: len(got) > 50, timeout=60)
            pg.restart("immediate")
            seen = len(got)
            wait_until(lambda: len(got) > seen + 50, timeout=60)  # live again after it
        finally:
            stop.set()
            writer.join(30)
        last = writer_log.position
        wait_until(lambda: len(got) >= last, timeout=60)
        assert sub.active
        assert len(got) == last and len(set(got)) == last  # each event once, none missing
        writes = [seq for tool, seq in got if tool == "#writer"]
        assert writes == list(range(1, len(writes) + 1))
    writer_log.close()
    writer_store.close()


def _relay(url: str, got: list[str]) -> tuple[Relay, EventLog, PostgresStore]:
    store = PostgresStore(url)
    store.open_team("t")
    log = EventLog(store, "t")

    def deliver(message: MemberMessage) -> bool:
        got.append(message.content)
        return True

    relay = Relay(log, StateNamespace(store, "t", "~members"), deliver)
    relay.start("@ann", log.position)
    return relay, log, store


def test_the_member_relay_delivers_what_is_queued_after_a_restart(
    pg: PostgresServer, pg_url: str
) -> None:
    got: list[str] = []
    relay, log, store = _relay(pg_url, got)
    other = PostgresStore(pg_url)  # another process's view of the team
    other_log = EventLog(other, "t")
    sender = Relay(other_log, StateNamespace(other, "t", "~members"), lambda m: False)
    try:
        sender.queue(MemberMessage(sender="user", recipient="@ann", content="before"))
        wait_until(lambda: got == ["before"], timeout=30)
        pg.restart("immediate")
        wait_until(lambda: _queued(sender, "after"), timeout=60)
        wait_until(lambda: got == ["before", "after"], timeout=60)
    finally:
        relay.stop()
        for closable in (log, store, other_log, other):
            closable.close()


def _queued(relay: Relay, content: str) -> bool:
    try:
        relay.queue(MemberMessage(sender="user", recipient="@ann", content=content))
    except TransientError:
        return False
    return True


def test_a_relay_whose_feed_died_stops_heartbeating(pg_url: str) -> None:
    got: list[str] = []
    relay, log, store = _relay(pg_url, got)
    roster = StateNamespace(store, "t", "~members")
    try:
        assert roster.get(f"holder:{process_token()}") is not None
        with psycopg.connect(pg_url, autocommit=True) as conn:  # the feed cannot read on
            conn.execute("ALTER TABLE toolcards_events RENAME TO toolcards_events_gone")
            conn.execute("SELECT pg_notify(%s, 't')", (CHANNEL,))  # wake the feed: it reads
        try:
            wait_until(lambda: roster.get(f"holder:{process_token()}") is None, timeout=30)
        finally:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("ALTER TABLE toolcards_events_gone RENAME TO toolcards_events")
    finally:
        relay.stop()
        log.close()
        store.close()
