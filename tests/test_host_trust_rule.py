"""Data never chooses what the host trusts (invariant 7), as a rule over the cards and the doors.

1. Every field of a built-in card (and of the models inside it) that reaches the host carries
   a ``HostAccess`` marker: the marked fields are exactly :data:`MARKED`. A field whose name
   looks like it could reach the host (:data:`SUSPECT`) is marked or listed in
   :data:`REVIEWED` with the reason it does not. A new such field fails here until decided.
2. Every door through which cards come from data (``load_cards``, JSON, a ``CardList`` field,
   the surfaces config, an agent spec, a stored profile, a tool actor's recorded config) refuses
   a marked value the host did not grant, and lets exactly the granted value through; built in
   code, the card is trusted.
"""

from __future__ import annotations

import importlib
import json
import re
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from toolcards import ExecTool, HostTrust, dump_cards, load_cards
from toolcards._builtin import BUILTIN_CARDS
from toolcards.core.registry import TRUST
from toolcards.core.trust import HostAccess, Reach
from toolcards.runtime import RoleProfile, Team
from toolcards.surfaces.agent import GovernedCards
from toolcards.surfaces.config import ConfigError, load_config, parse_config
from toolcards.tools.vector_store.card import VectorStoreTool

MARKED = {
    "ExecTool.mode": Reach.EXECUTION,
    "ExecTool.env_allow": Reach.ENV,
    "ExecTool.network": Reach.NETWORK,
    "ExecTool.docker_image": Reach.EXECUTION,
    "SearchTool.api_key_env": Reach.ENV,
    "SearchTool.base_url": Reach.URL,
    "SearchTool.allow_private": Reach.NETWORK,
    "MCPTool.command": Reach.PROGRAM,
    "MCPTool.env": Reach.ENV,
    "MCPTool.env_from": Reach.ENV,
    "MCPTool.url": Reach.URL,
    "MCPAuth.bearer_token_env": Reach.ENV,
    "MCPOAuth.client_secret_env": Reach.ENV,
    "MCPOAuth.token_endpoint": Reach.URL,
    "MCPOAuth.issuer": Reach.URL,
    "VectorStoreTool.qdrant_url": Reach.URL,
    "VectorStoreTool.qdrant_path": Reach.PATH,
    "VectorStoreTool.openai_base_url": Reach.URL,
    "VectorStoreTool.azure_endpoint": Reach.URL,
    "VectorStoreTool.index_dir": Reach.PATH,
}
"""Every marked field of the built-in cards, with how it reaches the host."""

REVIEWED = {
    "ExecTool.allowed_commands": "programs inside the sandbox; the mode decides whether they "
    "run on the host, and the default list already holds python3",
    "ExecTool.exec_command": "a capability switch",
    "MCPTool.args": "checked with MCPTool.command (its marker names it)",
    "MCPTool.cwd": "checked with MCPTool.command (its marker names it)",
    "MCPTool.transport": "stdio is checked through command, HTTP through url",
    "MCPTool.headers": "credentials in headers are refused by the card itself",
    "MCPAuth.bearer_token": "a secret the data itself holds, not the host's",
    "MCPTool.elicitation": "each request is a governed call of its own",
    "MCPTool.elicitation_timeout_seconds": "a bound",
    "MCPTool.sampling": "each request is a governed call, on the agent's own model",
    "MCPSampling.mode": "each request is a governed call, on the agent's own model",
    "MCPSampling.model": "a model name: the host's key goes to that model's own provider",
    "MCPTool.roots": "the card's own workspace",
    "MCPOAuth.client_secret": "a secret the data itself holds, not the host's",
    "MCPOAuth.redirect_uri": "the callback listener refuses a host that is not loopback",
    "MCPOAuth.authorization_endpoint": "opened in the user's browser; receives no secret",
    "MCPOAuth.resource": "restricted to the server's own URL or a parent of it",
    "SearchTool.api_key": "a secret the data itself holds, not the host's",
    "WebFetch.backend": "direct fetches go through the SSRF guard",
    "VectorStoreTool.api_key": "a secret the data itself holds, not the host's",
    "VectorStoreTool.provider": "the host's key goes to that provider's own endpoint",
    "VectorStoreTool.model": "a model name",
    "VectorStoreTool.backend": "qdrant's location is marked (qdrant_url, qdrant_path)",
    "ActivitySummarizer.model": "a model name: the host's key goes to that model's own provider",
    "WorkspaceTool.resources": "files written inside the workspace (relative paths checked)",
    "WorkspaceTool.allow_hardlinks": "a second name of a file elsewhere must first be made "
    "inside the workspace: no card from data can (the sandbox's mounts refuse cross-links)",
    "WorkspaceTool.workspace_mkdir": "a capability switch",
    "SkillMenu.header": "prompt text, one line as a skill's summary",
}
"""Fields whose names look like host reach but that need no grant, and why."""

