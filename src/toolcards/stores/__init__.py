"""Storage floor: where a team's rows live. Imports only ``toolcards.core``; every row belongs to
a team.

- The team store, in two halves: :class:`StateStore` (transactions, teams, actors, state rows,
  versions, call keys) and :class:`EventStore` (the event log); :class:`Store` is both.
- The other stores of a team: :class:`AuditTable`, :class:`ApprovalStore`,
  :class:`RateLimits`, :class:`CallResults` (durable runs).
- :class:`StoreLocation` parses a location; :class:`StoreBackend` opens the stores at one
  (SQLite files and memory, PostgreSQL, or a scheme an installed distribution declares in the
  ``toolcards.stores`` entry-point group); the ``open_*`` functions and :func:`open_stores`
  ask it.
- Doubles in pure Python: :class:`MemoryStore` (or one half: :class:`MemoryStateStore`,
  :class:`MemoryEventStore`), :class:`MemoryApprovalStore`, :class:`RateLimiter`.

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolcards._lazy import lazy_names

_NAMES = {
    **dict.fromkeys(
        (
            "ApprovalStore",
            "AuditTable",
            "EventStore",
            "RateLimits",
            "StateNamespace",
            "StateStore",
            "Store",
        ),
        "toolcards.stores.base",
    ),
    **dict.fromkeys(
        (
            "DatabaseUnavailable",
            "SchemaTooNew",
            "StoreClosedError",
            "StoreError",
            "StoreLockedError",
            "StoreUnavailable",
            "UnknownStoreScheme",
            "UnstorableText",
        ),
        "toolcards.stores.errors",
    ),
    **dict.fromkeys(("CallRecord", "CallResults"), "toolcards.stores.call_results"),
    **dict.fromkeys(("StoreBackend",), "toolcards.stores.backend"),
    **dict.fromkeys(("StoreLocation",), "toolcards.stores.location"),
    **dict.fromkeys(
        (
            "Stores",
            "open_approvals",
            "open_audit_table",
            "open_call_results",
            "open_rate_limits",
            "open_stores",
            "open_tasks",
            "open_team_store",
        ),
        "toolcards.stores.open",
    ),
    **dict.fromkeys(
        ("MemoryEventStore", "MemoryStateStore", "MemoryStore"), "toolcards.stores.memory_team"
    ),
    **dict.fromkeys(("MemoryApprovalStore", "RateLimiter"), "toolcards.stores.memory"),
}

if TYPE_CHECKING:
    from toolcards.stores.backend import StoreBackend
    from toolcards.stores.base import (
        ApprovalStore,
        AuditTable,
        EventStore,
        RateLimits,
        StateNamespace,
        StateStore,
        Store,
    )
    from toolcards.stores.call_results import CallRecord, CallResults
    from toolcards.stores.errors import (
        DatabaseUnavailable,
        SchemaTooNew,
        StoreClosedError,
        StoreError,
        StoreLockedError,
        StoreUnavailable,
        UnknownStoreScheme,
        UnstorableText,
    )
    from toolcards.stores.location import StoreLocation
    from toolcards.stores.memory import MemoryApprovalStore, RateLimiter
    from toolcards.stores.memory_team import MemoryEventStore, MemoryStateStore, MemoryStore
    from toolcards.stores.open import (
        Stores,
        open_approvals,
        open_audit_table,
        open_call_results,
        open_rate_limits,
        open_stores,
        open_tasks,
        open_team_store,
    )

__all__ = [
    "ApprovalStore",
    "AuditTable",
    "CallRecord",
    "CallResults",
    "DatabaseUnavailable",
    "EventStore",
    "MemoryApprovalStore",
    "MemoryEventStore",
    "MemoryStateStore",
    "MemoryStore",
    "RateLimiter",
    "RateLimits",
    "SchemaTooNew",
    "StateNamespace",
    "StateStore",
    "Store",
    "StoreBackend",
    "StoreClosedError",
    "StoreError",
    "StoreLocation",
    "StoreLockedError",
    "StoreUnavailable",
    "Stores",
    "UnknownStoreScheme",
    "UnstorableText",
    "open_approvals",
    "open_audit_table",
    "open_call_results",
    "open_rate_limits",
    "open_stores",
    "open_tasks",
    "open_team_store",
]

__getattr__, __dir__ = lazy_names(__name__, _NAMES)
