"""What a card loaded from data may do on this host: the host's decision, never the data's.

A card field whose value reaches the host (a program or a mode of running programs, a host
environment variable, a URL that receives a host credential, a private-network allowance, a
folder outside the workspace) carries a :class:`HostAccess` marker in its annotation:

```python
mode: Annotated[str, HostAccess(Reach.EXECUTION, "runs commands unconfined on this host",
                                safe=isolating)] = "auto"
```

Built in code by the host program, a card is trusted. Validated from data (``load_card(s)``,
a ``CardList`` field, the surfaces config, an agent spec, a stored profile, a tool actor's
config read back from the team's store), each marked field
whose value is not the field's default (nor a value its marker declares safe) must be allowed
by the host's :class:`HostTrust`, else validation fails with one line naming the field and the
grant that would allow it:

```python
load_cards(data, trust=HostTrust(commands=["uvx mcp-server-fetch"], env=["CRM_TOKEN"],
                                 urls=["https://search.internal.example/"]))
```
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import socket
import string
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any, Literal, NoReturn
from urllib.parse import urlsplit

from pydantic import BaseModel

from toolcards.core.errors import ToolcardsError
from toolcards.core.hosts import blocked_reason, internal_name

FROM_DATA = "toolcards.from_data"
"""Validation-context key, True while a card is validated from data (not built in code)."""
TRUST = "toolcards.trust"
"""Validation-context key holding the host's trust decision for cards loaded from data."""
REST = "**"
"""As the last argument pattern of a command rule: any number of further arguments."""
ANY_PROGRAM = "*"
"""As a command rule's program: any program (with any arguments unless patterns follow)."""
HOW = (
    "pass it as load_cards(..., trust=...), GovernedCards.trusting(...) for agent specs, "
    "Team(..., trust=...) for what a resumed team reads from its store or trust: "
    "in the operator's surfaces config, or build the card in code"
)


class UntrustedField(ToolcardsError, ValueError):
    """A card field from data that reaches the host, and that the host's trust does not allow."""


class Reach(StrEnum):
    """How a field reaches the host; the value is the :class:`HostTrust` grant that allows it."""

    PROGRAM = "commands"
    """A program started on this host (the marker names its ``args`` and ``cwd`` fields)."""
    EXECUTION = "execution"
    """A way of running programs the host vets: one that is not an isolating sandbox
    (``ExecTool.mode='local'``), or a container image other than the default
    (``ExecTool.docker_image``: the host's daemon pulls it with the host's registry logins)."""
    ENV = "env"
    """The name of a host environment variable the card reads or sets for a program."""
    URL = "urls"
    """A URL this host connects to: granted when a host credential goes there (or when it names
    a private host), see :attr:`HostAccess.credential`."""
    NETWORK = "private_network"
    """An allowance to reach loopback, private or metadata addresses from this host."""
    PATH = "paths"
    """A file or folder on this host outside the card's workspace."""


@dataclass(frozen=True, slots=True)
class HostAccess:
    """Marks a card (or param) field whose value reaches the host; read by :func:`check_card`.

    Only a value that differs from the field's default needs a grant (the card's author chose
    the default in code); for ``each="item"`` / ``"key"`` / ``"name"`` that is each list item,
    mapping key, or mapping key and value not in the default.
    """

    reach: Reach
    what: str
    """What the value does, for the refusal: ``"runs commands unconfined on this host"``."""
    each: Literal["value", "item", "key", "name"] = "value"
    safe: Callable[[Any], bool] | None = None
    """Values that never need a grant (an isolating sandbox), besides the default."""
    args: str | None = None
    """PROGRAM: the sibling field holding the program's arguments."""
    cwd: str | None = None
    """PROGRAM: the sibling field holding its working directory."""
    to: tuple[str, ...] = ()
    """ENV: sibling URL fields the variable's value is sent to (each must be granted too)."""
    credential: bool | tuple[str, ...] = True
    """URL: True, a host credential always goes there; sibling field names, one goes there
    while one of them is set; False, never (then only a private host needs a grant).

    A sibling named here is a field of the same model or, when it has none of that name, of
    the nearest model holding it (``"url"`` from a card's nested ``auth``); a dotted name
    reaches into a nested model (``"auth.oauth"``)."""


