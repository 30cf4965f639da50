"""Budget counters: the schema both SQL stores share. SQLite's are
:class:`~toolcards.stores.sqlite.budgets.SqliteBudgets` (in the approvals file every process
of a config shares), PostgreSQL's :class:`~toolcards.stores.postgres.governance.PostgresBudgets`
(one statement per use), the memory ones :class:`~toolcards.stores.memory.MemoryBudgets`; all
pass the same contract tests.

Every row carries its ``team_id`` and every statement filters by the store's team. A use's key
(see :class:`~toolcards.stores.base.BudgetStore`) is kept for :data:`KEY_TTL` seconds: a
durable run replayed within that time is not counted twice. Counters and keys past their
``expires`` are deleted now and then, so the tables stay bounded.
"""

from __future__ import annotations

from toolcards.stores.migrate import TeamColumn

SPEND = """
CREATE TABLE IF NOT EXISTS budget_spend (
    team_id TEXT NOT NULL DEFAULT '',
    counter TEXT NOT NULL,
    spent REAL NOT NULL,
    updated REAL NOT NULL,
    expires REAL,
    PRIMARY KEY (team_id, counter)
)
"""
KEYS = """
CREATE TABLE IF NOT EXISTS budget_keys (
    team_id TEXT NOT NULL DEFAULT '',
    key TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (team_id, key)
)
"""
SPEND_INDEXES = "CREATE INDEX IF NOT EXISTS budget_spend_expiry ON budget_spend(team_id, expires)"
KEYS_INDEXES = "CREATE INDEX IF NOT EXISTS budget_keys_expiry ON budget_keys(team_id, expires)"
SPEND_MIGRATION = TeamColumn("budget_spend")
KEYS_MIGRATION = TeamColumn("budget_keys")
"""Made with their team column: nothing to migrate yet."""
KEY_TTL = 7 * 86400.0
"""How long the key of a counted use is kept (a replay within it is not counted again)."""
PRUNE_EVERY = 512
"""Uses between two deletions of expired counters and keys."""
