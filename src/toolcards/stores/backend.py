"""What opens the stores at a location: :class:`StoreBackend`. The kind of a location picks
its backend (:func:`toolcards.stores.location.backend_class`: SQLite files and memory,
PostgreSQL, or a scheme an installed distribution declares in the ``toolcards.stores``
entry-point group); :mod:`toolcards.stores.open` asks it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from toolcards.stores.errors import StoreError
from toolcards.stores.location import ENTRY_POINT_GROUP, StoreLocation, backend_class

if TYPE_CHECKING:
    from toolcards.stores.base import BudgetStore, Store
    from toolcards.stores.call_results import CallResults
    from toolcards.stores.governance import ApprovalStore, AuditTable, RateLimits
    from toolcards.stores.tasks import SqlTasks

Closer = Callable[[], Any] | None
"""How to release what an opener returned (None: nothing to release)."""


class StoreBackend(ABC):
    """Opens one team's stores at a location of its kind. :meth:`team_store` is required;
    the other stores are optional (opening one a backend does not keep is a one-line
    :class:`StoreError`). A backend keeps no state of its own."""

    shared: ClassVar[bool] = False
    """True when several processes (and machines) share what it opens at one location: a
    configuration on such a store keeps its audit trail, approvals and rate limits there too."""

    @abstractmethod
    def team_store(self, where: StoreLocation, *, durable: bool, connect_timeout: float) -> Store:
        """The team store (state, events, actors); a new object each call."""

    def audit_table(self, where: StoreLocation, team_id: str | None, *, sync: bool) -> AuditTable:
        """One team's audit rows (without a team: the backend's default team)."""
        raise self.keeps_no(where, "audit trail")

    def approvals(self, where: StoreLocation, team_id: str | None) -> tuple[ApprovalStore, Closer]:
        """One team's pending approvals, and how to close them."""
        raise self.keeps_no(where, "approvals")

    def rate_limits(self, where: StoreLocation, team_id: str | None) -> tuple[RateLimits, Closer]:
        """One team's token buckets, and how to close them."""
        raise self.keeps_no(where, "rate limits")

    def budgets(self, where: StoreLocation, team_id: str | None) -> tuple[BudgetStore, Closer]:
        """One team's budget counters, and how to close them."""
        raise self.keeps_no(where, "budgets")

    def tasks(self, where: StoreLocation, team_id: str | None) -> SqlTasks:
        """One team's MCP task rows (close them when done)."""
        raise self.keeps_no(where, "MCP tasks")

    def call_results(self, where: StoreLocation, team_id: str | None) -> CallResults:
        """One team's recorded call results (durable runs)."""
        raise self.keeps_no(where, "call results")

    @staticmethod
    def keeps_no(where: StoreLocation, what: str) -> StoreError:
        """The error of an opener of a store this backend does not keep."""
        return StoreError(f"the store at {where.display} keeps no {what}")


def backend_of(where: StoreLocation) -> StoreBackend:
    """The backend serving ``where``; :class:`StoreError` when an installed entry point of
    its scheme is not a :class:`StoreBackend`."""
    cls = backend_class(where.kind)
    if not (isinstance(cls, type) and issubclass(cls, StoreBackend)):
        raise StoreError(f"entry point {where.kind!r} in {ENTRY_POINT_GROUP} is not a StoreBackend")
    return cls()