def _program(text: str) -> str:
    if not text or "\x00" in text:
        raise ValueError("a command rule needs a program")
    if text == ANY_PROGRAM:
        return text
    if "/" in text:
        if not os.path.isabs(text):
            raise ValueError(f"{text!r}: a program path in a rule must be absolute")
        return os.path.normpath(text)
    return text


def _strings(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class CommandRule:
    """One command a card from data may run on this host."""

    program: str
    """An absolute path (the card must name the same path), a bare program name (the card must
    name it bare, so it is looked up on ``PATH``), or ``*`` for any program."""
    args: tuple[str, ...] | None = None
    """``fnmatch`` patterns, one per argument (a final ``**``: any more); None: any arguments."""
    cwd: str | None = None
    """The working directory the card may set; None: the card may not set one."""
    env: frozenset[str] = field(default_factory=frozenset)
    """Environment names a card running this command may set or copy (besides ``HostTrust.env``)."""

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
            raise ValueError("a command rule needs a program")
        return cls(words[0], tuple(words[1:]) if len(words) > 1 else None)

    @classmethod
    def from_config(cls, value: str | Mapping[str, Any]) -> CommandRule:
        """A rule from a config entry: a string, or ``{command, args?, cwd?, env?}``."""
        if isinstance(value, str):
            return cls.parse(value)
        if not isinstance(value, Mapping):
            raise ValueError(f"a command rule is a string or a mapping, not {value!r:.60}")
        unknown = set(value) - {"command", "args", "cwd", "env"}
        if unknown:
            raise ValueError(f"unknown keys in a command rule: {', '.join(sorted(unknown))}")
        args = value.get("args")
        env = value.get("env") or []
        if not isinstance(value.get("command"), str):
            raise ValueError("a command rule needs 'command' (a string)")
        if args is not None and not _strings(args):
            raise ValueError("'args' of a command rule must be a list of strings")
        if not _strings(env):
            raise ValueError("'env' of a command rule must be a list of variable names")
        cwd = value.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError("'cwd' of a command rule must be a string")
        rule_args = tuple(args) if args is not None else None
        return cls(value["command"], rule_args, cwd, frozenset(env))

    def matches(self, command: str, args: Sequence[str], cwd: str | None) -> bool:
        """Whether this rule allows running ``command args`` in ``cwd``."""
        if self.program == ANY_PROGRAM:
            pass
        elif "/" in command:  # a path: only an absolute rule with the same path allows it
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
        return all(fnmatchcase(a, p) for a, p in zip(args, patterns, strict=True))


def _url_parts(url: str) -> tuple[str, str, int | None, str] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
        return None
    lowered = parts.path.lower()
    segments = lowered.replace("%2e", ".").split("/")
    if "." in segments or ".." in segments or "\\" in url or "%2f" in lowered or "%5c" in lowered:
        return None  # a path that could step out of a trusted prefix once normalised or decoded
    port = port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname.lower(), port, parts.path.rstrip("/")


_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
_PLAIN = _UNRESERVED | frozenset("!$&'()*+,=:@/")
"""What a path below a trusted prefix may hold: RFC 3986 path characters but ``;``."""
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _plain(below: str) -> bool:
    """Whether a path below a trusted prefix is read alike by servers and proxies that
    normalise paths differently: no ``;`` (Tomcat, Jetty and Spring read ``/..;/`` as
    ``/../``) and escapes only of unreserved characters (a proxy that decodes twice turns
    ``%252f`` into ``/``, an overlong decoder ``%c0%af``); anything else (a space, a character
    beyond ASCII, a bare ``%``) is refused."""
    unescaped = _ESCAPE.sub(lambda m: "-" if chr(int(m[1], 16)) in _UNRESERVED else "%", below)
    return set(unescaped) <= _PLAIN  # "%" is not plain: a bare one, or one escaping more


def private_host(url: str) -> bool:
    """True when ``url`` names, as written, a host the URL guard refuses (:mod:`.hosts`): a
    non-public address (in any spelling ``inet_aton`` reads, or inside a 6to4, NAT64 or
    IPv4-mapped address), a metadata name, ``localhost``, or a name without a dot (a LAN
    name). A public name that resolves to a private address is not seen here. A host written
    with other characters than ASCII is read as HTTP clients read it (UTS #46: ``127。0。0.1``
    is 127.0.0.1); one that does not map to ASCII counts as private."""
    host = (urlsplit(url).hostname or "").lower()
    if not host.isascii():
        import idna  # lazy: only a non-ASCII host needs it

        try:
            host = str(idna.encode(host, uts46=True).decode("ascii")).lower()
        except (idna.IDNAError, UnicodeError, ValueError):
            return True
    host = host.rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the forms C's inet_aton reads too: 127.1, 0x7f.0.0.1, 2130706433
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return "." not in host or internal_name(host)
    return blocked_reason(str(address)) is not None


class HostTrust:
    """What the host allows cards loaded from data to do on this host (nothing by default).

    ``commands`` the programs they may start (``CommandRule`` s or their strings: MCP stdio
    servers), ``env`` the host environment names they may read or set, ``urls`` the URL
    prefixes a host credential may go to (and private hosts they may name), ``private_network``
    whether they may reach loopback, private and metadata addresses, ``paths`` host folders
    outside the workspace they may use, ``execution`` the exec modes beyond an isolating sandbox
    they may choose (``"local"``) and the docker images beyond the default.
    """

    __slots__ = ("commands", "env", "execution", "paths", "private_network", "urls")

    def __init__(
        self,
        commands: Iterable[str | CommandRule] = (),
        env: Iterable[str] = (),
        *,
        urls: Iterable[str] = (),
        private_network: bool = False,
        paths: Iterable[str] = (),
        execution: Iterable[str] = (),
    ) -> None:
        if isinstance(commands, str):
            commands = [commands]
        self.commands: tuple[CommandRule, ...] = tuple(
            c if isinstance(c, CommandRule) else CommandRule.parse(c) for c in commands
        )
        self.env: frozenset[str] = frozenset([env] if isinstance(env, str) else env)
        self.urls: tuple[str, ...] = tuple([urls] if isinstance(urls, str) else urls)
        for url in self.urls:
            if _url_parts(url) is None:
                raise ValueError(f"{url!r}: a trusted URL is an http(s) URL without credentials")
        self.private_network = bool(private_network)
        self.paths: tuple[str, ...] = tuple([paths] if isinstance(paths, str) else paths)
        for path in self.paths:
            if not os.path.isabs(path):
                raise ValueError(f"{path!r}: a trusted path must be absolute")
        self.execution: frozenset[str] = frozenset(
            [execution] if isinstance(execution, str) else execution
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "execution"):  # set last in __init__: from then on, read-only
            raise AttributeError(f"HostTrust is read-only: build another one to change {name}")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={value!r}"
            for name in ("commands", "env", "urls", "private_network", "paths", "execution")
            if (value := getattr(self, name))
        )
        return f"HostTrust({shown})"

    @classmethod
    def of(cls, value: object) -> HostTrust:
        """``value`` as a trust decision: a HostTrust, None (nothing allowed), a command rule
        string or ``CommandRule``, a list of command rules, or a config mapping."""
        if value is None:
            return NOTHING
        if isinstance(value, HostTrust):
            return value
        if isinstance(value, str | CommandRule):
            return cls([value])
        if isinstance(value, list | tuple | Mapping):
            return cls.from_config(value)
        raise TypeError(
            "trust must be a HostTrust (toolcards.HostTrust), a list of allowed commands or a "
            f"mapping of grants, not {type(value).__name__}"
        )

    @classmethod
    def from_config(cls, value: object) -> HostTrust:
        """The trust a config grants (ValueError when malformed): a list of command rules, or a
        mapping ``{commands, env, urls, private_network, paths, execution}``."""
        if value is None:
            return cls()
        if isinstance(value, list | tuple):
            value = {"commands": value}
        if not isinstance(value, Mapping):
            raise ValueError("trust must be a list of commands or a mapping of grants")
        unknown = set(value) - {"commands", "env", "urls", "private_network", "paths", "execution"}
        if unknown:
            raise ValueError(f"unknown keys in trust: {', '.join(sorted(map(str, unknown)))}")
        commands = value.get("commands") or []
        if not isinstance(commands, list | tuple):
            raise ValueError("commands must be a list of commands")
        for key in ("env", "urls", "paths", "execution"):
            if not _strings(value.get(key) or []):
                raise ValueError(f"{key} must be a list of strings")
        if not isinstance(value.get("private_network", False), bool):
            raise ValueError("private_network must be true or false")
        return cls(
            [c if isinstance(c, CommandRule) else CommandRule.from_config(c) for c in commands],
            value.get("env") or (),
            urls=value.get("urls") or (),
            private_network=value.get("private_network", False),
            paths=value.get("paths") or (),
            execution=value.get("execution") or (),
        )

    def joined(self, other: HostTrust) -> HostTrust:
        """Everything this trust and ``other`` allow."""
        return HostTrust(
            [*self.commands, *other.commands],
            self.env | other.env,
            urls=[*self.urls, *other.urls],
            private_network=self.private_network or other.private_network,
            paths=[*self.paths, *other.paths],
            execution=self.execution | other.execution,
        )

    # ---- the decisions ----------------------------------------------------------------------

    def rule_for(self, command: str, args: Sequence[str], cwd: str | None) -> CommandRule | None:
        """The first rule allowing ``command args`` in ``cwd``, or None."""
        return next((r for r in self.commands if r.matches(command, args, cwd)), None)

    def allows_url(self, url: str) -> bool:
        """Whether ``url`` lies under one of the trusted URL prefixes (same scheme, host and
        port; the path equal or below, by whole segments, without dot segments; below the
        prefix, no ``;`` and escapes only of unreserved characters: see :func:`_plain`)."""
        found = _url_parts(url)
        if found is None:
            return False
        for trusted in self.urls:
            scheme, host, port, path = _url_parts(trusted) or ("", "", None, "")
            if found[:3] == (scheme, host, port) and (
                found[3] == path
                or (found[3].startswith(path + "/") and _plain(found[3][len(path) :]))
            ):
                return True
        return False

    def allows_path(self, path: str) -> bool:
        """Whether ``path`` (links resolved) lies in one of the trusted folders."""
        real = os.path.realpath(path)
        for trusted in self.paths:
            base = os.path.realpath(trusted)
            if os.path.commonpath([real, base]) == base:
                return True
        return False


