"""Who decides a governed MCP call that needs approval: the channels.

- :class:`OutOfBandApprovals` (the default, config ``approval: approver``): the call waits,
  at most ``approval_timeout`` seconds, in the approvals inbox shared by every process of the
  config until a principal with the approver role grants or denies it (``toolcards approvals
  grant|deny``, the dashboard, ``ApprovalBroker.grant`` in Python). The caller is never asked.
- :class:`FailClosed`: no principal of the config may approve, so nobody could decide: the
  call is refused at once.
- :class:`ElicitationApprovals` (config ``approval: client``, and only then): the calling
  client is asked by elicitation, with the exact arguments. This trusts the client: whoever
  holds its token approves its own calls; each yes is audited as the caller's own grant.
  A connection that cannot carry a server-initiated request (MCP 2026-07-28 dropped them)
  cannot be asked: the call goes to the out-of-band approver instead (refused at once when no
  principal may approve), and the caller is told so in one log line. Never approved silently.

The MCP server takes any :class:`ApprovalChannel`; :func:`approval_channel` picks one.

:class:`InboxApprover`, the dashboard's approver channel, is an executor approver
(``await approver(request) -> bool``): the request is put in the dashboard's
:class:`~toolcards.governance.approvals.broker.ApprovalBroker` (it is already there when
the executor shares that broker) and the call waits, at most ``timeout`` seconds, for a
principal with the approver role to grant or deny it on the page. No decision in time is
:class:`~toolcards.governance.approvals.broker.ApprovalTimedOut` (the call's outcome is
``approval_timeout``, not a refusal). The broker binds the decision to the call id, tool,
argument digest and principal, refuses self-approval and audits it with the approver's
identity; the executor then runs the call once, or refuses it. Hooks::

    Team(..., approver=InboxApprover(broker))                 # members of a team
    GovernedToolset(..., approver=InboxApprover(broker))      # one agent's toolset
    GovernedMCPServer(runtime, approver=InboxApprover(runtime.executor.approvals))
    GovernedMCPServer(runtime, approvals=InboxApprover(...))  # servers asking per call
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from toolcards.governance.approvals.broker import (
    ApprovalBroker,
    ApprovalError,
    ApprovalRequest,
    ApprovalState,
    ApprovalTimedOut,
    Approver,
    GrantedEdit,
)
from toolcards.governance.approvals.view import arguments_view, escaped_line

log = logging.getLogger(__name__)

APPROVAL_TIMEOUT = 300.0
"""How long a call waits for a human by default (seconds)."""
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this call",
            "description": "Yes runs the call once, with exactly these arguments.",
        }
    },
    "required": ["approve"],
}


def approval_prompt(request: ApprovalRequest) -> str:
    """What the human deciding a call reads before approving it: the exact arguments that run,
    whole (canonical JSON, hidden characters as named escapes), and the digest a yes binds;
    the tool, the caller and the reason on one line each, hidden characters escaped."""
    view = arguments_view(request, exact=True)
    if not view.recorded:
        args = "(not recorded: the call cannot be approved)"
    else:
        args = view.text
        if view.escapes:
            args += "\nshown as escapes: " + ", ".join(view.escapes)
    tool, caller, why = map(escaped_line, (request.tool_id, request.principal, request.reason))
    return (
        f"Approve this call?\ntool: {tool}\ncaller: {caller}\n"
        f"why: {why}\ndigest: sha256:{request.args_digest}\n"
        f"arguments (exact, {view.length} characters):\n{args}"
    )


class AskedFor(Protocol):
    """The approver a channel gives one call, and whether it asked a human."""

    @property
    def approver(self) -> Approver | None:
        """Who decides (None: nobody; the call fails closed)."""

    @property
    def human_asked(self) -> bool:
        """True once a human was asked (a refusal is then an approval outcome)."""


class ApprovalChannel(Protocol):
    """Where the MCP server sends approval-required calls: :class:`ElicitationApprovals`
    (the calling client's human), or an out-of-band inbox (the dashboard)."""

    def for_call(self, ctx: Any) -> AskedFor:
        """The approver for the call of request context ``ctx``."""


@dataclass
class AskedApprover:
    """The approver for one call, and whether it asked anyone (a refusal by a human is an
    approval outcome, not a policy denial)."""

    approver: Approver | None
    asked: list[bool] = field(default_factory=list)
    note: str | None = None
    """Why this call is not decided where the config says (added to an approval error)."""

    @property
    def human_asked(self) -> bool:
        return bool(self.asked)


@dataclass(frozen=True)
class ElicitationApprovals:
    """Asks the client that made the call, waiting at most ``timeout`` seconds (only with
    ``approval: client``: the caller approves its own call). With ``broker``, its yes is
    recorded and audited as the caller's own grant."""

    timeout: float = APPROVAL_TIMEOUT
    broker: ApprovalBroker | None = None
    fallback: OutOfBandApprovals | FailClosed | None = None
    """Who decides when the connection cannot carry the question (None: nobody)."""

    def for_call(self, ctx: Any) -> AskedApprover:
        session = ctx.session
        if not _can_push_requests(session):
            return self._out_of_band(ctx, _cannot_ask(session))
        if not _can_elicit(session):
            return AskedApprover(None)
        result = AskedApprover(None)
        request_id = ctx.request_id
        broker = self.broker

        async def approver(request: ApprovalRequest) -> bool | GrantedEdit:
            result.asked.append(True)
            yes = False
            with anyio.move_on_after(self.timeout) as waited:
                answer = await session.elicit_form(
                    approval_prompt(request), APPROVAL_SCHEMA, related_request_id=request_id
                )
                content = answer.content or {}
                yes = answer.action == "accept" and content.get("approve") is True
            if waited.cancelled_caught:
                raise ApprovalTimedOut(self.timeout)
            if yes and broker is not None:
                try:  # audited: the caller's own grant
                    broker.grant_by_caller(request, surface="mcp")
                except ApprovalError:  # expired or decided meanwhile
                    return False
            return yes

        result.approver = approver
        return result

    def _out_of_band(self, ctx: Any, why: str) -> AskedApprover:
        """The fallback's approver, announcing ``why`` (refused at once without one)."""
        if isinstance(self.fallback, OutOfBandApprovals):
            asked = self.fallback.for_call(ctx, because=why)
            asked.note = why
            return asked
        return AskedApprover(None, note=f"{why}; no principal may approve it")


def _can_elicit(session: Any) -> bool:
    caps = getattr(session, "client_capabilities", None)
    return getattr(caps, "elicitation", None) is not None


def _can_push_requests(session: Any) -> bool:
    """Whether the server may send this request's client a request of its own (False on
    an MCP 2026-07-28 connection: that revision has no server-initiated requests)."""
    return getattr(session, "can_send_request", True) is not False


def _cannot_ask(session: Any) -> str:
    # lazy: mcp 2.x only (mcp 1.x, with the apcore extra, lacks it)
    from mcp.types.version import MODERN_PROTOCOL_VERSIONS  # only reached on mcp 2.x

    version = getattr(session, "protocol_version", None)
    if version in MODERN_PROTOCOL_VERSIONS:
        lacks = f"MCP {version} has no server-initiated elicitation"
    else:
        lacks = "this connection cannot carry a server-initiated request"
    return f"approval: client cannot ask this client ({lacks})"


@dataclass(frozen=True)
class FailClosed:
    """Nobody can approve: every approval-required call is refused without waiting."""

    def for_call(self, ctx: Any) -> AskedApprover:
        return AskedApprover(None)


class InboxApprover:
    """Waits for a decision made in the dashboard (or anywhere sharing ``broker``'s store)."""

    def __init__(self, broker: ApprovalBroker, timeout: float = APPROVAL_TIMEOUT) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.broker = broker
        self.timeout = timeout

    async def __call__(self, request: ApprovalRequest) -> bool | GrantedEdit:
        broker = self.broker
        now = time.time()
        limit = min(self.timeout, request.expires_at - now)
        if limit <= 0:
            raise ApprovalTimedOut(self.timeout)
        mirrored = broker.get(request) is None  # recorded by another executor's broker
        shown = broker.store.add(request, now).request if mirrored else request
        if shown.approval_id != request.approval_id:  # another call's copy: never this one's
            return False
        try:
            state = await broker.wait(shown, limit)
        except BaseException:  # cancelled: the call is gone, so is its place in the inbox
            broker.withdraw(shown)
            raise
        if state is ApprovalState.PENDING and not broker.withdraw(shown, only_pending=True):
            state = broker.state(shown)  # decided after the last look: the decision counts
        edit = None
        if mirrored:
            # the copy's grant is settled by the executor's broker: its edit goes with the yes
            edit = broker.edit_of(shown) if state is ApprovalState.GRANTED else None
            broker.withdraw(shown)
        if state in (ApprovalState.PENDING, ApprovalState.EXPIRED):  # nobody decided in time
            raise ApprovalTimedOut(self.timeout)
        if edit is not None:
            return GrantedEdit(edit)
        return state is ApprovalState.GRANTED

    def for_call(self, ctx: Any) -> AskedInbox:
        """The per-call view a server that picks an approver per request asks for."""
        return AskedInbox(self)


@dataclass
class AskedInbox:
    """One call's approver (the inbox) and whether a human was asked."""

    inbox: InboxApprover
    asked: list[bool] = field(default_factory=list)

    async def approver(self, request: ApprovalRequest) -> bool | GrantedEdit:
        self.asked.append(True)
        return await self.inbox(request)

    @property
    def human_asked(self) -> bool:
        return bool(self.asked)


class OutOfBandApprovals:
    """The call waits in ``broker``'s inbox (shared with other processes through its store)
    for a principal with the approver role; the wait is announced in the server's log (which
    the calling client receives as a log message)."""

    def __init__(
        self, broker: ApprovalBroker, timeout: float = APPROVAL_TIMEOUT, *, page: str | None = None
    ) -> None:
        self.inbox = InboxApprover(broker, timeout)
        self.page = page
        """Where the dashboard is, named in the log line when it serves the inbox too (not its
        address when the callers must not learn it)."""

    def for_call(self, ctx: Any, *, because: str | None = None) -> AskedApprover:
        """The inbox's approver for one call; ``because``: why the call waits here although
        the config says ``approval: client`` (it leads the announcement, a warning then)."""
        result = AskedApprover(None)
        inbox = self.inbox
        also = "" if self.page is None else f", or in the dashboard at {self.page}"
        level, lead = (
            (logging.INFO, "") if because is None else (logging.WARNING, f": {because}; it")
        )

        async def approver(request: ApprovalRequest) -> bool | GrantedEdit:
            result.asked.append(True)
            log.log(
                level,
                "approval %s: %s by %s%s waits (at most %g s) for an approver: "
                "toolcards approvals grant %s%s",
                request.approval_id,
                request.tool_id,
                request.principal,
                lead,
                inbox.timeout,
                request.approval_id,
                also,
            )
            return await inbox(request)

        result.approver = approver
        return result


def approval_channel(
    mode: str, broker: ApprovalBroker, timeout: float, has_approver: bool
) -> ApprovalChannel:
    """The channel for ``mode`` (``"approver"`` or ``"client"``): out of band when some
    principal may approve (``has_approver``), refused at once when none may; or the client."""
    if mode not in ("approver", "client"):
        raise ValueError("approval must be 'approver' or 'client'")
    out_of_band = OutOfBandApprovals(broker, timeout) if has_approver else FailClosed()
    if mode == "client":
        return ElicitationApprovals(timeout, broker, fallback=out_of_band)
    return out_of_band
