"""The CLI's operations on a runtime, as plain data: run in the CLI process, or in a running
``toolcards serve`` that the CLI forwards to (:mod:`.control`). Either way one runtime, one
principal (the config's local one), one decision and one audit trail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolcards.surfaces.outcomes import classify

if TYPE_CHECKING:
    from toolcards.governance.approvals.broker import Approver
    from toolcards.surfaces.runtime import SurfaceRuntime

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


def describe_data(rt: SurfaceRuntime, tool: str) -> dict[str, Any]:
    """The tool's description; ``{"unknown": message}`` when it is unknown or hidden from the
    principal (the two read the same, with the message a call of it gets)."""
    from toolcards.governance.executor.pipeline import unknown_tool_message

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
    cap = rt.registry.get(tool)
    return cap.json_schema if cap is not None else {}


async def call_data(
    rt: SurfaceRuntime, tool: str, args: dict[str, Any], approver: Approver | None = None
) -> dict[str, Any]:
    """Call ``tool`` as the local principal; the outcome as the CLI reports it."""
    from pydantic_core import to_jsonable_python

    asked: list[bool] = []
    wrapped = None
    if approver is not None:
        inner = approver

        async def wrapped_approver(request: Any) -> bool:
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


def team_data(rt: SurfaceRuntime, events: int) -> dict[str, Any] | None:
    team = rt.team
    if team is None:
        return None
    members_fn = getattr(team, "members", None)
    members = [m.model_dump() for m in members_fn()] if callable(members_fn) else []
    actors = sorted(n for n in team.actor_names() if n.startswith("#"))
    recent = [e.model_dump(mode="json") for e in team.events()[-events:]] if events else []
    return {"team_id": team.team_id, "members": members, "tool_actors": actors, "events": recent}
