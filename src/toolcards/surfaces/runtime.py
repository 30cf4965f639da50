"""The one place a surface gets its executor: the MCP server and the CLI both build a
:class:`SurfaceRuntime`, so a config gives one team, one registry, one policy and one audit
trail whichever surface a call comes through. What only one surface serves is built by that
surface from the runtime (the MCP server's prompts, resources and tasks:
``toolcards.surfaces.mcp_server.options``).

An ``MCPTool`` card contributes a toolset rather than tool functions; its tools are known only
once the server is asked. :func:`toolset_registry` asks once, when the runtime is built, and
turns every tool found into a governed capability (the same policy, audit and approvals as the
card tools). A call made outside a running server connects for that call; a running server
keeps each toolset connected while it serves (:func:`toolcards.surfaces.serving.connected`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from toolcards.core.factory import ToolFactory
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.core.threads import background_thread
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import Executor
from toolcards.governance.guardrails import ToolHook
from toolcards.governance.policy.parse import PolicyError
from toolcards.governance.policy.policy import Policy
from toolcards.runtime.system import ActorSystemUnavailable
from toolcards.stores.errors import DatabaseUnavailable, SchemaTooNew, StoreError, StoreLockedError
from toolcards.surfaces.config import ConfigError, SurfaceConfig, load_config
from toolcards.surfaces.config.shared import open_shared
from toolcards.surfaces.http.auth import HttpAuth
from toolcards.surfaces.http.limits import HttpLimits
from toolcards.surfaces.http.tokens import TokenTable
from toolcards.surfaces.outcomes import ExitCode
from toolcards.tools._common.workspace_dir import workspace_dir

if TYPE_CHECKING:
    from pydantic_ai.toolsets import AbstractToolset

    from toolcards.governance.approvals.broker import ApprovalBroker
    from toolcards.runtime.system import ActorSystem
    from toolcards.runtime.team import Team
    from toolcards.stores.base import BudgetStore, RateLimits

ApprovalMode = Literal["approver", "client"]


@dataclass
class SurfaceRuntime:
    """An executor with the identities a surface vouches for. Close it when done (it owns the
    team and the audit log it was built with)."""

    executor: Executor
    local: Identity = ANONYMOUS
    tokens: TokenTable = field(default_factory=TokenTable)
    team: Team | None = None
    config: SurfaceConfig | None = None
    _owned: list[Callable[[], Any]] = field(default_factory=list, repr=False)
    approval: ApprovalMode = "approver"
    """Who decides approval-required calls: an approver principal out of band
    (``"approver"``), or the calling client (``"client"``: by elicitation over MCP, at the
    prompt on a terminal)."""
    approval_timeout: float = 300.0
    http_limits: HttpLimits = field(default_factory=HttpLimits)
    """What one HTTP client may make the server hold (the config's ``http:``)."""
    factory: ToolFactory | None = None
    """The bound cards the registry was built from (None: no cards)."""
    tools: list[Callable[..., Any]] = field(default_factory=list)
    """The plain tool callables the registry was built from (the config's ``tools:``)."""

    @property
    def toolsets(self) -> list[AbstractToolset[Any]]:
        """Card-contributed toolsets (MCP servers) whose tools are served: a server keeps them
        connected while it runs."""
        return self.factory.get_toolsets() if self.factory is not None else []

    @property
    def registry(self) -> CapabilityRegistry:
        return self.executor.registry

    @property
    def policy(self) -> Policy:
        return self.executor.policy

    @property
    def audit(self) -> AuditLog | None:
        return self.executor.audit

    def visible_to(self, identity: Identity) -> list[str]:
        """The tool ids ``identity`` may see (the policy's listing filter)."""
        return self.executor.visible_to(identity)

    def http_auth(self) -> HttpAuth:
        """Who an HTTP request comes from: this runtime's tokens, and the JWTs of the config's
        ``principals.oauth`` issuer when it names one."""
        oauth = self.config.principals.oauth if self.config is not None else None
        return HttpAuth(self.tokens, oauth)

    def has_approver(self, besides: Identity | None = None) -> bool:
        """True when a principal this runtime vouches for (the local one or a token's) holds
        the approver role: someone can decide a waiting call. ``besides``: the caller, who
        cannot approve its own call, counts for none of them."""
        role = self.executor.approvals.approver_role
        identities = [self.local, *(identity for _, identity in self.tokens.entries)]
        caller = besides.id if besides is not None else None
        return any(role in identity.roles and identity.id != caller for identity in identities)

    def workspaces(self) -> dict[str, Path]:
        """Workspace id -> directory, for the configured WorkspaceTool cards."""
        if self.config is None:
            return {}
        found: dict[str, Path] = {}
        root = self.config.workspaces_root
        for wid in self.config.workspace_ids():
            try:
                found[wid] = workspace_dir(wid, None, create=False, root=root)
            except ValueError:
                continue
        return found

    def own(self, closer: Callable[[], Any]) -> None:
        """Call ``closer`` when this runtime closes (before what it was built with)."""
        self._owned.append(closer)

    def close(self) -> None:
        """Flush and close the audit log, stop the team. Idempotent."""
        owned, self._owned = self._owned, []
        for closer in reversed(owned):
            closer()

    def __enter__(self) -> SurfaceRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- builders ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, *, with_team: bool | None = None) -> SurfaceRuntime:
        """Build from a config file (see :mod:`toolcards.surfaces.config`)."""
        return cls.from_config(load_config(path), with_team=with_team)

    @classmethod
    def from_config(
        cls,
        config: SurfaceConfig,
        *,
        with_team: bool | None = None,
        durability: Literal["batched", "sync"] = "batched",
    ) -> SurfaceRuntime:
        """Team (when there are cards, or ``with_team``), registry, policy, audit, approvals,
        rate limits (shared through the store's database with a PostgreSQL store), executor."""
        try:
            policy = Policy.from_yaml(config.policy_path)
        except PolicyError as exc:
            raise ConfigError(f"{config.source}: policy: {exc}") from None
        if config.system != "pykka":  # a missing extra is said before any store is reached
            require_modules("ray")
        cards = config.load_cards()
        for card in cards:  # a configured card without its extra would serve no tools
            require_modules(*card.missing_modules())
        tools = [tool for spec in config.tools for tool in _import_tools(spec, config.source)]
        hooks = [hook for spec in config.hooks for hook in _import_hooks(spec, config.source)]
        owned: list[Callable[[], Any]] = []
        team = None
        try:
            if cards or with_team:
                system = config.actor_system()
                if not isinstance(system, str):  # a system built here is released here
                    owned.append(system.shutdown)
                team = _open_team(config, system)
                owned.append(team.stop)
            factory = _bind(team, cards, config) if team and cards else None
            registry = _registry(factory, tools)
            shared = open_shared(config, durability=durability)
            owned.append(shared.close)
            executor = _executor(
                registry,
                policy,
                shared.audit,
                config.timeout,
                approvals=shared.approvals,
                rate_limiter=shared.rate_limiter,
                hooks=hooks,
                budgets=shared.budgets,
            )
        except BaseException:
            for closer in reversed(owned):
                closer()
            raise
        tokens = TokenTable.from_digests(
            (t.token_sha256, t.identity()) for t in config.principals.tokens
        )
        return cls(
            executor, config.local_identity, tokens, team, config, owned,
            config.approval, config.approval_timeout, config.http, factory, tools,
        )  # fmt: skip

    @classmethod
    def build(
        cls,
        source: CapabilityRegistry | ToolFactory | Sequence[Callable[..., Any]],
        *,
        policy: Policy | str | Path,
        identity: Identity | None = None,
        tokens: TokenTable | dict[str, Identity] | None = None,
        audit: AuditLog | str | Path | None = None,
        timeout: float | None = 60.0,
        approval: ApprovalMode = "approver",
        approval_timeout: float = 300.0,
    ) -> SurfaceRuntime:
        """For registries built in code: a registry, a ToolFactory or plain tool callables.
        ``tokens`` maps plain bearer tokens to identities (hashed here). ``approval``: who
        decides approval-required MCP calls (see :attr:`approval`)."""
        owned: list[Callable[[], Any]] = []
        if not isinstance(policy, Policy):
            policy = Policy.from_yaml(policy)
        if audit is not None and not isinstance(audit, AuditLog):
            audit = AuditLog(audit)
            owned.append(audit.close)
        if isinstance(tokens, dict):
            tokens = TokenTable.from_tokens(tokens.items())
        executor = _executor(as_registry(source), policy, audit, timeout)
        factory, plain = None, []
        if isinstance(source, ToolFactory):
            factory = source
        elif not isinstance(source, CapabilityRegistry):
            plain = list(source)
        return cls(
            executor, identity or ANONYMOUS, tokens or TokenTable(), _owned=owned,
            approval=approval, approval_timeout=approval_timeout, factory=factory, tools=plain,
        )  # fmt: skip


