"""The arguments of ``toolcards`` in an agent spec, read as data (hostile until checked).

```yaml
capabilities:
  - toolcards:
      cards: [{type: WorkspaceTool}, {type: PlanningTool, vector_store: false}]
      policy: policy.yaml          # a file (relative to this spec file) or a mapping
      identity: agent.writer       # an id (type agent), or {id, type, roles}
      audit: audit.db              # optional: where the audit rows go
      secret_scanner: true         # optional: or {action: refuse, tools: ["web_*"]}
      call_results: runs.db        # optional: durable runs run each tool call once
                                   # (or postgresql://user:password@host/db)
```

The files a spec names (``policy``, ``audit``, ``call_results``) are read against the folder
of the spec file when the spec comes from ``Agent.from_file`` (the same spec loaded from another
working directory runs under the same policy), and must lie in that folder, links followed: a
spec is data, and the host's files (its audit trail, its stores, its policy) are not data's to
write or read. A spec given as a mapping has no folder, so it names no file (``:memory:`` and
an inline policy only). Every error names the key as the YAML spells it, and an unknown key
names the closest known one (``identiy``: did you mean identity?).

pydantic-ai reads the spec with plain PyYAML, which hands over an aliased value as one shared
object: a 1 KB spec can stand for billions of values. :func:`spec_bounded` holds every value
to the bounds of the policy files' loader before anything reads it.

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

import difflib
import inspect
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_ai import Agent

from toolcards.core.card import ToolCard
from toolcards.core.identity import Identity
from toolcards.core.registry import CARD_TYPES, load_card
from toolcards.core.trust import HostTrust, UntrustedField
from toolcards.core.yaml_safe import check_loaded
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.guardrails import ToolHook
from toolcards.governance.policy.policy import Policy
from toolcards.governance.redaction.scanner import SecretScanner
from toolcards.stores.call_results import CallResults
from toolcards.stores.data_location import check_data_location, check_own_file
from toolcards.stores.errors import UnknownStoreScheme
from toolcards.stores.location import StoreLocation
from toolcards.stores.open import open_call_results
from toolcards.surfaces.config.hints import problems

SPEC_KEYS = ("cards", "policy", "identity", "audit", "secret_scanner", "call_results", "team")
"""The keys of ``toolcards`` in an agent spec, in the order the docs list them."""
IDENTITY_KEYS = ("id", "type", "roles")
SCANNER_KEYS = ("action", "tools")
_CARDS = "a list of tagged mappings: [{type: WorkspaceTool}]"
_FROM_FILE = Agent.from_file.__func__.__code__  # type: ignore[attr-defined]


def known_keys(given: Iterable[Any], known: Iterable[str], where: str) -> None:
    """ValueError naming the first key of ``given`` that is not ``known``, with the closest
    known one, in the spec's words (``where`` names the mapping)."""
    names = list(known)
    for key in given:
        if key in names:
            continue
        shown = key if isinstance(key, str) else repr(key)
        close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"{where}: unknown key {shown!r}{hint}; its keys are {', '.join(names)}")


def spec_bounded(**args: Any) -> None:
    """ValueError naming the first of the spec's ``args`` that expands, through YAML aliases,
    past what a policy file may (see :mod:`toolcards.core.yaml_safe`)."""
    for key, value in args.items():
        check_loaded(value, f"toolcards {key}")


def spec_folder() -> Path | None:
    """The folder of the spec file ``Agent.from_file`` is loading in this call stack (None:
    the spec was not loaded from a file here). pydantic-ai passes a capability no more than its
    own arguments, so the file is found as the ``path`` that ``Agent.from_file`` was given."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code is _FROM_FILE:
                path = frame.f_locals.get("path")
                return Path(path).absolute().parent if isinstance(path, str | Path) else None
            frame = frame.f_back
        return None
    finally:
        del frame


class SpecPaths:
    """Where a spec's files lie: in its file's folder (None: a spec given as a mapping, which
    has no folder and so names no file)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def path(self, key: str, value: Any, what: str) -> Path:
        """The real path of ``value`` (a path string) in the folder; ValueError naming ``key``
        when it is no path, or lies elsewhere (links followed), or the spec has no folder."""
        if not isinstance(value, str) or not value or "\n" in value or "\x00" in value:
            raise ValueError(f"toolcards {key}: must be {what}")
        if self.folder is None:
            raise UntrustedField(
                f"toolcards {key}: {value!r:.200} is a file, and a spec given as a mapping has "
                "no folder to keep files in: load it with Agent.from_file, or open it in code"
            )
        return check_own_file(
            self.folder,
            value,
            f"toolcards {key}:",
            who="the spec file",
            instead="a spec keeps its files beside it (the host opens others in code)",
        )

    def where(self) -> str:
        return f"the spec file's folder {self.folder}"


