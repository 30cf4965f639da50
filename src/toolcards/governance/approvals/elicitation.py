"""Questions for the team's human, in the approvals inbox: an MCP server's elicitation.

A question is a pending approval request (``tool_id`` such as ``mcp.crm.elicit``, arguments
``server``, ``message`` and ``requested_schema``), listed and decided where every approval
is (``toolcards approvals list|grant|deny``, the dashboard's inbox). The human's answer:

- a grant whose edited arguments are ``{"content": {...}}`` (:func:`answer_elicitation`,
  ``toolcards approvals grant ID --args '{"content": ...}'``, the dashboard's grant with
  edited arguments): *accept* with that content, which must fit the requested schema;
- a plain grant: *accept* with no content;
- a deny: *decline*;
- nobody in time, or the request withdrawn: *cancel*.

Who may answer is who may approve: a principal holding the approver role, never the caller
(the broker refuses and audits anything else). The answer travels in the approval store as
the grant's edit, so it may come from another process sharing the store.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from toolcards.core.approvals import ApprovalRequest, ApprovalState
from toolcards.core.identity import Identity
from toolcards.governance.approvals.broker import ApprovalBroker, ApprovalError, Handle
from toolcards.governance.redaction.redactor import canonical_json

__all__ = ["ElicitationReply", "answer_elicitation", "ask_inbox", "check_content", "form_fault"]

log = logging.getLogger(__name__)
_MAX_CONTENT_CHARS = 20_000
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True, slots=True)
class ElicitationReply:
    """The human's answer: ``accept`` (with ``content``, or None), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


def form_fault(schema: Mapping[str, Any]) -> str | None:
    """What keeps ``schema`` (a server's, hostile) from being a flat form a human can fill
    in, or None: ``properties`` must map names to objects, ``required`` list names, and each
    ``enum`` list JSON scalars (a text ``enum`` would take any part of it)."""
    props = schema.get("properties") or {}
    if not isinstance(props, Mapping) or not all(isinstance(p, Mapping) for p in props.values()):
        return "its properties are not objects by name"
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return "its required fields are not a list of names"
    for name, spec in props.items():
        enum = spec.get("enum", [])
        if not isinstance(enum, list) or not all(isinstance(v, _SCALARS) for v in enum):
            return f"the values of field {name!r} are not a list"
    return None


def check_content(content: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """``content`` as a plain dict when it fits the flat object ``schema`` of an elicitation
    (primitive properties, ``enum``, ``required``); ValueError naming what does not fit, or
    what keeps the schema from being a form (:func:`form_fault`)."""
    if not isinstance(content, Mapping):
        raise ValueError("the answer must be an object")
    fault = form_fault(schema)
    if fault is not None:
        raise ValueError(f"the question cannot be answered: {fault}")
    props = schema.get("properties") or {}
    unknown = sorted(set(content) - set(props))
    if unknown:
        raise ValueError(f"the question has no field {', '.join(map(repr, unknown))}")
    missing = [name for name in schema.get("required") or () if name not in content]
    if missing:
        raise ValueError(f"the answer lacks the required field {', '.join(map(repr, missing))}")
    for name, value in content.items():
        spec = props[name]
        kinds = _TYPES.get(str(spec.get("type", "")))
        wrong_bool = isinstance(value, bool) and spec.get("type") != "boolean"
        if kinds is not None and (not isinstance(value, kinds) or wrong_bool):
            raise ValueError(f"field {name!r} must be a {spec['type']}")
        if "enum" in spec and value not in spec["enum"]:
            raise ValueError(f"field {name!r} must be one of {spec['enum']!r}")
    plain = dict(content)
    if len(canonical_json(plain)) > _MAX_CONTENT_CHARS:
        raise ValueError(f"the answer is longer than {_MAX_CONTENT_CHARS} characters")
    return plain


async def ask_inbox(
    broker: ApprovalBroker,
    *,
    tool_id: str,
    server: str,
    message: str,
    schema: Mapping[str, Any],
    identity: Identity,
    call_id: str,
    surface: str,
    timeout: float,
) -> ElicitationReply:
    """Put the question in the inbox and wait (at most ``timeout`` seconds) for the answer."""
    args = {"server": server, "message": message, "requested_schema": dict(schema)}
    question = broker.request(
        tool_id=tool_id,
        args=args,
        identity=identity,
        reason=f"MCP server {server!r} asks {identity.id}'s human a question",
        call_id=call_id,
        surface=surface,
    )
    try:
        await broker.wait(question, timeout)
    except BaseException:
        broker.withdraw(question)
        raise
    settle = functools.partial(
        broker.settle_record,
        question.call_id,
        tool_id=question.tool_id,
        args_digest=question.args_digest,
        principal=question.principal,
    )
    record = settle()
    state = record.state if record is not None else ApprovalState.EXPIRED
    if state is ApprovalState.PENDING:  # nobody in time, unless an answer lands just now
        if broker.withdraw(question, only_pending=True):
            return ElicitationReply("cancel")
        record = settle()
        state = record.state if record is not None else ApprovalState.EXPIRED
    if state is ApprovalState.DENIED:
        return ElicitationReply("decline")
    if state is not ApprovalState.GRANTED or record is None:
        return ElicitationReply("cancel")
    edited = record.edited_args or {}
    content = edited.get("content")
    if content is None:
        return ElicitationReply("accept")
    try:
        return ElicitationReply("accept", check_content(content, schema))
    except ValueError as exc:  # an edit made where nothing checked it against the form
        log.warning("the answer to %s does not fit its question (%s)", tool_id, exc)
        return ElicitationReply("cancel")


def answer_elicitation(
    broker: ApprovalBroker,
    handle: Handle,
    *,
    approver: Identity,
    content: Mapping[str, Any] | None,
    surface: str = "python",
) -> ApprovalRequest:
    """Accept the question named by ``handle`` with ``content`` (None: no content), as
    ``approver``. Raises ApprovalError when the question is unknown or decided, or when
    ``approver`` may not approve it (the caller, or without the approver role); ValueError
    when ``content`` does not fit the question's schema."""
    question = broker.get(handle)
    asked = question.exact_args if question is not None else None
    if question is None or asked is None or "requested_schema" not in asked:
        raise ApprovalError("no such pending question (unknown, expired or not a question)")
    if content is None:
        return broker.grant(question, approver=approver, surface=surface)
    plain = check_content(content, asked["requested_schema"])
    return broker.grant(question, approver=approver, surface=surface, args={"content": plain})