def opening_error(exc: BaseException, config: Path) -> tuple[str, ExitCode] | None:
    """The one line and exit code a command line says when opening the runtime of the config
    file ``config`` raised ``exc`` (a config, store, database or cluster problem), or None
    for anything else."""
    if isinstance(exc, ConfigError):
        return str(exc), ExitCode.USAGE
    if isinstance(exc, StoreLockedError):
        return f"{exc} (is `toolcards serve` running on this config?)", ExitCode.FAILED
    if isinstance(exc, StoreError):
        return f"{exc} (store: in {config})", ExitCode.FAILED
    if isinstance(exc, sqlite3.Error):  # the audit log's file
        try:
            where = (
                f"cannot open the audit log {load_config(config).audit_path} (audit: in {config})"
            )
        except ConfigError:
            where = "cannot open the audit log"
        return f"{where}: {exc}; give a file path in a writable folder", ExitCode.FAILED
    if isinstance(exc, DatabaseUnavailable | ActorSystemUnavailable | SchemaTooNew):
        return str(exc), ExitCode.FAILED
    return None


def as_registry(
    source: CapabilityRegistry | ToolFactory | Sequence[Callable[..., Any]],
) -> CapabilityRegistry:
    if isinstance(source, CapabilityRegistry):
        return source
    if isinstance(source, ToolFactory):
        return _registry(source, [])
    return CapabilityRegistry.from_tools(list(source))


