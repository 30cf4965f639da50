"""Every executor outcome and what each surface makes of it: one table, keyed by the enum.

=============== ============ ==== ========= ============================================
outcome         kind         exit MCP       pydantic-ai model sees
=============== ============ ==== ========= ============================================
ok              ok           0    result    the value
denied          denied       3    error     the text "denied: ..."
unknown_tool    unknown_tool 7    error     ModelRetry(message)
invalid_args    invalid      4    error     ModelRetry(message)
retry           invalid      4    error     ModelRetry(message)
rate_limited    rate_limited 6    error     the text "rate limited: ..."
needs_approval  approval     5    error     ApprovalRequired(metadata)
approval_timeout approval    5    error     the text "approval timeout: ..."
error           failed       1    error     the text "error: ..."
policy_error    policy_error 8    error     the text "policy error: ..."
refused         refused      9    error     the text "refused: ..."
over_budget     over_budget  10   error     the text "over budget: ..."
=============== ============ ==== ========= ============================================

Exit code 2 (usage) is the command line's own: no call was made. A refused approval (a human
was asked and said no) is reported as ``approval``, not as a policy denial; so is a call nobody
decided on in time (``approval_timeout``). ``refused`` is a guardrail's (a hook of
:mod:`.guardrails` stopped a call the policy allowed), not the policy's. ``over_budget`` is a
budget of the team's that is spent (see :mod:`.executor.budget`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Literal


class Outcome(StrEnum):
    OK = "ok"
    DENIED = "denied"
    UNKNOWN_TOOL = "unknown_tool"
    INVALID_ARGS = "invalid_args"
    RETRY = "retry"
    RATE_LIMITED = "rate_limited"
    NEEDS_APPROVAL = "needs_approval"
    APPROVAL_TIMEOUT = "approval_timeout"
    ERROR = "error"
    POLICY_ERROR = "policy_error"
    """The policy has no good rules (its file was broken from the start): nothing runs."""
    REFUSED = "refused"
    """A guardrail hook stopped the call (its arguments, or its result): see ``.guardrails``."""
    OVER_BUDGET = "over_budget"
    """A budget the team shares is spent (calls, model tokens or cost): see ``.executor.budget``."""


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    DENIED = 3
    INVALID = 4
    APPROVAL = 5
    RATE_LIMITED = 6
    UNKNOWN_TOOL = 7
    POLICY_ERROR = 8
    REFUSED = 9
    OVER_BUDGET = 10


ModelView = Literal["value", "retry", "approval", "text"]


@dataclass(frozen=True, slots=True)
class OutcomeMeaning:
    """What one outcome is on every surface: its kind (CLI JSON, MCP ``_meta``), the CLI's
    exit code, whether MCP reports it as an error result, and what a pydantic-ai model sees:
    the tool's value, a retry prompt, an approval request or the message as a tool result."""

    kind: str
    exit_code: ExitCode
    mcp_is_error: bool
    model: ModelView


OUTCOMES: dict[Outcome, OutcomeMeaning] = {
    Outcome.OK: OutcomeMeaning("ok", ExitCode.OK, False, "value"),
    Outcome.DENIED: OutcomeMeaning("denied", ExitCode.DENIED, True, "text"),
    Outcome.UNKNOWN_TOOL: OutcomeMeaning("unknown_tool", ExitCode.UNKNOWN_TOOL, True, "retry"),
    Outcome.INVALID_ARGS: OutcomeMeaning("invalid", ExitCode.INVALID, True, "retry"),
    Outcome.RETRY: OutcomeMeaning("invalid", ExitCode.INVALID, True, "retry"),
    Outcome.RATE_LIMITED: OutcomeMeaning("rate_limited", ExitCode.RATE_LIMITED, True, "text"),
    Outcome.NEEDS_APPROVAL: OutcomeMeaning("approval", ExitCode.APPROVAL, True, "approval"),
    Outcome.APPROVAL_TIMEOUT: OutcomeMeaning("approval", ExitCode.APPROVAL, True, "text"),
    Outcome.ERROR: OutcomeMeaning("failed", ExitCode.FAILED, True, "text"),
    Outcome.POLICY_ERROR: OutcomeMeaning("policy_error", ExitCode.POLICY_ERROR, True, "text"),
    Outcome.REFUSED: OutcomeMeaning("refused", ExitCode.REFUSED, True, "text"),
    Outcome.OVER_BUDGET: OutcomeMeaning("over_budget", ExitCode.OVER_BUDGET, True, "text"),
}

REFUSED_APPROVAL = OutcomeMeaning("approval", ExitCode.APPROVAL, True, "text")
"""A call a human was asked about and refused: the policy did not deny it."""

UNKNOWN = OUTCOMES[Outcome.ERROR]
"""An outcome text no entry knows (a newer writer): a failure, never a success."""


def meaning(outcome: Outcome | str, *, human_asked: bool = False) -> OutcomeMeaning:
    """The table's entry for ``outcome`` (by enum or its text)."""
    try:
        found = OUTCOMES[Outcome(outcome)]
    except ValueError:
        return UNKNOWN
    if found.kind == "denied" and human_asked:
        return REFUSED_APPROVAL
    return found
