"""One mapping of executor outcomes for every surface: MCP error flags and CLI exit codes.

=====  ===============  ===================================================================
exit   kind             executor outcome
=====  ===============  ===================================================================
0      ok               ok
1      failed           error (the tool raised or timed out); also an unusable environment
2      usage            (the command line or the config file is wrong; no call was made)
3      denied           denied by the policy
4      invalid          invalid_args (schema validation) and retry (the tool rejected input)
5      approval         needs_approval with no human to ask, or the human refused
6      rate_limited     rate_limited (``retry_after`` seconds)
7      unknown_tool     unknown_tool (no such tool, or one the caller may not see)
=====  ===============  ===================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolcards.governance.executor import ExecutionResult


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    DENIED = 3
    INVALID = 4
    APPROVAL = 5
    RATE_LIMITED = 6
    UNKNOWN_TOOL = 7


_KINDS = {
    "ok": ("ok", ExitCode.OK),
    "denied": ("denied", ExitCode.DENIED),
    "invalid_args": ("invalid", ExitCode.INVALID),
    "retry": ("invalid", ExitCode.INVALID),
    "rate_limited": ("rate_limited", ExitCode.RATE_LIMITED),
    "needs_approval": ("approval", ExitCode.APPROVAL),
    "error": ("failed", ExitCode.FAILED),
    "unknown_tool": ("unknown_tool", ExitCode.UNKNOWN_TOOL),
}


@dataclass(frozen=True, slots=True)
class SurfaceOutcome:
    """How a surface reports one executor result."""

    kind: str
    exit_code: ExitCode
    outcome: str
    message: str

    @property
    def is_error(self) -> bool:
        return self.exit_code is not ExitCode.OK

    def meta(self, retry_after: float | None = None) -> dict[str, Any]:
        """Machine-readable details (MCP ``_meta`` and the CLI's JSON output)."""
        data: dict[str, Any] = {"outcome": self.outcome, "kind": self.kind}
        if retry_after is not None:
            data["retry_after"] = retry_after
        return data


def classify(result: ExecutionResult, *, human_asked: bool = False) -> SurfaceOutcome:
    """The surface view of ``result``. A refused approval (a human was asked and said no) is
    an approval outcome, not a policy denial."""
    outcome = str(result.outcome)
    # an outcome this table does not know yet is still a failure, never a success
    kind, code = _KINDS.get(outcome, ("failed", ExitCode.FAILED))
    if kind == "denied" and human_asked:
        kind, code = "approval", ExitCode.APPROVAL
    return SurfaceOutcome(kind, code, outcome, result.message)


def table_decision(kind: str) -> str:
    """The policy-table decision a surface outcome reveals (see governance ``table``)."""
    if kind in ("denied", "unknown_tool"):
        return "deny"
    if kind == "approval":
        return "approve"
    return "allow"
