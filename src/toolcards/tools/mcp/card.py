"""MCPTool: the tools of one MCP server (stdio, SSE or streamable HTTP) as a card."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from toolcards.core.card import ToolCard
from toolcards.core.trust import FROM_DATA, TRUST, HostAccess, HostTrust, Reach
from toolcards.tools._common.workspace_dir import workspace_dir, workspace_id_for
from toolcards.tools.mcp.oauth import AuthorizationHandler, OAuthFlow, loopback_handler
from toolcards.tools.mcp.oauth_urls import OAuthError, resource_for
from toolcards.tools.mcp.settings import MCPAuth, MCPOAuth, MCPSampling, nest_flat_keys
from toolcards.tools.mcp.wire_json import WireBounds

__all__ = ["MCPAuth", "MCPOAuth", "MCPSampling", "MCPTool"]

ROUTING_HEADERS = (
    "host",
    "forwarded",
    "x-host",
    "x-http-host-override",
    "x-real-ip",
    "x-original-url",
    "x-rewrite-url",
    "x-original-host",
)
"""Headers a front end or gateway routes by (with ``:authority`` and ``X-Forwarded*``): set
by a card, they would take its credential to another virtual host than its URL's. Names are
compared with ``_`` read as ``-``, as CGI and WSGI servers read them (``X_Forwarded_Host``
arrives as ``HTTP_X_FORWARDED_HOST``)."""

if TYPE_CHECKING:
    from toolcards.tools.mcp.server_requests import RequestRules, ServerRequests
    from toolcards.tools.mcp.toolset import MCPServerToolset


class MCPTool(ToolCard):
    """One MCP server's tools for the agent, through one connection.

    The transport is always the configured one (never guessed from the URL). Secrets are never
    serialized: use ``auth.bearer_token_env`` (an environment variable name) in persisted
    cards, or an ``auth.bearer_token`` secret set in code.

    A stdio server is a program run on this host. Built in code, the card is trusted; loaded
    from data (``load_cards``, a config file, a stored profile, an agent spec) it is refused
    unless the host's trust (``HostTrust``) allows its command and every environment name it
    uses; so is an HTTP server that would receive a host credential (``auth.bearer_token_env``,
    ``auth.oauth``) at a URL the trust does not list, or that names a private host. The server's
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
            Reach.URL,
            "receives a host credential",
            credential=("auth.bearer_token_env", "auth.oauth"),
        ),
    ] = None
    headers: dict[str, str] = Field(default_factory=dict)
    auth: MCPAuth = Field(default_factory=MCPAuth)
    """A bearer token or OAuth for an HTTP server (``{bearer_token_env}``, ``{oauth: {...}}``)."""
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
    server's answer is kept longer than this, or ``sampling.max_chars`` if larger)."""
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
    sampling: MCPSampling = Field(default_factory=MCPSampling)
    """``{mode: agent}``: the server's sampling requests are answered by the calling agent's
    model (or ``model`` outside an agent run), within ``max_tokens``, ``max_requests`` and
    ``max_chars``."""
    roots: Literal["none", "workspace"] = "none"
    """``workspace``: the server's roots request gets the card's workspace directory (one
    ``file://`` URI, symlinks resolved); ``none``: refused."""
    workspace_id: str | None = None
    """The workspace the roots name (under the workspaces root); default: the team id."""

    run_state: ClassVar[frozenset[str]] = ToolCard.run_state | {
        "_toolset",
        "_requests",
        "_oauth_flow",
    }

    _toolset: MCPServerToolset | None = PrivateAttr(default=None)
    _requests: ServerRequests | None = PrivateAttr(default=None)
    _workspaces_root: str | None = PrivateAttr(default=None)
    _oauth_flow: OAuthFlow | None = PrivateAttr(default=None)
    _oauth_handler: AuthorizationHandler | None = PrivateAttr(default=None)
    _granted_url: str | None = PrivateAttr(default=None)
    """From data, the host's URL grant that admitted ``url``: no request leaves it."""

    @model_validator(mode="before")
    @classmethod
    def _flat_keys(cls, data: Any) -> Any:
        """The former flat keys (``bearer_token_env``, ``sampling_model``, ...) nested."""
        return nest_flat_keys(data)

    @model_validator(mode="after")
    def _check_transport(self) -> Self:
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("transport 'stdio' needs a command")
            if self.url or self.headers or self.auth.is_set():
                raise ValueError("url, headers and auth apply to HTTP transports")
        else:
            if not self.url or not self.url.startswith(("http://", "https://")):
                raise ValueError(f"transport {self.transport!r} needs an http(s) url")
            if self.command or self.args or self.env or self.env_from or self.cwd:
                raise ValueError("command, args, env, env_from and cwd apply to stdio only")
            if "@" in self.url.split("/", 3)[2]:
                raise ValueError(
                    "credentials in the url are not allowed: use auth.bearer_token_env"
                )
            if self.auth.oauth is not None:
                try:
                    resource_for(self.url, self.auth.oauth.resource)
                except OAuthError as exc:
                    raise ValueError(str(exc)) from None
        for key in self.headers:
            name = key.strip().lower().replace("_", "-")
            if name in ("authorization", "proxy-authorization"):
                raise ValueError("put credentials in auth (bearer_token_env or oauth), not headers")
            if name.startswith((":", "x-forwarded")) or name in ROUTING_HEADERS:
                raise ValueError(f"header {key!r} is refused: the url alone says where requests go")
        for key in self.env_from.values():
            if not key or not key.replace("_", "a").isalnum():
                raise ValueError(f"env_from values must be environment variable names: {key!r}")
        return self

    @model_validator(mode="after")
    def _record_grant(self, info: ValidationInfo) -> Self:
        """From data, the host's URL grant admitting ``url``, which every request must keep
        under besides ``url``'s folder: the folder of a URL that is the grant itself
        (``/tenant-a``) is the origin, where another tenant may be. Built in code: no grant."""
        context = info.context if isinstance(info.context, dict) else {}
        if context.get(FROM_DATA) and self.url:
            urls = HostTrust.of(context.get(TRUST)).urls
            granted = (u for u in urls if HostTrust(urls=[u]).allows_url(self.url))
            self._granted_url = next(granted, None)
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
        cfg = self.auth.oauth
        if cfg is None:
            return None
        if self._oauth_flow is None:
            handler = self._oauth_handler or loopback_handler(cfg.redirect_uri)
            self._oauth_flow = OAuthFlow(
                client_id=cfg.client_id,
                client_secret=cfg.secret(),
                redirect_uri=cfg.redirect_uri,
                server_url=self.url or "",
                scopes=cfg.scopes,
                authorization_endpoint=cfg.authorization_endpoint,
                token_endpoint=cfg.token_endpoint,
                issuer=cfg.issuer,
                resource=cfg.resource,
                granted=self._granted_url,
                handler=handler,
                timeout=self.connect_timeout_seconds,
            )
        return self._oauth_flow

    def wire_bounds(self) -> WireBounds:
        """What of one message of the server is kept while it is read."""
        text = max(self.max_result_chars, self.sampling.max_chars)
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
        token = self.auth.token(self.name)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if self.transport == "sse":
            return SSETransport(
                self.url,
                headers=headers,
                auth=self._auth(),
                sse_read_timeout=max(self.timeout_seconds, 300.0),
                httpx_client_factory=bounded_client(bounds, self.url, self._granted_url),
            )
        return StreamableHttpTransport(
            self.url,
            headers=headers,
            auth=self._auth(),
            httpx_client_factory=bounded_client(bounds, self.url, self._granted_url),
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
                listing_seconds=self.connect_timeout_seconds + self.timeout_seconds,
            )
        return [self._toolset]
