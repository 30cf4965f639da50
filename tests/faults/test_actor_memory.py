"""A tool actor's memory never holds what its store does not: a write cut by a crash restart
or a stop of PostgreSQL leaves no phantom task, and every answer after recovery equals the
store (on Pykka copies and on a Ray actor)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from support.scripted import once_served, wait_until
from support.servers import PostgresServer, RayCluster
from toolcards import PlanningTool
from toolcards.core.errors import TransientError
from toolcards.runtime import Team
from toolcards.stores.postgres.team import PostgresStore
from toolcards.tools.planning.actor import ACTOR_NAME, PlanningActor

Tools = dict[str, Callable[..., Any]]
_namespaces = itertools.count(1)


def _team(url: str, system: str, ray: RayCluster | None = None) -> Team:
    if system == "ray":
        from toolcards.runtime import RayActorSystem

        assert ray is not None
        ns = RayActorSystem(address=ray.address, namespace=f"faults-{next(_namespaces)}")
        return Team("t", store=url, system=ns)
    return Team("t", store=url)


def _tools(team: Team) -> Tools:
    return {t.__name__: t for t in team.bind([PlanningTool(vector_store=False)], "ann").get_tools()}


def _stored(url: str) -> dict[int, tuple[int, str]]:
    def read() -> dict[int, tuple[int, str]]:
        store = PostgresStore(url)
        try:
            rows = store.state_items("t", ACTOR_NAME, "task:")
        finally:
            store.close()
        return {int(v["id"]): (int(v["version"]), str(v["description"])) for _, v in rows}

    return once_served(read)


def _answered(team: Team) -> dict[int, tuple[int, str]]:
    def ask() -> dict[int, tuple[int, str]]:
        handle = team.actor(ACTOR_NAME)
        assert handle is not None
        return {t.id: (t.version, t.description) for t in handle.ask(PlanningActor.tasks)}

    return once_served(ask)


@contextmanager
def _next_id_locked(url: str) -> Iterator[psycopg.Connection[Any]]:
    """Another session holds the board's id counter row: the next write waits on it."""
    conn = psycopg.connect(url)
    try:
        conn.execute(
            "SELECT 1 FROM toolcards_state WHERE team_id='t' AND actor=%s AND key='meta:next_id' "
            "FOR UPDATE",
            (ACTOR_NAME,),
        )
        yield conn
    finally:
        conn.close()


def _waiting_on_a_lock(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock'"
    ).fetchone()
    return row is not None and int(row[0]) > 0


def _cut_a_write(
    url: str, team: Team, tools: Tools, fault: Callable[[], None]
) -> BaseException | None:
    """Create a task whose write waits on a row lock, apply ``fault`` while it waits; the
    error the call ended with, or None when the write committed first (the server ended the
    lock holder's session a moment before the writer's: the writer got the lock, and the
    write is acknowledged and stored)."""
    outcome: list[BaseException | None] = []

    def create() -> None:
        try:
            tools["update_planning"](create=[{"description": "cut short"}])
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    with _next_id_locked(url) as blocker:
        writer = threading.Thread(target=create)
        writer.start()
        wait_until(lambda: _waiting_on_a_lock(blocker), timeout=30)
        fault()
    writer.join(60)
    assert not writer.is_alive()
    assert len(outcome) == 1
    assert outcome[0] is None or isinstance(outcome[0], TransientError), outcome[0]
    return outcome[0]


def _after(error: BaseException | None) -> dict[int, tuple[int, str]]:
    """The board a cut write leaves: without it, or with it when it was acknowledged."""
    kept = {1: (1, "kept")}
    return kept if error is not None else {**kept, 2: (1, "cut short")}


@pytest.mark.parametrize(
    "system",
    ["pykka", pytest.param("ray", marks=[pytest.mark.slow, pytest.mark.timeout(300)])],
)
def test_a_write_cut_by_a_crash_restart_leaves_no_phantom_task(
    pg: PostgresServer, pg_url: str, system: str, request: pytest.FixtureRequest
) -> None:
    ray = request.getfixturevalue("ray_cluster") if system == "ray" else None
    team = _team(pg_url, system, ray)
    try:
        tools = _tools(team)
        tools["update_planning"](create=[{"description": "kept"}])
        error = _cut_a_write(pg_url, team, tools, lambda: pg.restart("immediate"))
        assert _answered(team) == _stored(pg_url) == _after(error)
        assert ("cut short" in tools["search_planning"]()) == (error is None)
    finally:
        team.stop(everywhere=True)


def test_a_write_cut_by_a_stop_leaves_no_phantom_task(pg: PostgresServer, pg_url: str) -> None:
    team = _team(pg_url, "pykka")
    try:
        tools = _tools(team)
        tools["update_planning"](create=[{"description": "kept"}])
        error = _cut_a_write(pg_url, team, tools, lambda: pg.stop("fast"))
        with pytest.raises(TransientError):
            tools["search_planning"]()  # down: a retry, never an answer from memory alone
        pg.start()
        assert _answered(team) == _stored(pg_url) == _after(error)
        assert ("cut short" in tools["search_planning"]()) == (error is None)
    finally:
        team.stop(everywhere=True)


def test_writes_through_a_restart_and_a_stop_hold_exactly_what_the_store_holds(
    pg: PostgresServer, pg_url: str
) -> None:
    team = _team(pg_url, "pykka")
    acked: list[int] = []
    failed = itertools.count()
    done = threading.Event()

    def write() -> None:
        tools = _tools(team)
        for i in itertools.count():
            if done.is_set():
                return
            try:
                answer = tools["update_planning"](create=[{"description": f"task {i}"}])
            except TransientError:
                next(failed)
                continue
            acked.append(int(answer.split("[", 1)[1].split("]", 1)[0]))

    writer = threading.Thread(target=write)
    try:
        writer.start()
        for fault in (lambda: pg.restart("immediate"), lambda: pg.stop("fast")):
            seen = len(acked)
            wait_until(lambda seen=seen: len(acked) > seen + 20, timeout=60)
            fault()
            if pg.process is not None and pg.process.poll() is not None:
                pg.start()
        seen = len(acked)
        wait_until(lambda: len(acked) > seen + 20, timeout=60)
        done.set()
        writer.join(60)
        answered, stored = _answered(team), _stored(pg_url)
        assert answered == stored  # no phantom in memory
        assert set(acked) <= set(stored)  # nothing acknowledged is lost
        assert len(set(acked)) == len(acked)  # no id issued twice
    finally:
        done.set()
        team.stop(everywhere=True)
