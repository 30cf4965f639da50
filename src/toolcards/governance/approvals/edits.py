"""An approver's edit of a pending call's arguments: checked as a fresh call's, then run once.

An approver may grant a call with other arguments than the caller's (the CLI's ``grant ID
--args``, the dashboard's grant with ``args``, pydantic-ai's ``ToolApproved(override_args=...)``).
The edit is what is approved and what runs, so it goes through what a fresh call's arguments
go through: its declared paths are made canonical, it is validated against the tool's schema,
and the policy decides again on it. An edit the policy denies is denied (an edit never turns a
denied call into an allowed one); one that fails validation is refused with the schema's error
in one line. Nothing here asks anyone again: the grant already names exactly these arguments.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.errors import RetriableError, ToolcardsError
from toolcards.core.identity import Identity
from toolcards.governance.capability import InvalidArguments, ToolCapability, parse_arguments
from toolcards.governance.outcomes import Outcome
from toolcards.governance.policy.policy import Decision, Each, Policy
from toolcards.governance.redaction.redactor import canonical_json

__all__ = [
    "MAX_EDITED_ARGS",
    "CheckedEdit",
    "EditRefused",
    "Refusal",
    "apply",
    "check_edit",
    "edited_json",
    "granted_json",
    "split_override",
]

MAX_EDITED_ARGS = 1_000_000
"""Characters of canonical JSON an edit may have (as ``toolcards call --args`` takes)."""


class EditRefused(ToolcardsError, ValueError):
    """An edit that cannot run; the message is one line, safe to show the approver and the
    caller. ``denied``: the policy refused it (else it is malformed or invalid)."""

    def __init__(self, message: str, *, denied: bool = False) -> None:
        super().__init__(message)
        self.denied = denied


@dataclass(frozen=True, slots=True)
class CheckedEdit:
    """An edit that may run: ``args`` canonical (what the audit digests and the approver is
    shown), ``parsed`` the tool's types, ``decision`` the policy's answer on ``args``."""

    args: dict[str, Any]
    parsed: dict[str, Any]
    decision: Decision

    @property
    def json(self) -> str:
        return canonical_json(self.args)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an edit does not run, as the call's result: ``args`` are the edit as far as it can
    be recorded (the audit row keeps them)."""

    message: str
    outcome: Outcome = Outcome.DENIED
    args: dict[str, Any] = field(default_factory=dict)


def edited_json(args: object) -> str:
    """The canonical JSON of an edit; :class:`EditRefused` when it is not one JSON object of
    string keys or is longer than :data:`MAX_EDITED_ARGS` characters."""
    if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
        raise EditRefused("the edited arguments must be one JSON object")
    text = canonical_json(args)
    if len(text) > MAX_EDITED_ARGS:
        raise EditRefused(f"the edited arguments are longer than {MAX_EDITED_ARGS} characters")
    return text


def check_edit(
    policy: Policy, cap: ToolCapability, identity: Identity, edited: Mapping[str, Any]
) -> CheckedEdit:
    """``edited`` as a fresh call of ``cap`` by ``identity`` would be checked: paths made
    canonical, validated, decided by the policy. :class:`EditRefused` when it cannot run."""
    args = json.loads(edited_json(edited))  # plain JSON values, as they were granted
    each: Each = {}
    declared = cap.annotations.paths
    if declared is not None:
        try:
            args, each = declared.resolve(args)
        except RetriableError as exc:
            why = policy.redaction.text(str(exc))
            raise EditRefused(f"invalid edited arguments for {cap.id}: {why}") from None
    try:
        parsed = parse_arguments(cap, args)
    except InvalidArguments as exc:
        raise EditRefused(f"edited arguments: {exc}") from None
    decision = policy.evaluate(identity, cap.id, args, each)[0]
    if decision.effect == "deny":
        msg = f"{cap.id} with the edited arguments is not permitted for {identity.id}"
        raise EditRefused(msg, denied=True)
    return CheckedEdit(args, parsed, decision)


def apply(
    policy: Policy, edited: Mapping[str, Any], identity: Identity, cap: ToolCapability
) -> CheckedEdit | Refusal:
    """The granted edit checked where the call runs (the policy may have changed since the
    grant): what runs, or the call's refusal (``denied: ...``, one line)."""
    try:
        return check_edit(policy, cap, identity, edited)
    except EditRefused as exc:
        try:
            recorded = json.loads(edited_json(edited))
        except EditRefused:
            recorded = {}
        return Refusal(f"denied: {exc}", Outcome.DENIED, recorded)


def granted_json(
    request: ApprovalRequest,
    args: Mapping[str, Any],
    check: Callable[[ApprovalRequest, dict[str, Any]], str] | None,
) -> tuple[str, str | None]:
    """The canonical JSON an edited grant of ``request`` records ("" when it equals the
    request's own arguments) after ``check`` (a broker's :data:`EditCheck`), or why the edit
    is refused."""
    try:
        text = edited_json(args)
        if check is not None:
            text = check(request, json.loads(text))
    except EditRefused as exc:
        return "", str(exc)
    return ("" if text == request.args_json else text), None


def split_override(
    messages: Sequence[Any], tool_call_id: str | None, args: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the arguments the model called with, the edit) for an approved pydantic-ai call whose
    ``args`` may be a ``ToolApproved(override_args=...)``: the model's own are those of its
    tool call part in ``messages``. No edit when they are the same or cannot be found."""
    for message in reversed(messages):
        for part in getattr(message, "parts", ()):
            if getattr(part, "tool_call_id", None) != tool_call_id or not hasattr(
                part, "args_as_dict"
            ):
                continue
            called = part.args_as_dict()
            if not isinstance(called, dict) or canonical_json(called) == canonical_json(args):
                return args, None
            return called, args
    return args, None
