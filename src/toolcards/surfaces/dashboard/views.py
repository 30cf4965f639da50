"""What each panel shows, read from the team, the audit log and the approval broker.

Every function here blocks (store reads): the app runs them in a worker thread.
They return plain data for the templates, which escape every value.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from toolcards.core.approvals import ApprovalState
from toolcards.core.events import LIFECYCLE_DISPLAY
from toolcards.core.grants import Grant
from toolcards.governance.approvals.grants import describe
from toolcards.governance.approvals.view import (
    INLINE_LIMIT,
    PAGE_LIMIT,
    ArgumentsView,
    arguments_view,
    listed_view,
    reads_as_itself,
)
from toolcards.governance.audit.log import other_teams_line
from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, Redactor
from toolcards.runtime.member_restore import ROSTER, hire_time
from toolcards.runtime.worker import TRANSIENT_PREFIX

if TYPE_CHECKING:
    from toolcards.core.events import ToolStateEvent
    from toolcards.governance.approvals.broker import ApprovalBroker, ApprovalRequest
    from toolcards.governance.audit.log import AuditEntry, AuditLog
    from toolcards.governance.executor.budget import BudgetLine
    from toolcards.runtime.team import Team
    from toolcards.stores.audit_chain import ChainReport

RECENT_EVENTS = 50
LIFECYCLE_SCAN = 10
AUDIT_PAGE = 50
CHAIN_CHECK_EVERY = 30.0  # seconds: the audit panel's chain state is at most this old
EVENT_TEXT = 300
MAX_DIGITS = 18  # a position or an entry id: below 2**63
INBOX_CARDS = 20
"""Pending requests the inbox shows, oldest first (the panel says how many more wait): a
render reads at most this many, each no further than ``INLINE_LIMIT`` characters."""
OUTCOMES = (
    "ok",
    "denied",
    "unknown_tool",
    "invalid_args",
    "retry",
    "rate_limited",
    "needs_approval",
    "error",
    "refused",
    "deferred",
    "approval_granted",
    "approval_denied",
    "approval_rejected",
)
_MEMBER_KEYS = ("sender", "recipient", "name", "member")


def compact_json(value: Any, limit: int = EVENT_TEXT) -> str:
    """``value`` as one line of JSON, cut to ``limit`` characters."""
    text = json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- team ------------------------------------------------------------------------------------


def team_view(team: Team | None) -> dict[str, Any]:
    """Roster (busy or idle, last activity) and tool actors with their state size."""
    if team is None:
        return {"available": False}

    last = _last_activity(team)
    running = [(m.name, m.role, "busy" if m.busy else "idle", m.hired_at) for m in team.members()]
    members = [
        {
            "name": name,
            "role": role,
            "state": state,
            "last_at": last.get(name, (hired, "hired"))[0],
            "last_text": last.get(name, (hired, "hired"))[1],
        }
        for name, role, state, hired in running + _stopped_members(team, {r[0] for r in running})
    ]
    actors = [
        {"name": name, "size": team.state_of(name).count()}
        for name in sorted(team.actor_names())
        if name.startswith("#") and not name.startswith(TRANSIENT_PREFIX)
    ]
    return {
        "available": True,
        "team_id": team.team_id,
        "store": team.store_location,
        "members": members,
        "actors": actors,
    }


def _stopped_members(team: Team, running: set[str]) -> list[tuple[str, str, str, float]]:
    """Members on the roster that are not running here (their model could not be restored
    in this process, e.g. a dashboard opened on a stored team)."""
    found = []
    for key, record in team.state_of(ROSTER).items("member:"):
        name = key.removeprefix("member:")
        if name not in running and isinstance(record, dict):
            found.append((name, str(record.get("role", "")), "stopped", hire_time(record)))
    return sorted(found, key=lambda m: m[3])


def _last_activity(team: Team) -> dict[str, tuple[float, str]]:
    """Per member name: the time and a line of its latest event among the recent ones."""
    found: dict[str, tuple[float, str]] = {}
    for event in team.log.recent():
        payload = event.payload if isinstance(event.payload, dict) else {}
        what = str(payload.get("event") or event.tool_id)
        for key in _MEMBER_KEYS:
            who = payload.get(key)
            if isinstance(who, str) and who:
                found[who] = (event.timestamp, what)
    return found


# -- events ----------------------------------------------------------------------------------


def event_item(event: ToolStateEvent, redactor: Redactor = DEFAULT_REDACTOR) -> dict[str, Any]:
    """One event as the Live panel shows it (secrets in it redacted)."""
    return {
        "tool_id": event.tool_id,
        "seq": event.seq,
        "ts": event.timestamp,
        "id": event.id,
        "sender": redactor.text(event.sender) if event.sender else "",
        "display_type": event.display_type,
        "lifecycle": event.display_type == LIFECYCLE_DISPLAY,
        "text": compact_json(redactor.value(event.payload)),
    }


def events_view(
    team: Team | None, n: int = RECENT_EVENTS, redactor: Redactor = DEFAULT_REDACTOR
) -> dict[str, Any]:
    """The latest ``n`` events of the team's work (newest first), found among at most
    ``n * LIFECYCLE_SCAN`` recent events, with the lifecycle events (team and actor starts
    and stops, which a CLI call alone makes six of) of the same span, at most ``n``, which the
    panel hides until asked; and the log position they end at."""
    if team is None:
        return {"available": False, "events": [], "position": 0, "lifecycle": 0}
    position = team.log.position
    recent = list(team.log.entries(max(0, position - n * LIFECYCLE_SCAN)))
    end = recent[-1][0] if recent else position
    work = [(p, e) for p, e in recent if e.display_type != LIFECYCLE_DISPLAY][-n:]
    since = work[0][0] if len(work) == n else 0
    starts = [(p, e) for p, e in recent if e.display_type == LIFECYCLE_DISPLAY and p >= since]
    shown = sorted(work + starts[-n:], key=lambda item: item[0], reverse=True)
    return {
        "available": True,
        "events": [event_item(e, redactor) for _, e in shown],
        "position": end,
        "lifecycle": len(starts[-n:]),
    }


# -- approvals -------------------------------------------------------------------------------


def approval_item(
    request: ApprovalRequest,
    now: float,
    *,
    exact: bool,
    full: bool = False,
    view: ArgumentsView | None = None,
) -> dict[str, Any]:
    """One request as the inbox shows it, or its own page (``full``): its exact arguments for
    an approver (``exact``), else the redacted copy (see
    :mod:`toolcards.governance.approvals.view`), ``whole`` when they fit (the page shows at
    most ``PAGE_LIMIT`` characters: a caller's arguments cost a page that much, no more); for
    an approver shown them whole, each argument (``fields``) for a grant that remembers the
    decision: a string shows what it is in a form's field (no hidden character, no line
    break) or is offered no glob. ``view``: the arguments as a listing read them."""
    if view is None:
        view = arguments_view(request, exact=exact, limit=PAGE_LIMIT if full else None)
    whole = view.recorded and (view.fits or (full and view.whole))
    given = request.exact_args if exact and view.grantable and whole else None
    fields = [  # the glob offered matches the value alone: its `*`, `?` and `[` escaped
        {
            "name": name,
            "plain": reads_as_itself(name),  # else only "exactly as shown": `to` and `to\u200b`
            "glob": glob.escape(value) if _shown_whole(value) and reads_as_itself(name) else "",
        }
        for name, value in sorted((given or {}).items())
    ]
    return {
        "approval_id": request.approval_id,
        "call_id": request.call_id,
        "tool": request.tool_id,
        "principal": request.principal,
        "args_digest": request.args_digest,
        "args": view,
        "whole": whole,
        "reason": request.reason,
        "surface": request.surface,
        "session": request.session,
        "fields": fields,
        "age": max(0.0, now - request.created_at) if request.created_at else None,
        "expires_in": max(0.0, request.expires_at - now),
    }


def grant_item(grant: Grant, now: float) -> dict[str, Any]:
    """One live grant as the inbox shows it: exactly as it will match."""
    return {
        "grant_id": grant.grant_id,
        "principal": grant.principal,
        "tool": grant.tool_id,
        "matches": describe(grant),
        "pattern": grant.pattern_json,
        "session": grant.session,
        "created_by": grant.created_by,
        "expires_in": max(0.0, grant.expires_at - now),
    }


def approvals_view(broker: ApprovalBroker | None, *, exact: bool = False) -> dict[str, Any]:
    """The oldest requests waiting for a decision (at most :data:`INBOX_CARDS`, read no
    further than the inbox shows them), how many wait in all, and the live grants;
    ``exact``: as an approver sees them (a grant's pattern holds exact argument values: only
    an approver sees it)."""
    if broker is None:
        return {"available": False, "pending": [], "waiting": 0, "grants": [], "grant_count": 0}
    now = time.time()
    grants = broker.grants()
    listed, waiting = broker.listing(INBOX_CARDS, INLINE_LIMIT)
    return {
        "available": True,
        "pending": [
            approval_item(i.request, now, exact=exact, view=listed_view(i, exact=exact))
            for i in listed
        ],
        "waiting": waiting,
        "role": broker.approver_role,
        "grants": [grant_item(g, now) for g in grants] if exact else [],
        "grant_count": len(grants),
        "keeps_grants": broker.grant_store is not None,
    }


def one_approval_view(
    broker: ApprovalBroker | None, approval_id: str, *, exact: bool
) -> dict[str, Any] | None:
    """One pending request, to be shown whole (None when there is no such pending one)."""
    request = broker.get(approval_id) if broker is not None else None
    if broker is None or request is None or broker.state(request) is not ApprovalState.PENDING:
        return None
    return {
        "item": approval_item(request, time.time(), exact=exact, full=True),
        "role": broker.approver_role,
        "keeps_grants": broker.grant_store is not None,
    }


# -- budgets ---------------------------------------------------------------------------------


def budgets_view(report: Callable[[], list[BudgetLine]] | None) -> dict[str, Any]:
    """What each budget of the team spent and has left (``report`` reads the counters)."""
    if report is None:
        return {"available": False, "lines": []}
    lines = report()
    return {"available": True, "lines": [line.as_dict() for line in lines]}


# -- audit -----------------------------------------------------------------------------------


@dataclass
class AuditFilters:
    """The audit panel's query: every field optional; ``before`` pages back."""

    principal: str | None = None
    tool: str | None = None
    outcome: str | None = None
    since: str | None = None
    until: str | None = None
    before: int | None = None
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> AuditFilters:
        def text(name: str) -> str | None:
            value = (params.get(name) or "").strip()
            return value[:200] or None

        found = cls(text("principal"), text("tool"), text("outcome"), text("since"), text("until"))
        before = text("before")
        if before is not None:
            found.before = whole_number(before)
            if found.before is None:
                found.errors.append("before: expected an entry id")
        return found

    def query(self) -> dict[str, str]:
        """The filters as query parameters (for links that keep them)."""
        pairs = {
            "principal": self.principal,
            "tool": self.tool,
            "outcome": self.outcome,
            "since": self.since,
            "until": self.until,
        }
        return {k: v for k, v in pairs.items() if v}


