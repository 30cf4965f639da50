"""The surfaces' YAML config: team, cards, policy, principals and audit, in one file.

```yaml
team_id: crm                   # required with a postgresql:// store (default: toolcards)
store: team.db                 # relative to this file; ":memory:" keeps nothing; or postgresql://...
system: pykka                  # or ray, or {ray: {address: ..., namespace: ...}}
cards:
  - {type: WorkspaceTool}
  - {type: PlanningTool, vector_store: false}
tools: ["myapp.tools:TOOLS"]   # optional: plain tool callables (module:attribute)
resources: []                  # optional: extra MCP resources (module:attribute)
prompts: []                    # optional: extra MCP prompt functions (module:attribute)
hooks: ["myapp.guards:HOOKS"]  # optional: guardrail ToolHooks, in order (module:attribute)
policy: policy.yaml            # relative to this file
workspaces: workspaces         # WorkspaceTool/ExecTool files: <this>/<workspace id>; relative
                               # to this file (default: $TOOLCARDS_WORKSPACES_ROOT, else
                               # workspaces/ beside this file; a config that is data: always
                               # workspaces/ beside it)
audit: audit.db                # relative to this file; omit for audit.db beside it (or the
                               # PostgreSQL store's database)
approval: approver             # approval-required calls wait for an approver; "client": the
                               # caller approves its own calls (MCP elicitation, the CLI prompt)
approval_timeout: 300
approvals: audit.approvals.db  # pending approvals, shared by serve and the CLI (default)
sessions: {max: 1000, per_principal: 100, idle_timeout: 900}   # MCP over HTTP
http: {max_body: 4194304, header_timeout: 10, body_timeout: 15}   # HTTP clients' bounds
trust:                         # what the cards above may do on this host (HostTrust)
  commands: ["uvx mcp-server-fetch"]     # programs they may start (MCP stdio servers)
  env: [CRM_TOKEN]                       # host environment variables they may read or set
  urls: ["https://search.internal.example/"]   # where a host credential may go
  private_network: false                 # loopback, private and metadata addresses
  paths: []                              # host folders outside the workspace
  execution: []                          # exec modes that do not isolate (local)
mcp_commands: []               # the older spelling of trust: {commands: [...]}
timeout: 60
principals:
  local: {id: alice, type: user, roles: [data_admin]}      # stdio and CLI caller
  terminal_approver: {id: rita, roles: [approver]}         # answers `toolcards call`'s prompt
  tokens:                                                  # HTTP bearer tokens, hashed
    - {token_sha256: "sha256:9f86d0...", id: agent.crawler, type: agent, roles: [data_admin]}
  oauth: {issuer: "https://auth.example.com/", resource: "https://mcp.example.com/mcp",
          scopes: {crm.admin: [data_admin]}}      # bearer JWTs too (surfaces.http.oauth_config)
```

Tokens are stored as ``sha256:<hex>`` of the token (``toolcards hash-token`` prints one).
An id names one principal: entries of ``local``, ``terminal_approver`` and ``tokens`` that
share an id must agree on its type, roles and attrs (several tokens of one principal do).
Without ``principals.local`` the stdio and CLI caller is anonymous (a default-deny policy
rejects it).

Trust and code come from the operator only: ``trust:``, ``mcp_commands:`` and the imports
(``tools:``, ``hooks:``, ``resources:``, ``prompts:``) are read from the file ``load_config``
opens (written by whoever runs the server, not found in a workspaces root); a config given as a
mapping (``parse_config``) may carry them only when the host says it wrote it
(``host_written=True``). A config a client sent or an agent wrote is data: it grants nothing
and imports nothing, joins no Ray cluster it names, names no database server that would
get the host's password (``PGPASSWORD``, ``~/.pgpass``) or sit on its private network, and no
OAuth issuer or ``jwks_uri`` there (the HTTP server fetches them when a client sends a token),
and keeps its files and its workspaces beside it (never under the host's
``$TOOLCARDS_WORKSPACES_ROOT``, where other teams' workspaces lie).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from toolcards.core import host_files
from toolcards.core.errors import ToolcardsError
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.core.registry import CARD_TYPES, load_card
from toolcards.core.trust import HostTrust, UntrustedField, private_host
from toolcards.core.yaml_safe import YamlError, load_yaml
from toolcards.stores.data_location import check_data_location, check_own_file
from toolcards.stores.errors import UnknownStoreScheme
from toolcards.stores.location import StoreLocation, redact_url
from toolcards.surfaces.config.hints import problems
from toolcards.surfaces.http.limits import HttpLimits
from toolcards.surfaces.http.oauth_config import OAuthSpec
from toolcards.tools._common.workspace_dir import workspace_id_for

if TYPE_CHECKING:
    from toolcards.runtime.system import ActorSystem

DEFAULT_CONFIG = "toolcards.yaml"
APPROVER_ROLE = "approver"
"""The role a principal needs to decide approvals (the surfaces' brokers use it)."""
_HASH_PREFIX = "sha256:"


class ConfigError(ToolcardsError, ValueError):
    """A config file that cannot be used; the message names the file and the field."""


class PrincipalSpec(BaseModel):
    """An identity a surface vouches for (never taken from tool arguments)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    type: str = "user"
    roles: list[str] = Field(default_factory=list)
    attrs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _not_anonymous(cls, value: str) -> str:
        """The id of a caller with no credential is the anonymous one's: a principal named so
        would share its sessions and tasks with every unauthenticated caller."""
        if value == ANONYMOUS.id:
            raise ValueError(f"{value!r} is the id of a caller with no credential; pick another")
        return value

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
    oauth: OAuthSpec | None = None
    """Bearer JWTs of an OAuth issuer over HTTP (:mod:`toolcards.surfaces.http.oauth_config`)."""
    terminal_approver: PrincipalSpec | None = None
    """The human at the terminal who answers ``toolcards call``'s approval prompt: another
    principal than ``local`` (a caller never approves its own call), holding the approver
    role. Without it (and without ``approval: client``) the terminal asks nobody."""

    @field_validator("terminal_approver")
    @classmethod
    def _an_approver(cls, value: PrincipalSpec | None) -> PrincipalSpec | None:
        if value is not None and APPROVER_ROLE not in value.roles:
            raise ValueError(f"must hold the {APPROVER_ROLE!r} role")
        return value

    @model_validator(mode="after")
    def _apart(self) -> Principals:
        approver, local = self.terminal_approver, self.local
        if approver is not None and local is not None and approver.id == local.id:
            raise ValueError(
                "terminal_approver must be another principal than local "
                "(a caller cannot approve its own call)"
            )
        static = [("local", local), ("terminal_approver", approver)]
        static += [(f"tokens[{i}]", token) for i, token in enumerate(self.tokens)]
        specs = [(w, p) for w, p in static if p is not None]
        _one_principal_per_id(specs)
        if self.oauth is not None:
            ids = [(w, p.id) for w, p in specs]
            self.oauth.refuse_shared_ids([*ids, ("for callers with no credential", ANONYMOUS.id)])
        return self


def _one_principal_per_id(specs: list[tuple[str, PrincipalSpec]]) -> None:
    """ValueError when two entries share an id but not the identity: MCP tasks and pending
    approvals know their principal by id alone, so an agent ``alice`` would read a user
    ``alice``'s tasks and results. One identity twice (a second token, ``local``'s own
    token) is one principal."""
    first: dict[str, tuple[str, Identity]] = {}
    for where, spec in specs:
        seen, identity = first.setdefault(spec.id, (where, spec.identity()))
        if identity != spec.identity():
            raise ValueError(
                f"{where} and {seen} share the id {spec.id!r} but not its type, roles and "
                "attrs; give each principal its own id"
            )


class SessionLimits(BaseModel):
    """Bounds on MCP sessions over HTTP (each open session holds server memory)."""

    model_config = ConfigDict(extra="forbid")

    max: int = Field(default=1000, ge=1)
    """Open sessions in total; a new one beyond it gets 503."""
    per_principal: int = Field(default=100, ge=1)
    """Open sessions of one caller (all anonymous callers are one), and apart from them what
    it has in flight: its 2026-07-28 requests (which open no session) and the tool calls,
    resource reads and listings, subscriptions, prompts, completions and task waits its sessions
    run, one count; beyond either bound, 429 (a call in a session: an error result; another
    request in a session: a ``-32000`` error)."""
    idle_timeout: float = Field(default=900.0, gt=0)
    """Seconds without a request in flight (no call, no open stream) before a session ends."""


OWN_CARD_HINT = (
    "a card of your own is found through an installed package that registers it in the "
    "'toolcards.cards' entry-point group (pip install -e <your package>), or serve plain "
    "functions with tools: ['module:TOOLS'] and PYTHONPATH=<the folder of module.py> "
    "(docs/writing-cards.md)"
)
_SYSTEMS = ("pykka", "ray")
_RAY_KEYS = frozenset({"address", "namespace", "connect_timeout"})


class SurfaceConfig(BaseModel):
    """What ``toolcards serve`` and the CLI read. Paths are relative to the config file."""

    model_config = ConfigDict(extra="forbid")

    team_id: str = Field(default="toolcards", min_length=1)
    store: str = "team.db"
    system: str | dict[str, Any] = "pykka"
    cards: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    prompts: list[str] = Field(default_factory=list)
    hooks: list[str] = Field(default_factory=list)
    policy: str
    workspaces: str | None = None
    audit: str | None = "audit.db"
    approval: Literal["approver", "client"] = "approver"
    approval_timeout: float = Field(default=300.0, gt=0)
    approvals: str | None = None
    sessions: SessionLimits = Field(default_factory=SessionLimits)
    http: HttpLimits = Field(default_factory=HttpLimits)
    trust: dict[str, Any] | None = None
    """What the cards may do on this host (``HostTrust.from_config``): the operator's grant."""
    mcp_commands: list[str | dict[str, Any]] = Field(default_factory=list)
    """The older spelling of ``trust: {commands: [...]}``."""
    member: str | None = None
    timeout: float | None = Field(default=60.0, gt=0)
    principals: Principals = Field(default_factory=Principals)
    base_dir: Path = Field(default=Path("."), exclude=True)
    source: str = Field(default="<config>", exclude=True)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """As pydantic's, with every database URL's password hidden."""
        for name, value in super().__repr_args__():
            if name in ("store", "audit", "approvals") and isinstance(value, str):
                value = redact_url(value)
            yield name, value

    @field_validator("policy", "workspaces", "store", "audit", "approvals")
    @classmethod
    def _path(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A file's path with ``~`` expanded, or for a database key a location that names no
        file (``:memory:``, a server's URL) as given; a NUL character, or a ``~user`` this
        host has no home folder for, is this key's error, not a traceback when the file opens."""
        if value is None:
            return None
        if "\0" in value:
            raise ValueError("holds a NUL character, which no file name or URL can hold")
        if info.field_name in _DATABASES:
            try:
                if StoreLocation.parse(value).path is None:
                    return value
            except UnknownStoreScheme as exc:
                raise ValueError(str(exc)) from None
        if not value.startswith("~"):
            return value
        try:
            return str(Path(value).expanduser())
        except RuntimeError:
            home = value.partition("/")[0]
            raise ValueError(
                f"{value!r:.200}: this host has no home folder {home!r:.100}"
            ) from None

    @field_validator("system")
    @classmethod
    def _system(cls, value: str | dict[str, Any]) -> str | dict[str, Any]:
        if isinstance(value, str):
            if value not in _SYSTEMS:
                raise ValueError("must be 'pykka', 'ray' or {ray: {address: ..., namespace: ...}}")
            return value
        if list(value) != ["ray"]:
            raise ValueError("a mapping names one system: {ray: {address: ..., namespace: ...}}")
        options = value["ray"] if value["ray"] is not None else {}
        if not isinstance(options, dict) or set(options) - _RAY_KEYS:
            raise ValueError(f"ray: takes {', '.join(sorted(_RAY_KEYS))}")
        for key in ("address", "namespace"):
            if options.get(key) is not None and not isinstance(options[key], str):
                raise ValueError(f"ray.{key} must be a string")
        timeout = options.get("connect_timeout")
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise ValueError("ray.connect_timeout must be a positive number of seconds")
        return {"ray": dict(options)}

    @field_validator("mcp_commands", "trust")
    @classmethod
    def _trust(cls, value: Any) -> Any:
        HostTrust.from_config(value)  # a malformed grant is a config error now, not later
        return value

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
        p = Path(value)
        return p if p.is_absolute() else self.base_dir / p

    @property
    def policy_path(self) -> Path:
        return self.path(self.policy)

    @property
    def workspaces_root(self) -> Path:
        """Where the cards' workspaces live: ``workspaces:`` (relative to this file), else
        ``$TOOLCARDS_WORKSPACES_ROOT``, else ``workspaces/`` beside this file (always there
        for a config that is data: :func:`parse_config` names it)."""
        if self.workspaces is not None:
            return self.path(self.workspaces)
        env = os.environ.get(host_files.ROOT_ENV)
        return Path(env).expanduser().resolve() if env else self.path("workspaces")

    def location(self, value: str) -> str:
        """A database URL as given (never a path), ``:memory:``, or a path made absolute."""
        where = StoreLocation.parse(value)
        if where.path is None:
            return value
        return str(self.path(value))

    @property
    def store_location(self) -> str:
        return self.location(self.store)

    @property
    def shared_store(self) -> bool:
        """True with a shared store (PostgreSQL): many processes hold the team at once, and
        the audit trail, approvals and rate limits live in that database too."""
        return StoreLocation.parse(self.store).shared

    @property
    def store_display(self) -> str:
        """The store for messages: a URL without its password."""
        return redact_url(self.store_location)

    @property
    def audit_location(self) -> str | None:
        """The audit trail: the ``audit:`` given (a path or a URL; null keeps none), else the
        PostgreSQL store's database, else ``audit.db`` beside this file."""
        if "audit" not in self.model_fields_set and self.shared_store:
            return self.store
        return None if self.audit is None else self.location(self.audit)

    @property
    def audit_path(self) -> Path | None:
        """The audit file (None with no audit log, or with one in a database)."""
        location = self.audit_location
        if location is None or StoreLocation.parse(location).kind not in ("sqlite", "memory"):
            return None
        return Path(location)

    @property
    def approvals_location(self) -> str:
        """Pending approvals, shared by every process of this config: the ``approvals:``
        given, else the PostgreSQL store's database, else a SQLite file beside the audit file
        (``audit.approvals.db`` for ``audit.db``; beside this file without one)."""
        if self.approvals is not None:
            return self.location(self.approvals)
        if self.shared_store:
            return self.store
        audit = self.audit_path
        if audit is None:
            return str(self.path("approvals.db"))
        return str(audit.with_name(audit.stem + ".approvals.db"))

    @property
    def rate_limits_location(self) -> str | None:
        """Where rate-limit counters are shared (the PostgreSQL store), or None: in memory."""
        return self.store if self.shared_store else None

    def actor_system(self) -> str | ActorSystem:
        """``system:`` as ``Team(system=...)`` takes it. Ray says only warnings on this
        process's terminal; with no cluster address (``address:`` nor ``RAY_ADDRESS``) it is
        a ConfigError: each process would start a private Ray and its own copy of the actors."""
        if self.system == "pykka":
            return "pykka"
        from toolcards.runtime.ray_system import RayActorSystem  # lazy: the ray extra

        options = self.system["ray"] if isinstance(self.system, dict) else {}
        system = RayActorSystem(
            options.get("address"),
            options.get("namespace") or f"toolcards-{self.team_id}",
            connect_timeout=float(options.get("connect_timeout") or 10.0),
            init_options={"logging_level": logging.WARNING},
        )
        if system.starts_private_cluster():
            raise ConfigError(
                f"{self.source}: system: ray needs the address of a running Ray cluster: set "
                "system: {ray: {address: HOST:PORT}} or export RAY_ADDRESS=HOST:PORT (the "
                "address `ray start --head` prints); every process of the team must join "
                "that one cluster"
            )
        return system

    def host_trust(self) -> HostTrust:
        """What ``trust:`` and ``mcp_commands:`` allow the cards to do on this host."""
        return HostTrust.from_config(self.trust).joined(HostTrust.from_config(self.mcp_commands))

    @property
    def local_identity(self) -> Identity:
        local = self.principals.local
        return ANONYMOUS if local is None else local.identity()

    @property
    def terminal_approver(self) -> Identity | None:
        """Who answers ``toolcards call``'s approval prompt (None: nobody on the terminal)."""
        approver = self.principals.terminal_approver
        return None if approver is None else approver.identity()

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
        trust = self.host_trust()
        cards = []
        for i, data in enumerate(self.cards):
            where = f"{self.source}: cards.{i} ({data.get('type')})"
            try:
                card = load_card(data, trust=trust)
                use_root = getattr(card, "use_workspaces_root", None)
                if callable(use_root):
                    use_root(self.workspaces_root)  # relative to this file, like every path
                cards.append(card)
            except ValidationError as exc:
                found = problems(exc, CARD_TYPES.resolve(str(data.get("type"))))
                raise ConfigError(f"{where}: {found}") from None
            except ValueError as exc:
                hint = f"; {OWN_CARD_HINT}" if str(exc).startswith("unknown card type") else ""
                raise ConfigError(f"{where}: {exc}{hint}") from None
        return cards


_HOST_ONLY = {
    "trust": "grants trust",
    "mcp_commands": "grants trust",
    "tools": "names code to import",
    "hooks": "names code to import",
    "resources": "names code to import",
    "prompts": "names code to import",
    "system": "names a Ray cluster to join",
    "workspaces": "chooses the host folder the workspace tools act on",
}
"""Keys only a config the host wrote may carry, and what they would do."""
_DATABASES = ("store", "audit", "approvals")
"""The keys naming a database (a server, whose URL in data must not take the host's
credentials: ``toolcards.stores.data_location``; or a file, which data keeps in its own
folder)."""


def parse_config(
    data: Any,
    *,
    source: str = "<config>",
    base_dir: Path | None = None,
    host_written: bool = False,
) -> SurfaceConfig:
    """A config from a mapping; ConfigError naming ``source`` and the field when invalid.

    ``host_written``: the host (its operator's file, its own code) wrote ``data``, so its
    ``trust:`` and ``mcp_commands:`` grant what they say and its ``tools:``, ``hooks:``,
    ``resources:`` and ``prompts:`` name code to import, its ``system:`` may name a Ray
    cluster and its ``store:``, ``audit:`` and ``approvals:`` any database; otherwise (a config
    from anywhere else, such as a client or an agent's workspace) the first ones are refused,
    a database server must be public and carry its own password (the rule of an agent spec's
    stores, :mod:`toolcards.stores.data_location`), and so must the OAuth issuer and
    ``jwks_uri`` be public."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    granted = [key for key in _HOST_ONLY if _host_only(key, data.get(key))]
    if granted and not host_written:
        raise ConfigError(
            f"{source}: {granted[0]}: only the operator's config file (load_config) or the "
            f"host's code (parse_config(..., host_written=True)) {_HOST_ONLY[granted[0]]}; "
            "this config is data"
        )
    try:
        config = SurfaceConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {problems(exc, SurfaceConfig)}") from None
    config.base_dir = base_dir if base_dir is not None else Path(".")
    config.source = source
    if not host_written:
        _check_data_locations(config, source)
    shared = [v for v in (config.store, config.audit, config.approvals) if v and _shared(v)]
    if shared and "team_id" not in config.model_fields_set:
        raise ConfigError(
            f"{source}: team_id: {redact_url(shared[0])} is a shared store that holds many "
            "teams; name this config's team (team_id: <name>)"
        )
    _check_team_workspaces(config, source)
    if config.system != "pykka" and not config.shared_store:
        raise ConfigError(
            f"{source}: system: ray runs tool actors in other processes, which cannot open "
            f"store: {config.store_display}; set store: to a postgresql:// URL (or use "
            "system: pykka)"
        )
    return config


def _host_only(key: str, value: Any) -> bool:
    """Whether ``value`` of ``key`` is one only the host may write: any value but an empty
    one, and for ``system`` the mapping that names a Ray cluster (``system: ray`` joins the
    host's own ``RAY_ADDRESS``)."""
    return isinstance(value, dict) if key == "system" else bool(value)


def _check_data_locations(config: SurfaceConfig, source: str) -> None:
    """A config that is data names no database server that would get the host's password
    (``PGPASSWORD``, ``~/.pgpass``) or reach its private network (the rule agent specs
    follow), has the server fetch no OAuth URL there, and opens no file outside its own
    folder (links followed): the host's files are not data's to open, write or read as a
    policy. Its workspace tools act in ``workspaces/`` beside it, never under the host's
    ``$TOOLCARDS_WORKSPACES_ROOT``, where other teams' workspaces lie (the workspace id is
    data's to choose). Checked before anything opens."""
    for key in _DATABASES:
        value = getattr(config, key)
        if value is not None and StoreLocation.parse(value).shared:
            _check_server(source, key, value)
    for key in _DATABASES:
        _keep_own_database(config, source, key)
    config.policy = str(_check_own_file(config, source, "policy", config.policy))
    config.workspaces = str(_check_own_file(config, source, "workspaces", "workspaces"))
    _check_oauth_urls(config, source)


_FETCHED = ("issuer", "jwks_uri")
"""The ``principals.oauth`` URLs the HTTP server fetches (the issuer's metadata, its keys);
``resource`` is only advertised and compared, never fetched."""


def _check_oauth_urls(config: SurfaceConfig, source: str) -> None:
    """ConfigError when a config that is data names an issuer or ``jwks_uri`` on this host's
    private network: any client sending a JWT-shaped token makes the server GET them, so data
    would choose a request from inside that network (the rule of an MCP card's url and of a
    data database's server, :func:`toolcards.core.trust.private_host`)."""
    oauth = config.principals.oauth
    if oauth is None:
        return
    for key in _FETCHED:
        url = getattr(oauth, key)
        if url is not None and private_host(url):
            raise ConfigError(
                f"{source}: principals.oauth.{key}: {url!r:.200} names a host of this host's "
                "private network, and a config that is data may not choose where the server "
                "sends requests: name it in the operator's config file"
            )


def _check_server(source: str, key: str, value: str) -> None:
    """ConfigError when the server ``value`` of ``key`` could get the host's credentials."""
    try:
        check_data_location(
            f"{key}:",
            StoreLocation.parse(value),
            None,
            who="a config that is data",
            instead="name it in the operator's config file",
        )
    except UntrustedField as exc:
        raise ConfigError(f"{source}: {exc}") from None


_SIDE_FILES = {"store": (".lock",), "audit": (), "approvals": (".grants",)}
"""The files toolcards opens for writing beside each database file."""
_JOURNALS = ("-journal", "-wal", "-shm")
"""The files SQLite opens for writing beside every database file."""


def _keep_own_database(config: SurfaceConfig, source: str, key: str) -> None:
    """The database file ``key`` opens, the derived one too (``audit.approvals.db`` beside the
    audit file, with no ``approvals:``), and the files beside it, in the config's folder; the
    config then names its real path. The stores open that path with links followed (SQLite
    opens no file otherwise): a link planted after this check, as the file or as a folder on
    the way, is followed still."""
    location = getattr(config, f"{key}_location")
    if location is None or StoreLocation.parse(location).path is None:
        return  # a server (checked above), :memory:, or no audit log
    given = getattr(config, key)
    real = _check_own_file(config, source, key, location if given is None else given)
    for side in _SIDE_FILES[key] + _JOURNALS:
        _check_own_file(config, source, key, f"{real}{side}")
    setattr(config, key, str(real))


def _check_own_file(config: SurfaceConfig, source: str, key: str, value: str) -> Path:
    """The real path of the file ``value`` of ``key``; ConfigError when it lies outside the
    config's folder (the rule of an agent spec's files,
    :func:`toolcards.stores.data_location.check_own_file`)."""
    try:
        return check_own_file(
            config.base_dir,
            value,
            f"{key}:",
            who="the config",
            instead="a config that is data keeps its files beside it (name others in the "
            "operator's config file)",
        )
    except UntrustedField as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _check_team_workspaces(config: SurfaceConfig, source: str) -> None:
    """A card without a ``workspace_id`` keeps its files in a directory named after the team:
    a team id that cannot name one is this config's error, not every call's."""
    known = CARD_TYPES.names()
    for i, card in enumerate(config.cards):
        kind = card["type"]
        if card.get("workspace_id") or kind not in known:
            continue
        if "workspace_id" not in CARD_TYPES.resolve(kind).model_fields:
            continue
        try:
            workspace_id_for(None, config)
        except ValueError as exc:
            raise ConfigError(f"{source}: team_id: cards.{i} ({kind}): {exc}") from None


def load_config(path: str | Path = DEFAULT_CONFIG) -> SurfaceConfig:
    """Read a config file; ConfigError naming the file (and field) when it is unusable."""
    path = Path(path)
    try:
        file = host_files.read_host_file(path)
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found (pass --config)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the config file is not UTF-8 text") from None
    try:
        data = load_yaml(file.text, str(path))
    except YamlError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc.detail}") from None
    # a file in a workspace (or under $TOOLCARDS_WORKSPACES_ROOT) may be an agent's: its
    # trust is refused as a client's would be (judged of the very file read, not the name)
    host = not file.data
    source = str(path) if host else f"{path} (in a workspaces root, where agents write)"
    return parse_config(data, source=source, base_dir=file.path.parent, host_written=host)


def hash_token(token: str) -> str:
    """The value to store in ``principals.tokens[].token_sha256`` for ``token``."""
    return _HASH_PREFIX + hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh random bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def _shared(location: str) -> bool:
    """Whether ``location`` is a store many processes and teams share (one error when it is
    not a location at all is the opener's to say)."""
    try:
        return StoreLocation.parse(location).shared
    except UnknownStoreScheme:
        return False