def require_modules(*names: str) -> None:
    """ModuleNotFoundError for the first of ``names`` that cannot be imported (the command
    line names its extra, see :mod:`toolcards.surfaces.cli.extras`); nothing is imported
    here."""
    for name in names:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _open_team(config: SurfaceConfig, system: str | ActorSystem) -> Team:
    """The config's team with its recorded tool actors restarted (what they read back from
    the store under the operator's ``trust:``), or a new one (on a PostgreSQL store, other
    processes may hold it at the same time)."""
    from toolcards.runtime.team import Team  # lazy: ~3x python -c pass; cardless runtimes skip it

    team_id, store, trust = config.team_id, config.store_location, config.host_trust()
    if store != ":memory:":
        try:
            return Team.resume(team_id, store=store, system=system, trust=trust)
        except LookupError:
            pass
    return Team(team_id, store=store, system=system, trust=trust)


def _bind(team: Team, cards: list[Any], config: SurfaceConfig) -> ToolFactory:
    """The config's cards bound for its member; a ConfigError when the team refuses them (a
    card whose settings differ from its tool actor's recorded ones, a missing dependency):
    the config is what has to change, so it is one line, not a traceback."""
    try:
        return team.bind(cards, member=config.member_name)
    except ValueError as exc:
        raise ConfigError(f"{config.source}: cards: {exc}") from None