def spec_cards(data: Any, trust: HostTrust | None = None) -> list[ToolCard]:
    """The cards of the spec (a list of tagged mappings), loaded with the host's ``trust``;
    a refused card is one line naming it."""
    if data is None:
        raise ValueError(f"toolcards: needs cards ({_CARDS})")
    if not isinstance(data, list):
        raise ValueError(f"toolcards cards: must be {_CARDS}")
    cards = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), str):
            raise ValueError(f"toolcards cards[{i}]: must be a mapping with a type ({_CARDS})")
        try:
            kind = CARD_TYPES.resolve(item["type"])
        except ValueError:
            names = CARD_TYPES.names()
            close = difflib.get_close_matches(item["type"], names, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(
                f"toolcards cards[{i}].type: unknown card type {item['type']!r}{hint}"
            ) from None
        try:
            cards.append(load_card(dict(item), trust=trust))
        except ValidationError as exc:
            raise ValueError(
                f"toolcards cards[{i}] ({kind.card_type}): {problems(exc, kind)}"
            ) from None
    return cards


def spec_policy(data: Any, paths: SpecPaths) -> Policy | None:
    """A policy file path, an inline policy mapping, or None."""
    if data is None:
        return None
    if isinstance(data, Mapping):
        return Policy.from_dict(data)
    path = paths.path("policy", data, "a file path or a mapping of rules")
    if not path.is_file():
        raise ValueError(f"toolcards policy: file {data!r} not found (relative to {paths.where()})")
    return Policy.from_yaml(path)


def spec_identity(data: Any) -> Identity | None:
    """An identity id (an agent), a mapping ``{id, type, roles}``, or None."""
    if data is None:
        return None
    if isinstance(data, str):
        return Identity(data, type="agent")
    if isinstance(data, Mapping):
        known_keys(data, IDENTITY_KEYS, "toolcards identity")
        roles = data.get("roles", ())
        if not isinstance(roles, list | tuple) or not all(isinstance(r, str) for r in roles):
            raise ValueError("toolcards identity.roles: must be a list of names")
        ident, kind = data.get("id", ""), data.get("type", "agent")
        for key, value in (("id", ident), ("type", kind)):
            if not isinstance(value, str):
                raise ValueError(f"toolcards identity.{key}: must be a string")
        return Identity(ident, type=kind, roles=roles)
    raise ValueError("toolcards identity: must be an id or a mapping {id, type, roles}")


def spec_audit(
    data: Any, trust: HostTrust | None, team: str | None = None, paths: SpecPaths | None = None
) -> AuditLog | None:
    """An audit database (a path, or a server :func:`spec_store` lets through) of ``team``,
    or None."""
    if data is None:
        return None
    return AuditLog(spec_store("audit", data, trust, team, paths).target, team_id=team)


def spec_hooks(data: Any) -> list[ToolHook]:
    """The spec's guardrails: ``secret_scanner`` true, false/None, or ``{action, tools}``."""
    if data is None or data is False:
        return []

    if data is True:
        return [SecretScanner()]
    if not isinstance(data, Mapping):
        raise ValueError(
            "toolcards secret_scanner: must be true, false or a mapping {action, tools}"
        )
    known_keys(data, SCANNER_KEYS, "toolcards secret_scanner")
    action = data.get("action", "redact")
    if action not in ("redact", "refuse"):
        raise ValueError("toolcards secret_scanner.action: must be redact or refuse")
    tools = data.get("tools")
    if tools is not None and (
        not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools)
    ):
        raise ValueError("toolcards secret_scanner.tools: must be a list of tool globs")
    return [SecretScanner(action=action, tools=tools)]


def spec_call_results(
    data: Any, trust: HostTrust | None, team: str | None = None, paths: SpecPaths | None = None
) -> CallResults | None:
    """A durable runs' call-results store of ``team`` at any store location :func:`spec_store`
    lets through (opened by its backend), or None."""
    if data is None:
        return None
    return open_call_results(spec_store("call_results", data, trust, team, paths), team)


def spec_store(
    field: str,
    data: Any,
    trust: HostTrust | None,
    team: str | None = None,
    paths: SpecPaths | None = None,
) -> StoreLocation:
    """The store location a spec names in ``field``: a file in the spec file's folder (see
    :class:`SpecPaths`), ``:memory:``, or a server URL of a shared backend
    (PostgreSQL) that carries its own (non-empty) password and no options, on one host
    (never a list, never a socket path) that is public unless ``trust`` allows the private
    network.
    A refusal is one line that never shows a password."""
    if not isinstance(data, str) or not data or "\n" in data:
        raise ValueError(f"{field} must be a database file path or a database URL")
    try:
        where = StoreLocation.parse(data)
    except UnknownStoreScheme as exc:
        raise ValueError(f"{field}: {exc}") from None
    if not where.shared:
        if where.path is None:
            return where
        own = paths or SpecPaths(None)
        return StoreLocation.parse(own.path(field, data, "a database file path or URL"))
    if not team:
        raise ValueError(
            f"{field}: a shared database holds many teams; name the spec's team (team: <name>)"
        )
    check_data_location(
        f"toolcards {field}",
        where,
        trust,
        who="a spec",
        instead="open the store in code",
        grant="the host grants it with GovernedCards.trusting(HostTrust(private_network=True))",
    )
    return where
