"""The audit table: its schema, its migrations, the statements both audit stores use, and the
SQLite store (:class:`SqliteAuditTable`; PostgreSQL's is in :mod:`.postgres.governance`).

Rows carry their ``team_id``; every statement the stores run filters by the table's team.

Each row carries a key made when the row was made (``row_key``): a row written again (a
spill replayed after a COMMIT whose answer was lost, the journal of a killed process) is found
by its time and key, under the chain head's lock, and not written twice. Each team's rows
form a hash chain (:func:`link`; checked by :mod:`toolcards.stores.audit_chain`): each row's
position and digest (over the digest of the row before it) are written in the transaction
that moves the team's chain head (one row per team in ``audit_chain``, locked by that
transaction, so concurrent writers chain one after the other). The head, made with the team's
first chained row, records the rows without a position the table held then (written before
the chain): any other such row was written around the trail.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from toolcards.stores.errors import StoreError
from toolcards.stores.governance import Unchained
from toolcards.stores.migrate import TeamColumn, sqlite_owner, sqlite_setup
from toolcards.stores.sqlite.connect import read_only_connection, shared_connection

TABLE = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    principal TEXT NOT NULL,
    principal_type TEXT NOT NULL,
    roles TEXT NOT NULL,
    surface TEXT NOT NULL,
    tool TEXT NOT NULL,
    call_id TEXT,
    args_digest TEXT NOT NULL,
    args TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    outcome TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    error TEXT,
    team_id TEXT NOT NULL DEFAULT '',
    approved_args_digest TEXT,
    hook TEXT,
    grant_id TEXT,
    row_key TEXT,
    chain_seq BIGINT,
    chain_digest TEXT
);
CREATE TABLE IF NOT EXISTS audit_chain (
    team_id TEXT PRIMARY KEY,
    seq BIGINT NOT NULL,
    digest TEXT NOT NULL,
    older_rows BIGINT,
    older_id BIGINT
)
"""
KEYED = "hidden:"
"""The prefix of the row keys :func:`keys_of` finds (rows a governed toolset writes for calls
its model made to tools hidden from it): only those rows are in the key index, so the rows of
every other call pay nothing for it."""
_KEYED_ROWS = f"substr(row_key, 1, {len(KEYED)}) = '{KEYED}'"  # equal bytes under any collation
INDEXES = f"""
CREATE INDEX IF NOT EXISTS audit_team_principal_ts ON audit(team_id, principal, ts);
CREATE INDEX IF NOT EXISTS audit_team_tool_ts ON audit(team_id, tool, ts);
CREATE INDEX IF NOT EXISTS audit_team_ts ON audit(team_id, ts);
CREATE INDEX IF NOT EXISTS audit_team_grant ON audit(team_id, grant_id) WHERE grant_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_team_hidden_key ON audit(team_id, row_key) WHERE {_KEYED_ROWS}
"""
MIGRATION = TeamColumn(
    "audit",
    drop_indexes=("audit_principal_ts", "audit_tool_ts", "audit_ts"),
    added=(
        ("approved_args_digest", "TEXT"),
        ("hook", "TEXT"),
        ("grant_id", "TEXT"),
        ("row_key", "TEXT"),
        ("chain_seq", "BIGINT"),
        ("chain_digest", "TEXT"),
    ),
    beside=(TeamColumn("audit_chain", added=(("older_rows", "BIGINT"), ("older_id", "BIGINT"))),),
)
"""Tables written before gain the team, the digest of an approver's edited arguments (NULL
in older rows: they ran as called), the guardrail hook that refused or changed a call, the
grant (a remembered approval) that let it run, the row's key and its place in the team's
chain (NULL in older rows: the chain starts after them). Chain heads gain the rows without a
position the table held when they were made (NULL in a head made before: not recorded)."""

