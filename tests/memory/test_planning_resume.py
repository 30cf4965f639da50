"""A resumed board reads its summary row and tasks by key, not every row (SQLite, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolcards.core.errors import RetriableError
from toolcards.runtime import Team, ToolActorContext
from toolcards.runtime.events import EventLog
from toolcards.stores.base import StateNamespace, Store
from toolcards.stores.postgres.team import PostgresStore
from toolcards.stores.sqlite.team import TeamStore
from toolcards.tools.planning import actor as planning_actor
from toolcards.tools.planning.actor import ACTOR_NAME, PlanningActor, PlanningConfig
from toolcards.tools.planning.card import PlanningTool
from toolcards.tools.planning.models import Task

ROWS = 1000
"""A board far larger than the few rows a restore, a first read or a short summary may read."""
VIA_TOOL = 20


class _CountsRows:
    """Counts the state rows a real store returns (by key and by range)."""

    rows_read = 0

    def state_get(self, team_id: str, actor: str, key: str) -> Any | None:
        value = super().state_get(team_id, actor, key)  # type: ignore[misc]
        self.rows_read += value is not None
        return value

    def state_items(self, *args: Any, **kwargs: Any) -> list[tuple[str, Any]]:
        rows: list[tuple[str, Any]] = super().state_items(*args, **kwargs)  # type: ignore[misc]
        self.rows_read += len(rows)
        return rows


class CountingSqlite(_CountsRows, TeamStore):
    pass


class CountingPostgres(_CountsRows, PostgresStore):
    pass


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "team.db")


def _counting(location: str) -> Store:
    if location.startswith("postgresql://"):
        return CountingPostgres(location)
    return CountingSqlite(location)


def tools_of(team: Team, member: str = "ann") -> dict[str, Any]:
    factory = team.bind([PlanningTool(vector_store=False)], member=member)
    return {fn.__name__: fn for fn in factory.get_tools()}


def bulk_put(team: Team, first: int, last: int) -> None:
    """Tasks ``first..last`` written around the tool, through the public state API."""
    state = team.state_of(ACTOR_NAME)
    with state.batch():
        for task_id in range(first, last + 1):
            status = ("pending", "started", "completed")[task_id % 3]
            task = Task(id=task_id, description=f"bulk {task_id}", status=status, creator="bulk")
            state.put(f"task:{task_id}", task.model_dump())


def build_board(location: str, rows: int = ROWS) -> None:
    """A stopped team: tasks made with the tool, more put in bulk, then (resumed) one change
    through the tool, which reads every row once and summarizes them again."""
    with Team("t", store=location) as team:
        tools = tools_of(team)
        tools["update_planning"](create=[{"description": f"made {i}"} for i in range(VIA_TOOL)])
        bulk_put(team, VIA_TOOL + 1, rows)
    with Team.resume("t", store=location) as team:
        tools_of(team)["update_planning"](update=[{"id": 1, "version": 1, "status": "started"}])


@pytest.fixture
def actor_on(location: str) -> Iterator[tuple[PlanningActor, Store]]:
    """The planning actor restored from a counting store holding a large board."""
    build_board(location)
    store = _counting(location)
    with Team("host", store=":memory:") as host:
        ctx = ToolActorContext(
            ACTOR_NAME, host, StateNamespace(store, "t", ACTOR_NAME), EventLog(store, "t")
        )
        actor = PlanningActor(ctx, PlanningConfig(vector_store=None))
        try:
            yield actor, store
        finally:
            store.close()


def test_restore_reads_the_summary_row_not_every_task(
    actor_on: tuple[PlanningActor, Store],
) -> None:
    actor, store = actor_on
    actor.on_start()
    assert store.rows_read <= 3  # type: ignore[attr-defined]


def test_the_first_task_read_after_restore_reads_one_row(
    actor_on: tuple[PlanningActor, Store],
) -> None:
    actor, store = actor_on
    actor.on_start()
    before = store.rows_read  # type: ignore[attr-defined]
    task = actor.get(ROWS // 2)
    assert task.description == f"bulk {ROWS // 2}"
    assert store.rows_read - before == 1  # type: ignore[attr-defined]


def test_the_unscoped_summary_after_restore_reads_only_the_tasks_it_shows(
    actor_on: tuple[PlanningActor, Store],
) -> None:
    actor, store = actor_on
    actor.on_start()
    before = store.rows_read  # type: ignore[attr-defined]
    view = actor.summary(None, False, 5)
    assert store.rows_read - before == 5  # type: ignore[attr-defined]
    assert [t.id for t in view.scoped] == [1, 2, 3, 4, 5]
    assert (view.total, view.by_status) == (ROWS, actor.board.view(None, False, 0).by_status)


def test_a_resumed_team_answers_the_first_call_from_a_large_board(location: str) -> None:
    build_board(location)
    with Team.resume("t", store=location) as team:
        tools = tools_of(team, "bob")
        text = tools["get_planning_task"](id=ROWS - 1)
    assert text.startswith(f"ID {ROWS - 1} [")
    assert f"Description: bulk {ROWS - 1}" in text


def test_ids_continue_from_the_largest_after_a_resume(location: str) -> None:
    build_board(location)
    with Team.resume("t", store=location) as team:
        out = tools_of(team)["update_planning"](create=[{"description": "next"}])
    assert out.startswith(f"created ids: [{ROWS + 1}]")


def test_ids_continue_past_rows_put_around_the_tool_after_the_last_change(
    location: str,
) -> None:
    build_board(location)
    with Team.resume("t", store=location) as team:
        bulk_put(team, ROWS + 1, ROWS + 10)
    with Team.resume("t", store=location) as team:
        tools = tools_of(team)
        assert f"bulk {ROWS + 10}" in tools["get_planning_task"](id=ROWS + 10)
        out = tools["update_planning"](create=[{"description": "next"}])
    assert out.startswith(f"created ids: [{ROWS + 11}]")


def test_the_summary_counts_rows_changed_around_the_tool(location: str) -> None:
    build_board(location, rows=100)
    with Team.resume("t", store=location) as team:
        bulk_put(team, 1, 100)  # every status rewritten: 34 pending, 33 started, 33 completed
    with Team.resume("t", store=location) as team:
        tools_of(team)
        handle = team.actor(ACTOR_NAME)
        assert handle is not None
        view = handle.ask(PlanningActor.summary, None, False, 3)
    assert view.total == 100
    assert view.by_status == {"pending": 33, "started": 34, "completed": 33}


def test_listing_after_a_resume_returns_every_task(location: str) -> None:
    build_board(location)
    with Team.resume("t", store=location) as team:
        tools_of(team)
        handle = team.actor(ACTOR_NAME)
        assert handle is not None
        tasks = handle.ask(PlanningActor.tasks)
    assert [t.id for t in tasks] == list(range(1, ROWS + 1))


def test_an_unknown_id_after_a_resume_names_the_first_ids(location: str) -> None:
    build_board(location, rows=100)
    with Team.resume("t", store=location) as team:
        tools = tools_of(team)
        with pytest.raises(RetriableError, match=r"existing ids: 1, 2, 3, .*, 30, \.\.\."):
            tools["get_planning_task"](id=10_000)


def test_a_stored_row_that_is_no_task_of_its_key_is_skipped(
    location: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One task row of wrong types written around the tool made every search and update
    raise; a next-id row that is no id kept the actor from starting."""
    build_board(location, rows=30)
    with Team.resume("t", store=location) as team:
        state = team.state_of(ACTOR_NAME)
        state.put("task:99", {"id": "x"})
        state.put("task:98", Task(id=5, description="not 5's row", creator="bulk").model_dump())
        state.put("meta:next_id", ["x"])  # no id: the actor did not start
    with Team.resume("t", store=location) as team:
        tools = tools_of(team)
        assert "bulk 30" in tools["search_planning"](query="bulk 30")
        out = tools["update_planning"](create=[{"description": "next"}])
        assert out.startswith("created ids: [31]")
        with pytest.raises(RetriableError, match="no task with id 99"):
            tools["get_planning_task"](id=99)
        assert "Description: made 4" in tools["get_planning_task"](id=5)
    assert "skipped stored row 'task:99'" in caplog.text
    assert "skipped stored row 'task:98': it holds task 5" in caplog.text


def test_a_resume_loads_stored_tasks_only_up_to_the_cap(
    location: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A million task rows written around the tool were all loaded and indexed by the first
    search (528 MiB; searches timed out): past the cap they stay in the store."""
    build_board(location, rows=100)
    monkeypatch.setattr(planning_actor, "MAX_BOARD_TASKS", 60)
    with Team.resume("t", store=location) as team:
        tools_of(team)
        handle = team.actor(ACTOR_NAME)
        assert handle is not None
        assert len(handle.ask(PlanningActor.tasks)) == 60
    assert "40 stored tasks past the cap of 60 were not loaded" in caplog.text
