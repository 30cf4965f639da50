"""One table says what every executor outcome is on every surface, and every surface reads
it: the CLI's exit code and kind, MCP's error flag, what a pydantic-ai model sees."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import ModelRetry
from pydantic_ai.exceptions import ApprovalRequired

from toolcards.governance.executor.pipeline import ExecutionResult
from toolcards.governance.outcomes import OUTCOMES, ExitCode, Outcome, meaning
from toolcards.governance.toolset.governed import to_model_result
from toolcards.surfaces.outcomes import classify


def test_every_outcome_has_its_exit_code_mcp_meaning_and_model_view() -> None:
    assert set(OUTCOMES) == set(Outcome)
    for outcome, entry in OUTCOMES.items():
        assert isinstance(entry.exit_code, ExitCode)
        assert entry.mcp_is_error is (outcome is not Outcome.OK)
        assert entry.model in ("value", "retry", "approval", "text")
    assert ExitCode.USAGE not in {e.exit_code for e in OUTCOMES.values()}  # the CLI's own


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_cli_and_mcp_report_what_the_table_says(outcome: Outcome) -> None:
    shown = classify(ExecutionResult(outcome, "t", message="m"))
    assert (shown.kind, shown.exit_code, shown.is_error) == (
        OUTCOMES[outcome].kind,
        OUTCOMES[outcome].exit_code,
        OUTCOMES[outcome].mcp_is_error,
    )


@pytest.mark.parametrize("outcome", list(Outcome))
def test_the_model_sees_what_the_table_says(outcome: Outcome) -> None:
    result = ExecutionResult(outcome, "t", value={"v": 1}, message="said")
    seen: Any
    try:
        seen = to_model_result(result)
    except ModelRetry:
        seen = "retry"
    except ApprovalRequired:
        seen = "approval"
    expected = {"value": {"v": 1}, "retry": "retry", "approval": "approval", "text": "said"}
    assert seen == expected[OUTCOMES[outcome].model]


def test_an_outcome_no_entry_knows_is_a_failure_and_a_refused_approval_is_not_a_denial() -> None:
    assert meaning("from_a_newer_writer").exit_code is ExitCode.FAILED
    assert meaning(Outcome.DENIED, human_asked=True).exit_code is ExitCode.APPROVAL
