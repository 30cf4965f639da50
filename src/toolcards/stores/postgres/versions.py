"""Actor versions in PostgreSQL, what lets a process's copy of an actor catch up with the rows
other processes changed: each commit moves the version of every actor it changed and stamps
the state rows it wrote (a deleted key leaves a tombstone) with it; :func:`state_changes`
reads back what changed since a version."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from toolcards.stores.postgres.connections import ThreadState

__all__ = ["TOMBSTONES_KEPT", "bump_versions", "state_changes"]

TOMBSTONES_KEPT = 10_000
"""Deleted keys remembered per actor (a copy older than the oldest one reloads fully)."""

Rows = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
"""Runs one read (``%s`` placeholders) and returns its rows."""


def bump_versions(state: ThreadState, cur: Any) -> None:
    """Before a commit: move the version of every actor the transaction changed by one, and
    stamp the state rows it wrote (and a tombstone per key it deleted) with that version."""
    for team_id, actor in sorted(state.dirty):
        cur.execute(
            "INSERT INTO toolcards_actor_versions VALUES (%s, %s, 1) "
            "ON CONFLICT (team_id, actor) DO UPDATE "
            "SET version = toolcards_actor_versions.version + 1 RETURNING version",
            (team_id, actor),
        )
        version = int(cur.fetchone()[0])
        keys = state.keys.get((team_id, actor), {})
        if put := sorted(key for key, gone in keys.items() if not gone):
            cur.execute(
                "UPDATE toolcards_state SET changed=%s "
                "WHERE team_id=%s AND actor=%s AND key = ANY(%s)",
                (version, team_id, actor, put),
            )
        if gone := sorted(key for key, gone in keys.items() if gone):
            cur.executemany(
                "INSERT INTO toolcards_state_tombstones VALUES (%s, %s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                [(team_id, actor, version, key) for key in gone],
            )
            _prune_tombstones(cur, team_id, actor)


def _prune_tombstones(cur: Any, team_id: str, actor: str) -> None:
    """Keep about the newest :data:`TOMBSTONES_KEPT` tombstones of an actor; the version
    they are pruned through is recorded (changes since an older one cannot be told)."""
    cur.execute(
        "SELECT changed FROM toolcards_state_tombstones WHERE team_id=%s AND actor=%s "
        "ORDER BY changed DESC OFFSET %s LIMIT 1",
        (team_id, actor, TOMBSTONES_KEPT),
    )
    row = cur.fetchone()
    if row is None:
        return
    through = int(row[0])
    cur.execute(
        "DELETE FROM toolcards_state_tombstones WHERE team_id=%s AND actor=%s AND changed <= %s",
        (team_id, actor, through),
    )
    cur.execute(
        "INSERT INTO toolcards_state_pruned VALUES (%s, %s, %s) ON CONFLICT (team_id, actor) "
        "DO UPDATE SET through = GREATEST(toolcards_state_pruned.through, EXCLUDED.through)",
        (team_id, actor, through),
    )


def state_changes(
    rows: Rows, team_id: str, actor: str, since: int
) -> tuple[list[tuple[str, Any]], list[str]] | None:
    """See :meth:`toolcards.stores.base.Store.state_changes`; ``rows`` runs the reads."""
    written = rows(
        "SELECT key, value FROM toolcards_state WHERE team_id=%s AND actor=%s "
        "AND changed > %s ORDER BY key",
        (team_id, actor, since),
    )
    gone = rows(
        "SELECT DISTINCT t.key FROM toolcards_state_tombstones t WHERE t.team_id=%s "
        "AND t.actor=%s AND t.changed > %s AND NOT EXISTS (SELECT 1 FROM toolcards_state s "
        "WHERE s.team_id=t.team_id AND s.actor=t.actor AND s.key=t.key) ORDER BY t.key",
        (team_id, actor, since),
    )
    pruned = rows(  # read last: a prune that raced the reads above shows here
        "SELECT through FROM toolcards_state_pruned WHERE team_id=%s AND actor=%s",
        (team_id, actor),
    )
    if pruned and since < int(pruned[0][0]):
        return None  # tombstones it would need are gone
    return [(str(k), json.loads(v)) for k, v in written], [str(k) for (k,) in gone]
