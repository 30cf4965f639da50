"""Guardrails: ordered hooks before and after a governed tool runs.

An input hook (:meth:`ToolHook.before_call`) sees the arguments of a call the policy allowed
(and a human approved, when one had to) and returns them, changed or not, or a
:class:`Refuse`. An output hook (:meth:`ToolHook.after_call`) sees the tool's value and
returns it, redacted or not, or a :class:`Refuse`. The executor's pipeline::

    identity -> policy decision -> rate limit -> approval -> input hooks (in order) ->
    the tool -> output hooks (in order) -> audit

The policy always decides first: a denied call never reaches a hook. Hooks run in the order
given; each one sees what the one before it returned. Hooks may be sync or async (a sync
hook runs on the event loop: keep it to quick checks, and do I/O in an async one).

Fail closed: a hook that raises, returns something that is not arguments (a dict) or a
:class:`Refuse`, or is still running at the call's deadline refuses the call. The model then
reads ``refused: ...``; the audit row has the outcome ``refused`` and the refusing hook's
name in its ``hook`` column (an ``ok`` row names the hooks that changed its arguments or its
result there).

A rewrite is checked again before it runs: the declared paths are made canonical, the
arguments must fit the tool's schema, and the policy must give the rewritten call the very
decision (effect and rule) it gave the original; otherwise the rewriting hook refused it. A
call a human approved is never rewritten (the approval covers the arguments shown): a hook
that changes them refuses it. The audit row keeps the arguments as received.

Deadline: the call's timeout (the tool's, else the executor's) covers the hooks and the tool
together; ``ctx.deadline`` says when it passes (``time.monotonic()``), and the tool gets what
the input hooks left of it.
"""

from __future__ import annotations

import copy
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeAlias, TypeVar, overload

from toolcards.core.errors import RetriableError
from toolcards.core.identity import Identity
from toolcards.governance.capability import InvalidArguments, ToolCapability, parse_arguments
from toolcards.governance.policy.parse import compile_globs
from toolcards.governance.policy.policy import Decision, Policy
from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, Redactor

__all__ = [
    "HookContext",
    "Hooks",
    "Refuse",
    "ToolHook",
    "input_guardrail",
    "output_guardrail",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Refuse:
    """What a hook returns to stop a call: ``reason`` is shown to the model (after redaction)
    as ``refused: <reason>`` and recorded in the audit row."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class HookContext:
    """One call, as a hook sees it. ``args`` are the canonical arguments as received (read
    only); ``decision`` is the policy's; ``deadline`` is when the call's time is up
    (``time.monotonic()``; None: no limit); ``redaction`` is the policy's redactor;
    ``sensitive`` names the arguments redacted whole (the tool's)."""

    tool_id: str
    principal: Identity
    args: Mapping[str, Any]
    call_id: str
    surface: str
    decision: Decision
    deadline: float | None
    redaction: Redactor = DEFAULT_REDACTOR
    sensitive: frozenset[str] = frozenset()

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never below 0; None: no limit)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())


Args: TypeAlias = dict[str, Any]
InputResult: TypeAlias = "Args | Refuse | Awaitable[Args | Refuse]"
OutputResult: TypeAlias = "Any | Refuse | Awaitable[Any | Refuse]"


class ToolHook:
    """A guardrail: override :meth:`before_call`, :meth:`after_call` or both (either may be
    ``async def``). ``name`` (default: the class name) is what audit rows record; ``tools``
    (globs on tool ids, None: every tool) selects the tools it guards."""

    name: str = ""
    tools: Sequence[str] | None = None

    def before_call(self, ctx: HookContext, args: Args) -> InputResult:
        """The arguments to run with (``args`` is the hook's own copy) or a :class:`Refuse`."""
        return args

    def after_call(self, ctx: HookContext, result: Any) -> OutputResult:
        """The value to hand back (the tool's, or a redacted one) or a :class:`Refuse`."""
        return result

    @property
    def hook_name(self) -> str:
        return self.name or type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.hook_name!r}>"


def _overrides(hook: ToolHook, method: str) -> bool:
    return getattr(type(hook), method) is not getattr(ToolHook, method)


F = TypeVar("F", bound=Callable[..., Any])


class _InputFunction(ToolHook):
    def __init__(self, fn: Callable[[HookContext, Args], Any], name: str, tools: Any) -> None:
        self._fn, self.name, self.tools = fn, name, tools

    def before_call(self, ctx: HookContext, args: Args) -> InputResult:
        result: InputResult = self._fn(ctx, args)
        return result


