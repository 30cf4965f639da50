"""The arguments of ``toolcards`` in an agent spec, read as data (hostile until checked).

```yaml
capabilities:
  - toolcards:
      cards: [{type: WorkspaceTool}, {type: PlanningTool, vector_store: false}]
      policy: policy.yaml          # a file (relative to the working directory) or a mapping
      identity: agent.writer       # an id (type agent), or {id, type, roles}
      audit: audit.db              # optional: where the audit rows go
      secret_scanner: true         # optional: or {action: refuse, tools: ["web_*"]}
      call_results: runs.db        # optional: durable runs run each tool call once
                                   # (or postgresql://user:password@host/db)
```

Cards load by type tag with the trust the host gave (``GovernedCards.trusting(HostTrust(...))``;
none by default): a card field that reaches the host (a stdio ``MCPTool``, ``ExecTool``'s
``mode: local``, a URL that would receive a host secret) is refused unless that trust allows
it. What may run on this host is the host's decision, never the spec's. For the same reason a
spec names no hook code: of the guardrails, only the built-in ``secret_scanner`` can be
switched on here. A store the spec names (``audit``, ``call_results``) is a file, or a database
server whose URL carries its own password and no options (the host's credentials and files,
``PGPASSWORD``, ``~/.pgpass``, a service file, never go where a spec says); a server of this
host's private network needs ``HostTrust(private_network=True)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from toolcards.core.card import ToolCard
from toolcards.core.identity import Identity
from toolcards.core.registry import CARD_TYPES, load_card
from toolcards.core.trust import HostTrust, UntrustedField, private_host
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.guardrails import ToolHook
from toolcards.governance.policy.policy import Policy
from toolcards.stores.call_results import CallResults
from toolcards.stores.errors import UnknownStoreScheme
from toolcards.stores.location import StoreLocation
from toolcards.stores.open import open_call_results
from toolcards.surfaces.config.hints import problems

IDENTITY_KEYS = frozenset({"id", "type", "roles"})
SCANNER_KEYS = frozenset({"action", "tools"})


def spec_cards(data: Any, trust: HostTrust | None = None) -> list[ToolCard]:
    """The cards of the spec (a list of tagged mappings), loaded with the host's ``trust``;
    a refused card is one line naming it."""
    if not isinstance(data, list):
        raise ValueError("cards must be a list of tagged mappings ({type: WorkspaceTool})")
    cards = []
    for i, item in enumerate(data):
        try:
            cards.append(load_card(item, trust=trust))
        except ValidationError as exc:
            kind = CARD_TYPES.resolve(str(item.get("type")))
            raise ValueError(
                f"toolcards cards[{i}] ({kind.card_type}): {problems(exc, kind)}"
            ) from None
    return cards


def spec_policy(data: Any) -> Policy | None:
    """A policy file path, an inline policy mapping, or None."""
    if data is None:
        return None
    if isinstance(data, Mapping):
        return Policy.from_dict(data)
    if isinstance(data, str) and data and "\n" not in data:
        path = Path(data)
        if not path.is_file():
            raise ValueError(f"policy file {data!r} not found (relative to {Path.cwd()})")
        return Policy.from_yaml(path)
    raise ValueError("policy must be a file path or a mapping of rules")


def spec_identity(data: Any) -> Identity | None:
    """An identity id (an agent), a mapping ``{id, type, roles}``, or None."""
    if data is None:
        return None
    if isinstance(data, str):
        return Identity(data, type="agent")
    if isinstance(data, Mapping):
        unknown = sorted(set(data) - IDENTITY_KEYS)
        if unknown:
            raise ValueError(f"identity takes id, type and roles, not {', '.join(unknown)}")
        roles = data.get("roles", ())
        if not isinstance(roles, list | tuple) or not all(isinstance(r, str) for r in roles):
            raise ValueError("identity roles must be a list of names")
        return Identity(str(data.get("id", "")), type=str(data.get("type", "agent")), roles=roles)
    raise ValueError("identity must be an id or a mapping {id, type, roles}")


def spec_audit(data: Any, trust: HostTrust | None, team: str | None = None) -> AuditLog | None:
    """An audit database (a path, or a server :func:`spec_store` lets through) of ``team``,
    or None."""
    if data is None:
        return None
    return AuditLog(spec_store("audit", data, trust, team).target, team_id=team)


def spec_hooks(data: Any) -> list[ToolHook]:
    """The spec's guardrails: ``secret_scanner`` true, false/None, or ``{action, tools}``."""
    if data is None or data is False:
        return []
    from toolcards.governance.redaction.scanner import SecretScanner

    if data is True:
        return [SecretScanner()]
    if not isinstance(data, Mapping):
        raise ValueError("secret_scanner must be true, false or a mapping {action, tools}")
    unknown = sorted(set(data) - SCANNER_KEYS)
    if unknown:
        raise ValueError(f"secret_scanner takes action and tools, not {', '.join(unknown)}")
    action = data.get("action", "redact")
    if action not in ("redact", "refuse"):
        raise ValueError("secret_scanner action must be 'redact' or 'refuse'")
    tools = data.get("tools")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools)
    ):
        raise ValueError("secret_scanner tools must be a list of tool globs")
    return [SecretScanner(action=action, tools=tools)]


def spec_call_results(
    data: Any, trust: HostTrust | None, team: str | None = None
) -> CallResults | None:
    """A durable runs' call-results store of ``team`` at any store location :func:`spec_store`
    lets through (opened by its backend), or None."""
    if data is None:
        return None
    return open_call_results(spec_store("call_results", data, trust, team), team)


def spec_store(
    field: str, data: Any, trust: HostTrust | None, team: str | None = None
) -> StoreLocation:
    """The store location a spec names in ``field``: a file path (relative to the working
    directory), ``:memory:``, or a server URL of a shared backend (PostgreSQL) that carries its
    own password and no options, on a public host unless ``trust`` allows the private network.
    A refusal is one line that never shows a password."""
    if not isinstance(data, str) or not data or "\n" in data:
        raise ValueError(f"{field} must be a database file path or a database URL")
    try:
        where = StoreLocation.parse(data)
    except UnknownStoreScheme as exc:
        raise ValueError(f"{field}: {exc}") from None
    if not where.shared:
        return where
    if not team:
        raise ValueError(
            f"{field}: a shared database holds many teams; name the spec's team (team: <name>)"
        )
    parts = urlsplit(where.target)
    if parts.password is None or parts.query:
        raise UntrustedField(
            f"toolcards {field} {where.display!r} names a database without its own password or "
            "with options, and a spec may not choose where the host's credentials and files "
            "(PGPASSWORD, ~/.pgpass, a service or key file) go: write user:password@host/db, "
            "or open the store in code"
        )
    if private_host(where.target) and not HostTrust.of(trust).private_network:
        raise UntrustedField(
            f"toolcards {field} {where.display!r} names a host of this host's private network, "
            "and a spec may not choose that: the host grants it with "
            "GovernedCards.trusting(HostTrust(private_network=True))"
        )
    return where