COLUMNS = (
    "ts, principal, principal_type, roles, surface, tool, call_id, args_digest, args, "
    "decision, reason, outcome, duration_ms, error, approved_args_digest, hook, grant_id, "
    "row_key"
)
WIDTH = COLUMNS.count(",") + 1
"""Values in a row (a row kept by an older version may have fewer: the later ones are NULL)."""
KEY = WIDTH - 1
"""The index of the row's key in a row."""
_TS, _DURATION = 0, 12
_MOSTLY_NULL = (13, 14, 15, 16)
"""Where a row holds its error, approved digest, hook and grant: NULL in most rows, never
empty text (:func:`_normal`). An INSERT binds them as empty text made NULL by the statement
(``NULLIF``): Python's sqlite3 binds a None through its adapter lookup, about 0.2 us a value,
more than the rest of the row's text values together."""
_CHAINED = f"{COLUMNS}, chain_seq, chain_digest, team_id"
_PLACES = "({})".format(
    ", ".join("NULLIF(?, '')" if i in _MOSTLY_NULL else "?" for i in range(WIDTH + 3))
)
_HEAD_MADE = (
    "INSERT INTO audit_chain (team_id, seq, digest, older_rows, older_id) "
    "SELECT ?, 0, ?, count(*), max(id) FROM audit "
    "WHERE team_id IN (?, '') AND chain_seq IS NULL ON CONFLICT (team_id) DO NOTHING"
)
"""A team's head, recording the rows without a position written before it: the team's, and
those of no team (PostgreSQL keeps a shared table's rows of older versions there, until an
operator gives them to their team)."""
_HEAD = "SELECT seq, digest FROM audit_chain WHERE team_id = ?"
_HEAD_MOVED = "UPDATE audit_chain SET seq = ?, digest = ? WHERE team_id = ?"
_KEYS_AT = "SELECT row_key FROM audit WHERE team_id = ? AND ts IN ({})"
_OTHER_TEAMS = (
    "WITH RECURSIVE teams (team_id, n) AS (SELECT min(team_id), 0 FROM audit UNION ALL "
    "SELECT (SELECT team_id FROM audit WHERE team_id > teams.team_id ORDER BY team_id LIMIT 1), "
    "n + 1 FROM teams WHERE team_id IS NOT NULL AND n < ?) "
    "SELECT team_id FROM teams WHERE team_id IS NOT NULL AND team_id <> ? LIMIT ?"
)
"""The first teams of the table, each found by one probe of a team-led index from the one
before (a DISTINCT reads every other team's rows: a LIMIT stops it no sooner)."""
_CHAIN_PAGE = (
    f"SELECT id, {_CHAINED} FROM audit WHERE team_id = ? AND id > ? "
    "AND chain_seq IS NOT NULL ORDER BY id LIMIT ?"
)
_AT = "SELECT min(id) FROM audit WHERE team_id = ? AND chain_seq = ?"
_UNCHAINED = "SELECT count(*), min(id), max(id) FROM audit WHERE team_id = ? AND chain_seq IS NULL"
_OLDER = "SELECT older_rows, older_id FROM audit_chain WHERE team_id = ?"


GENESIS = ""
"""The digest "before" a team's first row."""


def _encoder() -> Callable[[Any], str]:
    """Compact ASCII JSON; the C encoder is built once (``json.dumps`` builds one per call)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - interpreters without the C accelerator
        return json.JSONEncoder(separators=(",", ":")).encode
    chunks = make(
        None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    return lambda value: "".join(chunks(value, 0))


_json = _encoder()


_quote = json.encoder.encode_basestring_ascii
_sha256 = hashlib.sha256
_TEAMS: dict[str, bytes] = {}  # a team id's JSON
_DIGEST, _ARGS = 7, 8  # where a row (:data:`COLUMNS`) holds its argument digest and arguments
NOT_KEPT = '{"[not kept]":"its process was killed before the row was written"}'
"""The arguments of a row written from a killed process's journal (its digest is kept)."""


def row_json(values: Sequence[Any]) -> bytes:
    """Values as compact JSON (ASCII): a row's line in a spill file; a row but its arguments
    (:func:`split`) in a journal file and in its link."""
    return _json(values).encode()


def split(row: Sequence[Any]) -> tuple[tuple[Any, ...], str]:
    """A row's values but its arguments (the argument digest moved last), and its arguments
    (the redacted JSON: the costly part of a row, made on the writer)."""
    return (*row[:_DIGEST], *row[_ARGS + 1 :], row[_DIGEST]), row[_ARGS]


def join(rest: Sequence[Any], args: str) -> tuple[Any, ...]:
    """The row of :func:`split`'s parts."""
    return (*rest[:_DIGEST], rest[-1], args, *rest[_DIGEST:-1])


def link(prev: str, seq: int, team_id: str, row: Sequence[Any], rest: bytes | None = None) -> str:
    """The digest of ``row`` at position ``seq`` of ``team_id``'s chain, after ``prev`` (a
    hex digest): SHA-256 of the JSON list ``[prev, seq, team_id, *rest, args]``, where
    ``rest`` are the row's values but its arguments (:func:`split`; the arguments come last,
    so the JSON of the rest can be made once, when the call ends). ``rest``: ``row_json`` of
    them, when the caller has it already."""
    if rest is None:
        rest = row_json(split(row)[0])
    team = _TEAMS.get(team_id)
    if team is None:
        if len(_TEAMS) >= 1024:
            _TEAMS.clear()
        team = _TEAMS[team_id] = _json(team_id).encode()
    args = _quote(row[_ARGS]).encode()
    return _sha256(b'["%s",%d,%s,%s,%s]' % (prev.encode(), seq, team, rest[1:-1], args)).hexdigest()


