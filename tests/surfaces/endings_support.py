"""What the audit-invariant tests share: a config serving ``ending_tools:TOOLS`` under its
policy, waiting until a call runs, and reading a call's audit rows (by its ``tag``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from surfaces.ending_tools import POLICY
from surfaces.surface_support import SURFACE_ENV, write_config
from toolcards.governance import (
    ApprovalBroker,
    ApprovalRequest,
    AuditEntry,
    AuditLog,
    Identity,
    SqliteApprovalStore,
)

CALLER = Identity("agent.runner", "agent", ["worker"])
APPROVER = Identity("ann", "user", ["approver"])
DECISIONS = ("approval_granted", "approval_denied", "approval_rejected")
DEADLINE = 60.0


@dataclass
class Endings:
    """A config (its audit trail, approvals file and marks directory) for the ending tools."""

    base: Path
    config: Path

    @property
    def audit(self) -> Path:
        return self.base / "audit.db"

    @property
    def marks(self) -> Path:
        return self.base / "marks"

    @property
    def env(self) -> dict[str, str]:
        return {**SURFACE_ENV, "ENDINGS_DIR": str(self.marks)}

    def rows(self, tag: str) -> list[AuditEntry]:
        """Every audit row whose arguments carry ``tag`` (call rows and approval decisions)."""
        with AuditLog(self.audit) as log:
            return [e for e in log.query(limit=100_000) if e.args.get("tag") == tag]

    def call_rows(self, tag: str) -> list[AuditEntry]:
        return [e for e in self.rows(tag) if e.outcome not in DECISIONS]

    def settled_rows(self, tag: str, *, timeout: float = DEADLINE) -> list[AuditEntry]:
        """The call rows of ``tag`` once there are any (another process writes them)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.call_rows(tag)
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


def endings_config(base: Path, **extra: Any) -> Endings:
    """A config serving the ending tools to :data:`CALLER` (stdio's local principal and an HTTP
    token), with :data:`APPROVER` among its principals, timeout 2 s."""
    base.mkdir(parents=True, exist_ok=True)
    (base / "marks").mkdir(exist_ok=True)
    policy = base / "policy.yaml"
    policy.write_text(POLICY, encoding="utf-8")
    extra.setdefault("timeout", 2)
    config = write_config(
        base,
        local=CALLER,
        tokens=[CALLER, APPROVER],
        policy=policy,
        tools=["ending_tools:TOOLS"],
        approvals=str(base / "approvals.db"),
        **extra,
    )
    return Endings(base, config)


async def wait_running(marks: Path, tag: str) -> None:
    """Until the call tagged ``tag`` runs (its tool created the mark)."""
    with anyio.fail_after(DEADLINE):
        while not (marks / tag).exists():
            await anyio.sleep(0.02)


async def grant_when_pending(endings: Endings, tag: str) -> ApprovalRequest:
    """Grant, as :data:`APPROVER`, the pending request of the call tagged ``tag`` (in the
    approvals file the served config shares; the grant is audited into its trail)."""
    store = SqliteApprovalStore(endings.base / "approvals.db")
    try:
        with AuditLog(endings.audit, "sync") as audit, anyio.fail_after(DEADLINE):
            broker = ApprovalBroker(store=store, audit=audit)
            while True:
                for request in broker.pending():
                    if request.args.get("tag") == tag:
                        return broker.grant(request, approver=APPROVER, surface="test")
                await anyio.sleep(0.05)
    finally:
        store.close()
