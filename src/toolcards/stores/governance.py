"""The protocols of the stores governance writes to, one team's each: :class:`ApprovalStore`
(pending approvals, found again by their :data:`Binding`), :class:`GrantStore` (remembered
approvals, kept by the approval stores beside their requests), :class:`AuditTable` (the audit
trail), :class:`RateLimits` (token buckets, of :class:`Limit` rules) and :class:`BudgetStore`
(what a team spent, counter by counter, of :class:`Spend` s)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from toolcards.core.approvals import ApprovalRecord, ApprovalRequest, ApprovalState
from toolcards.core.errors import ToolcardsError
from toolcards.core.grants import Grant

__all__ = [
    "PENDING_PER_PRINCIPAL",
    "ApprovalStore",
    "AuditTable",
    "Binding",
    "BudgetStore",
    "GrantStore",
    "Limit",
    "RateLimits",
    "Spend",
    "TooManyApprovals",
    "Unchained",
]

Binding = tuple[str, str, str, str]
"""(call id, tool id, argument digest, principal id)."""

PENDING_PER_PRINCIPAL = 100
"""The pending requests one principal may hold in one team's approval store. A caller that
is never asked again (a 2026-07-28 MCP client is answered with an InputRequiredResult at
once) leaves its request, exact arguments and all, until it expires: without this bound one
principal would fill the store and every approver's inbox."""


class TooManyApprovals(ToolcardsError):
    """``principal`` already holds as many pending requests as a store keeps for one."""

    def __init__(self, principal: str) -> None:
        super().__init__(f"{principal} already has {PENDING_PER_PRINCIPAL} requests waiting")
        self.principal = principal


@runtime_checkable
class ApprovalStore(Protocol):
    def add(self, request: ApprovalRequest, now: float) -> ApprovalRecord:
        """Store ``request`` as pending, unless an unexpired record with the same binding
        exists: then return that one unchanged (a request is never replaced).
        :class:`TooManyApprovals` (nothing stored) when its principal already holds
        :data:`PENDING_PER_PRINCIPAL` unexpired pending requests: counted in the transaction
        of the insert, so requests made together cannot pass the bound together."""
        ...

    def get(self, approval_id: str) -> ApprovalRecord | None:
        """The record, expired or not (None when unknown or removed)."""
        ...

    def decide(
        self,
        approval_id: str,
        state: ApprovalState,
        approver: str,
        now: float,
        *,
        edited: str = "",
    ) -> ApprovalRecord | None:
        """Move a pending, unexpired record to ``state``; None when it is not pending.
        ``edited`` (canonical JSON) is the approver's edit of its arguments, kept with it."""
        ...

    def take(
        self, binding: Binding, *, approved: bool, now: float, session: str | None = None
    ) -> ApprovalRecord | None:
        """The unexpired record for ``binding``. A decided one is removed (spent) and returned;
        a pending one is returned and kept, unless ``approved``: then it is removed and
        returned as granted. None when there is none (expired ones are removed). With
        ``session``, a record asked in another session is returned and kept whatever its
        state: its decision is its own caller's to spend."""
        ...

    def remove(self, approval_id: str, *, only_pending: bool = False) -> bool:
        """Forget a record; True when there was one. ``only_pending``: only while it is
        undecided (a caller giving up keeps a decision that landed meanwhile)."""
        ...

    def pending(self, now: float) -> list[ApprovalRecord]:
        """Unexpired pending records, oldest first (expired ones are removed)."""
        ...

    def pending_ids(self, now: float) -> list[str]:
        """The ids of :meth:`pending`'s records, read without their arguments and removing
        nothing: cheap enough for a page's watcher to poll several times a second."""
        ...


@runtime_checkable
class GrantStore(Protocol):
    """One team's remembered approvals (see :mod:`toolcards.governance.approvals.grants`),
    kept beside its pending approvals: an approval store that keeps them holds one as its
    ``grants``."""

    team_id: str
    fresh: bool
    """True when :meth:`stamp` moves with every change made by any process before that change
    can be read (a grant found through it needs no :meth:`live`); False when each use must be
    confirmed."""

    def add(self, grant: Grant, limit: int) -> bool:
        """Store ``grant``; False (nothing stored) when the team already holds ``limit`` live
        grants."""
        ...

    def revoke(self, grant_id: str, by: str, now: float) -> Grant | None:
        """Revoke a live grant (its row stays, revoked); None when it is unknown, expired or
        revoked already."""
        ...

    def get(self, grant_id: str) -> Grant | None:
        """The grant, live or not (None when unknown)."""
        ...

    def listing(self, now: float, *, ended: bool = False, limit: int = 1000) -> list[Grant]:
        """The live grants, newest first, at most ``limit`` (``ended``: also the revoked and
        expired ones)."""
        ...

    def live(self, grant_id: str, now: float) -> bool:
        """Whether the grant is live now, asked of the store itself (one round trip)."""
        ...

    def stamp(self) -> object:
        """A value that changes whenever a grant of this store is made or revoked by any
        process that shares it; cheap enough to read on every call."""
        ...