def _executor(
    registry: CapabilityRegistry,
    policy: Policy,
    audit: AuditLog | None,
    timeout: float | None,
    *,
    approvals: ApprovalBroker | None = None,
    rate_limiter: RateLimits | None = None,
    hooks: Sequence[ToolHook] = (),
    budgets: BudgetStore | None = None,
) -> Executor:
    return Executor(
        registry,
        policy,
        audit=audit,
        approvals=approvals,
        rate_limiter=rate_limiter,
        timeout=timeout,
        hooks=hooks,
        budgets=budgets,
    )


def _registry(factory: ToolFactory | None, tools: list[Callable[..., Any]]) -> CapabilityRegistry:
    """The cards' and the plain tools' capabilities (built on first use: listing them does
    not load pydantic-ai). A remote server's tool never takes a plain tool's name."""
    parts = []
    try:
        if factory is not None:
            factory.reserve(fn.__name__ for fn in tools)
            parts.append(CapabilityRegistry.from_factory(factory))
            toolsets = factory.get_toolsets()
            if toolsets:
                parts.append(toolset_registry(toolsets))
        if tools:
            parts.append(CapabilityRegistry.from_tools(tools))
        return CapabilityRegistry.combine(parts)
    except ValueError as exc:
        raise ConfigError(f"two tools share a name: {exc}") from None


def toolset_registry(toolsets: Sequence[AbstractToolset[Any]]) -> CapabilityRegistry:
    """Capabilities of every tool of ``toolsets``, listed now (each toolset connects for the
    listing and closes again). A server that cannot be reached lists no tools: its toolset
    logs why."""
    from pydantic_ai.toolsets import CombinedToolset  # lazy: pydantic-ai, ~1 s; MCPTool cards only

    combined = CombinedToolset(list(toolsets))
    found: list[CapabilityRegistry] = []
    failed: list[BaseException] = []

    def list_them() -> None:  # its own event loop, whether or not the caller runs one
        try:
            found.append(anyio.run(CapabilityRegistry.from_toolset, combined))
        except BaseException as exc:
            failed.append(exc)

    worker = background_thread(list_them, name="toolcards-list-toolsets", daemon=False)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]
    return found[0]


def imported(spec: str, source: str, field: str = "tools") -> list[Any]:
    """What the config entry ``spec`` (``module:name``) of ``field`` names, as a list (a
    list or tuple value as its items); ConfigError when it cannot be imported."""
    module_name, _, attr = spec.partition(":")
    if not module_name or module_name.startswith(".") or not attr:
        why = "give 'module:attribute' (a module by its full name)"
        raise ConfigError(f"{source}: {field}: {spec!r}: {why}")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        hint = ""
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if missing and f"{module_name}.".startswith(f"{missing}."):  # the module itself
            hint = (
                f" (the module is imported by name: install its package, or run with "
                f"PYTHONPATH=<the folder holding {module_name.partition('.')[0]}.py>)"
            )
        raise ConfigError(f"{source}: {field}: cannot import {spec!r}: {exc}{hint}") from None
    except Exception as exc:  # the module's own code: a typo, or what it raised when run
        raise ConfigError(f"{source}: {field}: cannot import {spec!r}: {_raised(exc)}") from None
    return list(value) if isinstance(value, list | tuple) else [value]


def _raised(exc: Exception) -> str:
    """``exc`` in one line: its type and message, and where a SyntaxError is (file:line)."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}:{exc.lineno})"
    return f"{type(exc).__name__}: {exc}"


def _import_tools(spec: str, source: str) -> Iterable[Callable[..., Any]]:
    items = imported(spec, source)
    for item in items:
        if not callable(item):
            raise ConfigError(f"{source}: tools: {spec!r} holds {item!r:.60}, not a callable")
    return items


def _import_hooks(spec: str, source: str) -> list[ToolHook]:
    items: list[ToolHook] = imported(spec, source, "hooks")
    for item in items:
        if not isinstance(item, ToolHook):
            raise ConfigError(f"{source}: hooks: {spec!r} holds {item!r:.60}, not a ToolHook")
    return items