def whole_number(text: str) -> int | None:
    """``text`` as a whole number of at most 18 ASCII digits, else None (``str.isdigit``
    also takes ``²``, which ``int`` refuses, and ``int`` refuses more than 4,300 digits)."""
    if text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS:
        return int(text)
    return None


def parse_time(text: str | None, now: float | None = None) -> float | None:
    """``30s``, ``10m``, ``2h``, ``1d`` (ago) or an ISO time (local when naive)."""
    if not text:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number = text[:-1]
    if text[-1:] in units and number.replace(".", "", 1).isdigit():
        return (time.time() if now is None else now) - float(number) * units[text[-1]]
    return dt.datetime.fromisoformat(text).timestamp()


def audit_view(audit: AuditLog | None, filters: AuditFilters) -> dict[str, Any]:
    """One page (newest first) of the entries matching ``filters``."""
    if audit is None:
        return {"available": False, "rows": [], "filters": filters}
    bounds: dict[str, float | None] = {}
    for name in ("since", "until"):
        try:
            bounds[name] = parse_time(getattr(filters, name))
        except ValueError:
            filters.errors.append(f"{name}: use 30s, 10m, 2h, 1d or an ISO time")
            bounds[name] = None
    entries = audit.query(
        principal=filters.principal,
        tool=filters.tool,
        outcome=filters.outcome,
        since=bounds["since"],
        until=bounds["until"],
        before=filters.before,
        limit=AUDIT_PAGE + 1,
    )
    more = len(entries) > AUDIT_PAGE
    page = list(reversed(entries[-AUDIT_PAGE:]))
    others = audit.elsewhere() if not entries and not filters.query() else []
    return {
        "available": True,
        "rows": [audit_row(e) for e in page],
        "older": page[-1].id if more and page else None,
        "filters": filters,
        "outcomes": OUTCOMES,
        "chain": chain_state(audit),
        "elsewhere": other_teams_line(audit, others, "--team {team}") if others else "",
    }


