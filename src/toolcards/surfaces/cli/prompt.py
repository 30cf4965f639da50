"""Who decides an approval-required ``toolcards call``: never the caller, unless the config
says ``approval: client``.

- ``principals.terminal_approver`` set, stdin a terminal, no ``--json``: the terminal asks
  that principal (another one than the caller, holding the approver role), showing the exact
  arguments whole. Yes grants the request as them, no denies it: both through the broker,
  audited with their identity like every other decision.
- ``approval: client``, stdin a terminal, no ``--json``: the caller is asked, and its yes
  grants its own call (the config trusts the caller); audited as the caller's own grant.
- otherwise, on a terminal, when a principal of the config (the local one or a token's) holds
  the approver role: nobody on the terminal is asked (whatever is typed decides nothing); the
  call waits, at most ``approval_timeout`` seconds, in the config's approvals inbox for an
  approver out of band (``toolcards approvals grant ID``, the dashboard).
- otherwise (no terminal, ``--json``, an inbox no other process can reach, or no principal
  holding the approver role): nobody could decide in time, so the call fails closed at once,
  as an MCP client's does, and :data:`~toolcards.surfaces.cli.run.FAIL_CLOSED_HINT` says how
  such calls get approved.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from toolcards.governance.approvals.broker import ApprovalError
from toolcards.stores.memory import MemoryApprovalStore
from toolcards.surfaces.approval import InboxApprover, approval_prompt
from toolcards.surfaces.cli.state import cell, err

if TYPE_CHECKING:
    from toolcards.core.identity import Identity
    from toolcards.governance.approvals.broker import (
        ApprovalBroker,
        ApprovalRequest,
        Approver,
        GrantedEdit,
    )
    from toolcards.surfaces.runtime import SurfaceRuntime


def call_approver(rt: SurfaceRuntime, *, interactive: bool, status: Any) -> Approver | None:
    """The approver of one ``toolcards call`` (None: the call fails closed at once)."""
    broker = rt.executor.approvals
    config = rt.config
    if interactive and rt.approval == "client":
        return _Prompt(broker, None, status).ask
    approver = config.terminal_approver if config is not None else None
    if interactive and approver is not None:
        return _Prompt(broker, approver, status).ask
    if interactive and _shared(broker) and rt.has_approver(besides=rt.local):  # else nobody
        return _waiter(broker, rt.approval_timeout)
    return None


def _shared(broker: ApprovalBroker) -> bool:
    """Whether another process (an approver's CLI, a dashboard) can decide in this inbox."""
    return not isinstance(broker.store, MemoryApprovalStore)


class _Prompt:
    """Asks on the terminal: as ``approver``, or (None) the trusted caller itself."""

    def __init__(self, broker: ApprovalBroker, approver: Identity | None, status: Any) -> None:
        self.broker = broker
        self.approver = approver
        self.status = status

    async def ask(self, request: ApprovalRequest) -> bool:
        from rich.prompt import Confirm  # lazy: rich, ~5x python -c pass; only for a terminal

        who = self.approver
        if self.status is not None:
            self.status.stop()
        sys.stderr.write(approval_prompt(request) + "\n")  # plain text: never markup
        sys.stderr.flush()
        question = "Run it once with exactly these arguments?"
        if who is not None:
            question = f"Approve as {who.id}? {question}"
        # the approver's id is the config's: a Text, never read as markup
        yes = bool(Confirm.ask(cell(question, "prompt"), default=False, console=err()))
        if self.status is not None:
            self.status.start()
        try:
            if who is None:
                if yes:
                    self.broker.grant_by_caller(request, surface="cli")
            elif yes:
                self.broker.grant(request, approver=who, surface="cli")
            else:
                self.broker.deny(request, approver=who, surface="cli", reason="no at the terminal")
        except ApprovalError as exc:
            err().print(str(exc), markup=False)
            return False
        return yes


def _waiter(broker: ApprovalBroker, timeout: float) -> Approver:
    inbox = InboxApprover(broker, timeout)

    async def wait_for_an_approver(request: ApprovalRequest) -> bool | GrantedEdit:
        err().print(
            f"approval {request.approval_id}: {request.tool_id} by {request.principal} waits "
            f"(at most {inbox.timeout:g} s) for an approver; nothing typed here decides it. "
            f"An approver runs: toolcards approvals grant {request.approval_id}",
            markup=False,
            emoji=False,
        )
        return await inbox(request)

    return wait_for_an_approver
