"""The surfaces' YAML config: team, cards, policy, principals and audit, in one file.

```yaml
team_id: crm
store: team.db                 # relative to this file; ":memory:" keeps nothing
cards:
  - {type: WorkspaceTool}
  - {type: PlanningTool, vector_store: false}
tools: ["myapp.tools:TOOLS"]   # optional: plain tool callables (module:attribute)
resources: []                  # optional: extra MCP resources (module:attribute)
prompts: []                    # optional: extra MCP prompt functions (module:attribute)
policy: policy.yaml            # relative to this file
audit: audit.db                # relative to this file; omit for audit.db beside it
timeout: 60
principals:
  local: {id: alice, type: user, roles: [data_admin]}      # stdio and CLI caller
  tokens:                                                  # HTTP bearer tokens, hashed
    - {token_sha256: "sha256:9f86d0...", id: agent.crawler, type: agent, roles: [data_admin]}
```

Tokens are stored as ``sha256:<hex>`` of the token (``toolcards hash-token`` prints one).
Without ``principals.local`` the stdio and CLI caller is anonymous (a default-deny policy
rejects it).
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from toolcards.governance.identity import ANONYMOUS, Identity

DEFAULT_CONFIG = "toolcards.yaml"
_HASH_PREFIX = "sha256:"


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file and the field."""


class PrincipalSpec(BaseModel):
    """An identity a surface vouches for (never taken from tool arguments)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    type: str = "user"
    roles: list[str] = Field(default_factory=list)
    attrs: dict[str, Any] = Field(default_factory=dict)

    def identity(self) -> Identity:
        return Identity(self.id, self.type, self.roles, self.attrs)


class TokenSpec(PrincipalSpec):
    """An HTTP bearer token (stored hashed) and the identity it stands for."""

    token_sha256: str

    @field_validator("token_sha256")
    @classmethod
    def _hex_digest(cls, value: str) -> str:
        digest = value.removeprefix(_HASH_PREFIX).lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("must be 'sha256:' followed by 64 hex digits (toolcards hash-token)")
        return digest


class Principals(BaseModel):
    model_config = ConfigDict(extra="forbid")

    local: PrincipalSpec | None = None
    tokens: list[TokenSpec] = Field(default_factory=list)


class SurfaceConfig(BaseModel):
    """What ``toolcards serve`` and the CLI read. Paths are relative to the config file."""

    model_config = ConfigDict(extra="forbid")

    team_id: str = Field(default="toolcards", min_length=1)
    store: str = "team.db"
    cards: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    policy: str
    audit: str | None = "audit.db"
    member: str | None = None
    timeout: float | None = Field(default=60.0, gt=0)
    principals: Principals = Field(default_factory=Principals)
    base_dir: Path = Field(default=Path("."), exclude=True)
    source: str = Field(default="<config>", exclude=True)

    @field_validator("cards")
    @classmethod
    def _tagged(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for item in value:
            if not isinstance(item.get("type"), str):
                raise ValueError("every card needs a 'type' naming its card class")
        return value

    @field_validator("tools", "resources", "prompts")
    @classmethod
    def _import_specs(cls, value: list[str]) -> list[str]:
        for spec in value:
            if ":" not in spec:
                raise ValueError(f"{spec!r}: give 'module:attribute'")
        return value

    # -- resolved values ------------------------------------------------------------------

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.base_dir / p

    @property
    def policy_path(self) -> Path:
        return self.path(self.policy)

    @property
    def store_location(self) -> str:
        return self.store if self.store == ":memory:" else str(self.path(self.store))

    @property
    def audit_path(self) -> Path | None:
        return None if self.audit is None else self.path(self.audit)

    @property
    def local_identity(self) -> Identity:
        local = self.principals.local
        return ANONYMOUS if local is None else local.identity()

    @property
    def member_name(self) -> str:
        if self.member:
            return self.member
        local = self.principals.local
        return local.id if local is not None else "toolcards"

    def workspace_ids(self) -> list[str]:
        """The workspace ids of the configured WorkspaceTool cards (default: the team id)."""
        return sorted(
            {
                str(card.get("workspace_id") or self.team_id)
                for card in self.cards
                if card.get("type") == "WorkspaceTool"
            }
        )

    def load_cards(self) -> list[Any]:
        """The configured cards as ToolCard instances (ConfigError naming the bad card)."""
        from toolcards.core.registry import CARD_TYPES, load_card
        from toolcards.surfaces.config_hints import problems

        cards = []
        for i, data in enumerate(self.cards):
            where = f"{self.source}: cards.{i} ({data.get('type')})"
            try:
                cards.append(load_card(data))
            except ValidationError as exc:
                found = problems(exc, CARD_TYPES.resolve(str(data.get("type"))))
                raise ConfigError(f"{where}: {found}") from None
            except ValueError as exc:
                raise ConfigError(f"{where}: {exc}") from None
        return cards


def parse_config(
    data: Any, *, source: str = "<config>", base_dir: Path | None = None
) -> SurfaceConfig:
    """A config from a mapping; ConfigError naming ``source`` and the field when invalid."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    try:
        config = SurfaceConfig.model_validate(data)
    except ValidationError as exc:
        from toolcards.surfaces.config_hints import problems

        raise ConfigError(f"{source}: {problems(exc, SurfaceConfig)}") from None
    config.base_dir = base_dir if base_dir is not None else Path(".")
    config.source = source
    return config


def load_config(path: str | Path = DEFAULT_CONFIG) -> SurfaceConfig:
    """Read a config file; ConfigError naming the file (and field) when it is unusable."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found (pass --config)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_config(data, source=str(path), base_dir=path.resolve().parent)


def hash_token(token: str) -> str:
    """The value to store in ``principals.tokens[].token_sha256`` for ``token``."""
    return _HASH_PREFIX + hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)
