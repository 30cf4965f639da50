"""Errors shared by every layer, and the tree of every exception toolcards defines.

``except ToolcardsError`` catches each of them. Two branches say what calling again can do:
``RetriableError``, the call itself is wrong (the model calls again with other arguments);
``TransientError``, something the call needs is down right now (the database, the store) and
the same call may succeed later. Both reach a model as a retry carrying their message.
``ActorUnavailable`` (an actor not running: restarting, stopped) is transient too; the
team tool's hire and fire report it as not done. A second base in parentheses is
kept because callers catch that built-in type. The module each class lives in is on the right
(under ``toolcards.``)::

    ToolcardsError                              core.errors
    ├── RetriableError                          core.errors
    │   ├── RgPatternError                      tools.workspace.grep
    │   └── UnstorableText                      stores.errors
    ├── TransientError                          core.errors
    │   ├── DatabaseUnavailable                 stores.errors
    │   │   ├── StoreUnavailable                stores.errors
    │   │   └── DatabaseBusy                    stores.errors
    │   ├── ActorUnavailable                    core.actors
    │   └── ActorTimeout (TimeoutError)         core.actors
    ├── ToolNotConfigured                       core.errors
    ├── ToolObserverGone                        core.errors
    ├── CommandNotRecognized                    core.errors
    ├── UntrustedField (ValueError)             core.trust
    ├── ViewNotFound (LookupError)              core.views
    ├── StoreError                              stores.errors
    │   └── UnknownStoreScheme                  stores.errors
    ├── StoreLockedError                        stores.errors
    ├── StoreClosedError                        stores.errors
    ├── DatabaseClosed                          stores.errors
    ├── SchemaTooNew                            stores.errors
    ├── TooManyTasks                            stores.tasks
    ├── TooManyApprovals                        stores.governance
    ├── YamlError (ValueError)                  core.yaml_safe
    ├── PolicyError (ValueError)                governance.policy.parse
    ├── ApprovalError (PermissionError)         governance.approvals.types
    │   └── EditRefusedError                    governance.approvals.types
    ├── EditRefused (ValueError)                governance.approvals.edits
    ├── ResultTooDeep                           governance.redaction.scanner
    ├── OpaqueResult                            governance.redaction.scanner
    ├── ApprovalTimedOut                        governance.approvals.types
    ├── ApprovalAsked                           governance.executor.runner
    ├── GrantError (ValueError)                 governance.approvals.grants
    ├── BudgetExceeded (UsageLimitExceeded)     governance.toolset.budget
    ├── InvalidArguments (ValueError)           governance.capability
    ├── ActorSystemUnavailable                  runtime.system
    ├── DeferredFailed                          runtime.deferred
    ├── ModelUnavailable (ValueError)           runtime.profiles
    ├── TeamStopped                             runtime.team
    ├── UnknownActorTag (LookupError)           runtime.tool_actor
    ├── AccessRefused (LookupError)             tools.workspace.access
    ├── AmbiguousPattern                        tools.workspace.regex_size
    ├── BackendUnavailable (RuntimeError)       tools.exec.backends.base
    ├── LimitUnavailable (RuntimeError)         tools.exec.limits
    ├── OAuthError (RuntimeError)               tools.mcp.oauth_urls
    ├── ListingTooLarge                         tools.mcp.toolset
    ├── Refused                                 tools.mcp.server_requests
    ├── SearchError                             tools.search.client
    ├── URLRefused (ValueError)                 tools._common.urls
    ├── EmbeddingError                          tools.vector_store.base
    ├── VectorExtraMissing (ImportError)        tools.vector_store.base
    ├── QdrantAnswerRefused                     tools.vector_store.qdrant_index
    ├── ConfigError (ValueError)                surfaces.config.model
    ├── ArgsError (ValueError)                  surfaces.cli.args
    ├── PortUnavailable (OSError)               surfaces.http.ports
    ├── InvalidToken                            surfaces.http.tokens
    │   ├── InsufficientScope                   surfaces.http.oauth
    │   └── KeysUnavailable                     surfaces.http.jwks
    ├── Unauthorized                            surfaces.http.auth
    ├── SignInRefused                           surfaces.dashboard.sessions
    ├── ResourceNotFound (LookupError)          surfaces.mcp_server.resource_sources
    ├── RegistrationError (ValueError)          bridges.apcore.register
    └── DemoError                               demo.state

``tests/core/test_error_tree.py`` checks this drawing against the classes.
"""

from __future__ import annotations


class ToolcardsError(Exception):
    """Base class of every exception toolcards defines (``except ToolcardsError`` catches
    them all); the tree is drawn at the top of ``toolcards/core/errors.py``."""


class RetriableError(ToolcardsError):
    """A failure the model can fix by calling again with different arguments.

    Surfaces turn it into a retry prompt (pydantic-ai ``ModelRetry``); it never ends a run.
    """


class TransientError(ToolcardsError):
    """Something the call needs is down right now (the database cannot be reached, the
    connection was lost); the same call may succeed later, and nothing of it was applied.

    Surfaces turn it into a retry prompt carrying the message, as for :class:`RetriableError`,
    but the arguments were not at fault.
    """


class ToolNotConfigured(ToolcardsError):
    """The tool cannot run as configured (no API key, a rejected credential). The call's
    outcome is ``error`` on every surface; the message, which names what to set, is safe to
    show and reaches the caller as ``error: <message>``. Calling again will not help."""


class ToolObserverGone(ToolcardsError):
    """The agent or team member that owned a card has been garbage-collected or stopped."""


class CommandNotRecognized(ToolcardsError):
    """A slash-command names no registered command; nothing was run."""

    def __init__(self, name: str, known: list[str] | None = None) -> None:
        self.name = name
        self.known = sorted(known or [])
        hint = f" Known commands: {', '.join(self.known)}." if self.known else ""
        super().__init__(f"Command '{name}' is not recognized.{hint}")