SUSPECT = re.compile(
    r"env|url|endpoint|path|dir|command|cwd|mode|network|private|host|image|root|key|token|"
    r"secret|args|hardlink|backend|provider|header|resource|redirect|issuer|transport|sampl|elicit"
)
_BOUNDS = re.compile(r"^(max_|min_)|_(bytes|chars|timeout|seconds|weight)$")
"""Names of bounds, whatever else they contain (``max_image_bytes``)."""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _fields() -> Iterator[tuple[str, Any]]:
    """``(Model.field, FieldInfo)`` of every built-in card and every model inside one."""
    seen: set[type[BaseModel]] = set()
    todo = [getattr(importlib.import_module(m), a) for m, a in BUILTIN_CARDS.values()]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            yield f"{model.__name__}.{name}", info
            todo += _models_in(info.annotation)


def test_the_marked_fields_are_exactly_those_that_reach_the_host() -> None:
    marked = {
        where: meta.reach
        for where, info in _fields()
        for meta in info.metadata
        if isinstance(meta, HostAccess)
    }
    assert marked == MARKED


def test_every_field_that_looks_like_host_reach_is_marked_or_reviewed() -> None:
    undecided = sorted(
        where
        for where, _ in _fields()
        if SUSPECT.search(where.split(".")[1])
        and not _BOUNDS.search(where.split(".")[1])
        and where not in MARKED
        and where not in REVIEWED
    )
    assert undecided == []
    known = {where for where, _ in _fields()}
    assert set(REVIEWED) <= known  # no stale entry


# ---- the doors -------------------------------------------------------------------------------

LOCAL = {"type": "ExecTool", "mode": "local"}
GRANT = HostTrust(execution=["local"])


