"""What the model may send, and what the model is told when apcore says no."""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from apcore.errors import (
    ACLDeniedError,
    ApprovalError,
    InvalidInputError,
    ModuleError,
    SchemaValidationError,
)
from pydantic_ai.exceptions import ModelRetry, ToolFailed

from toolcards.core.errors import RetriableError, TransientError

_log = logging.getLogger(__name__)

#: Names that describe the caller, never the call. The model cannot set them.
IDENTITY_FIELDS = frozenset({"identity", "caller_id", "call_chain", "trace_id", "context"})


def clean_arguments(args: dict[str, Any], schema: dict[str, Any], module_id: str) -> dict[str, Any]:
    """Drop control fields from model-supplied arguments; refuse identity fields.

    Every name starting with ``_`` is a control field (``_approval_token``, apcore's reserved
    ``_apcore.*`` context keys, ...) and is removed. Identity-like names the module's schema does
    not declare are refused with a retry, because honouring them would let the model pick who
    it is.
    """
    declared = set((schema.get("properties") or {}).keys())
    stripped = sorted(key for key in args if key.startswith("_"))
    if stripped:
        _log.warning("dropped control fields %s from arguments for %s", stripped, module_id)
    smuggled = sorted(key for key in args if key in IDENTITY_FIELDS and key not in declared)
    if smuggled:
        raise ModelRetry(
            f"Arguments {smuggled} are not parameters of this tool: the caller's identity is "
            "fixed by the application. Call the tool again with only its declared parameters."
        )
    return {key: value for key, value in args.items() if not key.startswith("_")}


def _detail(error: ModuleError) -> str:
    hint = getattr(error, "ai_guidance", None)
    return f"{error.message} {hint}" if hint else error.message


def _retry_or_fail(message: str, *, can_retry: bool) -> NoReturn:
    if can_retry:
        raise ModelRetry(message)
    raise ToolFailed(message)


def report(error: Exception, *, module_id: str, can_retry: bool) -> NoReturn:
    """Turn an apcore error into something the model reads; the run keeps going.

    Fixable problems (invalid arguments, retryable failures) become ``ModelRetry`` while the
    tool's retry budget lasts and ``ToolFailed`` after it. Decisions (ACL denial, approval
    denied, timed out or pending) and other failures become ``ToolFailed`` at once.
    """
    if isinstance(error, (SchemaValidationError, InvalidInputError)):
        errors = [e for e in (error.details or {}).get("errors") or [] if isinstance(e, dict)]
        listing = "; ".join(f"{e.get('path') or '/'}: {e.get('message')}" for e in errors)
        text = f"Invalid arguments for {module_id}: {listing or error.message}."
        _retry_or_fail(text + " Fix the arguments and call again.", can_retry=can_retry)
    if isinstance(error, ACLDeniedError):
        raise ToolFailed(
            f"Access denied: the current caller may not use {module_id}. "
            "Do not retry; choose another tool or tell the user."
        )
    if isinstance(error, ApprovalError):
        result = getattr(error, "result", None)
        reason = getattr(result, "reason", None) or error.message
        raise ToolFailed(f"The call to {module_id} was not approved ({error.code}): {reason}")
    if isinstance(error, ModuleError):
        cause = getattr(error, "cause", None)
        if isinstance(cause, (RetriableError, TransientError, ModelRetry)):
            text = cause.message if isinstance(cause, ModelRetry) else str(cause)
            _retry_or_fail(f"{module_id}: {text}", can_retry=can_retry)
        text = f"{module_id} failed ({error.code}): {_detail(error)}"
        _retry_or_fail(text, can_retry=can_retry and bool(error.retryable))
    if isinstance(error, (RetriableError, TransientError)):
        _retry_or_fail(f"{module_id} failed: {error}", can_retry=can_retry)
    raise ToolFailed(f"{module_id} failed: {type(error).__name__}: {error}")
