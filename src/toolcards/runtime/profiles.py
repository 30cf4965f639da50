"""Role profiles: what a hired team member is (its model, instructions, cards and roles).

A profile is a pydantic model that round-trips through JSON and YAML when its ``model`` is a
pydantic-ai model spec string (``"openai:gpt-5"``). A model *object* (``FunctionModel(...)``,
a configured ``OpenAIChatModel``) is accepted in code for tests and custom providers, but it
cannot be written out: serializing such a profile raises an error naming the role. Pass the
same profiles again to ``Team.resume(..., profiles=...)`` to bring such members back.

:func:`check_model` says, in one line, why a spec cannot run here (the provider package is not
installed, its API key is not set, the spec is unknown); hiring a member checks it first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from toolcards.core.card import ToolCard
from toolcards.core.errors import ToolcardsError
from toolcards.core.registry import CardList

ROLE_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,47}")
SPEC_EXAMPLES = "'openai:gpt-4o' or 'anthropic:claude-sonnet-4-5'"
EXTRAS = {"openai": "openai", "anthropic": "anthropic"}
"""pydantic-ai provider groups that toolcards ships as an extra of its own."""


_CHECKED: set[tuple[str, int]] = set()
"""(spec, environment) pairs that passed :func:`check_model` (building a provider client
costs milliseconds; a hire checks its model every time)."""


class ModelUnavailable(ToolcardsError, ValueError):
    """A model spec that cannot run in this environment; the message (one line) says what to
    install or set."""


def check_model(model: Any) -> None:
    """Raise :class:`ModelUnavailable` when the model spec ``model`` cannot run here: the
    provider's package is missing, its API key is not set, or the spec is unknown. Model
    objects are not checked (they are already built). Nothing is sent to the provider."""
    if not isinstance(model, str):
        return
    key = (model, hash(frozenset(os.environ.items())))  # a key set later is seen at once
    if key in _CHECKED:
        return
    # lazy: pydantic-ai, ~1 s; only a member's model needs it
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models import infer_model

    try:
        infer_model(model)
    except ImportError as exc:
        raise ModelUnavailable(_install_hint(model, str(exc))) from None
    except UserError as exc:
        raise ModelUnavailable(_setting_hint(model, str(exc))) from None
    except Exception as exc:  # a provider's own validation: report it on one line
        raise ModelUnavailable(f"model {model!r} cannot be used: {_first_line(str(exc))}") from None
    if len(_CHECKED) >= 64:
        _CHECKED.clear()
    _CHECKED.add(key)


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


def _install_hint(model: str, text: str) -> str:
    found = re.search(r"pydantic-ai-slim\[([\w-]+)\]", text)
    group = found.group(1) if found else model.split(":", 1)[0]
    extra = EXTRAS.get(group)
    if extra is not None:
        how = f"pip install 'toolcards[{extra}]' (in a clone: pip install -e '.[{extra}]')"
    else:
        how = f"pip install 'pydantic-ai-slim[{group}]'"
    return f"model {model!r} needs the {group} provider package: {how}"


def _setting_hint(model: str, text: str) -> str:
    env = re.search(r"Set the `(\w+)` environment variable", text)
    if env is not None:
        name = env.group(1)
        return f"model {model!r} needs the {name} environment variable: export {name}=..."
    if text.startswith("Unknown model"):
        return f"unknown model {model!r}: give a pydantic-ai model spec such as {SPEC_EXAMPLES}"
    return f"model {model!r} cannot be used: {_first_line(text)}"


def valid_model(model: Any, kind: str = "a pydantic-ai model spec string or Model") -> Any:
    """``model`` when it is a non-empty spec string or a pydantic-ai ``Model``; else ValueError
    (``kind`` names what was expected)."""
    if isinstance(model, str):
        if not model.strip():
            raise ValueError("model must be a non-empty model spec string or a model object")
        if ":" not in model and model != "test":
            raise ValueError(
                f"model {model!r} is not a pydantic-ai model spec: use 'provider:model', "
                f"e.g. {SPEC_EXAMPLES}"
            )
        return model
    from pydantic_ai.models import Model  # lazy: pydantic-ai, ~1 s; only a member's model needs it

    if not isinstance(model, Model):
        raise ValueError(f"model must be {kind}, got {type(model).__name__}")
    return model


def model_spec(model: Any, holder: str, advice: str) -> str:
    """The spec string to persist for ``model``; a model object cannot be written out, so it
    raises ValueError naming ``holder`` and giving ``advice``."""
    if isinstance(model, str):
        return model
    raise ValueError(
        f"{holder} holds a {type(model).__name__} object, which cannot be serialized; {advice}"
    )


class RoleProfile(BaseModel):
    """One role a team can hire members for.

    ``role`` names the role (``researcher``) and the default member names (``@researcher-1``);
    ``description`` is shown to whoever decides whom to hire; ``instructions`` open the member's
    instructions, followed by the system prompts of its ``cards``. ``roles`` are the governance
    roles of the member's identity (``agent.<name>``) when the team has a policy.
    ``max_members`` caps how many members of this role may be on the roster at once.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    role: str
    description: str = ""
    instructions: str = ""
    model: Any
    """A pydantic-ai model spec string (serializable) or, in code only, a model object."""
    cards: CardList = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    max_members: int | None = Field(default=None, ge=1)
    messaging: bool = True
    """Give the member the ``send_message(to, content)`` tool to message other members."""
    model_settings: dict[str, Any] | None = None
    """pydantic-ai model settings for every run of the member (``temperature``, ...)."""
    max_history: int | None = Field(default=None, ge=1)
    """Keep at most this many history messages (older whole turns are dropped); None: all."""
    placement: Literal["process", "cluster"] = "process"
    """Where members of this role run: ``"process"``, a thread of the process that hires
    them; ``"cluster"``, an actor of the team's distributed system (Ray), in a worker process
    of the cluster (needs a PostgreSQL store and ``system="ray"``; the model, cards and the
    team's policy, audit log and approver must be picklable)."""

    @field_validator("role")
    @classmethod
    def _valid_role(cls, role: str) -> str:
        if not ROLE_PATTERN.fullmatch(role):
            raise ValueError(
                f"role {role!r} must start with a letter and hold only letters, digits, "
                "'_', '.' or '-' (at most 48 characters)"
            )
        return role

    @field_validator("model")
    @classmethod
    def _valid_model(cls, model: Any) -> Any:
        return valid_model(model)

    @field_validator("cards")
    @classmethod
    def _cards_only(cls, cards: list[Any]) -> list[Any]:
        for card in cards:
            if not isinstance(card, ToolCard):
                raise ValueError(f"cards must be ToolCard instances, got {type(card).__name__}")
        return cards

    @field_serializer("model")
    def _serialize_model(self, model: Any) -> str:
        return model_spec(
            model,
            f"RoleProfile {self.role!r}",
            "use a model spec string (such as 'openai:gpt-5') to persist the profile",
        )

    @property
    def serializable(self) -> bool:
        """True when the profile can be written out (its model is a spec string)."""
        return isinstance(self.model, str)

    def fresh_cards(self) -> list[ToolCard]:
        """New card instances with this profile's configuration (one set per member, so that
        members never share a card's bound owner or its caches), keeping what the host gave
        each card in code or granted it from data (:meth:`ToolCard.fresh_copy`)."""
        return [card.fresh_copy() for card in self.cards]


def normalize_profiles(profiles: Iterable[Any] | None) -> list[RoleProfile]:
    """Validate ``profiles`` (RoleProfile instances or mappings); role names must be unique."""
    out: list[RoleProfile] = []
    seen: set[str] = set()
    for item in profiles or ():
        profile = item if isinstance(item, RoleProfile) else RoleProfile.model_validate(item)
        if profile.role in seen:
            raise ValueError(f"two profiles define the role {profile.role!r}")
        seen.add(profile.role)
        out.append(profile)
    return out
