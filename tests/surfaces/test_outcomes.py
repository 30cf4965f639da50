"""The surfaces' mapping of executor outcomes is open: an outcome it does not list is an
error result and a failing exit code, never a success."""

from __future__ import annotations

from dataclasses import dataclass

from toolcards.surfaces.outcomes import ExitCode, classify


@dataclass
class Result:
    outcome: str
    message: str = "no such tool"
    retry_after: float | None = None
    edit: None = None
    grant_id: None = None

    def told(self, text: str) -> str:
        return text


def test_an_unlisted_outcome_is_an_error_with_a_failing_exit_code() -> None:
    view = classify(Result("some_future_outcome"))  # type: ignore[arg-type]
    assert view.is_error
    assert view.exit_code is not ExitCode.OK
    assert view.meta() == {"outcome": "some_future_outcome", "kind": view.kind}


def test_listed_outcomes_keep_their_exit_codes() -> None:
    assert classify(Result("denied")).exit_code is ExitCode.DENIED  # type: ignore[arg-type]
    assert classify(Result("ok")).exit_code is ExitCode.OK  # type: ignore[arg-type]