class Cursor(Protocol):
    """A DB-API cursor (or connection) speaking ``?`` placeholders and these table names."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...


def select(where: str) -> str:
    """The query for one team's rows matching ``where`` (``?`` placeholders: the team, the
    condition's values, then the limit), newest first."""
    condition = f"team_id = ? AND ({where})" if where else "team_id = ?"
    return f"SELECT id, {COLUMNS} FROM audit WHERE {condition} ORDER BY id DESC LIMIT ?"


def keys_of(keys: int) -> str:
    """The condition of a caller's rows made under any of ``keys`` keys, each starting with
    :data:`KEYED` (``?`` placeholders: the caller, then the keys), searched by the team's key
    index (:func:`select`)."""
    return f"principal = ? AND {_KEYED_ROWS} AND row_key IN ({', '.join('?' * keys)})"


def write(
    cur: Cursor,
    team_id: str,
    rows: Sequence[Sequence[Any]],
    *,
    replay: bool,
    lock: str,
    texts: Sequence[bytes] | None = None,
    per_statement: int = 500,
) -> int:
    """Append ``rows`` to the team's chain, inside the caller's write transaction; ``lock``
    is what locks the chain head's row until it commits (PostgreSQL: `` FOR UPDATE``; SQLite
    holds the file's write lock already). ``replay``: the rows may have been written before
    (a spill, a journal): those whose key is in the table are left out. ``texts``: the JSON
    of each row's values but its arguments (:func:`split`), made with the row (fresh rows
    only).
    ``per_statement``: rows one INSERT carries (a statement of many rows costs a third less
    per row than one statement per row). Returns the rows written."""
    fresh = [_normal(row) for row in rows] if replay or texts is None else rows
    if not fresh:
        return 0
    head = cur.execute(_HEAD + lock, (team_id,)).fetchone()
    if head is None:  # the team's first chained row (its older rows are counted once, here)
        cur.execute(_HEAD_MADE, (team_id, GENESIS, team_id))
        head = cur.execute(_HEAD + lock, (team_id,)).fetchone()
    seq, digest = head
    if replay:  # under the head's lock: no other writer of the team adds rows meanwhile
        fresh = _unwritten(cur, team_id, fresh)
        if not fresh:
            return 0
    made: Sequence[bytes | None] = [None] * len(fresh) if replay or texts is None else texts
    values: list[Any] = []
    for row, text in zip(fresh, made, strict=True):
        seq += 1
        digest = link(digest, seq, team_id, row, text)
        values += row
        values += (seq, digest, team_id)
    width = WIDTH + 3
    for column in _MOSTLY_NULL:
        values[column::width] = ["" if value is None else value for value in values[column::width]]
    start = 0
    for rows_in in _statements(len(fresh), per_statement):
        end = start + rows_in * width
        cur.execute(_insert(rows_in), values[start:end])
        start = end
    cur.execute(_HEAD_MOVED, (seq, digest, team_id))
    return len(fresh)


def _statements(rows: int, most: int) -> list[int]:
    """The rows of each INSERT carrying ``rows`` rows: powers of two up to ``most``, largest
    first. A statement of hundreds of rows takes milliseconds to compile, more than its rows
    take to insert: batches of any size then use a few statements, each compiled once and
    kept in the connection's statement cache."""
    size = 1 << (max(1, most).bit_length() - 1)
    out = []
    while rows:
        while size > rows:
            size >>= 1
        out.append(size)
        rows -= size
    return out


@functools.lru_cache(maxsize=32)
def _insert(rows: int) -> str:
    """The INSERT of ``rows`` rows."""
    return f"INSERT INTO audit ({_CHAINED}) VALUES {', '.join([_PLACES] * rows)}"


def _normal(row: Sequence[Any]) -> tuple[Any, ...]:
    """``row`` as stored and chained: every value (NULL for those an older version did not
    keep, and for an empty error, approved digest, hook or grant), reals as floats, and a key
    (a row kept without one gets its content's digest, so writing it again is still found)."""
    full = [*row, *[None] * (WIDTH - len(row))]
    full[_TS], full[_DURATION] = float(full[_TS]), float(full[_DURATION])
    for column in _MOSTLY_NULL:  # an empty one is none (stored NULL, as it is chained)
        full[column] = full[column] or None
    if not full[KEY]:
        text = json.dumps(full[:KEY], separators=(",", ":"))
        full[KEY] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return tuple(full)


