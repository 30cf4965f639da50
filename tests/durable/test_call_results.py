"""The store of recorded call results, on SQLite and on PostgreSQL (each opened by its location
through the opener): claims, settled records, released claims, and two teams in one
database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolcards.stores import CallResults, open_call_results
from toolcards.stores.call_results import SqliteCallResults
from toolcards.stores.postgres.call_results import PostgresCallResults

KEY = "wf-1:3/pyd_ai_call_1"
Opener = Callable[..., CallResults]


@pytest.fixture(params=["sqlite", "postgres"])
def open_results(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the store of a team (the same database for every team)."""
    opened: list[CallResults] = []
    kind = SqliteCallResults if request.param == "sqlite" else PostgresCallResults
    where = str(tmp_path / "calls.db")
    if request.param == "postgres":
        where = request.getfixturevalue("postgres_url")

    def open_team(team: str = "t1") -> CallResults:
        store = open_call_results(where, team)
        assert isinstance(store, kind)
        opened.append(store)
        return store

    yield open_team
    for store in opened:
        store.close()


def test_the_first_claim_of_a_key_finds_nothing(open_results: Opener) -> None:
    assert open_results().claim(KEY, "append_line", "d1") is None


def test_a_key_claimed_and_never_settled_reads_unsettled(open_results: Opener) -> None:
    store = open_results()
    store.claim(KEY, "append_line", "d1")
    earlier = store.claim(KEY, "append_line", "d1")
    assert earlier is not None and not earlier.settled
    assert (earlier.tool_id, earlier.args_digest) == ("append_line", "d1")


def test_a_settled_key_reads_its_outcome_and_value(open_results: Opener) -> None:
    store = open_results()
    store.claim(KEY, "append_line", "d1")
    store.settle(KEY, "ok", "", '"appended"')
    again = open_results().claim(KEY, "append_line", "d1")  # another process, the same file
    assert again is not None and again.settled
    assert (again.outcome, again.value) == ("ok", '"appended"')


def test_a_released_claim_lets_the_key_run_again(open_results: Opener) -> None:
    store = open_results()
    store.claim(KEY, "append_line", "d1")
    store.release(KEY)
    assert store.claim(KEY, "append_line", "d1") is None


def test_a_settled_key_is_not_released(open_results: Opener) -> None:
    store = open_results()
    store.claim(KEY, "append_line", "d1")
    store.settle(KEY, "ok", "", "null")
    store.release(KEY)
    earlier = store.claim(KEY, "append_line", "d1")
    assert earlier is not None and earlier.settled


def test_the_first_answer_settled_stays(open_results: Opener) -> None:
    store = open_results()
    store.claim(KEY, "append_line", "d1")
    store.settle(KEY, "error", "interrupted", None)
    store.settle(KEY, "ok", "", '"appended"')  # a late settle of the same key
    earlier = store.claim(KEY, "append_line", "d1")
    assert earlier is not None and (earlier.outcome, earlier.value) == ("error", None)


def test_two_teams_never_see_each_others_calls(open_results: Opener) -> None:
    one, other = open_results("t1"), open_results("t2")
    one.claim(KEY, "append_line", "d1")
    one.settle(KEY, "ok", "", '"alpha secret"')
    assert other.find(KEY) is None
    elsewhere = other.claim(KEY, "other_tool", "d2", "beta.agent")
    assert elsewhere is not None and elsewhere.elsewhere  # claimed by another team: refused
    assert elsewhere.tool_id == "other_tool" and elsewhere.value is None  # its own claim only
    mine = one.find(KEY)
    assert mine is not None and (mine.outcome, mine.value) == ("ok", '"alpha secret"')


def test_a_team_claiming_a_key_first_is_not_refused_for_another_teams_later_claim(
    open_results: Opener,
) -> None:
    one, other = open_results("t1"), open_results("t2")
    assert one.claim(KEY, "append_line", "d1") is None
    other.claim(KEY, "append_line", "d1")
    again = one.claim(KEY, "append_line", "d1")  # t1's replay finds its own claim
    assert again is not None and not again.elsewhere and not again.settled


def test_find_reads_a_key_without_claiming_it(open_results: Opener) -> None:
    store = open_results()
    assert store.find(KEY) is None
    assert store.claim(KEY, "append_line", "d1") is None  # find left it unclaimed
    found = store.find(KEY)
    assert found is not None and not found.settled and found.tool_id == "append_line"
