"""Actor versions in PostgreSQL, what lets a process's copy of an actor catch up with the rows
other processes changed: each commit moves the version of every actor it changed and stamps
the state rows it wrote (a deleted key leaves a tombstone) with it; :func:`state_changes`
reads back what changed since a version."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolcards.stores.postgres.connections import Later, ThreadState
from toolcards.stores.rows import read_values

__all__ = [
    "TOMBSTONES_KEPT",
    "bump_versions",
    "changes_query",
    "read_changes",
    "state_changes",
]

TOMBSTONES_KEPT = 10_000
"""Deleted keys remembered per actor (a copy older than the oldest one reloads fully)."""

Rows = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
"""Runs one read (``%s`` placeholders) and returns its rows."""


def bump_versions(state: ThreadState, later: Later) -> None:
    """Before a commit: move the version of every actor the transaction changed by one, and
    stamp the state rows it wrote (and a tombstone per key it deleted) with that version.
    Nothing is read back: the statements are queued with ``later`` (one round trip)."""
    for team_id, actor in sorted(state.dirty):
        later(
            "INSERT INTO toolcards_actor_versions VALUES (%s, %s, 1) "
            "ON CONFLICT (team_id, actor) DO UPDATE "
            "SET version = toolcards_actor_versions.version + 1",
            (team_id, actor),
        )
        keys = state.keys.get((team_id, actor), {})
        if put := sorted(key for key, gone in keys.items() if not gone):
            later(
                "UPDATE toolcards_state s SET changed = v.version "
                "FROM toolcards_actor_versions v WHERE v.team_id = %s AND v.actor = %s "
                "AND s.team_id = v.team_id AND s.actor = v.actor AND s.key = ANY(%s)",
                (team_id, actor, put),
            )
        if gone := sorted(key for key, gone in keys.items() if gone):
            later(
                "INSERT INTO toolcards_state_tombstones SELECT v.team_id, v.actor, v.version, k "
                "FROM toolcards_actor_versions v, unnest(%s::text[]) AS k "
                "WHERE v.team_id = %s AND v.actor = %s ON CONFLICT DO NOTHING",
                (gone, team_id, actor),
            )
            _prune_tombstones(later, team_id, actor)


def _prune_tombstones(later: Later, team_id: str, actor: str) -> None:
    """Keep about the newest :data:`TOMBSTONES_KEPT` tombstones of an actor; the version
    they are pruned through is recorded (changes since an older one cannot be told)."""
    later(
        "WITH cut AS (SELECT changed FROM toolcards_state_tombstones WHERE team_id = %s "
        "AND actor = %s ORDER BY changed DESC OFFSET %s LIMIT 1), "
        "pruned AS (DELETE FROM toolcards_state_tombstones t USING cut WHERE t.team_id = %s "
        "AND t.actor = %s AND t.changed <= cut.changed) "
        "INSERT INTO toolcards_state_pruned SELECT %s, %s, changed FROM cut "
        "ON CONFLICT (team_id, actor) "
        "DO UPDATE SET through = GREATEST(toolcards_state_pruned.through, EXCLUDED.through)",
        (team_id, actor, TOMBSTONES_KEPT, team_id, actor, team_id, actor),
    )


def changes_query(team_id: str, actor: str, since: int) -> tuple[str, tuple[Any, ...]]:
    """One statement (one snapshot, one round trip) for the rows of ``actor`` written since
    version ``since``, the keys deleted since, and the version its tombstones are pruned
    through; :func:`read_changes` reads its rows."""
    return (
        "SELECT 0, key, value FROM toolcards_state WHERE team_id = %s AND actor = %s "
        "AND changed > %s "
        "UNION ALL SELECT DISTINCT 1, t.key, NULL FROM toolcards_state_tombstones t "
        "WHERE t.team_id = %s AND t.actor = %s AND t.changed > %s AND NOT EXISTS "
        "(SELECT 1 FROM toolcards_state s WHERE s.team_id = t.team_id AND s.actor = t.actor "
        "AND s.key = t.key) "
        "UNION ALL SELECT 2, NULL, through::text FROM toolcards_state_pruned "
        "WHERE team_id = %s AND actor = %s ORDER BY 1, 2",
        (team_id, actor, since, team_id, actor, since, team_id, actor),
    )


def read_changes(
    found: list[tuple[Any, ...]], since: int, actor: str
) -> tuple[list[tuple[str, Any]], list[str]] | None:
    """The rows written and the keys deleted, from the rows of :func:`changes_query`; None
    when tombstones a copy at ``since`` would need are pruned. A row written that does not
    read is as good as deleted (:func:`~toolcards.stores.rows.read_values`)."""
    texts: list[tuple[str, str]] = []
    gone: list[str] = []
    for kind, key, value in found:
        if kind == 0:
            texts.append((str(key), value))
        elif kind == 1:
            gone.append(str(key))
        elif since < int(value):
            return None
    written, unreadable = read_values(actor, texts)
    return written, gone + unreadable


def state_changes(
    rows: Rows, team_id: str, actor: str, since: int
) -> tuple[list[tuple[str, Any]], list[str]] | None:
    """See :meth:`toolcards.stores.base.Store.state_changes`; ``rows`` runs the read."""
    return read_changes(rows(*changes_query(team_id, actor, since)), since, actor)
