"""Idempotency keys of committed mutations: the call id a tool actor's write ran under,
recorded in the same transaction as the write's rows, with the call's result.

A connection lost while ``COMMIT`` was on its way leaves the writer not knowing whether its
transaction committed. Its retry, under the same call id, finds the key when the first
attempt did commit and gets the recorded result back instead of writing again; when the
first attempt did not commit, the key is not there either and the retry writes. The key and
the rows commit or vanish together, so neither answer can be wrong.

Unlike :mod:`toolcards.stores.call_results` (governed calls of durable runs, claimed before
and settled after in their own transactions, possibly in another database), these rows live
in the team store beside the state they vouch for: only that makes "recorded" and "applied"
the same fact. Every row carries its ``team_id`` and every statement filters by it.

Bounded: a key is kept :data:`KEEP_SECONDS` (a retry comes within seconds or minutes), and a
team keeps at most about :data:`KEEP_PER_TEAM` keys (the oldest go first; the count is
enforced on a team's first record in a writing process and every :data:`PRUNE_EVERY` of its
records after, so a team holds at most ``KEEP_PER_TEAM + PRUNE_EVERY`` keys per writing
process, however many teams that process writes for).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from toolcards.stores.base import AppliedCall, dumps

KEEP_SECONDS = 24 * 3600.0
"""How long a key is kept after its call committed."""
KEEP_PER_TEAM = 10_000
"""The most keys a team keeps (the oldest are dropped first)."""
PRUNE_EVERY = 256
"""How many records a writer makes for a team between two enforcements of :data:`KEEP_PER_TEAM`."""
COUNTED_TEAMS = 4096
"""Teams whose records since their last enforcement a process counts (the least recently
written go first: such a team's next record enforces the bound again)."""

__all__ = ["KEEP_PER_TEAM", "KEEP_SECONDS", "PRUNE_EVERY", "AppliedCall", "find", "record"]

Execute = Callable[[str, tuple[Any, ...]], Any]
"""Runs one statement with ``?`` placeholders; returns a cursor (``fetchone``)."""


def statements(prefix: str) -> list[str]:
    """The table and its index, for a backend whose tables carry ``prefix``."""
    table = f"{prefix}applied_calls"
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (team_id TEXT NOT NULL, call_key TEXT NOT NULL, "
        "actor TEXT NOT NULL, digest TEXT NOT NULL, result TEXT NOT NULL, "
        "at DOUBLE PRECISION NOT NULL, PRIMARY KEY (team_id, call_key))",
        f"CREATE INDEX IF NOT EXISTS {table}_at ON {table} (team_id, at)",
    ]


def call_digest(method: str, args: Any, kwargs: Any) -> str:
    """What tells one call from another under the same key: its method and arguments."""
    text = dumps([method, args, kwargs])
    return hashlib.sha256(text.encode()).hexdigest()


def find(execute: Execute, prefix: str, team_id: str, key: str) -> AppliedCall | None:
    """The unexpired record of ``key`` in ``team_id``, or None."""
    row = execute(
        f"SELECT actor, digest, result, at FROM {prefix}applied_calls "
        "WHERE team_id = ? AND call_key = ? AND at >= ?",
        (team_id, key, time.time() - KEEP_SECONDS),
    ).fetchone()
    if row is None:
        return None
    return AppliedCall(str(row[0]), str(row[1]), str(row[2]), float(row[3]))


_since_prune: OrderedDict[tuple[str, str], int] = OrderedDict()
_since_prune_lock = threading.Lock()


def _prune_due(prefix: str, team_id: str) -> bool:
    """True on a team's first record here and on every :data:`PRUNE_EVERY`-th after it: a
    count per team (a count of the whole process let one team's keys grow past the bound
    while another team's records took every enforcement)."""
    key = (prefix, team_id)
    with _since_prune_lock:
        n = _since_prune.pop(key, 0)
        _since_prune[key] = (n + 1) % PRUNE_EVERY
        if len(_since_prune) > COUNTED_TEAMS:
            _since_prune.popitem(last=False)
    return n == 0


def record(
    execute: Execute, prefix: str, team_id: str, key: str, actor: str, digest: str, result: str
) -> None:
    """Record ``key`` (inside the transaction of the call's writes) and drop expired keys."""
    table = f"{prefix}applied_calls"
    now = time.time()
    execute(
        f"INSERT INTO {table} (team_id, call_key, actor, digest, result, at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (team_id, call_key) DO UPDATE SET "
        "actor = EXCLUDED.actor, digest = EXCLUDED.digest, result = EXCLUDED.result, "
        "at = EXCLUDED.at",
        (team_id, key, actor, digest, result, now),
    )
    execute(f"DELETE FROM {table} WHERE team_id = ? AND at < ?", (team_id, now - KEEP_SECONDS))
    if _prune_due(prefix, team_id):
        execute(
            f"DELETE FROM {table} WHERE team_id = ? AND at < (SELECT at FROM {table} "
            "WHERE team_id = ? ORDER BY at DESC LIMIT 1 OFFSET ?)",
            (team_id, team_id, KEEP_PER_TEAM - 1),
        )
