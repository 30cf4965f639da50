"""Deciding a pending call from the dashboard: the decision names exactly what the page
showed (the binding in the form), and goes through the broker, which checks the role,
refuses self-approval and audits it.

A grant may carry the approver's edit of the arguments (``args``: a JSON object in a JSON
body, or JSON text in a form field): those are what is approved and what runs, once, checked
as a fresh call's would be. The answer names what will run (its canonical JSON and digest).

A grant may also be remembered for later calls (``remember``: how long, ``30m`` to ``30d``;
``session``: only in the call's session; ``match.<argument>``: ``exact``, ``any`` or ``glob``
with the pattern in ``glob.<argument>``): the answer shows the grant exactly as it will match.
A remembered grant is revoked with ``POST /grants/<id>/revoke``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from toolcards.core import outside_json
from toolcards.governance.approvals.broker import ApprovalError, EditRefusedError
from toolcards.governance.approvals.grants import GrantError, Remember, describe, parse_duration
from toolcards.governance.redaction.redactor import args_digest
from toolcards.surfaces.dashboard.views import grant_item

if TYPE_CHECKING:
    from starlette.requests import Request

    from toolcards.core.identity import Identity
    from toolcards.governance.approvals.broker import ApprovalBroker

__all__ = ["BINDING", "Decided", "decide_shown", "read_decision", "remember_of", "revoke_grant"]

BINDING = ("call_id", "tool", "args_digest", "principal")
"""The form fields that name the request as the page showed it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Decided:
    """The answer to a decision: HTTP status, one line, and (an edited grant) what runs."""

    status: int
    message: str
    runs: dict[str, Any] | None = None
    runs_digest: str | None = None
    grant: dict[str, Any] | None = None
    """The grant remembered (as the inbox shows one), if any."""


async def read_decision(
    request: Request, limit: int, read_form: Callable[[Request], Awaitable[dict[str, str]]]
) -> tuple[dict[str, str], Any, str | None]:
    """A decision's fields, the edit it carries (None: none) and why its body cannot be read
    (None: it can): a JSON object (``args`` an object) or a form (``args`` JSON text)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        found = await json_fields(request, limit)
        if found is None:
            return {}, None, f"the body must be one JSON object of at most {limit} bytes"
        return found[0], found[1], None
    form = await read_form(request)
    edit, bad = form_edit(form.get("args"))
    return form, edit, bad


async def json_fields(request: Request, limit: int) -> tuple[dict[str, str], Any] | None:
    """A JSON decision body (at most ``limit`` bytes): its string fields, and ``args`` as
    given (None when absent); None when it is not one JSON object within the limit."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    try:
        data = outside_json.load_object(body)
    except ValueError:
        return None
    fields = {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
    return fields, data.get("args")


def form_edit(text: str | None) -> tuple[Any, str | None]:
    """A form's ``args`` field: (the edit, None), (None, None) when empty, or (None, why)."""
    if text is None or not text.strip():
        return None, None
    try:
        return outside_json.loads(text), None
    except ValueError as exc:
        return None, f"the edited arguments are not valid JSON ({exc})"


def remember_of(fields: dict[str, str]) -> tuple[Remember | None, str | None]:
    """The grant a decision asks to remember (None: none), or why it cannot be read."""
    if not fields.get("remember"):
        return None, None
    pattern: dict[str, Any] = {}
    for key, how in fields.items():
        if not key.startswith("match.") or how == "exact":
            continue
        name = key.removeprefix("match.")
        if how == "any":
            pattern[name] = "any"
        elif how == "glob":
            pattern[name] = {"glob": fields.get(f"glob.{name}", "")}
        else:
            return None, f"{name}: a match is exact, any or glob"
    try:
        seconds = parse_duration(fields["remember"])
    except GrantError as exc:
        return None, str(exc)
    session = fields.get("session", "") in ("1", "true", "on")
    return Remember(seconds, session, pattern or None), None


def revoke_grant(broker: ApprovalBroker, identity: Identity, grant_id: str) -> Decided:
    """Revoke a grant through the broker (which checks the role and audits it)."""
    try:
        revoked = broker.revoke(grant_id, approver=identity, surface="dashboard")
    except ApprovalError as exc:
        forbidden = broker.approver_role not in identity.roles
        return Decided(403 if forbidden else 409, str(exc))
    return Decided(200, f"revoked {grant_id}: {describe(revoked)}")


def decide_shown(
    broker: ApprovalBroker,
    identity: Identity,
    approval_id: str,
    shown: tuple[str, ...],
    grant: bool,
    args: Any = None,
    remember: Remember | None = None,
) -> Decided:
    """Grant (with ``args``: the approver's edit; with ``remember``: also later calls) or deny
    what the human saw (the binding in the form), through the broker."""
    request = broker.get(approval_id)
    handle: Any = approval_id
    if request is not None:
        call_id, tool_id, digest, principal = shown
        handle = dataclasses.replace(
            request, call_id=call_id, tool_id=tool_id, args_digest=digest, principal=principal
        )
    decide: Callable[..., Any] = broker.grant_record if grant else broker.deny
    edit: dict[str, Any] = {"args": args} if grant and args is not None else {}
    if grant and remember is not None:
        edit["remember"] = remember
    try:
        answer = decide(handle, approver=identity, surface="dashboard", **edit)
    except EditRefusedError as exc:
        return Decided(422, str(exc))
    except ApprovalError as exc:
        own = request is not None and request.principal == identity.id
        forbidden = broker.approver_role not in identity.roles or own
        return Decided(403 if forbidden else 409, str(exc))
    decided = answer.request if grant else answer
    verb = "granted" if grant else "denied"
    message = f"{verb}: {decided.tool_id} for {decided.principal}"
    remembered = answer.grant if grant else None
    if remembered is not None:
        item = grant_item(remembered, remembered.created_at)
        return Decided(200, f"{message}; remembered as {remembered.grant_id}", grant=item)
    runs = answer.edited_args if grant else None
    if runs is None:
        return Decided(200, message)
    digest = args_digest(runs)
    return Decided(200, f"{message}; runs the edited arguments sha256:{digest}", runs, digest)
