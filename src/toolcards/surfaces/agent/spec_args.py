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
```

Relative paths (``policy``, ``audit``, ``call_results``) are read against the folder of the
spec file when the spec comes from ``Agent.from_file`` (the same spec loaded from another
working directory runs under the same policy), against the working directory when the spec is
a mapping built in code. Every error names the key as the YAML spells it, and an unknown key
names the closest known one (``identiy``: did you mean identity?).

Cards load by type tag with the trust the host gave (``ToolCards.trusting(HostTrust(...))``;
none by default): a card field that reaches the host (a stdio ``MCPTool``, ``ExecTool``'s
``mode: local``, a URL that would receive a host secret) is refused unless that trust allows
it. What may run on this host is the host's decision, never the spec's. For the same reason a
spec names no hook code: of the guardrails, only the built-in ``secret_scanner`` can be
switched on here.
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
from toolcards.core.trust import HostTrust
from toolcards.governance.audit.log import AuditLog
from toolcards.governance.guardrails import ToolHook
from toolcards.governance.policy.policy import Policy
from toolcards.stores.call_results import SqliteCallResults
from toolcards.surfaces.config.hints import problems

SPEC_KEYS = ("cards", "policy", "identity", "audit", "secret_scanner", "call_results")
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
    """Where a spec's relative paths are read from: its file's folder, else the working
    directory."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def path(self, key: str, value: Any, what: str) -> Path:
        """``value`` (a path string) against the folder; ValueError naming ``key``."""
        if not isinstance(value, str) or not value or "\n" in value or "\x00" in value:
            raise ValueError(f"toolcards {key}: must be {what}")
        path = Path(value).expanduser()
        if path.is_absolute() or self.folder is None:
            return path
        return self.folder / path

    def where(self) -> str:
        return f"the spec file's folder {self.folder}" if self.folder else f"{Path.cwd()}"


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
        return Identity(str(data.get("id", "")), type=str(data.get("type", "agent")), roles=roles)
    raise ValueError("toolcards identity: must be an id or a mapping {id, type, roles}")


def spec_audit(data: Any, paths: SpecPaths) -> AuditLog | None:
    """An audit database path, or None."""
    if data is None:
        return None
    return AuditLog(paths.path("audit", data, "a database file path"))


def spec_hooks(data: Any) -> list[ToolHook]:
    """The spec's guardrails: ``secret_scanner`` true, false/None, or ``{action, tools}``."""
    if data is None or data is False:
        return []
    from toolcards.governance.redaction.scanner import SecretScanner

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


def spec_call_results(data: Any, paths: SpecPaths) -> SqliteCallResults | None:
    """A durable runs' call-results database path, or None."""
    if data is None:
        return None
    return SqliteCallResults(paths.path("call_results", data, "a database file path"))
