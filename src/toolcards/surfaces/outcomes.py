"""How every surface reports an executor result: the kind, the CLI exit code and the MCP
error flag come from the one table, :data:`toolcards.governance.outcomes.OUTCOMES`; a tool's
value is shown as text the same way by the CLI and the MCP server's text content
(:func:`render_value`).

Exit code 2 (usage) is the command line's own: the command or the config is wrong, no call
was made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolcards.governance.outcomes import ExitCode, meaning

__all__ = ["ExitCode", "SurfaceOutcome", "classify", "render_value", "table_decision"]

if TYPE_CHECKING:
    from toolcards.governance.executor.pipeline import ExecutionResult


@dataclass(frozen=True, slots=True)
class SurfaceOutcome:
    """How a surface reports one executor result."""

    kind: str
    exit_code: ExitCode
    outcome: str
    message: str
    approved_args_digest: str | None = None
    """Set when an approver's edit of the arguments ran in place of the caller's."""
    grant_id: str | None = None
    """Set when a remembered approval (a grant) let the call run without asking anyone."""

    @property
    def is_error(self) -> bool:
        return self.exit_code is not ExitCode.OK

    def meta(self, retry_after: float | None = None) -> dict[str, Any]:
        """Machine-readable details (MCP ``_meta`` and the CLI's JSON output)."""
        data: dict[str, Any] = {"outcome": self.outcome, "kind": self.kind}
        if retry_after is not None:
            data["retry_after"] = retry_after
        if self.approved_args_digest is not None:
            data["approved_args_digest"] = self.approved_args_digest
        if self.grant_id is not None:
            data["grant_id"] = self.grant_id
        return data


def classify(result: ExecutionResult, *, human_asked: bool = False) -> SurfaceOutcome:
    """The surface view of ``result``. A refused approval (a human was asked and said no) is
    an approval outcome, not a policy denial."""
    found = meaning(result.outcome, human_asked=human_asked)
    digest = result.edit.digest if result.edit is not None else None
    message = result.told(result.message) if result.message else result.message
    return SurfaceOutcome(
        found.kind, found.exit_code, str(result.outcome), message, digest, result.grant_id
    )


def table_decision(kind: str) -> str:
    """The policy-table decision a surface outcome reveals (see governance ``table``)."""
    if kind in ("denied", "unknown_tool"):
        return "deny"
    if kind == "approval":
        return "approve"
    if kind == "invalid":  # the table's tools never ask for a retry: the schema refused
        return "invalid"
    return "allow"


def render_value(value: Any) -> tuple[str, dict[str, Any] | None]:
    """A tool value as text (strings as they are, everything else as indented JSON) and, for
    objects, the structured (JSON-ready) value."""
    if isinstance(value, str):
        return value, None
    from pydantic_core import to_jsonable_python  # lazy: a forwarded CLI call loads no pydantic

    plain = to_jsonable_python(value, fallback=str)
    text = json.dumps(plain, ensure_ascii=False, indent=2)
    return text, plain if isinstance(plain, dict) else None
