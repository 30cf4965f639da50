"""The hash chain of a team's audit rows, and its check.

Each row of a team has a position in the team's chain (1, 2, 3, ...) and a digest: SHA-256
over the digest of the row before it, its position, its team and every value of the row (JSON,
so the text is the same from either database; :func:`toolcards.stores.audit_sql.link`). The
table keeps the team's head (the last position and digest).

:class:`ChainCheck` walks the rows in the table's order (by id: a team's rows are chained in
the order they are stored) and names the first that does not hold: a row whose values were
changed (its digest no longer follows from the row before it and its own values), positions
missing (rows removed, also from the end: the head is further on), a row stored out of its
place (reordered), or a row carrying no position the chain does not account for (written
around the trail). Rows written before the chain existed (older versions) carry no position
and are counted, not checked: the head records how many there were and their highest id when
it was made, and a row without a position beyond those (more of them, a higher id, or an id
the table never gives: 0 or below) is named. A head made by a version that did not record
them leaves only rows stored after the first chained one to name.

Whoever can rewrite the table can also recompute every digest after the rows they changed:
the chain shows changes made without doing that. Keep the head's digest somewhere else
(``toolcards audit verify`` prints it) to catch a rewrite too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolcards.stores.audit_sql import GENESIS, link
from toolcards.stores.governance import Unchained


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What a check of one team's chain found."""

    team_id: str
    ok: bool
    rows: int
    """Chained rows checked."""
    head: tuple[int, str] | None
    """The team's chain head as the table keeps it (position, digest)."""
    message: str
    """One line: the chain holds (its length and head), or the first row that breaks it."""
    row_id: int | None = None
    """The id of the first row that breaks the chain (None: it holds, or the break is at
    its end)."""
    unchained: int = 0
    """Rows of the team written before the chain (not covered by it)."""


class ChainCheck:
    """Feed it one team's chained rows in the table's order (by id, :meth:`feed`, page by
    page), then :meth:`finish` with the head (read after the rows: writers may still add
    rows) and the rows carrying no position. ``find`` gives the id of the team's row at a
    position (None: there is none), to tell a removed row from a moved one."""

    def __init__(self, team_id: str, find: Callable[[int], int | None]) -> None:
        self.team_id = team_id
        self.rows = 0
        self.problem: str | None = None
        self.row_id: int | None = None
        self._find = find
        self._seq = 0
        self._digest = GENESIS
        self._id = 0
        self._first_id: int | None = None

    @property
    def after(self) -> int:
        """Where the next page starts (the id of the last row checked)."""
        return self._id

    def behind(self, head: tuple[int, str] | None) -> bool:
        """Whether ``head`` is past the rows checked so far (rows were added meanwhile, or
        removed from the end)."""
        return self.problem is None and head is not None and head[0] > self._seq

    def feed(self, rows: Iterable[Sequence[Any]]) -> bool:
        """Check ``rows`` (``(id, *row, chain_seq, chain_digest, team_id)``); False once a
        row breaks the chain (the rest is not looked at)."""
        for raw in rows:
            if self.problem is not None:
                return False
            row_id, values = int(raw[0]), tuple(raw[1:-3])
            seq, digest = int(raw[-3]), str(raw[-2])
            problem = self._broken(row_id, values, seq, digest)
            if problem is not None:
                self.problem, self.row_id = problem, row_id
                return False
            self.rows += 1
            self._seq, self._digest, self._id = seq, digest, row_id
            if self._first_id is None:
                self._first_id = row_id
        return self.problem is None

    def _broken(self, row_id: int, values: tuple[Any, ...], seq: int, digest: str) -> str | None:
        """What is wrong with this row, the rows before it being sound (None: nothing)."""
        where = f"row id {row_id} (#{seq}{_call(values)})"
        expected = self._seq + 1
        if seq < expected:
            return f"{where} is stored after row #{self._seq}: rows reordered or repeated"
        if seq > expected:
            moved = self._find(expected)
            if moved is not None:
                return f"row #{expected} (id {moved}) is stored after {where}: rows reordered"
            missing = f"#{expected}" if seq == expected + 1 else f"#{expected}-#{seq - 1}"
            return f"{where}: row {missing} before it was removed"
        if link(self._digest, seq, self.team_id, values) != digest:
            return f"{where} was changed"
        return None

    def finish(self, head: tuple[int, str] | None, unchained: Unchained) -> ChainReport:
        """The report, given the table's head for the team and its rows that carry no
        position (with those the head recorded)."""
        count = unchained.rows
        problem, row_id = self.problem, self.row_id
        if problem is None:
            problem = self._end(head)
        if problem is None:
            problem, row_id = _around(unchained, self._first_id)
        if problem is not None:
            message = f"audit chain of team {self.team_id!r} broken: {problem}"
            return ChainReport(self.team_id, False, self.rows, head, message, row_id, count)
        tip = f"{self.rows} rows, head #{head[0]} sha256:{head[1]}" if head else "no rows yet"
        older = f"; {count} older rows written before the chain are not covered" if count else ""
        message = f"audit chain of team {self.team_id!r} holds: {tip}{older}"
        return ChainReport(self.team_id, True, self.rows, head, message, None, count)

    def _end(self, head: tuple[int, str] | None) -> str | None:
        """What is wrong with the end of the chain, given the head (None: nothing)."""
        if head is None:
            return None if self.rows == 0 else "its head is missing"
        seq, digest = head
        if seq > self._seq:
            missing = f"#{seq}" if seq == self._seq + 1 else f"#{self._seq + 1}-#{seq}"
            return f"row {missing} at its end was removed"
        if seq < self._seq or digest != self._digest:
            return f"its head (#{seq}) does not match its last row (#{self._seq})"
        return None


def _around(rows: Unchained, first: int | None) -> tuple[str | None, int | None]:
    """A row carrying no position that the chain does not account for, and its id (None:
    there is none, or it cannot be told from the older rows)."""
    odd: int | None = None
    if rows.low is not None and rows.low <= 0:  # ids the table gives start at 1
        odd = rows.low
    elif rows.older_rows is None:  # not recorded: rows stored after the chain began
        if first is not None and rows.high is not None and rows.high > first:
            odd = rows.high
    elif rows.high is not None and (rows.older_id is None or rows.high > rows.older_id):
        odd = rows.high
    elif rows.rows > rows.older_rows:
        return (
            f"{rows.rows} rows carry no chain position, {rows.older_rows} did when it began: "
            "rows written around the trail"
        ), None
    if odd is None:
        return None, None
    return f"row id {odd} carries no chain position: written around the trail", odd


def _call(values: tuple[Any, ...]) -> str:
    call_id = values[6] if len(values) > 6 else None
    return f", call {call_id}" if call_id else ""
