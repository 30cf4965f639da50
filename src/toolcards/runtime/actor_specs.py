"""What of a tool actor's config is recorded, what stays in this process, and how two binds
of one actor that disagree are told apart.

A config's JSON (its recorded spec) leaves out the values given in code that must never reach
the store: fields declared with ``exclude=True`` (an API key) and private attributes (an HTTP
transport). Those *in-code values* travel to the actor beside the JSON, in memory only.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel


def in_code_values(config: BaseModel | None) -> dict[str, Any]:
    """The set (not None) excluded fields and private attributes of ``config``."""
    if config is None:
        return {}
    found: dict[str, Any] = {}
    for name, field in type(config).model_fields.items():
        value = getattr(config, name)
        if field.exclude is True and value is not None:
            found[name] = value
    private = config.__pydantic_private__ or {}
    found.update({name: value for name, value in private.items() if value is not None})
    return found


def secret_fields(config: BaseModel | None) -> dict[str, Any]:
    """The in-code values of ``config`` that are fields (picklable: they may travel to the
    worker process that runs the actor, never to the store)."""
    fields = type(config).model_fields if config is not None else {}
    return {k: v for k, v in in_code_values(config).items() if k in fields}


def with_values(config: BaseModel, values: dict[str, Any]) -> BaseModel:
    """A copy of ``config`` carrying ``values`` (fields and private attributes)."""
    fields = {k: v for k, v in values.items() if k in type(config).model_fields}
    copy = config.model_copy(update=fields)
    for name, value in values.items():
        if name not in fields:
            setattr(copy, name, value)
    return copy


def merge_in_code(name: str, running: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The in-code values the actor ``name`` needs once ``given`` is bound beside ``running``.

    A value only one side sets is kept; the same key with two different values is a
    ``ValueError`` naming the key (never the values: they may be secrets).
    """
    clash = sorted(k for k in given if k in running and given[k] != running[k])
    if clash:
        raise ValueError(
            f"tool actor {name} already runs with another {', '.join(clash)} given in code; "
            "give every card of it the same value"
        )
    return {**running, **given}


def conflict_line(
    name: str,
    team_id: str,
    known: tuple[str, str | None, str | None],
    wanted: tuple[str, str | None, str | None],
) -> str:
    """One line for a bind of ``name`` whose settings differ from the running actor's.

    ``known`` and ``wanted`` are ``(actor tag, config JSON, who bound it)``; the line names
    the settings that differ on both sides and who bound each.
    """
    (known_tag, known_cfg, known_by), (tag, cfg, by) = known, wanted
    first = f"bound by {known_by!r}" if known_by else "recorded in the team's store"
    second = f"{by!r} binds" if by else "a bind asks for"
    if known_tag != tag:
        return (
            f"tool actor {name} already exists in team {team_id} as {known_tag} ({first}); "
            f"{second} {tag}: one name holds one tool"
        )
    before, after = _fields(known_cfg), _fields(cfg)
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    was = ", ".join(f"{k}={before.get(k)!r}" for k in keys) or "its recorded settings"
    now = ", ".join(f"{k}={after.get(k)!r}" for k in keys) or "other settings"
    fix = (
        "bind every card of it with the same settings"
        if known_by
        else "put the recorded settings back, or start a fresh team state (another team id or "
        "store)"
    )
    return (
        f"tool actor {name} already exists in team {team_id} with {was} ({first}); "
        f"{second} {now}: {fix}"
    )


def _fields(config: str | None) -> dict[str, Any]:
    if config is None:
        return {}
    try:
        found = json.loads(config)
    except ValueError:
        return {"config": config}
    return found if isinstance(found, dict) else {"config": found}
