"""``python -m toolcards.demo``: the main job (an offline team; run it twice to see a resume).

Options: ``--state DIR`` (default ``./.toolcards-demo``), ``--fresh`` (start over),
``--model openai:gpt-4o`` (a real provider instead of the scripted members),
``--basic`` (the single-agent card demo). A problem you can fix (a missing provider package or
API key, a state directory that cannot be used or is in use) is one line on stderr and a
non-zero exit code: 2 for the command line, 1 for the state; Ctrl-C is one line and 130.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pydantic_ai

from toolcards.demo.basic import run
from toolcards.demo.next_steps import print_next_steps
from toolcards.demo.report import render
from toolcards.demo.state import DemoError, clear, is_complete
from toolcards.demo.team_job import TEAM_ID, run_job
from toolcards.runtime import ModelUnavailable, check_model

DEFAULT_STATE = Path(".toolcards-demo")


def _quiet_pydantic_ai() -> None:
    """The job owns its output: no first-run banner from pydantic-ai."""
    if hasattr(pydantic_ai, "BANNER_ENABLED"):
        pydantic_ai.BANNER_ENABLED = False


def _error(message: str, code: int) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _interrupted(state: Path) -> str:
    """The line after Ctrl-C: a run again resumes the team once a first run set it up; before
    that, it starts over (see :func:`~toolcards.demo.team_job.run_job`)."""
    if is_complete(state):
        return "interrupted; run it again to resume (or --fresh to start over)"
    return "interrupted before the team was set up; run it again to start over"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolcards.demo",
        description="The main job: an offline governed team; run it again to see it resume.",
    )
    parser.add_argument(
        "--state", type=Path, default=None, help=f"where the job keeps its state ({DEFAULT_STATE})"
    )
    parser.add_argument("--fresh", action="store_true", help="delete the saved state first")
    parser.add_argument(
        "--model", default=None, help="a pydantic-ai model spec, e.g. openai:gpt-4o"
    )
    parser.add_argument("--basic", action="store_true", help="run the single-agent card demo")
    args = parser.parse_args(argv)
    _quiet_pydantic_ai()
    if args.basic:
        run()
        return 0

    state: Path = args.state or DEFAULT_STATE
    try:
        if args.model is not None:
            check_model(args.model)  # before the state is touched
        if args.fresh:
            clear(state)

        summary = run_job(state, model=args.model)
    except ModelUnavailable as exc:
        return _error(f"{exc}; or leave out --model for the offline scripted team", 2)
    except DemoError as exc:
        return _error(str(exc), 1)
    except KeyboardInterrupt:  # Ctrl-C: what the job stored stays, as after any run
        print(f"\n{_interrupted(state)}", file=sys.stderr)
        return 130

    render(summary)
    print_next_steps(state, TEAM_ID, state_given=args.state is not None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