NOTHING = HostTrust()
"""The trust of a card from data when the host gave none: nothing is allowed."""


def check_card(card: BaseModel, trust: HostTrust) -> None:
    """Refuse (:class:`UntrustedField`) a field of ``card`` from data that reaches the host and
    that ``trust`` does not allow; nested models are checked the same way."""
    if _reaches(type(card)):
        _Check(trust).model(card, type(card).__name__)


@dataclass(frozen=True)
class _Plan:
    """What to check on one model class: its marked fields (with their defaults, computed once)
    and the fields that may hold models with marked fields of their own."""

    marked: tuple[tuple[str, HostAccess, Any], ...]
    nested: tuple[str, ...]


_PLANS: dict[type[BaseModel], _Plan] = {}


def _plan(cls: type[BaseModel]) -> _Plan:
    found = _PLANS.get(cls)
    if found is None:
        _PLANS[cls] = _Plan((), ())  # a model that holds itself: no loop while planning
        marked = [
            (name, meta, info.get_default(call_default_factory=True))
            for name, info in cls.model_fields.items()
            for meta in info.metadata
            if isinstance(meta, HostAccess)
        ]
        marked.sort(key=lambda item: item[1].reach is not Reach.PROGRAM)  # rules before env
        nested = [
            name
            for name, info in cls.model_fields.items()
            if any(_reaches(model) for model in _models_in(info.annotation))
        ]
        found = _PLANS[cls] = _Plan(tuple(marked), tuple(nested))
    return found