def _config(tmp_path: Path, **extra: Any) -> Path:
    (tmp_path / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
    body = {"store": ":memory:", "policy": "policy.yaml", "cards": [LOCAL], **extra}
    path = tmp_path / "toolcards.yaml"
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def via_load_cards(tmp_path: Path, trust: HostTrust | None) -> object:
    return load_cards([LOCAL], trust=trust)


def via_json(tmp_path: Path, trust: HostTrust | None) -> object:
    text = json.dumps(dump_cards([ExecTool(mode="local")]))
    return load_cards(json.loads(text), trust=trust)


def via_card_list(tmp_path: Path, trust: HostTrust | None) -> object:
    profile = {"role": "r", "model": "test", "cards": [LOCAL]}
    return RoleProfile.model_validate(profile, context={TRUST: trust})


def via_config_file(tmp_path: Path, trust: HostTrust | None) -> object:
    extra = {"trust": {"execution": sorted(trust.execution)}} if trust else {}
    return load_config(_config(tmp_path, **extra)).load_cards()


def via_agent_spec(tmp_path: Path, trust: HostTrust | None) -> object:
    toolcards = {"cards": [LOCAL], "policy": {"default_effect": "allow", "rules": []}}
    spec = {"capabilities": [{"toolcards": toolcards}]}
    capability = GovernedCards if trust is None else GovernedCards.trusting(trust)
    model = TestModel(call_tools=[])
    return Agent.from_spec(spec, model=model, custom_capability_types=[capability])


DOORS: list[Callable[[Path, HostTrust | None], object]] = [
    via_load_cards,
    via_json,
    via_card_list,
    via_config_file,
    via_agent_spec,
]


@pytest.mark.parametrize("door", DOORS, ids=lambda d: d.__name__)
def test_every_door_refuses_what_the_host_did_not_grant(
    door: Callable[[Path, HostTrust | None], object], tmp_path: Path
) -> None:
    with pytest.raises((ValidationError, ConfigError, ValueError), match=r"ExecTool\.mode"):
        door(tmp_path, None)


@pytest.mark.parametrize("door", DOORS, ids=lambda d: d.__name__)
def test_every_door_lets_the_granted_value_through(
    door: Callable[[Path, HostTrust | None], object], tmp_path: Path
) -> None:
    assert door(tmp_path, GRANT) is not None


def test_a_config_that_is_not_the_operators_grants_nothing(tmp_path: Path) -> None:
    data = {"policy": "p.yaml", "cards": [LOCAL], "trust": {"execution": ["local"]}}
    with pytest.raises(ConfigError, match="only the operator's config file"):
        parse_config(data, source="sent-by-a-client")
    with pytest.raises(ConfigError, match="only the operator's config file"):
        parse_config({"policy": "p.yaml", "mcp_commands": ["sh"]}, source="sent-by-a-client")
    trusted = parse_config(data, source="ours", host_written=True)
    assert [c.mode for c in trusted.load_cards()] == ["local"]


@pytest.mark.timeout(60)
def test_a_stored_profile_is_data_too(tmp_path: Path) -> None:
    store = str(tmp_path / "team.db")
    profile = RoleProfile(role="r", model="test", cards=[ExecTool(mode="local")])
    with Team("t1", store=store, profiles=[profile]) as team:
        team.hire("r")
    with pytest.warns(UserWarning, match=r"@r-1 failed to restart(?s:.*)ExecTool\.mode = 'local'"):
        resumed = Team.resume("t1", store=store)
    try:
        assert resumed.members() == []
    finally:
        resumed.stop()


@pytest.mark.timeout(60)
def test_a_stored_profile_is_granted_by_the_teams_trust(tmp_path: Path) -> None:
    store = str(tmp_path / "team.db")
    profile = RoleProfile(role="r", model="test", cards=[ExecTool(mode="local")])
    with Team("t1", store=store, profiles=[profile]) as team:
        team.hire("r")
    with Team.resume("t1", store=store, trust=GRANT) as resumed:
        assert [m.name for m in resumed.members()] == ["@r-1"]


@pytest.mark.timeout(60)
def test_a_recorded_tool_actor_config_is_data_too(tmp_path: Path) -> None:
    store, folder = str(tmp_path / "team.db"), tmp_path / "indexes"
    card = VectorStoreTool(provider="hash", dimension=64, index_dir=str(folder))
    with Team("t1", store=store) as team:
        team.bind([card], member="alice")  # built in code: trusted, and recorded
    with pytest.warns(UserWarning, match=r"#VectorStore waits for its card: .*\.index_dir"):
        resumed = Team.resume("t1", store=store)
    with resumed:
        assert resumed.actor("#VectorStore") is None
    with Team.resume("t1", store=store, trust=HostTrust(paths=[str(folder)])) as granted:
        assert granted.actor("#VectorStore") is not None


def test_a_card_built_in_code_is_trusted() -> None:
    card = ExecTool(mode="local", env_allow=["HOST_SECRET"], network=True)
    assert (card.mode, card.env_allow, card.network) == ("local", ["HOST_SECRET"], True)