class _OutputFunction(ToolHook):
    def __init__(self, fn: Callable[[HookContext, Any], Any], name: str, tools: Any) -> None:
        self._fn, self.name, self.tools = fn, name, tools

    def after_call(self, ctx: HookContext, result: Any) -> OutputResult:
        return self._fn(ctx, result)


@overload
def input_guardrail(fn: Callable[[HookContext, Args], Any], /) -> ToolHook: ...
@overload
def input_guardrail(
    *, name: str | None = None, tools: Sequence[str] | None = None
) -> Callable[[Callable[[HookContext, Args], Any]], ToolHook]: ...
def input_guardrail(
    fn: Callable[[HookContext, Args], Any] | None = None,
    /,
    *,
    name: str | None = None,
    tools: Sequence[str] | None = None,
) -> Any:
    """``fn(ctx, args) -> args | Refuse`` (sync or async) as a :class:`ToolHook`, named after
    the function unless ``name`` is given."""

    def make(f: Callable[[HookContext, Args], Any]) -> ToolHook:
        return _InputFunction(f, name or f.__name__, tools)

    return make if fn is None else make(fn)


@overload
def output_guardrail(fn: Callable[[HookContext, Any], Any], /) -> ToolHook: ...
@overload
def output_guardrail(
    *, name: str | None = None, tools: Sequence[str] | None = None
) -> Callable[[Callable[[HookContext, Any], Any]], ToolHook]: ...
def output_guardrail(
    fn: Callable[[HookContext, Any], Any] | None = None,
    /,
    *,
    name: str | None = None,
    tools: Sequence[str] | None = None,
) -> Any:
    """``fn(ctx, result) -> result | Refuse`` (sync or async) as a :class:`ToolHook`."""

    def make(f: Callable[[HookContext, Any], Any]) -> ToolHook:
        return _OutputFunction(f, name or f.__name__, tools)

    return make if fn is None else make(fn)


# -- running them (the executor's side) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call a hook stopped: the hook's name, the model's text, the audit row's error."""

    hook: str
    message: str
    error: str


@dataclass(frozen=True, slots=True)
class Passed:
    """What went through: the value (arguments, parsed, or the result) and the hooks that
    changed it."""

    value: Any
    changed: tuple[str, ...] = ()


class Hooks:
    """An executor's ordered hooks, with the input and output ones picked per tool."""

    __slots__ = ("_by_tool", "hooks")

    def __init__(self, hooks: Iterable[ToolHook] = ()) -> None:
        self.hooks: tuple[ToolHook, ...] = tuple(hooks)
        seen: set[str] = set()
        for hook in self.hooks:
            if not isinstance(hook, ToolHook):
                raise TypeError(f"a hook must be a ToolHook, not {type(hook).__name__}")
            if hook.hook_name in seen:
                raise ValueError(
                    f"two hooks are named {hook.hook_name!r}: audit rows could not tell"
                )
            seen.add(hook.hook_name)
        self._by_tool: dict[str, tuple[tuple[ToolHook, ...], tuple[ToolHook, ...]]] = {}

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def for_tool(self, tool_id: str) -> tuple[tuple[ToolHook, ...], tuple[ToolHook, ...]]:
        """(input hooks, output hooks) that guard ``tool_id``, in order."""
        found = self._by_tool.get(tool_id)
        if found is None:
            mine = [h for h in self.hooks if _guards(h, tool_id)]
            found = (
                tuple(h for h in mine if _overrides(h, "before_call")),
                tuple(h for h in mine if _overrides(h, "after_call")),
            )
            if len(self._by_tool) < 10_000:  # ids come from the registry
                self._by_tool[tool_id] = found
        return found


def _guards(hook: ToolHook, tool_id: str) -> bool:
    tools = hook.tools
    if tools is None:
        return True
    globs = (tools,) if isinstance(tools, str) else tuple(tools)
    return compile_globs(globs).fullmatch(tool_id) is not None


async def _answer(hook: ToolHook, ctx: HookContext, method: str, value: Any) -> Any:
    """The hook's answer, awaited within the call's deadline. Raises what the hook raised,
    or TimeoutError (also when the deadline passed before its turn)."""
    if ctx.remaining() == 0.0:
        raise TimeoutError
    result = getattr(hook, method)(ctx, value)
    if inspect.isawaitable(result):
        import asyncio  # lazy: ~4x python -c pass; listing tools never loads it

        async with asyncio.timeout(ctx.remaining()):
            result = await result
    return result


