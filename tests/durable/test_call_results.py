"""The store of recorded call results, on SQLite and on PostgreSQL (each opened by its location
through the opener): claims, settled records, released claims, and two teams in one
database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from toolcards.stores import CallResults, call_results, open_call_results
from toolcards.stores.call_results import MAX_VALUE_BYTES, TOO_LARGE, SqliteCallResults
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


def test_a_claim_keeps_its_owner_and_only_its_owner_renews_its_lease(open_results: Opener) -> None:
    store = open_results()
    store.claim(KEY, "append_line", "d1", owner="claim-1", lease_until=100.0)
    store.renew(KEY, "claim-2", 500.0)  # not its owner: nothing changes
    store.renew(KEY, "claim-1", 200.0)
    found = store.find(KEY)
    assert found is not None and (found.owner, found.lease_until) == ("claim-1", 200.0)
    store.settle(KEY, "ok", "", "null")
    store.renew(KEY, "claim-1", 300.0)  # settled: its lease no longer matters
    found = store.find(KEY)
    assert found is not None and found.lease_until == 200.0


def test_a_value_too_large_to_keep_is_recorded_as_an_error_saying_so(open_results: Opener) -> None:
    """Every result was kept whole, however large (160 MB from one run of 40 reads)."""
    store = open_results()
    for key, size in (("kept", MAX_VALUE_BYTES), ("too large", MAX_VALUE_BYTES + 1)):
        store.claim(key, "read_blob", "d1")
        store.settle(key, "ok", "", '"' + "x" * (size - 2) + '"')
    kept, large = store.find("kept"), store.find("too large")
    assert kept is not None and kept.value is not None and len(kept.value) == MAX_VALUE_BYTES
    assert large is not None and (large.outcome, large.message, large.value) == (
        "error",
        TOO_LARGE,
        None,
    )


def test_records_settled_before_the_window_are_deleted_when_a_key_is_claimed(
    open_results: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows were never removed: every governed call left its whole result for good."""
    store, other_team = open_results(), open_results("t2")
    store.claim("settled", "append_line", "d1")
    store.settle("settled", "ok", "", '"appended"')
    store.claim("running", "append_line", "d1")  # unsettled (running, or its process died)
    other_team.claim("settled", "append_line", "d1")
    other_team.settle("settled", "ok", "", "null")
    store.claim("next", "append_line", "d1")
    assert store.find("settled") is not None  # within the window
    monkeypatch.setattr(call_results, "KEEP_SECONDS", 0.0)
    store.claim("later", "append_line", "d1")
    assert store.find("settled") is None
    assert all(store.find(key) is not None for key in ("running", "next", "later"))
    assert other_team.find("settled") is not None  # another team's rows are its own


def test_a_table_of_an_older_version_gains_the_lease_and_settle_columns(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "calls.db"
    with sqlite3.connect(path) as old:  # the table as the version before leases made it
        old.execute(
            "CREATE TABLE toolcards_call_results (team_id TEXT NOT NULL, call_key TEXT NOT NULL, "
            "tool_id TEXT NOT NULL, args_digest TEXT NOT NULL, principal TEXT NOT NULL DEFAULT '', "
            "call_id TEXT, claimed_at DOUBLE PRECISION NOT NULL, outcome TEXT, message TEXT, "
            "value TEXT, PRIMARY KEY (team_id, call_key))"
        )
        old.execute(
            "INSERT INTO toolcards_call_results VALUES ('t1', ?, 'append_line', 'd1', '', "
            "'call-1', 1.0, NULL, NULL, NULL)",
            (KEY,),
        )
    old.close()
    store = SqliteCallResults(path, "t1")
    earlier = store.claim(KEY, "append_line", "d1")  # its claim holds no lease: it reads dead
    assert earlier is not None and (earlier.call_id, earlier.lease_until) == ("call-1", 0.0)
    store.close()
