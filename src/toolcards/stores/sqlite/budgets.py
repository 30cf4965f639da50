"""One team's budget counters in a SQLite file (see :mod:`toolcards.stores.budgets`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from toolcards.stores.budgets import (
    KEY_TTL,
    KEYS,
    KEYS_INDEXES,
    KEYS_MIGRATION,
    PRUNE_EVERY,
    SPEND,
    SPEND_INDEXES,
    SPEND_MIGRATION,
)
from toolcards.stores.governance import Spend
from toolcards.stores.migrate import sqlite_setup
from toolcards.stores.sqlite.connect import immediate, shared_connection


class SqliteBudgets:
    """One team's budget counters in a SQLite file, safe for several processes on one
    machine (every use is one write transaction taken up front)."""

    def __init__(self, path: str | Path, team_id: str | None = None) -> None:
        self.path = Path(path)
        self._db = shared_connection(self.path, sync=True)
        self.team_id = sqlite_setup(self._db, SPEND, SPEND_MIGRATION, SPEND_INDEXES, team_id)
        sqlite_setup(self._db, KEYS, KEYS_MIGRATION, KEYS_INDEXES, self.team_id)
        self._lock = threading.Lock()
        self._uses = 0

    def _tx(self) -> AbstractContextManager[Any]:
        return immediate(self._db, self._lock)

    def take(self, key: str | None, spends: Sequence[Spend], now: float) -> int | None:
        team = self.team_id
        with self._tx() as db:
            self._prune(db, now)
            if key is not None and self._counted(db, key):
                return None
            for index, spend in enumerate(spends):
                row = db.execute(
                    "SELECT spent FROM budget_spend WHERE team_id = ? AND counter = ?",
                    (team, spend.counter),
                ).fetchone()
                if (float(row[0]) if row else 0.0) + spend.amount > spend.limit:
                    return index
            self._spend(db, key, spends, now)
        return None

    def add(self, key: str | None, spends: Sequence[Spend], now: float) -> None:
        with self._tx() as db:
            self._prune(db, now)
            if key is None or not self._counted(db, key):
                self._spend(db, key, spends, now)

    def spent(self, counters: Sequence[str]) -> dict[str, float]:
        if not counters:
            return {}
        marks = ", ".join("?" * len(counters))
        with self._lock:
            rows = self._db.execute(
                "SELECT counter, spent FROM budget_spend "
                f"WHERE team_id = ? AND counter IN ({marks})",
                (self.team_id, *counters),
            ).fetchall()
        return {str(c): float(s) for c, s in rows}

    def listing(self, now: float, limit: int = 1000) -> list[tuple[str, float, float]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT counter, spent, updated FROM budget_spend WHERE team_id = ? "
                "AND (expires IS NULL OR expires > ?) ORDER BY updated DESC LIMIT ?",
                (self.team_id, now, int(limit)),
            ).fetchall()
        return [(str(c), float(s), float(u)) for c, s, u in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _counted(self, db: Any, key: str) -> bool:
        row = db.execute(
            "SELECT 1 FROM budget_keys WHERE team_id = ? AND key = ?", (self.team_id, key)
        ).fetchone()
        return row is not None

    def _spend(self, db: Any, key: str | None, spends: Sequence[Spend], now: float) -> None:
        team = self.team_id
        if key is not None:
            db.execute("INSERT INTO budget_keys VALUES (?, ?, ?)", (team, key, now + KEY_TTL))
        for spend in spends:
            db.execute(
                "INSERT INTO budget_spend VALUES (?, ?, ?, ?, ?) ON CONFLICT (team_id, counter) "
                "DO UPDATE SET spent = spent + excluded.spent, updated = excluded.updated, "
                "expires = excluded.expires",
                (team, spend.counter, spend.amount, now, spend.expires),
            )

    def _prune(self, db: Any, now: float) -> None:
        self._uses += 1
        if self._uses % PRUNE_EVERY:
            return
        db.execute(
            "DELETE FROM budget_keys WHERE team_id = ? AND expires <= ?", (self.team_id, now)
        )
        db.execute(
            "DELETE FROM budget_spend WHERE team_id = ? AND expires <= ?", (self.team_id, now)
        )
