"""The CLI's operations on a runtime, as plain data: run in the CLI process, or in a running
``toolcards serve`` that the CLI forwards to (:mod:`.control`). Either way one runtime, one
principal (the config's local one), one decision and one audit trail.

:func:`open_runtime` opens the config's runtime for a command run here; :mod:`.run` imports
this module only when no server answers, so a forwarded command loads no runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from toolcards.core.registry import CARD_TYPES
from toolcards.governance.executor.pipeline import unknown_tool_message
from toolcards.surfaces.cli.logs import escaped_logs
from toolcards.surfaces.cli.state import State, fail
from toolcards.surfaces.outcomes import classify
from toolcards.surfaces.runtime import SurfaceRuntime, opening_error

if TYPE_CHECKING:
    from toolcards.governance.approvals.broker import Approver, GrantedEdit

_HINTS = ("readonly", "destructive", "idempotent", "open_world", "requires_approval")


def hints(ann: Any) -> list[str]:
    return [n for n in _HINTS if getattr(ann, n)]


def summary(description: str) -> str:
    """The first paragraph of a description, as one line."""
    return " ".join((description.strip().split("\n\n", 1)[0]).split())


def list_rows(rt: SurfaceRuntime, show_all: bool = False) -> list[dict[str, Any]]:
    visible = set(rt.visible_to(rt.local))
    return [
        {
            "name": tool.id,
            "callable": tool.id in visible,
            "hints": hints(tool.annotations),
            "description": summary(tool.description or ""),
        }
        for tool in rt.registry.summaries()  # no capability is built to list them
        if show_all or tool.id in visible
    ]


def static_listing(rt: SurfaceRuntime) -> bool:
    """Whether what :func:`list_rows` gives for ``rt`` follows from its config, its policy,
    the code and the environment alone (the listing cache may keep it, see :mod:`.listing`):
    every card is one of this package's own, none contributes a toolset (an MCP server's
    tools are asked from the server), and there are no plain tools (a card or a tool of
    another package may make its tools from anything)."""
    config = rt.config
    if config is None or rt.toolsets or config.tools:
        return False
    kinds = [CARD_TYPES.resolve(str(card["type"])) for card in config.cards]
    return all(kind.__module__.startswith("toolcards.") for kind in kinds)


def describe_data(rt: SurfaceRuntime, tool: str) -> dict[str, Any]:
    """The tool's description; ``{"unknown": message}`` when it is unknown or hidden from the
    principal (the two read the same, with the message a call of it gets)."""
    cap = rt.registry.get(tool)
    if cap is None or not rt.policy.visible(rt.local, tool):
        return {"unknown": unknown_tool_message(tool, rt.visible_to(rt.local))}
    annotations = cap.annotations.as_metadata()
    if cap.annotations.paths is not None:  # the arguments that name files, as text
        annotations["paths"] = cap.annotations.paths.describe()
    return {
        "name": cap.id,
        "description": cap.description,
        "annotations": annotations,
        "input_schema": cap.json_schema,
        "hints": hints(cap.annotations),
    }


def schema_of(rt: SurfaceRuntime, tool: str) -> dict[str, Any]:
    """The schema ``key=value`` pairs are typed by (see ``argument_schema``)."""
    cap = rt.registry.get(tool)
    return cap.argument_schema() if cap is not None else {}


async def call_data(
    rt: SurfaceRuntime, tool: str, args: dict[str, Any], approver: Approver | None = None
) -> dict[str, Any]:
    """Call ``tool`` as the local principal; the outcome as the CLI reports it."""
    asked: list[bool] = []
    wrapped = None
    if approver is not None:
        inner = approver

        async def wrapped_approver(request: Any) -> bool | GrantedEdit:
            asked.append(True)
            return await inner(request)

        wrapped = wrapped_approver
    result = await rt.executor.call(tool, args, rt.local, surface="cli", approver=wrapped)
    if result.approval is not None:  # the process ends: nobody could resume this request
        rt.executor.approvals.withdraw(result.approval)
    view = classify(result, human_asked=bool(asked))
    data: dict[str, Any] = {"tool": tool, "ok": not view.is_error}
    data.update(view.meta(result.retry_after))
    data["exit_code"] = int(view.exit_code)
    if view.is_error:
        data["message"] = view.message
    else:
        data["value"] = to_jsonable_python(result.value, fallback=str)
    if result.edit is not None:  # an approver's edit ran: said beside the value
        data["note"] = result.edit.note
    return data


MAX_STATUS_EVENTS = 1000
"""Events ``team status`` shows at most (read from the log's end, never the whole log)."""


def team_data(rt: SurfaceRuntime, events: int) -> dict[str, Any] | None:
    team = rt.team
    if team is None:
        return None
    members_fn = getattr(team, "members", None)
    members = [m.model_dump() for m in members_fn()] if callable(members_fn) else []
    actors = sorted(n for n in team.actor_names() if n.startswith("#"))
    shown = team.log.recent(min(max(events, 0), MAX_STATUS_EVENTS)) if events > 0 else []
    recent = [e.model_dump(mode="json") for e in shown]
    return {"team_id": team.team_id, "members": members, "tool_actors": actors, "events": recent}


def open_runtime(state: State, with_team: bool = False) -> SurfaceRuntime:
    """The runtime for ``state``'s command (config and store problems end the command); it
    is closed with the state. What it logs is escaped (:func:`.logs.escaped_logs`: a plain
    ``list`` or ``call`` runs without the root options that say so)."""
    escaped_logs()
    built = state.built(with_team)
    if built is not None:
        return built
    try:
        rt = SurfaceRuntime.open(state.config, with_team=with_team or None)
    except Exception as exc:
        found = opening_error(exc, state.config)
        if found is None:
            raise
        fail(*found)
    state.opened.append(rt)
    return rt
