"""The team dashboard: a web page with the roster, the plan, the knowledge graph, the audit
trail, the approvals inbox and live team events (``toolcards dashboard``, or
``toolcards serve --transport http --dashboard``). Needs the ``dashboard`` extra.

::

    from toolcards.surfaces.dashboard import Dashboard, InboxApprover, BackgroundServer

    broker = ApprovalBroker(audit=audit)
    team = Team("t1", store="team.db", policy=policy, audit=audit,
                approver=InboxApprover(broker, timeout=300))
    dash = Dashboard(team=team, audit=audit, approvals=broker, tokens=tokens)
    with BackgroundServer(dash.app(), port=8766) as server:
        print(server.url)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolcards._lazy import lazy_names

_NAMES = {
    "Dashboard": "toolcards.surfaces.dashboard.app",
    "InboxApprover": "toolcards.surfaces.approval",
    "BackgroundServer": "toolcards.surfaces.dashboard.serve",
    "dashboard_for": "toolcards.surfaces.dashboard.serve",
    "run_dashboard": "toolcards.surfaces.dashboard.serve",
}

if TYPE_CHECKING:
    from toolcards.surfaces.approval import InboxApprover
    from toolcards.surfaces.dashboard.app import Dashboard
    from toolcards.surfaces.dashboard.serve import (
        BackgroundServer,
        dashboard_for,
        run_dashboard,
    )

__all__ = [
    "BackgroundServer",
    "Dashboard",
    "InboxApprover",
    "dashboard_for",
    "run_dashboard",
]

__getattr__, __dir__ = lazy_names(__name__, _NAMES)
