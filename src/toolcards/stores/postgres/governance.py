"""Governance state in PostgreSQL, for a team held by many processes: pending approvals and
remembered ones (grants), rate-limit counters and the audit trail
(:class:`~toolcards.governance.audit.log.AuditLog` with a ``postgresql://`` location uses
:class:`PostgresAuditTable`).

One module owns this SQL; the approval logic is the SQLite store's (the same statements, with
PostgreSQL's placeholders), so both pass one contract suite.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from toolcards.stores import approvals, audit_sql, budgets, grants
from toolcards.stores.approvals import SqlApprovalStore
from toolcards.stores.base import Limit, Spend
from toolcards.stores.governance import Unchained
from toolcards.stores.grants import SqlGrants
from toolcards.stores.migrate import TeamColumn
from toolcards.stores.postgres.connections import Connections
from toolcards.stores.postgres.listener import GRANTS_CHANNEL, EventListener
from toolcards.stores.postgres.schema import keyed_lock, run_ddl

_BUCKETS = """
CREATE TABLE IF NOT EXISTS toolcards_rate_buckets (
    key TEXT PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL
)
"""

_T = TypeVar("_T")
_SCHEMA_LOCK = 7_264_331_943
_TABLE_NAME = re.compile(r"\b(audit|approvals|grants|budget_spend|budget_keys)(?=[ (_])")


class _Cursorish:
    """A psycopg cursor speaking the ``?`` placeholders of the shared SQL (``tables``: the
    shared SQL's table names are SQLite's, made PostgreSQL's)."""

    def __init__(self, cursor: Any, *, tables: bool = False) -> None:
        self._cursor = cursor
        self._tables = tables

    def _sql(self, sql: str) -> str:
        return (_TABLE_NAME.sub(r"toolcards_\1", sql) if self._tables else sql).replace("?", "%s")

    def execute(self, sql: str, params: Any = ()) -> Any:
        self._cursor.execute(self._sql(sql), params)
        return self._cursor


def postgres_ddl(sqlite_ddl: str) -> str:
    """The SQLite schema of an audit or approval table, for PostgreSQL: the same columns
    (64-bit ids, double precision reals), with ``toolcards_`` table and index names."""
    ddl = sqlite_ddl.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
    ddl = re.sub(r"\bREAL\b", "DOUBLE PRECISION", ddl)
    return _TABLE_NAME.sub(r"toolcards_\1", ddl)


def create_table(
    db: Connections, table: str, migration: TeamColumn | None = None, indexes: str = ""
) -> None:
    """Create a table (SQLite DDL, translated), add its team column when it predates it,
    then its indexes: under one advisory lock, so concurrent processes migrate once."""
    with db.transaction(), db.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for statement in postgres_ddl(table).split(";"):
            run_ddl(cur, statement)
        if migration is not None:
            migration.postgres(cur)
        for statement in postgres_ddl(indexes).split(";"):
            if statement.strip():
                run_ddl(cur, statement)


def named_team(team_id: str | None) -> str:
    """``team_id``, which a shared database needs: without it two processes that each left
    it out would silently be one team (ValueError naming the key)."""
    if not team_id:
        raise ValueError(
            "team_id: a PostgreSQL store holds many teams; name the team its rows belong to"
        )
    return team_id


class _TeamTable:
    """One team's view of a governance table in PostgreSQL: the connections, the printable
    location, the team, and the table made (and migrated) on first open."""

    def __init__(self, url: str, team_id: str | None, connect_timeout: float) -> None:
        self.team_id = named_team(team_id)
        self._db = Connections(url, connect_timeout=connect_timeout)
        self.location = self._db.location

    def close(self) -> None:
        self._db.close()


class PostgresApprovalStore(_TeamTable, SqlApprovalStore):
    """Pending approvals in a PostgreSQL database: every process of a team sees one set, and
    a grant made in one process releases the call waiting in another. Its ``grants`` are the
    team's remembered approvals: a change is notified to every process (which reads them
    again), and each use of one is confirmed by one query, so a revoked grant stops at once
    on every machine."""

    table = "toolcards_approvals"

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        create_table(self._db, approvals.TABLE, approvals.MIGRATION, approvals.INDEXES)
        create_table(self._db, grants.TABLE, grants.MIGRATION, grants.INDEXES)
        stamp = NotifiedStamp(self._db, self.location, self.team_id)
        self.grants = SqlGrants(
            "toolcards_grants", self.team_id, self._grants_tx, self._read, stamp, fresh=False
        )

    def _grants_tx(self) -> AbstractContextManager[Any]:
        return self._team_tx("grants")

    def close(self) -> None:
        self.grants.close()
        super().close()

    def _tx(self) -> AbstractContextManager[Any]:
        return self._team_tx("approvals")

    @contextmanager
    def _team_tx(self, table: str) -> Iterator[Any]:
        """A transaction holding the team's lock on ``table``: the team's writers (in any
        process) go one by one, so what one checks before it writes (a binding, a principal's
        pending bound, the team's grant limit) still holds when it commits. The team's lock,
        not the table's: every team shares the table, and one team's slow or stalled
        transaction must never hold up another team's."""
        with self._db.transaction(), self._db.cursor() as cur:
            keyed_lock(cur, table, self.team_id)
            yield _Cursorish(cur)

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._db.cursor() as cur:
            yield _Cursorish(cur)


class NotifiedStamp:
    """The stamp of a team's grants in PostgreSQL: a number this process moves whenever the
    database notifies a change of them (and after its listening connection comes back, when a
    notice may have been lost); :meth:`move` sends the notice."""

    def __init__(self, db: Connections, location: str, team_id: str) -> None:
        self._db = db
        self._team_id = team_id
        self._listener = EventListener(db, location, GRANTS_CHANNEL)
        self._value = 0
        self._unwatch: Any = None

    def read(self) -> object:
        if self._unwatch is None:  # listening from the first read on
            self._unwatch = self._listener.watch(self._team_id, self._moved)
            self._value += 1  # what changed before the listener started is read again
        return self._value

    def _moved(self) -> None:
        self._value += 1

    def move(self) -> None:
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SELECT pg_notify(%s, %s)", (GRANTS_CHANNEL, self._team_id))
        self._value += 1

    def close(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
        self._listener.stop()


class PostgresRateLimiter(_TeamTable):
    """Token buckets in PostgreSQL: a limit of 5/min holds across every process and machine
    (the database's clock refills them, so machines need not agree on the time)."""

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        create_table(self._db, _BUCKETS)

    def acquire(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """Take one token from every applicable bucket: 0.0 when allowed, else the seconds
        until the call would be (no token is taken then)."""
        if not limits:
            return 0.0
        keys = [(_bucket_key(self.team_id, lim, principal, tool_id), lim) for lim in limits]
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SELECT extract(epoch from clock_timestamp())::float8")
            now = float(cur.fetchone()[0])
            states: list[tuple[str, float]] = []
            wait = 0.0
            for key, lim in sorted(keys, key=lambda item: item[0]):  # one lock order
                cur.execute(
                    "INSERT INTO toolcards_rate_buckets VALUES (%s, %s, %s) "
                    "ON CONFLICT (key) DO NOTHING",
                    (key, float(lim.count), now),
                )
                cur.execute(
                    "SELECT tokens, updated FROM toolcards_rate_buckets WHERE key=%s FOR UPDATE",
                    (key,),
                )
                tokens, updated = cur.fetchone()
                rate = lim.count / lim.period
                tokens = min(float(lim.count), float(tokens) + (now - float(updated)) * rate)
                if tokens < 1.0:
                    wait = max(wait, (1.0 - tokens) / rate)
                states.append((key, tokens))
            taken = 0.0 if wait > 0.0 else 1.0
            for key, tokens in states:
                cur.execute(
                    "UPDATE toolcards_rate_buckets SET tokens=%s, updated=%s WHERE key=%s",
                    (tokens - taken, now, key),
                )
        return wait

    def peek(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """What :meth:`acquire` would answer now, taking no token and making no row (a bucket
        with no row is full)."""
        wait = 0.0
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SELECT extract(epoch from clock_timestamp())::float8")
            now = float(cur.fetchone()[0])
            for lim in limits:
                key = _bucket_key(self.team_id, lim, principal, tool_id)
                cur.execute(
                    "SELECT tokens, updated FROM toolcards_rate_buckets WHERE key=%s", (key,)
                )
                row = cur.fetchone()
                if row is not None:
                    rate = lim.count / lim.period
                    tokens = float(row[0]) + (now - float(row[1])) * rate
                    wait = max(wait, (1.0 - tokens) / rate)
        return wait

    def reset(self) -> None:
        """Forget this team's buckets (other teams' stay)."""
        prefix = json.dumps([self.team_id])[:-1] + ","
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("DELETE FROM toolcards_rate_buckets WHERE starts_with(key, %s)", (prefix,))


_BUDGET_FUNCTIONS = """
CREATE OR REPLACE FUNCTION toolcards_budget_take(
    p_team text, p_key text, p_counters text[], p_amounts float8[], p_limits float8[],
    p_expires float8[], p_now float8, p_key_expires float8
) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    i integer;
    n integer := coalesce(array_length(p_counters, 1), 0);
    held float8;
BEGIN
    IF random() < %(prune)s THEN
        DELETE FROM toolcards_budget_keys WHERE team_id = p_team AND expires <= p_now;
        DELETE FROM toolcards_budget_spend WHERE team_id = p_team AND expires <= p_now;
    END IF;
    IF p_key IS NOT NULL AND EXISTS (
        SELECT 1 FROM toolcards_budget_keys WHERE team_id = p_team AND key = p_key
    ) THEN
        RETURN -1;
    END IF;
    FOR i IN 1 .. n LOOP  -- the counters come sorted: every process locks them in one order
        INSERT INTO toolcards_budget_spend VALUES (p_team, p_counters[i], 0, p_now, p_expires[i])
            ON CONFLICT DO NOTHING;
        SELECT spent INTO held FROM toolcards_budget_spend
            WHERE team_id = p_team AND counter = p_counters[i] FOR UPDATE;
        IF held + p_amounts[i] > p_limits[i] THEN
            RETURN i - 1;
        END IF;
    END LOOP;
    IF p_key IS NOT NULL THEN
        INSERT INTO toolcards_budget_keys VALUES (p_team, p_key, p_key_expires)
            ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN  -- counted meanwhile by another process
            RETURN -1;
        END IF;
    END IF;
    FOR i IN 1 .. n LOOP
        UPDATE toolcards_budget_spend SET spent = spent + p_amounts[i], updated = p_now,
            expires = p_expires[i] WHERE team_id = p_team AND counter = p_counters[i];
    END LOOP;
    RETURN -1;
END $$;
CREATE OR REPLACE FUNCTION toolcards_budget_add(
    p_team text, p_key text, p_counters text[], p_amounts float8[], p_expires float8[],
    p_now float8, p_key_expires float8
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    i integer;
BEGIN
    IF p_key IS NOT NULL THEN
        INSERT INTO toolcards_budget_keys VALUES (p_team, p_key, p_key_expires)
            ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_counters, 1), 0) LOOP
        INSERT INTO toolcards_budget_spend VALUES (p_team, p_counters[i], p_amounts[i], p_now,
                                                   p_expires[i])
            ON CONFLICT (team_id, counter) DO UPDATE SET
                spent = toolcards_budget_spend.spent + excluded.spent,
                updated = excluded.updated, expires = excluded.expires;
    END LOOP;
END $$
"""


class PostgresBudgets(_TeamTable):
    """Budget counters in PostgreSQL, shared by every process and machine of a team. A use is
    one statement (one round trip): a function that checks and adds every counter of the use
    under row locks taken in one order, so no process ever spends past a limit, and a use
    counted once under its key is never counted again."""

    def __init__(
        self, url: str, team_id: str | None = None, *, connect_timeout: float = 5.0
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        create_table(self._db, budgets.SPEND, budgets.SPEND_MIGRATION, budgets.SPEND_INDEXES)
        create_table(self._db, budgets.KEYS, budgets.KEYS_MIGRATION, budgets.KEYS_INDEXES)
        with self._db.transaction(), self._db.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            cur.execute(_BUDGET_FUNCTIONS % {"prune": 1.0 / budgets.PRUNE_EVERY})
        self._reopen = (url, self.team_id, connect_timeout)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as where it counts: unpickling (a worker of the team) opens the same table."""
        url, team_id, connect_timeout = self._reopen
        return (_reopen_budgets, (url, team_id, connect_timeout))

    def take(self, key: str | None, spends: Sequence[Spend], now: float) -> int | None:
        ordered = sorted(enumerate(spends), key=lambda item: item[1].counter)
        with self._db.cursor() as cur:
            cur.execute(
                "SELECT toolcards_budget_take(%s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    self.team_id, key, [s.counter for _, s in ordered],
                    [float(s.amount) for _, s in ordered], [float(s.limit) for _, s in ordered],
                    [s.expires for _, s in ordered], now, now + budgets.KEY_TTL,
                ),
            )  # fmt: skip
            over = int(cur.fetchone()[0])
        return None if over < 0 else ordered[over][0]

    def add(self, key: str | None, spends: Sequence[Spend], now: float) -> None:
        ordered = sorted(spends, key=lambda spend: spend.counter)
        with self._db.cursor() as cur:
            cur.execute(
                "SELECT toolcards_budget_add(%s, %s, %s, %s, %s, %s, %s)",
                (
                    self.team_id, key, [s.counter for s in ordered],
                    [float(s.amount) for s in ordered], [s.expires for s in ordered], now,
                    now + budgets.KEY_TTL,
                ),
            )  # fmt: skip

    def spent(self, counters: Sequence[str]) -> dict[str, float]:
        if not counters:
            return {}
        sql = (
            "SELECT counter, spent FROM toolcards_budget_spend "
            "WHERE team_id = %s AND counter = ANY(%s)"
        )

        def query(cur: Any) -> list[tuple[Any, ...]]:
            cur.execute(sql, (self.team_id, list(counters)))
            return list(cur.fetchall())

        return {str(c): float(s) for c, s in self._db.read(query)}

    def listing(self, now: float, limit: int = 1000) -> list[tuple[str, float, float]]:
        sql = (
            "SELECT counter, spent, updated FROM toolcards_budget_spend WHERE team_id = %s "
            "AND (expires IS NULL OR expires > %s) ORDER BY updated DESC LIMIT %s"
        )

        def query(cur: Any) -> list[tuple[Any, ...]]:
            cur.execute(sql, (self.team_id, now, int(limit)))
            return list(cur.fetchall())

        return [(str(c), float(s), float(u)) for c, s, u in self._db.read(query)]


def _reopen_budgets(url: str, team_id: str, connect_timeout: float) -> PostgresBudgets:
    return PostgresBudgets(url, team_id, connect_timeout=connect_timeout)


def _bucket_key(team_id: str, lim: Limit, principal: str, tool_id: str) -> str:
    """One bucket per team, limit, principal and tool; JSON, so no two tuples share a key."""
    return json.dumps([team_id, lim.index, lim.count, lim.period, principal, tool_id])


class PostgresAuditTable(_TeamTable):
    """The audit trail in PostgreSQL: every process of a team appends to one table, and to
    one chain (each write locks the team's chain head until it commits). ``read_only``: a
    trail looked at beside its writers, which runs no DDL (it takes the schema lock)."""

    def __init__(
        self,
        url: str,
        team_id: str | None = None,
        *,
        connect_timeout: float = 5.0,
        read_only: bool = False,
    ) -> None:
        super().__init__(url, team_id, connect_timeout)
        if not read_only:
            create_table(self._db, audit_sql.TABLE, audit_sql.MIGRATION, audit_sql.INDEXES)

    def insert(
        self,
        rows: list[tuple[Any, ...]],
        *,
        replay: bool = False,
        texts: list[bytes] | None = None,
    ) -> int:
        with self._db.transaction(), self._db.cursor() as cur:
            table = _Cursorish(cur, tables=True)
            lock = " FOR UPDATE"  # writers of the team, in any process, chain one by one
            return audit_sql.write(table, self.team_id, rows, replay=replay, lock=lock, texts=texts)

    def select(self, where: str, params: list[Any], limit: int) -> list[tuple[Any, ...]]:
        sql, args = audit_sql.select(where), [self.team_id, *params, limit]
        return self._read(lambda cur: list(cur.execute(sql, args).fetchall()))

    def chain_page(self, after: int, limit: int) -> list[Any]:
        return self._read(lambda cur: audit_sql.chain_page(cur, self.team_id, after, limit))

    def chain_row(self, seq: int) -> int | None:
        return self._read(lambda cur: audit_sql.chain_row(cur, self.team_id, seq))

    def chain_head(self) -> tuple[int, str] | None:
        return self._read(lambda cur: audit_sql.chain_head(cur, self.team_id))

    def unchained(self) -> Unchained:
        return self._read(lambda cur: audit_sql.unchained(cur, self.team_id))

    def other_teams(self) -> list[str]:
        return self._read(lambda cur: audit_sql.other_teams(cur, self.team_id))

    def _read(self, query: Callable[[_Cursorish], _T]) -> _T:
        # a connection lost since the last read is reopened once
        return self._db.read(lambda cur: query(_Cursorish(cur, tables=True)))