_CHAINS: weakref.WeakKeyDictionary[AuditLog, tuple[float, float, ChainReport]] = (
    weakref.WeakKeyDictionary()
)


def chain_state(audit: AuditLog, now: float | None = None) -> ChainReport:
    """The team's hash chain as last checked. A check reads every row: it runs again when the
    last one is older than :data:`CHAIN_CHECK_EVERY`, or a hundred times what it took (a
    dashboard spends at most about 1% of a core on it, however long the trail)."""
    now = time.monotonic() if now is None else now
    known = _CHAINS.get(audit)
    if known is None or now - known[0] > max(CHAIN_CHECK_EVERY, 100 * known[1]):
        started = time.monotonic()
        report = audit.verify()
        known = _CHAINS[audit] = (now, time.monotonic() - started, report)
    return known[2]


def audit_row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "ts": entry.ts,
        "principal": entry.principal,
        "surface": entry.surface,
        "tool": entry.tool,
        "decision": entry.decision,
        "outcome": entry.outcome,
        "reason": entry.reason or "",
        "args": compact_json(entry.args, 400),
        "duration_ms": entry.duration_ms,
        "error": entry.error or "",
    }


def _shown_whole(value: Any) -> bool:
    """Whether ``value`` can stand in a form's field as it is (a string without hidden
    characters or line breaks)."""
    return isinstance(value, str) and reads_as_itself(value)