def _refusal(hook: ToolHook, ctx: HookContext, failure: BaseException | Refuse) -> Refusal:
    name = hook.hook_name
    if isinstance(failure, Refuse):
        why = failure.reason.strip()
        msg = f"refused: {ctx.redaction.text(why)}" if why else _stopped(ctx.tool_id)
        return Refusal(name, msg, f"refused by {name}: {why or 'no reason given'}")
    if isinstance(failure, TimeoutError):
        return Refusal(name, _stopped(ctx.tool_id), f"{name} did not answer by the deadline")
    # no traceback: its last line repeats the message, which may hold an argument in clear
    error = f"{type(failure).__name__}: {failure}"
    shown = ctx.redaction.error(error, ctx.args, ctx.sensitive)
    log.warning("hook %s failed on %s; the call is refused: %s", name, ctx.tool_id, shown)
    return Refusal(name, _stopped(ctx.tool_id), f"{name} raised {error}")


_SCALARS = (str, int, float, bool, type(None))


def _own_copy(args: Mapping[str, Any]) -> Args:
    """A copy a hook may change without touching the call's arguments (one level deep when
    they are all scalars, the usual case: a deep copy costs several microseconds)."""
    if all(type(v) in _SCALARS for v in args.values()):
        return dict(args)
    return copy.deepcopy(dict(args))


def _stopped(tool_id: str) -> str:
    return f"refused: a guardrail stopped {tool_id}"


Recheck = Callable[[Args], "Args | str"]


async def check_input(
    hooks: Sequence[ToolHook], ctx: HookContext, recheck: Recheck
) -> Passed | Refusal:
    """Run the input hooks in order; each rewrite is checked (``recheck``: the parsed
    arguments, or why the rewrite may not run). ``Passed.value`` is (raw, parsed) arguments,
    parsed None when nothing changed."""
    args: Args = dict(ctx.args)
    parsed: Args | None = None
    changed: list[str] = []
    for hook in hooks:
        try:
            result = await _answer(hook, ctx, "before_call", _own_copy(args))
        except Exception as exc:
            return _refusal(hook, ctx, exc)
        if isinstance(result, Refuse):
            return _refusal(hook, ctx, result)
        if not isinstance(result, dict):
            why = f"{hook.hook_name} returned {type(result).__name__}, not arguments"
            return Refusal(hook.hook_name, _stopped(ctx.tool_id), why)
        if result == args:
            continue
        checked = recheck(result)
        if isinstance(checked, str):
            return Refusal(hook.hook_name, _stopped(ctx.tool_id), f"{hook.hook_name} {checked}")
        args, parsed = result, checked
        changed.append(hook.hook_name)
    return Passed((args, parsed), tuple(changed))


async def check_output(hooks: Sequence[ToolHook], ctx: HookContext, value: Any) -> Passed | Refusal:
    """Run the output hooks in order over the tool's value."""
    changed: list[str] = []
    for hook in hooks:
        try:
            result = await _answer(hook, ctx, "after_call", value)
        except Exception as exc:
            return _refusal(hook, ctx, exc)
        if isinstance(result, Refuse):
            return _refusal(hook, ctx, result)
        if result is not value:
            changed.append(hook.hook_name)
        value = result
    return Passed(value, tuple(changed))


def rechecker(
    policy: Policy, cap: ToolCapability, who: Identity, decision: Decision, approved: bool
) -> Recheck:
    """The check a rewrite passes before it runs: not an approved call, canonical paths, the
    tool's schema, and the policy's same decision."""

    def recheck(args: Args) -> Args | str:
        if approved:
            return "changed the arguments of a call a human approved"
        declared = cap.annotations.paths
        each: Mapping[str, tuple[Any, ...]] = {}
        try:
            if declared is not None:
                args, each = declared.resolve(args)
            parsed = parse_arguments(cap, args)
        except (InvalidArguments, RetriableError) as exc:
            return f"rewrote the arguments into invalid ones ({policy.redaction.text(str(exc))})"
        if policy.decide(who, cap.id, args, each) != decision:
            return "rewrote the arguments into a call the policy decides differently"
        return parsed

    return recheck


def context(
    tool_id: str,
    who: Identity,
    args: Mapping[str, Any],
    call_id: str,
    surface: str,
    decision: Decision,
    timeout: float | None,
    redaction: Redactor,
    sensitive: Iterable[str] = (),
) -> HookContext:
    """The context of one call whose time starts now."""
    deadline = None if timeout is None else time.monotonic() + timeout
    view = MappingProxyType(_own_copy(args))
    hidden = frozenset(sensitive)
    return HookContext(tool_id, who, view, call_id, surface, decision, deadline, redaction, hidden)