class Unchained(NamedTuple):
    """A team's rows that carry no chain position, and those its chain head recorded."""

    rows: int
    """How many."""
    low: int | None
    """Their lowest id."""
    high: int | None
    """Their highest id."""
    older_rows: int | None
    """How many the table held when the head was made (None: no head, or one made by a
    version that did not record them)."""
    older_id: int | None
    """The highest id among those (None: there were none, or not recorded)."""


@runtime_checkable
class AuditTable(Protocol):
    """Where one team's audit rows go (the statements of :mod:`toolcards.stores.audit_sql`,
    ``?`` placeholders); every row written and read is the table's team's."""

    team_id: str

    def insert(
        self,
        rows: list[tuple[Any, ...]],
        *,
        replay: bool = False,
        texts: list[bytes] | None = None,
    ) -> int:
        """Append ``rows`` (without their team: the table adds it) to the team's chain in one
        transaction; ``replay``: leave out rows whose key is already in the table (checked under
        the lock that orders the team's writers); ``texts``:
        the rows' JSON, made with them. Returns the rows written."""
        ...

    def select(self, where: str, params: list[Any], limit: int) -> list[tuple[Any, ...]]:
        """Rows of the team matching ``where`` (a condition on the columns, may be empty),
        newest first, at most ``limit``."""
        ...

    def chain_page(self, after: int, limit: int) -> list[Any]:
        """The team's chained rows with an id above ``after``, by id."""
        ...

    def chain_row(self, seq: int) -> int | None:
        """The id of the team's row at chain position ``seq`` (None: there is none)."""
        ...

    def chain_head(self) -> tuple[int, str] | None:
        """The team's chain head: its last position and digest (None: no chained row)."""
        ...

    def unchained(self) -> Unchained:
        """The team's rows without a chain position (how many, the lowest and highest id),
        and those its chain head recorded when it was made."""
        ...

    def other_teams(self) -> list[str]:
        """A few other teams with rows in this table."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


class Limit(Protocol):
    """One rate limit as the buckets see it: its rule index, ``count`` calls per ``period``
    seconds (the policy's compiled limits have these attributes)."""

    @property
    def index(self) -> int: ...

    @property
    def count(self) -> int: ...

    @property
    def period(self) -> float: ...


class RateLimits(Protocol):
    """What the executor needs of a rate limiter: one team's buckets, in this process's
    memory (:class:`~toolcards.stores.memory.RateLimiter`) or in PostgreSQL, shared by every
    process of the team (:class:`~toolcards.stores.postgres.governance.PostgresRateLimiter`)."""

    def acquire(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """Take one token from every applicable bucket: 0.0 when allowed, else the seconds
        until the call would be (no token is taken then)."""
        ...

    def peek(self, limits: Sequence[Limit], principal: str, tool_id: str) -> float:
        """What :meth:`acquire` would answer now, taking no token: a call that must first ask
        a human takes its token only once approved."""
        ...


class Spend(NamedTuple):
    """What one use adds to one budget counter: ``amount`` of it, within ``limit`` (a take
    refuses to go past it); the counter may be forgotten after ``expires`` (epoch seconds;
    None: kept)."""

    counter: str
    amount: float
    limit: float
    expires: float | None = None


@runtime_checkable
class BudgetStore(Protocol):
    """One team's budget counters, shared by every process of the team that opens the same
    store. ``key`` names one use (a call, a model response): a use counted once under its key
    is never counted again (a durable run's replay), and a take under it is answered as taken."""

    team_id: str

    def take(self, key: str | None, spends: Sequence[Spend], now: float) -> int | None:
        """Add every spend when each counter stays within its limit, all or nothing, at once
        for every process: None when taken (or already counted under ``key``), else the index
        of the first spend that would go over (nothing added)."""
        ...

    def add(self, key: str | None, spends: Sequence[Spend], now: float) -> None:
        """Add every spend whatever the limits (what a model response used), once per key."""
        ...

    def spent(self, counters: Sequence[str]) -> dict[str, float]:
        """What each of ``counters`` has spent (a counter never used is absent)."""
        ...

    def listing(self, now: float, limit: int = 1000) -> list[tuple[str, float, float]]:
        """``(counter, spent, updated)`` of the team's live counters, most recently used first."""
        ...
