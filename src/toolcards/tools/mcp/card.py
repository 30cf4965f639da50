"""MCPTool: the tools of one MCP server (stdio, SSE or streamable HTTP) as a card."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from toolcards.core.card import ToolCard
from toolcards.core.trust import HostAccess, Reach
from toolcards.tools._common.workspace_dir import workspace_dir, workspace_id_for
from toolcards.tools.mcp.oauth import AuthorizationHandler, OAuthFlow, loopback_handler
from toolcards.tools.mcp.oauth_urls import OAuthError, resource_for
from toolcards.tools.mcp.wire_json import WireBounds

if TYPE_CHECKING:
    from toolcards.tools.mcp.server_requests import RequestRules, ServerRequests
    from toolcards.tools.mcp.toolset import MCPServerToolset

_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


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
    ] = Field(default=None, pattern=_ENV_NAME)
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


class MCPTool(ToolCard):
    """One MCP server's tools for the agent, through one connection.

    The transport is always the configured one (never guessed from the URL). Secrets are never
    serialized: use ``bearer_token_env`` (an environment variable name) in persisted cards, or
    a ``bearer_token`` secret set in code.

    A stdio server is a program run on this host. Built in code, the card is trusted; loaded
    from data (``load_cards``, a config file, a stored profile, an agent spec) it is refused
    unless the host's trust (``HostTrust``) allows its command and every environment name it
    uses; so is an HTTP server that would receive a host credential (``bearer_token_env``,
    ``oauth``) at a URL the trust does not list, or that names a private host. The server's
    environment holds only what the card names (plus ``PATH``, ``HOME``, ``USER``,
    ``LOGNAME``, ``SHELL``, ``TERM``).
    """

    name: str = Field(default="mcp", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """Names the server in logs and messages."""
    transport: Literal["stdio", "sse", "streamable-http"]
    command: Annotated[
        str | None,
        HostAccess(Reach.PROGRAM, "would run on this host", args="args", cwd="cwd"),
    ] = None
    args: list[str] = Field(default_factory=list)
    env: Annotated[
        dict[str, str], HostAccess(Reach.ENV, "sets a variable of the server", each="key")
    ] = Field(default_factory=dict)
    """Extra environment of the stdio server (persisted: no secrets here, see ``env_from``)."""
    env_from: Annotated[
        dict[str, str],
        HostAccess(Reach.ENV, "copies a host variable into the server", each="name"),
    ] = Field(default_factory=dict)
    """Stdio server variables copied from this process's environment: child name -> our name."""
    cwd: str | None = None
    url: Annotated[
        str | None,
        HostAccess(
            Reach.URL, "receives a host credential", credential=("bearer_token_env", "oauth")
        ),
    ] = None
    headers: dict[str, str] = Field(default_factory=dict)
    bearer_token_env: Annotated[
        str | None, HostAccess(Reach.ENV, "sends a host variable as a bearer token", to=("url",))
    ] = Field(default=None, pattern=_ENV_NAME)
    bearer_token: SecretStr | None = Field(default=None, exclude=True, repr=False)
    oauth: MCPOAuth | None = None
    tool_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9_-]{0,32}$")
    """Prepended to every tool name with `_` (`crm` -> `crm_search`; `crm_` is not doubled)."""
    include_tools: list[str] | None = None
    exclude_tools: list[str] = Field(default_factory=list)
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    """Longest wait for one response from the server; for a call the server runs as a task
    (MCP 2026-07-28), the longest the task may take, after which it is cancelled."""
    max_result_chars: int = Field(default=100_000, ge=1_000)
    """Longer text results are cut, with a marker, while they are read (no string of the
    server's answer is kept longer than this, or ``sampling_max_chars`` if larger)."""
    max_file_bytes: int = Field(default=5 << 20, ge=1024, le=100 << 20)
    """Images, audio and embedded files larger than this reach the model as a one-line note
    saying so, and are never held whole (an answer is refused past about 8 times
    ``max_result_chars`` plus twice this)."""
    max_listed_tools: int = Field(default=100, ge=1, le=100_000)
    """A server listing more tools than this (after include/exclude) has every one deferred
    to tool search, as with ``defer_loading``: no request carries their definitions until the
    model finds them, and the model is told so."""
    retry_interval_seconds: float = Field(default=5.0, ge=0, le=3600)
    """Least time between two connection attempts to a server that is down."""
    protocol: Literal["auto", "legacy"] = "auto"
    """``auto``: the newest MCP revision both sides speak; ``legacy``: the handshake-era
    revisions (2025-11-25 and before), whose servers ask by server-initiated requests."""

    # ---- what the server may ask of this client (each request governed and audited) ------
    elicitation: Literal["refuse", "inbox"] = "refuse"
    """``refuse``: the server's questions are declined; ``inbox``: they wait in the approvals
    inbox for a human approver (not the caller), who accepts with content or declines."""
    elicitation_timeout_seconds: float = Field(default=300.0, gt=0, le=3600)
    """Longest wait for the human's answer; then the question is cancelled."""
    sampling: Literal["off", "agent"] = "off"
    """``agent``: the server's sampling requests are answered by the calling agent's model
    (or ``sampling_model`` outside an agent run)."""
    sampling_model: str | None = Field(default=None, max_length=200)
    """A pydantic-ai model name for sampling when no agent model is reachable (the MCP
    server and CLI surfaces); None: refused there."""
    sampling_max_tokens: int = Field(default=1024, ge=1, le=100_000)
    """The cap on the ``max_tokens`` a sampling request may ask for."""
    sampling_max_requests: int = Field(default=10, ge=0, le=10_000)
    """Sampling requests allowed per connection; later ones are refused."""
    sampling_max_chars: int = Field(default=50_000, ge=100, le=1_000_000)
    """The most text a sampling request may send, and the completion may return."""
    roots: Literal["none", "workspace"] = "none"
    """``workspace``: the server's roots request gets the card's workspace directory (one
    ``file://`` URI, symlinks resolved); ``none``: refused."""
    workspace_id: str | None = None
    """The workspace the roots name (under the workspaces root); default: the team id."""

    _toolset: MCPServerToolset | None = PrivateAttr(default=None)
    _requests: ServerRequests | None = PrivateAttr(default=None)
    _workspaces_root: str | None = PrivateAttr(default=None)
    _oauth_flow: OAuthFlow | None = PrivateAttr(default=None)
    _oauth_handler: AuthorizationHandler | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_transport(self) -> Self:
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("transport 'stdio' needs a command")
            if self.url or self.headers or self.oauth or self.bearer_token_env or self.bearer_token:
                raise ValueError("url, headers, oauth and bearer tokens apply to HTTP transports")
        else:
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ValueError(f"transport {self.transport!r} needs an http(s) url")
            if self.command or self.args or self.env or self.env_from or self.cwd:
                raise ValueError("command, args, env, env_from and cwd apply to stdio only")
            if "@" in self.url.split("/", 3)[2]:
                raise ValueError("credentials in the url are not allowed; use bearer_token_env")
            if self.oauth is not None:
                try:
                    resource_for(self.url, self.oauth.resource)
                except OAuthError as exc:
                    raise ValueError(str(exc)) from None
        if any(k.lower() in ("authorization", "proxy-authorization") for k in self.headers):
            raise ValueError("put credentials in bearer_token_env or bearer_token, not headers")
        for key in self.env_from.values():
            if not key or not key.replace("_", "a").isalnum():
                raise ValueError(f"env_from values must be environment variable names: {key!r}")
        return self

    @field_validator("workspace_id")
    @classmethod
    def _safe_workspace_id(cls, value: str | None) -> str | None:
        return None if value is None else workspace_id_for(value, None)

    def use_workspaces_root(self, root: str | Path) -> None:
        """Keep this card's workspace under ``root`` (the host's choice, never card data)."""
        self._workspaces_root = str(root)

    def _rules(self) -> RequestRules:
        from toolcards.tools.mcp.server_requests import RequestRules  # lazy: extra mcp

        chosen = workspace_id_for(self.workspace_id, self.observer_or_none())
        root = self._workspaces_root
        return RequestRules(
            elicitation=self.elicitation,
            elicitation_timeout=self.elicitation_timeout_seconds,
            sampling=self.sampling,
            sampling_model=self.sampling_model,
            sampling_max_tokens=self.sampling_max_tokens,
            sampling_max_requests=self.sampling_max_requests,
            sampling_max_chars=self.sampling_max_chars,
            roots=self.roots,
            workspace=lambda: workspace_dir(chosen, None, root=root),
            timeout=self.timeout_seconds,
        )

    def set_authorization_handler(self, handler: AuthorizationHandler) -> Self:
        """Use ``handler`` for the user-consent step of OAuth (default: a loopback browser flow)."""
        self._oauth_handler = handler
        if self._oauth_flow is not None:
            self._oauth_flow.handler = handler
        return self

    # ---- building ----------------------------------------------------------------------------

    def _auth(self) -> OAuthFlow | None:
        if self.oauth is None:
            return None
        if self._oauth_flow is None:
            cfg = self.oauth
            handler = self._oauth_handler or loopback_handler(cfg.redirect_uri)
            self._oauth_flow = OAuthFlow(
                client_id=cfg.client_id,
                client_secret=_secret(cfg.client_secret, cfg.client_secret_env, "oauth"),
                redirect_uri=cfg.redirect_uri,
                server_url=self.url or "",
                scopes=cfg.scopes,
                authorization_endpoint=cfg.authorization_endpoint,
                token_endpoint=cfg.token_endpoint,
                issuer=cfg.issuer,
                resource=cfg.resource,
                handler=handler,
                timeout=self.connect_timeout_seconds,
            )
        return self._oauth_flow

    def wire_bounds(self) -> WireBounds:
        """What of one message of the server is kept while it is read."""
        text = max(self.max_result_chars, self.sampling_max_chars)
        return WireBounds.of(text, self.max_file_bytes)

    def _transport(self) -> Any:
        # lazy: extra mcp
        from fastmcp.client.transports import SSETransport, StreamableHttpTransport

        from toolcards.tools.mcp.wire import BoundedStdio, bounded_client  # lazy: extra mcp

        bounds = self.wire_bounds()
        if self.transport == "stdio":
            assert self.command is not None
            args, env = list(self.args), self._child_env()
            return BoundedStdio(self.command, args, env=env, cwd=self.cwd, bounds=bounds)
        assert self.url is not None
        headers = dict(self.headers)
        token = _secret(self.bearer_token, self.bearer_token_env, f"MCP server {self.name!r}")
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if self.transport == "sse":
            return SSETransport(
                self.url,
                headers=headers,
                auth=self._auth(),
                sse_read_timeout=max(self.timeout_seconds, 300.0),
                httpx_client_factory=bounded_client(bounds),
            )
        return StreamableHttpTransport(
            self.url,
            headers=headers,
            auth=self._auth(),
            httpx_client_factory=bounded_client(bounds),
            max_sse_event_size=bounds.total + (1 << 16),  # the events are bounded here
        )

    def _child_env(self) -> dict[str, str]:
        """What the stdio server gets besides the SDK's base (``PATH``, ``HOME``, ``USER``,
        ``LOGNAME``, ``SHELL``, ``TERM``): ``env``, then the ``env_from`` copies that are set."""
        env = dict(self.env)
        for child, ours in self.env_from.items():
            if ours in os.environ:
                env[child] = os.environ[ours]
        return env

    def _build(self) -> Any:
        # lazy: extra mcp
        from toolcards.tools.mcp.answers import client_handlers
        from toolcards.tools.mcp.toolset import require_mcp_client

        mcp = require_mcp_client()
        from fastmcp import Client  # lazy: extra mcp

        from toolcards.tools.mcp.tasks import TaskDriver  # lazy: extra mcp

        assert self._requests is not None
        client = Client(
            self._transport(),
            init_timeout=self.connect_timeout_seconds,
            timeout=self.timeout_seconds,
            mode=self.protocol,
            extensions=[TaskDriver(self.name)],
            **client_handlers(self._requests),
        )
        return mcp.MCPToolset(client, id=f"mcp-{self.name}", tool_error_behavior="error")

    def get_toolsets(self) -> list[Any]:
        if self._toolset is None:
            # lazy: extra mcp
            from toolcards.tools.mcp.server_requests import ServerRequests
            from toolcards.tools.mcp.toolset import MCPServerToolset, require_mcp_client

            require_mcp_client()
            self._requests = ServerRequests(self.name, self._rules())
            self._toolset = MCPServerToolset(
                name=self.name,
                build=self._build,
                prefix=self.tool_prefix,
                include=self.include_tools,
                exclude=self.exclude_tools,
                retry_interval=self.retry_interval_seconds,
                max_result_chars=self.max_result_chars,
                defer_loading=self.defer_loading,
                max_listed_tools=self.max_listed_tools,
                requests=self._requests,
            )
        return [self._toolset]