def _unwritten(cur: Cursor, team_id: str, rows: Sequence[Sequence[Any]]) -> list[Sequence[Any]]:
    """``rows`` whose key is neither in the table nor earlier in ``rows`` (rows are found by
    their time, which the team's time index finds, then by key)."""
    seen: set[str] = set()
    for start in range(0, len(rows), 500):
        times = sorted({row[_TS] for row in rows[start : start + 500]})
        found = cur.execute(_KEYS_AT.format(", ".join("?" * len(times))), (team_id, *times))
        seen.update(key for (key,) in found.fetchall() if key)
    fresh = []
    for row in rows:
        if row[KEY] not in seen:
            seen.add(row[KEY])
            fresh.append(row)
    return fresh


def chain_page(cur: Cursor, team_id: str, after: int, limit: int) -> list[Any]:
    """Up to ``limit`` chained rows with an id above ``after``, by id:
    ``(id, *row, chain_seq, chain_digest, team_id)``."""
    return list(cur.execute(_CHAIN_PAGE, (team_id, after, limit)).fetchall())


def chain_row(cur: Cursor, team_id: str, seq: int) -> int | None:
    """The id of the team's row at chain position ``seq`` (None: there is none)."""
    row = cur.execute(_AT, (team_id, seq)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def chain_head(cur: Cursor, team_id: str) -> tuple[int, str] | None:
    """The team's chain head (its last position and digest), None before its first row."""
    row = cur.execute(_HEAD, (team_id,)).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


def unchained(cur: Cursor, team_id: str) -> Unchained:
    """The team's rows that carry no chain position, and those its head recorded."""
    count, low, high = cur.execute(_UNCHAINED, (team_id,)).fetchone()
    older = cur.execute(_OLDER, (team_id,)).fetchone() or (None, None)
    return Unchained(int(count), low, high, *older)


def other_teams(cur: Cursor, team_id: str, limit: int = 10) -> list[str]:
    """Teams other than ``team_id`` with rows in the table (at most ``limit``, sorted): the
    first ``limit`` + 1 teams, one index probe each, however many rows they have."""
    found = cur.execute(_OTHER_TEAMS, (limit, team_id, limit)).fetchall()
    return sorted(str(team) for (team,) in found)


_ROWS = 500 if sqlite3.sqlite_version_info >= (3, 32) else 45
"""Rows one INSERT carries: SQLite before 3.32 takes at most 999 values a statement."""


class SqliteAuditTable:
    """The audit table of a SQLite file, seen as one team's rows. ``read_only=True``: a trail
    looked at beside its writer (``toolcards dashboard --store``), which creates, claims and
    migrates nothing and takes no write lock; a file that needs any of that is refused."""

    def __init__(
        self,
        path: str | Path,
        *,
        sync: bool,
        team_id: str | None = None,
        read_only: bool = False,
    ) -> None:
        self.location = str(path)
        if not read_only:
            self._db = shared_connection(path, sync=sync)
            self.team_id = sqlite_setup(self._db, TABLE, MIGRATION, INDEXES, team_id)
            """``team_id``, or (None) the team that owns the file."""
            return
        try:
            self._db = read_only_connection(path)  # a missing file is not created
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read audit trail {path}: {exc}") from None
        try:
            owner = sqlite_owner(self._db, MIGRATION)
            if owner is None:
                raise StoreError(
                    f"audit trail {path} has an older layout than this toolcards reads: open "
                    "it once with a writer (toolcards serve or call on its config), then retry"
                )
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):  # not a database, say
                raise StoreError(f"cannot read audit trail {path}: {exc}") from None
            raise
        self.team_id = team_id or owner

    def insert(
        self,
        rows: list[tuple[Any, ...]],
        *,
        replay: bool = False,
        texts: list[bytes] | None = None,
    ) -> int:
        # IMMEDIATE: the chain head is read and moved under the file's write lock
        self._db.execute("BEGIN IMMEDIATE")
        try:
            written = write(
                self._db,
                self.team_id,
                rows,
                replay=replay,
                lock="",
                texts=texts,
                per_statement=_ROWS,
            )
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return written

    def select(self, where: str, params: list[Any], limit: int) -> list[tuple[Any, ...]]:
        sql = select(where)
        return list(self._db.execute(sql, [self.team_id, *params, limit]).fetchall())

    def chain_page(self, after: int, limit: int) -> list[Any]:
        return chain_page(self._db, self.team_id, after, limit)

    def chain_row(self, seq: int) -> int | None:
        return chain_row(self._db, self.team_id, seq)

    def chain_head(self) -> tuple[int, str] | None:
        return chain_head(self._db, self.team_id)

    def unchained(self) -> Unchained:
        return unchained(self._db, self.team_id)

    def other_teams(self) -> list[str]:
        return other_teams(self._db, self.team_id)

    def close(self) -> None:
        self._db.close()
