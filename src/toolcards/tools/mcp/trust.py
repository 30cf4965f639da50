"""Which stdio MCP servers a card loaded from data may start: the host program's decision.

A stdio ``MCPTool`` runs a program on this host. A card built in code by the host program is
trusted; a card read from data (``load_cards``, a config file, a stored profile) may start
only a command the host allowed, with only the environment names the host allowed:

```python
load_cards(data, trust=MCPTrust(["uvx mcp-server-fetch", "/opt/mcp/bin/crm --port *"],
                                env=["CRM_TOKEN"]))
```

A rule is a program (an absolute path, or a bare name looked up on ``PATH``) optionally
followed by argument patterns (``fnmatch``, one per argument; a final ``**`` matches any
remaining arguments). A program without patterns may be given any arguments.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolcards.core.errors import ToolcardsError

REST = "**"
"""As the last argument pattern: any number of further arguments."""


class UntrustedCommand(ToolcardsError, ValueError):
    """A stdio MCP server from loaded data that the host program did not allow."""


def _program(text: str) -> str:
    if not text or "\x00" in text:
        raise ValueError("an MCP command rule needs a program")
    if "/" in text:
        if not os.path.isabs(text):
            raise ValueError(f"{text!r}: a program path in a rule must be absolute")
        return os.path.normpath(text)
    return text


@dataclass(frozen=True)
class CommandRule:
    """One command a loaded stdio card may run."""

    program: str
    """An absolute path (the card must name the same path) or a bare program name (the card
    must name it bare, so it is looked up on ``PATH``)."""
    args: tuple[str, ...] | None = None
    """``fnmatch`` patterns, one per argument (a final ``**``: any more); None: any arguments."""
    cwd: str | None = None
    """The working directory the card may set; None: the card may not set one."""
    env: frozenset[str] = field(default_factory=frozenset)
    """Environment names the card may set (``env``) or copy (``env_from``, both names)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "program", _program(self.program))
        if self.args is not None:
            object.__setattr__(self, "args", tuple(self.args))
        if self.cwd is not None:
            if not os.path.isabs(self.cwd):
                raise ValueError(f"{self.cwd!r}: a working directory in a rule must be absolute")
            object.__setattr__(self, "cwd", os.path.normpath(self.cwd))
        object.__setattr__(self, "env", frozenset(self.env))

    @classmethod
    def parse(cls, text: str) -> CommandRule:
        """A rule from ``"program [pattern ...]"`` (shell-style quoting)."""
        words = shlex.split(text)
        if not words:
            raise ValueError("an MCP command rule needs a program")
        return cls(words[0], tuple(words[1:]) if len(words) > 1 else None)

    @classmethod
    def from_config(cls, value: str | Mapping[str, Any]) -> CommandRule:
        """A rule from a config entry: a string, or ``{command, args?, cwd?, env?}``."""
        if isinstance(value, str):
            return cls.parse(value)
        if not isinstance(value, Mapping):
            raise ValueError(f"an MCP command rule is a string or a mapping, not {value!r:.60}")
        unknown = set(value) - {"command", "args", "cwd", "env"}
        if unknown:
            raise ValueError(f"unknown keys in an MCP command rule: {', '.join(sorted(unknown))}")
        args = value.get("args")
        env = value.get("env") or []
        if not isinstance(value.get("command"), str):
            raise ValueError("an MCP command rule needs 'command' (a string)")
        if args is not None and not _strings(args):
            raise ValueError("'args' of an MCP command rule must be a list of strings")
        if not _strings(env):
            raise ValueError("'env' of an MCP command rule must be a list of variable names")
        cwd = value.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("'cwd' of an MCP command rule must be a string")
        rule_args = tuple(args) if args is not None else None
        return cls(value["command"], rule_args, cwd, frozenset(env))

    def matches(self, command: str, args: Sequence[str], cwd: str | None) -> bool:
        """Whether this rule allows running ``command args`` in ``cwd``."""
        if "/" in command:  # a path: only an absolute rule with the same path allows it
            if not os.path.isabs(command) or os.path.normpath(command) != self.program:
                return False
        elif command != self.program:
            return False
        if cwd is not None and (self.cwd is None or os.path.normpath(cwd) != self.cwd):
            return False
        if self.args is None:
            return True
        patterns = list(self.args)
        if patterns and patterns[-1] == REST:
            patterns.pop()
            if len(args) < len(patterns):
                return False
            args = args[: len(patterns)]
        elif len(args) != len(patterns):
            return False
        return all(fnmatch.fnmatchcase(a, p) for a, p in zip(args, patterns, strict=True))


def _strings(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


class MCPTrust:
    """The stdio MCP commands (and environment names) a host allows for loaded cards."""

    __slots__ = ("env", "rules")

    def __init__(self, commands: Iterable[str | CommandRule] = (), env: Iterable[str] = ()):
        if isinstance(commands, str):
            commands = [commands]
        self.rules: tuple[CommandRule, ...] = tuple(
            c if isinstance(c, CommandRule) else CommandRule.parse(c) for c in commands
        )
        self.env: frozenset[str] = frozenset([env] if isinstance(env, str) else env)
        """Environment names allowed with every rule."""

    def __repr__(self) -> str:
        return f"MCPTrust(rules={list(self.rules)!r}, env={sorted(self.env)!r})"

    @classmethod
    def of(cls, value: object) -> MCPTrust:
        """``value`` as a trust decision: an MCPTrust, None (nothing allowed), a command rule
        string, or a list of rules (strings, ``CommandRule`` s or config mappings)."""
        if value is None:
            return cls()
        if isinstance(value, MCPTrust):
            return value
        if isinstance(value, str | CommandRule):
            return cls([value])
        if isinstance(value, list | tuple):
            return cls.from_config(value)
        raise TypeError(
            f"trust must be an MCPTrust or a list of allowed commands, not {type(value).__name__}"
        )

    @classmethod
    def from_config(cls, value: object) -> MCPTrust:
        """The trust a config's ``mcp_commands:`` list grants (ValueError when malformed)."""
        if value is None:
            return cls()
        if not isinstance(value, list | tuple):
            raise ValueError("mcp_commands must be a list of commands")
        return cls([v if isinstance(v, CommandRule) else CommandRule.from_config(v) for v in value])

    def check(
        self,
        *,
        name: str,
        command: str,
        args: Sequence[str],
        cwd: str | None,
        env: Iterable[str],
        env_from: Mapping[str, str],
    ) -> None:
        """Refuse (UntrustedCommand) what no rule allows; the message says how to allow it."""
        line = shlex.join([command, *args])
        shown = line if len(line) <= 200 else line[:200] + "..."
        rule = next((r for r in self.rules if r.matches(command, args, cwd)), None)
        if rule is None:
            where = f" in {cwd}" if cwd is not None else ""
            raise UntrustedCommand(
                f"MCP server {name!r} would run `{shown}`{where} on this host, and no trust "
                "decision allows it: a card loaded from data may start only the commands the "
                f"host program allows. To allow it, pass load_cards(..., trust=MCPTrust([{line!r}"
                "])) (toolcards.tools.mcp.MCPTrust), list it under mcp_commands: in the "
                "surfaces config, or build the MCPTool in code"
            )
        allowed = self.env | rule.env
        names = set(env) | set(env_from) | set(env_from.values())
        refused = sorted(names - allowed)
        if refused:
            raise UntrustedCommand(
                f"MCP server {name!r} (`{shown}`) may not set or copy the environment "
                f"variables {', '.join(refused)}: list them in the trust decision "
                "(MCPTrust(..., env=[...]) or env: in the mcp_commands rule)"
            )
