"""Pending approvals in SQL: the schema, its migration and the logic both SQL stores share
(:class:`~toolcards.stores.sqlite.approvals.SqliteApprovalStore` and
:class:`~toolcards.stores.postgres.governance.PostgresApprovalStore`).

Every row carries its ``team_id`` and every statement filters by the store's team, so two
teams in one database never see, decide or spend each other's requests. All pass the contract
tests in ``tests/stores/test_contract.py``.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, NamedTuple

from toolcards.core.approvals import ApprovalRecord, ApprovalRequest, ApprovalState
from toolcards.core.identity import Identity
from toolcards.stores.governance import PENDING_PER_PRINCIPAL, Binding, TooManyApprovals
from toolcards.stores.migrate import TeamColumn

TABLE = """
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY,
    call_id TEXT NOT NULL,
    tool_id TEXT NOT NULL,
    args_digest TEXT NOT NULL,
    principal TEXT NOT NULL,
    principal_type TEXT NOT NULL,
    roles TEXT NOT NULL,
    args TEXT NOT NULL,
    reason TEXT NOT NULL,
    surface TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    state TEXT NOT NULL,
    approver TEXT,
    decided_at REAL,
    args_exact TEXT NOT NULL DEFAULT '',
    team_id TEXT NOT NULL DEFAULT '',
    args_edited TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT ''
)
"""
INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS approvals_team_binding
    ON approvals(team_id, call_id, tool_id, args_digest, principal);
CREATE INDEX IF NOT EXISTS approvals_team_expiry ON approvals(team_id, expires_at);
CREATE INDEX IF NOT EXISTS approvals_team_principal ON approvals(team_id, principal, state)
"""
MIGRATION = TeamColumn(
    "approvals",
    drop_indexes=("approvals_binding", "approvals_expiry"),
    added=(
        ("args_exact", "TEXT NOT NULL DEFAULT ''"),
        ("args_edited", "TEXT NOT NULL DEFAULT ''"),
        ("session", "TEXT NOT NULL DEFAULT ''"),
    ),
)
"""Tables written before gain the columns added since (the exact arguments, the team, an
approver's edit of the arguments, the caller's session) and lose the team-less indexes."""

_FIELDS = (
    "approval_id, call_id, tool_id, args_digest, principal, principal_type, roles, args, "
    "reason, surface, created_at, expires_at, state, approver, decided_at, args_exact, "
    "args_edited, session"
)
_LISTED = (
    "approval_id, call_id, tool_id, args_digest, principal, principal_type, roles, "
    "substr(args, 1, ?), reason, surface, created_at, expires_at, state, approver, decided_at, "
    "substr(args_exact, 1, ?), args_edited, session, length(args), length(args_exact)"
)
"""What an inbox lists of a request: its arguments (exact and redacted) cut to a number of
characters, and their lengths, which say whether the cut text is whole."""
_BY_BINDING = "team_id = ? AND call_id = ? AND tool_id = ? AND args_digest = ? AND principal = ?"
_PENDING = "team_id = ? AND state = 'pending' AND expires_at > ?"
"""The team's pending, unexpired requests (the team and the time as arguments)."""
_OLDEST_FIRST = "ORDER BY created_at, approval_id"
_PENDING_OF = (
    "SELECT COUNT(*) FROM {table} WHERE team_id = ? AND principal = ? AND state = 'pending' "
    "AND expires_at > ?"
)


class Listed(NamedTuple):
    """A pending request as an inbox lists it, its arguments read no further than the inbox
    shows them: the exact ones (``request.args_json``) and the redacted copy
    (``request.args``) only when whole within the listing's characters, else left unread
    (empty) and their length in ``exact_unread`` and ``redacted_unread`` (characters of JSON).
    Exact arguments left unread no longer match the request's digest: what is listed so can
    be denied, never granted."""

    request: ApprovalRequest
    exact_unread: int = 0
    redacted_unread: int = 0


