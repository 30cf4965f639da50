"""The pure-Python team store answers as the SQLite store does: one seeded run of mixed
operations (state writes, events, transactions that commit or roll back, compaction, call keys,
two teams) applied to both, every answer compared."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from toolcards.stores import MemoryStore, Store
from toolcards.stores.sqlite.team import TeamStore

TEAMS = ("a", "b")
ACTORS = ("#A", "#B", "team")
KEYS = ("k", "k1", "k2", "task:1", "task:2", "task:10", "tasl")


class Abort(Exception):
    """Rolls a transaction back."""


def _operation(rng: random.Random) -> Callable[[Store], Any]:
    team, actor, key = rng.choice(TEAMS), rng.choice(ACTORS), rng.choice(KEYS)
    value = rng.choice([1, "x", {"n": rng.randint(0, 9)}, [1, 2], None])
    kind = rng.randrange(11)
    if kind == 0:
        return lambda s: s.state_put(team, actor, key, value)
    if kind == 1:
        return lambda s: s.state_delete(team, actor, key)
    if kind == 2:
        return lambda s: (s.state_get(team, actor, key), s.state_count(team, actor, "task:"))
    if kind == 3:
        prefix, after = rng.choice(["", "task:"]), rng.choice(["", "k1", "task:1"])
        limit = rng.randrange(3)
        return lambda s: s.state_items(team, actor, prefix, after=after, limit=limit)
    if kind == 4:
        stamp = 1000.0 + rng.randrange(100)
        return lambda s: s.append_event(team, actor, f'{{"v":{stamp}}}', None, stamp)
    if kind == 5:
        position = rng.randrange(5)
        return lambda s: s.read_events(team, position, limit=4)
    if kind == 6:
        keep = rng.choice([None, 0, 1, 3])
        before = rng.choice([None, 1050.0])
        return lambda s: s.compact_events(team, keep_per_tool=keep, before=before)
    if kind == 7:
        inner = [_operation(rng) for _ in range(rng.randrange(1, 4))]
        rollback = rng.random() < 0.4
        return lambda s: _transaction(s, inner, rollback)
    if kind == 8:
        return lambda s: (s.last_seq(team, actor), s.last_position(team), s.team_exists(team))
    if kind == 9:
        return lambda s: (s.state_version(team, actor), s.recorded_actors(team))
    tag = f"tag{rng.randrange(3)}"
    return lambda s: s.record_actor(team, actor, tag, None)


def _transaction(store: Store, inner: list[Callable[[Store], Any]], rollback: bool) -> Any:
    answers: list[Any] = []
    try:
        with store.transaction():
            answers.extend(op(store) for op in inner)
            if rollback:
                raise Abort
    except Abort:
        answers.append("rolled back")
    return answers


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_double_answers_every_operation_as_sqlite_does(seed: int) -> None:
    rng = random.Random(seed)
    operations = [_operation(rng) for _ in range(400)]
    double, sqlite = MemoryStore(), TeamStore(":memory:")
    try:
        for store in (double, sqlite):
            for team in TEAMS:
                store.open_team(team)
        for n, op in enumerate(operations):
            assert op(double) == op(sqlite), f"operation {n}"
        for team in TEAMS:
            assert double.read_events(team, 0, 10_000) == sqlite.read_events(team, 0, 10_000)
    finally:
        double.close()
        sqlite.close()
