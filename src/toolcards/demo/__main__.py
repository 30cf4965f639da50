"""``python -m toolcards.demo``: the main job (an offline team; run it twice to see a resume).

Options: ``--state DIR`` (default ``./.toolcards-demo``), ``--fresh`` (start over),
``--model openai:gpt-4o`` (a real provider instead of the scripted members),
``--basic`` (the single-agent card demo).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolcards.demo", description=__doc__)
    parser.add_argument("--state", type=Path, default=Path(".toolcards-demo"))
    parser.add_argument("--fresh", action="store_true", help="delete the saved state first")
    parser.add_argument(
        "--model", default=None, help="a pydantic-ai model spec, e.g. openai:gpt-4o"
    )
    parser.add_argument("--basic", action="store_true", help="run the single-agent card demo")
    args = parser.parse_args(argv)
    if args.basic:
        from toolcards.demo.basic import run

        run()
        return 0
    if args.fresh and args.state.exists():
        shutil.rmtree(args.state)
    from toolcards.demo.report import render
    from toolcards.demo.team_job import TEAM_ID, run_job

    render(run_job(args.state, model=args.model))
    state = args.state
    print(f"Open the dashboard on this team: toolcards dashboard --store {state / 'team.db'} "
          f"--team {TEAM_ID} --audit {state / 'audit.db'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
