"""The nested settings of an ``MCPTool``: how it authenticates (``auth``) and what a server's
sampling requests may use (``sampling``)."""

from __future__ import annotations

import os
import warnings
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from toolcards.core.trust import HostAccess, Reach

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

FLAT_KEYS = {
    "bearer_token_env": ("auth", "bearer_token_env"),
    "bearer_token": ("auth", "bearer_token"),
    "oauth": ("auth", "oauth"),
    "sampling_model": ("sampling", "model"),
    "sampling_max_tokens": ("sampling", "max_tokens"),
    "sampling_max_requests": ("sampling", "max_requests"),
    "sampling_max_chars": ("sampling", "max_chars"),
}
"""The former flat keys of an ``MCPTool`` (read one more release): key -> (group, field)."""


def _secret(value: SecretStr | None, env: str | None, what: str) -> str | None:
    if value is not None and value.get_secret_value():
        return value.get_secret_value()
    if env:
        found = os.environ.get(env)
        if not found:
            raise ValueError(f"{what}: the environment variable {env} is not set")
        return found
    return None


class MCPOAuth(BaseModel):
    """OAuth authorization-code + PKCE settings for a server that answers 401.

    Endpoints are discovered from the server (protected-resource metadata, then the
    authorization server's metadata) unless both are given here. A confidential client (a
    ``client_secret``) names its authorization server: ``issuer``, or both endpoints; its
    secret never goes to an authorization server the MCP server names.
    """

    model_config = ConfigDict(extra="forbid")

    client_id: str = Field(min_length=1)
    client_secret_env: Annotated[
        str | None,
        HostAccess(
            Reach.ENV, "sends a host variable as the client secret", to=("issuer", "token_endpoint")
        ),
    ] = Field(default=None, pattern=ENV_NAME)
    client_secret: SecretStr | None = Field(default=None, exclude=True, repr=False)
    """Never serialized: persisted cards use ``client_secret_env``."""
    redirect_uri: str = "http://127.0.0.1:8765/callback"
    scopes: list[str] = Field(default_factory=list)
    authorization_endpoint: str | None = None
    token_endpoint: Annotated[
        str | None,
        HostAccess(Reach.URL, "receives the client secret", credential=("client_secret_env",)),
    ] = None
    issuer: Annotated[
        str | None,
        HostAccess(Reach.URL, "receives the client secret", credential=("client_secret_env",)),
    ] = None
    """The authorization server (required with a client secret); when set, the MCP server's
    own metadata is not asked which authorization server to use."""
    resource: str | None = None
    """The resource indicator (RFC 8707) requested: default the MCP server's canonical URL;
    only that URL or a parent path of it on the same origin is allowed."""

    @model_validator(mode="after")
    def _check_confidential(self) -> Self:
        secret = self.client_secret_env or (
            self.client_secret is not None and self.client_secret.get_secret_value()
        )
        if secret and not self.issuer and not (self.authorization_endpoint and self.token_endpoint):
            raise ValueError(
                "an oauth client_secret needs its authorization server: set issuer "
                "(or authorization_endpoint and token_endpoint)"
            )
        return self

    def secret(self) -> str | None:
        """The client secret (``client_secret``, else the ``client_secret_env`` variable)."""
        return _secret(self.client_secret, self.client_secret_env, "oauth")


class MCPAuth(BaseModel):
    """How an HTTP server is authenticated: a bearer token, or OAuth (or neither)."""

    model_config = ConfigDict(extra="forbid")

    bearer_token_env: Annotated[
        str | None, HostAccess(Reach.ENV, "sends a host variable as a bearer token", to=("url",))
    ] = Field(default=None, pattern=ENV_NAME)
    """The environment variable holding the bearer token (persisted cards use this)."""
    bearer_token: SecretStr | None = Field(default=None, exclude=True, repr=False)
    """A token set in code; never serialized."""
    oauth: MCPOAuth | None = None

    def is_set(self) -> bool:
        """Whether any credential is configured."""
        return bool(self.bearer_token_env or self.bearer_token or self.oauth)

    def token(self, server: str) -> str | None:
        """The bearer token for ``server`` (named in the error when its variable is unset)."""
        return _secret(self.bearer_token, self.bearer_token_env, f"MCP server {server!r}")


class MCPSampling(BaseModel):
    """What a server's sampling requests may use (each is a governed call of its own)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["off", "agent"] = "off"
    """``agent``: answered by the calling agent's model (or ``model`` outside an agent run)."""
    model: str | None = Field(default=None, max_length=200)
    """A pydantic-ai model name for sampling when no agent model is reachable (the MCP
    server and CLI surfaces); None: refused there."""
    max_tokens: int = Field(default=1024, ge=1, le=100_000)
    """The cap on the ``max_tokens`` a sampling request may ask for."""
    max_requests: int = Field(default=10, ge=0, le=10_000)
    """Sampling requests allowed for the card's life (a reconnection starts no new count)."""
    max_chars: int = Field(default=50_000, ge=100, le=1_000_000)
    """The most text a sampling request may send, and the completion may return."""


def nest_flat_keys(data: Any) -> Any:
    """``data`` (an ``MCPTool``'s input) with its former flat keys moved into ``auth`` and
    ``sampling``, each with a warning naming the new key; a key given in both forms is an
    error."""
    if not isinstance(data, dict):
        return data
    sampling = data.get("sampling")
    flat = [key for key in FLAT_KEYS if key in data]
    if not flat and not isinstance(sampling, str):
        return data
    data = dict(data)
    groups: dict[str, dict[str, Any]] = {}
    for group in ("auth", "sampling"):
        given = data.get(group)
        if isinstance(given, BaseModel):  # built in code: its set fields, secrets included
            given = {name: getattr(given, name) for name in given.model_fields_set}
        groups[group] = dict(given) if isinstance(given, dict) else {}
    moved = []
    if isinstance(sampling, str):
        groups["sampling"] = {"mode": sampling}
        moved.append(("sampling", "sampling.mode"))
    for key in flat:
        group, name = FLAT_KEYS[key]
        if name in groups[group]:
            raise ValueError(f"{key} and {group}.{name} both given: keep {group}.{name} only")
        groups[group][name] = data.pop(key)
        moved.append((key, f"{group}.{name}"))
    for group, values in groups.items():
        if values or group in data:
            data[group] = values
    warnings.warn(
        "MCPTool: "
        + ", ".join(f"{old} is now {new}" for old, new in moved)
        + " (the flat form is read until the next release)",
        FutureWarning,
        stacklevel=2,
    )
    return data