def _reaches(cls: type[BaseModel]) -> bool:
    plan = _plan(cls)
    return bool(plan.marked or plan.nested)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions and lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _is_set(value: object) -> bool:
    return value is not None and value is not False and value != "" and value != {}


def _parts(value: Any, default: Any, each: str) -> Iterator[Any]:
    """The parts of ``value`` that the default does not already hold."""
    if value is None or value == default:
        return
    if each == "value":
        yield value
        return
    if each == "item":
        yield from (v for v in value if v not in (default or ()))
        return
    known: Mapping[Any, Any] = default or {}
    for key, item in value.items():
        if key not in known:
            yield key
        if each == "name" and item not in known.values():
            yield item


def _nested(value: Any) -> Iterator[tuple[str, BaseModel]]:
    if isinstance(value, BaseModel):
        yield "", value
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if isinstance(item, BaseModel):
                yield f"[{i}]", item


class _Check:
    """One card's check: the command rules it matched grant their environment names."""

    def __init__(self, trust: HostTrust) -> None:
        self.trust = trust
        self.rules: list[CommandRule] = []
        self.holders: list[BaseModel] = []
        """The models holding the one being checked, outermost first."""

    def model(self, model: BaseModel, where: str) -> None:
        plan = _plan(type(model))
        for name, marker, default in plan.marked:
            for part in _parts(getattr(model, name), default, marker.each):
                if marker.safe is None or not marker.safe(part):
                    self.decide(model, f"{where}.{name}", marker, part)
        self.holders.append(model)
        for name in plan.nested:
            for index, nested in _nested(getattr(model, name)):
                self.model(nested, f"{where}.{name}{index}")
        self.holders.pop()

    def sibling(self, model: BaseModel, name: str) -> Any:
        """The value of the sibling ``name`` of a marked field of ``model`` (see
        :attr:`HostAccess.credential`): None when no model on the way has it."""
        head, *rest = name.split(".")
        owners = (m for m in (model, *reversed(self.holders)) if head in type(m).model_fields)
        value = getattr(next(owners, None), head, None)
        for part in rest:
            value = getattr(value, part, None)
        return value

    def decide(self, model: BaseModel, where: str, marker: HostAccess, value: Any) -> None:
        trust = self.trust
        if marker.reach is Reach.PROGRAM:
            args = list(self.sibling(model, marker.args) or ()) if marker.args else []
            cwd = self.sibling(model, marker.cwd) if marker.cwd else None
            rule = trust.rule_for(str(value), args, cwd)
            if rule is None:
                line = shlex.join([str(value), *args])
                shown = line if len(line) <= 200 else line[:200] + "..."
                place = f" in {cwd}" if cwd is not None else ""
                refuse(where, f"`{shown}`{place}", marker.what, f"commands=[{line!r}]")
            self.rules.append(rule)
        elif marker.reach is Reach.ENV:
            grants = []
            if value not in trust.env and not any(value in r.env for r in self.rules):
                grants.append(f"env=[{value!r}]")
            found = [self.sibling(model, s) for s in marker.to]
            targets = [str(url) for url in found if url is not None]
            refused = [url for url in targets if not trust.allows_url(url)]
            if (
                refused
            ):  # where the value goes must be granted too, the default destination included
                grants.append(f"urls={refused!r}")
            if grants:
                what = marker.what + (f" to {refused[0]}" if refused else "")
                refuse(where, repr(value), what, ", ".join(grants))
        elif marker.reach is Reach.URL:
            self.decide_url(model, where, marker, str(value))
        elif marker.reach is Reach.NETWORK:
            if not trust.private_network:
                refuse(where, repr(value), marker.what, "private_network=True")
        elif marker.reach is Reach.PATH:
            if not trust.allows_path(str(value)):
                refuse(where, repr(value), marker.what, f"paths=[{str(value)!r}]")
        elif value not in trust.execution:
            refuse(where, repr(value), marker.what, f"execution=[{value!r}]")

    def decide_url(self, model: BaseModel, where: str, marker: HostAccess, url: str) -> None:
        """A URL needs a grant when a host credential goes there, or when it names a private
        host (then ``private_network`` allows it too)."""
        if self.trust.allows_url(url):
            return
        sends = marker.credential
        if not isinstance(sends, bool):
            sends = any(_is_set(self.sibling(model, sibling)) for sibling in sends)
        if sends:
            refuse(where, repr(url), marker.what, f"urls=[{url!r}]")
        if private_host(url) and not self.trust.private_network:
            what = "names a host of this host's private network"
            refuse(where, repr(url), what, f"urls=[{url!r}]) or HostTrust(private_network=True")


def refuse(where: str, shown: str, what: str, grant: str) -> NoReturn:
    """Raise the one-line refusal of field ``where``."""
    raise UntrustedField(
        f"{where} = {shown} {what}, and a card loaded from data may not choose that: the host "
        f"grants it with HostTrust({grant}) ({HOW})"
    )
