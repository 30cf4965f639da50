"""Slash-commands for humans: ``/name args`` parsed against the command's signature."""

from __future__ import annotations

import enum
import inspect
import shlex
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict

from toolcards.core.errors import CommandNotRecognized
from toolcards.core.spec import describe


class RestOfLine:
    """Marker: ``Annotated[str, RestOfLine()]`` takes the unparsed rest of the command line."""


Rest = Annotated[str, RestOfLine()]
"""A ``str`` parameter that receives the rest of the line, quotes and spaces kept."""

_EMPTY = inspect.Parameter.empty


class CommandArg(BaseModel):
    """One argument of a command, for help screens."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    required: bool
    default: Any = None
    rest_of_line: bool = False


class CommandDescriptor(BaseModel):
    """A command's name, description and arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    args: list[CommandArg]


class _Command:
    __slots__ = ("fn", "hints", "name", "params", "rest")

    def __init__(self, name: str, fn: Callable[..., Any]) -> None:
        self.name = name
        self.fn = fn
        sig = inspect.signature(fn)
        self.params = [
            p
            for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "ctx"
        ]
        try:
            self.hints = typing.get_type_hints(fn, include_extras=True)
        except Exception:  # unresolvable annotations: treat every argument as text
            self.hints = {}
        self.rest: str | None = None
        for p in self.params:
            if _is_rest(self.hints.get(p.name)):
                self.rest = p.name
        strs = [p for p in self.params if _base_type(self.hints.get(p.name)) is str]
        if self.rest is None and len(self.params) == 1 and strs:
            self.rest = self.params[0].name

    def descriptor(self) -> CommandDescriptor:
        args = [
            CommandArg(
                name=p.name,
                type=_type_name(self.hints.get(p.name)),
                required=p.default is _EMPTY,
                default=None if p.default is _EMPTY else p.default,
                rest_of_line=p.name == self.rest,
            )
            for p in self.params
        ]
        return CommandDescriptor(name=self.name, description=describe(self.fn), args=args)

    def bind(self, raw: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        names = [p.name for p in self.params]
        tokens = _split_keep_raw(raw)
        positional = [p.name for p in self.params]
        index = 0
        for raw_token, raw_rest in tokens:
            key, sep, _ = raw_token.partition("=")
            if sep and key in names and key != self.rest:
                values[key] = _token(raw_token.partition("=")[2])
                continue
            while index < len(positional) and positional[index] in values:
                index += 1
            if index >= len(positional):
                raise ValueError(f"too many arguments (unexpected {raw_token!r})")
            target = positional[index]
            if target == self.rest:
                if sep and key == self.rest:
                    values[target] = _unquote_rest(raw_rest.partition("=")[2])
                else:
                    values[target] = _unquote_rest(raw_rest)
                break
            values[target] = _token(raw_token)
            index += 1
        for p in self.params:
            if p.name not in values:
                if p.default is _EMPTY:
                    raise ValueError(f"missing argument {p.name!r}")
                continue
            values[p.name] = _coerce(values[p.name], self.hints.get(p.name), p.name)
        return values


def _split_keep_raw(raw: str) -> Iterator[tuple[str, str]]:
    """Raw shell-like token texts, each with the rest of the line from where it starts.

    Lazy: a rest-of-line parameter stops the scan, so text after it is never tokenized.
    """
    pos = 0
    while True:
        while pos < len(raw) and raw[pos].isspace():
            pos += 1
        if pos >= len(raw):
            return
        end = _advance(raw, pos)
        yield raw[pos:end], raw[pos:]
        pos = end


def _token(text: str) -> str:
    parts = shlex.split(text)
    return parts[0] if parts else ""


def _advance(raw: str, start: int) -> int:
    """Index just after the shell-like token that starts at ``start``."""
    i, quote = start, ""
    while i < len(raw):
        ch = raw[i]
        if quote:
            if ch == "\\" and quote == '"' and i + 1 < len(raw):
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "\\" and i + 1 < len(raw):
            i += 2
            continue
        elif ch.isspace():
            break
        i += 1
    return i


def _unquote_rest(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        try:
            parts = shlex.split(text)
        except ValueError:
            return text
        if len(parts) == 1:
            return parts[0]
    return text


def _is_rest(hint: Any) -> bool:
    if typing.get_origin(hint) is Annotated:
        return any(isinstance(m, RestOfLine) for m in hint.__metadata__)
    return False


def _base_type(hint: Any) -> Any:
    if typing.get_origin(hint) is Annotated:
        hint = typing.get_args(hint)[0]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return hint


def _type_name(hint: Any) -> str:
    base = _base_type(hint)
    if base is None:
        return "str"
    return getattr(base, "__name__", None) or str(base).replace("typing.", "")


_TRUE = {"1", "true", "yes", "y", "on"}
_FALSE = {"0", "false", "no", "n", "off"}


def _coerce(value: Any, hint: Any, name: str) -> Any:
    if not isinstance(value, str):
        return value
    base = _base_type(hint)
    origin = typing.get_origin(base)
    try:
        if base is None or base is str or base is Any:
            return value
        if base is bool:
            low = value.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError(f"expected yes/no, got {value!r}")
        if base is int:
            return int(value)
        if base is float:
            return float(value)
        if isinstance(base, type) and issubclass(base, enum.Enum):
            return base(value)
        if origin in (list, tuple, set):
            items = [v.strip() for v in value.split(",") if v.strip()]
            inner = typing.get_args(base)
            if inner:
                items = [_coerce(v, inner[0], name) for v in items]
            return origin(items)
    except (ValueError, KeyError) as exc:
        raise ValueError(f"argument {name!r}: {exc}") from None
    return value


class CommandRegistry:
    """Dispatches ``/name args`` to registered callables.

    Arguments are shell-like tokens: ``key=value`` keywords, then positionals, coerced laxly
    from the signature's annotations. A ``Rest`` parameter (or the only ``str`` parameter) takes
    the rest of the line. Unknown command -> ``CommandNotRecognized``; any other failure ->
    the string ``Command '<name>' failed: <reason>``.
    """

    def __init__(self, commands: Iterable[Callable[..., Any]] | None = None) -> None:
        self._commands: dict[str, _Command] = {}
        for fn in commands or ():
            self.register(fn)

    def register(self, fn: Callable[..., Any], name: str | None = None) -> None:
        """Add ``fn`` under ``name`` (default ``fn.__name__``); a duplicate is a ValueError."""
        key = name or fn.__name__
        if key in self._commands:
            raise ValueError(f"command {key!r} is already registered")
        self._commands[key] = _Command(key, fn)

    def __contains__(self, name: object) -> bool:
        return name in self._commands

    def __len__(self) -> int:
        return len(self._commands)

    def names(self) -> list[str]:
        """Registered command names, sorted."""
        return sorted(self._commands)

    def get(self, name: str) -> Callable[..., Any] | None:
        """The callable registered as ``name``."""
        found = self._commands.get(name)
        return None if found is None else found.fn

    def descriptors(self) -> list[CommandDescriptor]:
        """Name, description and arguments of every command, sorted by name."""
        return [self._commands[n].descriptor() for n in self.names()]

    @staticmethod
    def is_command(text: str) -> bool:
        """True when ``text`` looks like a slash-command."""
        stripped = text.lstrip()
        return stripped.startswith("/") and len(stripped) > 1 and not stripped[1].isspace()

    def _lookup(self, line: str) -> tuple[_Command, str]:
        stripped = line.strip()
        if stripped.startswith("/"):
            stripped = stripped[1:]
        name, _, raw = stripped.partition(" ")
        found = self._commands.get(name)
        if found is None:
            raise CommandNotRecognized(name, list(self._commands))
        return found, raw.strip()

    def dispatch(self, line: str) -> Any:
        """Run the command named on ``line`` and return its result (or a failure string)."""
        command, raw = self._lookup(line)
        try:
            kwargs = command.bind(raw)
            result = command.fn(**kwargs)
            if inspect.isawaitable(result):
                result = _run_sync(result)
            return result
        except Exception as exc:
            return f"Command '{command.name}' failed: {exc}"

    async def adispatch(self, line: str) -> Any:
        """Async form of :meth:`dispatch`."""
        command, raw = self._lookup(line)
        try:
            kwargs = command.bind(raw)
            result = command.fn(**kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result
        except Exception as exc:
            return f"Command '{command.name}' failed: {exc}"


def _run_sync(awaitable: Any) -> Any:
    import asyncio  # lazy: ~4x python -c pass; only an async command needs it

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(awaitable))
    raise RuntimeError("an async command cannot be dispatched synchronously inside a running loop")


async def _await(awaitable: Any) -> Any:
    return await awaitable
