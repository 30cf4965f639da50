"""The event-log statements both team stores run alike, on tables named with a backend's
``prefix`` and with ``?`` placeholders (see :data:`toolcards.stores.applied_calls.Execute`):
the envelope columns an older events table gains, the refusal of a newer layout, and
compaction. Every statement filters by the team."""

from __future__ import annotations

from collections.abc import Iterable

from toolcards.stores.applied_calls import Execute
from toolcards.stores.errors import SchemaTooNew
from toolcards.stores.rows import (
    EVENT_ENVELOPE_COLUMNS,
    LIFECYCLE_TOOL,
    SCHEMA_VERSION,
    Compaction,
    compaction_marker,
    dumps,
)

__all__ = ["add_envelope_columns", "check_schema", "compact"]


def check_schema(location: str, version: int) -> None:
    """Refuse a store whose layout ``version`` is newer than this code writes."""
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"store {location} has schema {version}, newer than this toolcards "
            f"({SCHEMA_VERSION}); upgrade toolcards to open it"
        )


def add_envelope_columns(execute: Execute, prefix: str, columns: Iterable[str]) -> None:
    """Add to the events table, whose columns are ``columns``, the envelope columns it lacks
    (older rows keep NULL there)."""
    present = set(columns)
    for name, ddl in EVENT_ENVELOPE_COLUMNS:
        if name not in present:
            execute(f"ALTER TABLE {prefix}events ADD COLUMN {name} {ddl}", ())


def compact(
    execute: Execute,
    prefix: str,
    team_id: str,
    *,
    keep_per_tool: int | None,
    before: float | None,
) -> list[Compaction]:
    """Inside a transaction: drop old events of every tool of ``team_id`` except lifecycle
    ones (see :meth:`toolcards.stores.base.Store.compact_events`)."""
    events = f"{prefix}events"
    done: list[Compaction] = []
    tools = execute(
        f"SELECT tool_id, seq FROM {prefix}tool_seqs WHERE team_id=? AND tool_id<>? "
        "ORDER BY tool_id",
        (team_id, LIFECYCLE_TOOL),
    ).fetchall()
    for tool_id, last in tools:
        through = 0 if keep_per_tool is None else int(last) - keep_per_tool
        if before is not None:
            row = execute(
                f"SELECT MAX(seq) FROM {events} WHERE team_id=? AND tool_id=? AND timestamp<?",
                (team_id, tool_id, before),
            ).fetchone()
            through = max(through, int(row[0] or 0))
        if through <= 0:
            continue
        removed = int(
            execute(
                f"DELETE FROM {events} WHERE team_id=? AND tool_id=? AND seq<?",
                (team_id, tool_id, through),
            ).rowcount
        )
        marker = dumps(compaction_marker(through))
        replaced = int(
            execute(
                f"UPDATE {events} SET payload=?, payload_type=NULL, sender=NULL WHERE team_id=? "
                "AND tool_id=? AND seq=? AND payload<>?",
                (marker, team_id, tool_id, through, marker),
            ).rowcount
        )
        if removed or replaced:
            done.append(Compaction(str(tool_id), through, removed + replaced))
    return done
