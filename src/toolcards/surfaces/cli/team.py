"""``toolcards team status``: the configured team's members, tool actors and recent events
(from a running server on the config when one runs)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from toolcards.surfaces.cli.operations import MAX_STATUS_EVENTS, open_runtime, team_data
from toolcards.surfaces.cli.options import ConfigOpt, state_of
from toolcards.surfaces.cli.state import cell, emit_json, fail, out
from toolcards.surfaces.outcomes import ExitCode

team_app = typer.Typer(help="Inspect the team.", no_args_is_help=True)


@team_app.command("status")
def team_status(
    ctx: typer.Context,
    config: ConfigOpt = None,
    events: Annotated[int, typer.Option(min=0, max=MAX_STATUS_EVENTS)] = 10,
) -> None:
    """Members, tool actors and recent events of the configured team."""
    state = state_of(ctx, config)
    server = state.server()
    if server is not None:
        try:
            data = server.request("team", events=events)
        except (OSError, RuntimeError, ValueError) as exc:
            fail(f"the running server did not answer: {exc}", ExitCode.FAILED)
    else:
        data = team_data(open_runtime(state, with_team=True), events)
    if data is None:
        fail("no team is configured for this runtime", ExitCode.USAGE)
    if state.json:
        emit_json(data)
        return
    # the config's team id, the members' names and the events are data: escaped, never markup
    out().print(cell("team", "bold"), cell(data["team_id"]))
    members = ", ".join(m["name"] for m in data["members"]) or "(none)"
    out().print(cell(f"members: {members}"))
    out().print(cell(f"tool actors: {', '.join(data['tool_actors']) or '(none)'}"))
    for e in data["events"]:
        payload = json.dumps(e.get("payload"), ensure_ascii=False)
        out().print(cell(f"  {e['tool_id']} #{e['seq']}: {payload[:120]}"))
