"""What the approval broker's two sides share: its errors, what an approver and an edit check
are, and the handle a decision names a request by (see :mod:`.approvals`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.errors import ToolcardsError

__all__ = [
    "ApprovalError",
    "ApprovalTimedOut",
    "Approver",
    "EditCheck",
    "EditRefusedError",
    "GrantedEdit",
    "Handle",
    "handle_id",
]


class ApprovalError(ToolcardsError, PermissionError):
    """A grant or deny was refused; the message says why."""


class EditRefusedError(ApprovalError):
    """A grant's edited arguments were refused (not one JSON object, too long, invalid for
    the tool's schema, or denied by the policy); the request still waits."""


class GrantedEdit(NamedTuple):
    """An approver's yes to a request, given to other arguments than the request's: what an
    approver returns in place of ``True`` when its human granted an edit (the dashboard's
    inbox, when the request was copied into another broker than the executor's). The
    executor checks the edit as a fresh call's arguments and runs it, never the request's."""

    args: dict[str, Any]


Approver = Callable[[ApprovalRequest], Awaitable[bool | GrantedEdit]]
"""An async callable a surface provides: ``await approver(request) -> bool`` (or a
:class:`GrantedEdit`). A wrapper of an approver returns what it returns, never ``bool()``
of it: that would run the request's arguments in place of the edit."""

EditCheck = Callable[[ApprovalRequest, dict[str, Any]], str]
"""Checks an approver's edit of ``request``'s arguments as a fresh call's would be checked
(an executor lends its own, see :mod:`.edits`): returns the canonical JSON that will
run, or raises :class:`~toolcards.governance.approvals.edits.EditRefused`."""

Handle = ApprovalRequest | str
"""What a decision names: the request the human saw, or its ``approval_id``."""


class ApprovalTimedOut(ToolcardsError):
    """Raised by an approver when nobody decided on the call within its wait (``seconds``):
    the executor reports ``approval_timeout``, not a refusal."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no approver decided within {seconds:g} s")
        self.seconds = seconds


def handle_id(handle: Handle) -> str:
    """The ``approval_id`` a handle names (a TypeError for anything else, or an empty id)."""
    if isinstance(handle, ApprovalRequest):
        return handle.approval_id
    if isinstance(handle, str) and handle:
        return handle
    raise TypeError("an approval handle is an ApprovalRequest or its approval_id")