def listed(request: ApprovalRequest, chars: int) -> Listed:
    """``request`` (held in memory) as a listing of ``chars`` characters reads it: its exact
    arguments left unread when longer."""
    size = len(request.args_json)
    return Listed(request) if size <= chars else Listed(replace(request, args_json=""), size)


class SqlApprovalStore:
    """The approval logic in SQL for one team. A subclass sets ``team_id`` and gives
    :meth:`_tx` (a write transaction that is atomic across processes) and :meth:`_read`,
    both yielding an object with ``execute(sql, params)`` speaking ``?`` placeholders."""

    table = "approvals"
    team_id: str

    def _tx(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def add(self, request: ApprovalRequest, now: float) -> ApprovalRecord:
        who = request.identity
        team = self.team_id
        with self._tx() as db:
            db.execute(f"DELETE FROM {self.table} WHERE {_BY_BINDING} AND expires_at <= ?",
                       (team, *request.binding, now))  # fmt: skip
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE {_BY_BINDING}", (team, *request.binding)
            ).fetchone()
            if row is not None:
                return _record(row)
            (held,) = db.execute(
                _PENDING_OF.format(table=self.table), (team, request.principal, now)
            ).fetchone()
            if held >= PENDING_PER_PRINCIPAL:
                raise TooManyApprovals(request.principal)
            db.execute(
                f"INSERT INTO {self.table} ({_FIELDS}, team_id) VALUES ({', '.join('?' * 19)})",
                (
                    request.approval_id,
                    *request.binding,
                    who.type if who else "user",
                    ",".join(sorted(who.roles)) if who else "",
                    json.dumps(dict(request.args), sort_keys=True, default=str),
                    request.reason,
                    request.surface,
                    request.created_at,
                    request.expires_at,
                    ApprovalState.PENDING.value,
                    None,
                    None,
                    request.args_json,
                    "",
                    request.session,
                    team,
                ),
            )
        return ApprovalRecord(request)

    def get(self, approval_id: str) -> ApprovalRecord | None:
        with self._read() as db:
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE approval_id = ? AND team_id = ?",
                (approval_id, self.team_id),
            ).fetchone()
        return None if row is None else _record(row)

    def decide(
        self,
        approval_id: str,
        state: ApprovalState,
        approver: str,
        now: float,
        *,
        edited: str = "",
    ) -> ApprovalRecord | None:
        with self._tx() as db:
            changed = db.execute(
                f"UPDATE {self.table} SET state = ?, approver = ?, decided_at = ?, "
                "args_edited = ? "
                "WHERE approval_id = ? AND team_id = ? AND state = 'pending' AND expires_at > ?",
                (state.value, approver, now, edited, approval_id, self.team_id, now),
            ).rowcount
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE approval_id = ? AND team_id = ?",
                (approval_id, self.team_id),
            ).fetchone()
        return _record(row) if changed and row is not None else None

    def take(
        self, binding: Binding, *, approved: bool, now: float, session: str | None = None
    ) -> ApprovalRecord | None:
        team = self.team_id
        with self._tx() as db:
            row = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE {_BY_BINDING}", (team, *binding)
            ).fetchone()
            if row is None:
                return None
            record = _record(row)
            approval_id = record.request.approval_id
            if record.request.expires_at <= now:
                self._delete(db, approval_id)
                return None
            if session is not None and record.request.session != session:
                return record  # another session's: never spent here
            if record.state is ApprovalState.PENDING:
                if not approved:
                    return record
                record = replace(record, state=ApprovalState.GRANTED, decided_at=now)
            self._delete(db, approval_id)
            return record

    def remove(self, approval_id: str, *, only_pending: bool = False) -> bool:
        with self._tx() as db:
            return bool(self._delete(db, approval_id, only_pending=only_pending))

    def pending(self, now: float) -> list[ApprovalRecord]:
        self._prune(now)
        # read after the write commits: a long listing (a full inbox of large arguments)
        # never holds the team's writers up; a row expired since is left out all the same
        with self._read() as db:
            rows = db.execute(
                f"SELECT {_FIELDS} FROM {self.table} WHERE {_PENDING} {_OLDEST_FIRST}",
                (self.team_id, now),
            ).fetchall()
        return [_record(row) for row in rows]

    def listing(self, now: float, limit: int, chars: int) -> tuple[list[Listed], int]:
        """The oldest ``limit`` pending requests, each read no further than ``chars``
        characters of its arguments (a full inbox holds a hundred requests of 4 MiB a
        caller: reading, decoding and hashing them all cost gigabytes a page), and how many
        are pending in all."""
        self._prune(now)
        pending = f"FROM {self.table} WHERE {_PENDING}"
        oldest = f"SELECT approval_id {pending} {_OLDEST_FIRST} LIMIT ?"
        with self._read() as db:  # the rows chosen first: only they are read, then sorted
            rows = db.execute(
                f"SELECT {_LISTED} FROM {self.table} WHERE team_id = ? "
                f"AND approval_id IN ({oldest}) {_OLDEST_FIRST}",
                (chars, chars, self.team_id, self.team_id, now, limit),
            ).fetchall()
            (total,) = db.execute(f"SELECT COUNT(*) {pending}", (self.team_id, now)).fetchone()
        return [_listed(row, chars) for row in rows], int(total)

    def _prune(self, now: float) -> None:
        with self._tx() as db:
            db.execute(
                f"DELETE FROM {self.table} WHERE team_id = ? AND expires_at <= ?",
                (self.team_id, now),
            )

    def pending_ids(self, now: float) -> list[str]:
        with self._read() as db:
            rows = db.execute(
                f"SELECT approval_id FROM {self.table} WHERE {_PENDING} {_OLDEST_FIRST}",
                (self.team_id, now),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def _delete(self, db: Any, approval_id: str, *, only_pending: bool = False) -> int:
        undecided = " AND state = 'pending'" if only_pending else ""
        return int(
            db.execute(
                f"DELETE FROM {self.table} WHERE approval_id = ? AND team_id = ?{undecided}",
                (approval_id, self.team_id),
            ).rowcount
        )


def _listed(row: tuple[object, ...], chars: int) -> Listed:
    """A row of :data:`_LISTED`: a text longer than ``chars`` is left unread, never parsed
    cut (a length SQLite counts only to a NUL character is caught by the digest)."""
    redacted_size, exact_size = (int(str(size)) for size in row[-2:])
    redacted_unread = redacted_size if redacted_size > chars else 0
    exact_unread = exact_size if exact_size > chars else 0
    redacted = "{}" if redacted_unread else row[7]
    exact = "" if exact_unread else row[15]
    request = _record((*row[:7], redacted, *row[8:15], exact, *row[16:18])).request
    return Listed(request, exact_unread, redacted_unread)


def _record(row: tuple[object, ...]) -> ApprovalRecord:
    (approval_id, call_id, tool_id, digest, principal, ptype, roles, args, reason, surface,
     created_at, expires_at, state, approver, decided_at, exact, edited, session) = row  # fmt: skip
    identity = Identity(str(principal), str(ptype), [r for r in str(roles).split(",") if r])
    request = ApprovalRequest(
        call_id=str(call_id),
        tool_id=str(tool_id),
        args_digest=str(digest),
        principal=str(principal),
        args=json.loads(str(args)),
        reason=str(reason),
        expires_at=float(expires_at),  # type: ignore[arg-type]
        surface=str(surface),
        identity=identity,
        approval_id=str(approval_id),
        created_at=float(created_at),  # type: ignore[arg-type]
        args_json=str(exact or ""),
        session=str(session or ""),
    )
    return ApprovalRecord(
        request,
        ApprovalState(str(state)),
        None if approver is None else str(approver),
        None if decided_at is None else float(decided_at),  # type: ignore[arg-type]
        str(edited or ""),
    )
