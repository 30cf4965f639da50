"""Parse and validate a policy document (YAML text or dict) into compiled rules.

Every error names the line of the offending entry when the document came from YAML.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, time
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import yaml

from toolcards.core.errors import ToolcardsError
from toolcards.core.names import glob_pattern
from toolcards.core.yaml_safe import BoundedLoader, YamlError
from toolcards.core.yaml_safe import load_yaml as load_bounded_yaml
from toolcards.governance.redaction.patterns import check_policy_pattern
from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, MAX_PATTERNS, Redactor

Effect = Literal["allow", "deny", "approve"]
EFFECTS: tuple[str, ...] = ("allow", "deny", "approve")

_PERIODS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")
_NUMERIC = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")
_RULE_KEYS = frozenset({"description", "callers", "targets", "effect", "conditions"})
_CONDITION_KEYS = frozenset({"roles", "identity_types", "attrs", "arguments"})
_LIMIT_KEYS = frozenset({"description", "callers", "targets", "rate"})
_BUDGET_KEYS = frozenset(
    {"name", "description", "callers", "targets", "per", "period", "tokens", "cost", "calls"}
)
_BUDGET_SCOPES = ("principal", "run", "team")
_TOP_KEYS = frozenset(
    {"default_effect", "rules", "limits", "budgets", "description", "version", "redaction"}
)
_REDACTION_KEYS = frozenset({"patterns", "disable", "span_arguments"})
_ARG_OPS = frozenset({"eq", "ne", "in", "not_in", "min", "max", "glob", "max_length"})


class PolicyError(ToolcardsError, ValueError):
    """A policy document is malformed; the message names the line when known."""


class _LineDict(dict[str, Any]):
    """A mapping that remembers the YAML line of itself and of each key."""

    line: int | None = None
    key_lines: dict[str, int]


class _Loader(BoundedLoader):
    pass


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> _LineDict:
    loader.flatten_mapping(node)
    out = _LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise PolicyError(f"line {line}: keys must be strings, got {key!r}")
        if key in out:
            raise PolicyError(f"line {line}: duplicate key {key!r}")
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = line
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)


def load_yaml(text: str, source: str = "policy") -> Any:
    """YAML text -> data whose mappings remember their lines; syntax errors name the line."""
    try:
        return load_bounded_yaml(text, source, _Loader)
    except PolicyError as exc:
        raise PolicyError(f"{source}: {exc}") from None
    except YamlError as exc:
        raise PolicyError(str(exc)) from None


def _where(source: str, node: Any, key: str | None = None) -> str:
    line = None
    if isinstance(node, _LineDict):
        line = node.key_lines.get(key, node.line) if key else node.line
    return f"{source}: line {line}" if line else source


def compile_globs(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching any of the shell-style ``patterns`` (case-sensitive)."""
    return glob_pattern(patterns)


@dataclass(frozen=True, slots=True)
class ArgCondition:
    """One test on one argument. ``check`` returns None when it cannot be evaluated."""

    name: str
    op: str
    operand: Any

    def check(self, args: Mapping[str, Any]) -> bool | None:
        if self.name not in args:
            return None
        value = args[self.name]
        op = self.op
        if op in ("min", "max"):
            answers = {self._within(num) for num in _readings(value)}
            return answers.pop() if len(answers) == 1 else None  # no number, or two answers
        if op in ("eq", "ne"):
            if json_kind(value) != json_kind(self.operand):
                return None  # "true" is not true, though the tool may be handed True
            return bool(value == self.operand) == (op == "eq")
        if op in ("in", "not_in"):
            kind = json_kind(value)
            if any(json_kind(item) == kind and item == value for item in self.operand):
                return op == "in"
            if any(json_kind(item) != kind for item in self.operand):
                return None  # "0" is not in [0], yet it may be 0 to the tool
            return op == "not_in"
        if op == "glob":
            if not isinstance(value, str):
                return None
            return self.operand.fullmatch(value) is not None
        if op == "max_length":
            try:
                return bool(len(value) <= self.operand)
            except TypeError:
                return None
        return None  # pragma: no cover - ops are validated at load time

    def _within(self, num: int | float | Decimal) -> bool:
        """``num`` is within this ``min`` or ``max``."""
        return bool(num >= self.operand) if self.op == "min" else bool(num <= self.operand)


def json_kind(value: Any) -> str | None:
    """The JSON type of ``value``: null, boolean, number, string, array or object (None: no
    JSON value). A bool is a boolean, never the number 1 or 0 Python equates it with."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | Decimal):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object" if isinstance(value, Mapping) else None


def as_number(value: Any) -> int | float | Decimal | None:
    """The exact number of an int, float, Decimal, bool or numeric string (None: not a number,
    or NaN). A numeric string is a Decimal, not a float: a float of "100.0000000000000001" or
    of 10**18 + 1 is 100 or 10**18, yet a tool taking a Decimal or an int acts on the exact
    value, so a ``max`` would pass an amount over it (a tool taking a float: :func:`_readings`).
    Python compares int, float and Decimal exactly with each other."""
    if isinstance(value, str) and _NUMERIC.match(value):
        try:
            return Decimal(value)
        except InvalidOperation:  # an exponent past Decimal's range (either sign): it
            return None  # is no number the policy can place, so it counts against the caller
    if isinstance(value, Decimal):
        return None if value.is_nan() else value  # is_nan: comparing an sNaN raises
    if isinstance(value, float):
        return None if math.isnan(value) else value  # NaN: neither over nor under a limit
    return value if isinstance(value, int) else None  # a huge int: exact, compared cheaply


def _readings(value: Any) -> tuple[int | float | Decimal, ...]:
    """The numbers a tool may be handed for ``value``: its exact number (:func:`as_number`)
    and, for a numeric string, an int or a Decimal, the float it rounds to, which a tool
    taking a float is handed ("999.99999999999999999": 1000.0, "1e-400": 0.0, 10**21 - 1:
    1e21); an int a tool parses from a string equals the exact number. Empty: no number, or
    a string ``float`` does not read."""
    num = as_number(value)
    if num is None:
        return ()
    if isinstance(value, bool | float):
        return (num,)
    try:
        return num, float(value)
    except OverflowError:  # an int past any float: no float tool is handed it
        return (num,)
    except ValueError:  # a separator (\x1c-\x1f) Decimal strips around it and float does not
        return ()


def _float(value: Any) -> float | None:
    """``as_number`` as a float; an int too large for one is ±inf."""
    num = as_number(value)
    if num is None:
        return None
    try:
        return float(num)
    except OverflowError:  # only an int overflows
        return math.inf if num > 0 else -math.inf


@dataclass(frozen=True, slots=True)
class Rule:
    index: int
    description: str
    callers: re.Pattern[str]
    targets: re.Pattern[str]
    effect: Effect
    roles: frozenset[str] | None
    identity_types: frozenset[str] | None
    attrs: tuple[tuple[str, Any], ...]
    arguments: tuple[ArgCondition, ...]
    caller_globs: tuple[str, ...] = ("*",)
    target_globs: tuple[str, ...] = ("*",)


@dataclass(frozen=True, slots=True)
class Limit:
    index: int
    callers: re.Pattern[str]
    targets: re.Pattern[str]
    count: int
    period: float
    text: str


@dataclass(frozen=True, slots=True)
class Budget:
    """A spending limit the whole team shares: model ``tokens``, model ``cost`` (US dollars)
    and governed ``calls``, each optional, counted ``per`` principal, run or team, within a
    fixed ``period`` of seconds (None: for as long as the counter lives)."""

    index: int
    name: str
    callers: re.Pattern[str]
    targets: re.Pattern[str]
    per: str
    period: float | None
    tokens: int | None
    cost: float | None
    calls: int | None
    period_text: str | None = None

    def limit(self, metric: str) -> float | None:
        """The limit on ``metric`` (tokens, cost or calls; None: not limited here)."""
        value: float | None = getattr(self, metric)
        return value


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    default_effect: Effect
    rules: tuple[Rule, ...]
    limits: tuple[Limit, ...]
    redaction: Redactor = DEFAULT_REDACTOR
    budgets: tuple[Budget, ...] = ()


def _str_list(value: Any, what: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"{where}: {what} must be a non-empty list of strings")
    return tuple(value)


def _check_keys(node: Mapping[str, Any], allowed: frozenset[str], what: str, source: str) -> None:
    for key in node:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            raise PolicyError(
                f"{_where(source, node, key)}: unknown key {key!r} in {what} (known: {known})"
            )


def _effect(value: Any, where: str) -> Effect:
    if value not in EFFECTS:
        raise PolicyError(f"{where}: effect must be one of allow, deny, approve (got {value!r})")
    return value  # type: ignore[no-any-return]


def _arg_conditions(spec: Any, source: str) -> tuple[ArgCondition, ...]:
    where = _where(source, spec)
    if not isinstance(spec, Mapping):
        raise PolicyError(f"{where}: conditions.arguments must be a mapping of argument names")
    out: list[ArgCondition] = []
    for name, test in spec.items():
        at = _where(source, spec, name)
        if isinstance(test, list):
            test = {"in": test}
        elif not isinstance(test, Mapping):
            test = {"eq": test}
        if not test:
            raise PolicyError(f"{at}: argument condition for {name!r} is empty")
        for op, operand in test.items():
            if op not in _ARG_OPS:
                known = ", ".join(sorted(_ARG_OPS))
                raise PolicyError(f"{at}: unknown operator {op!r} for {name!r} (known: {known})")
            out.append(ArgCondition(name, op, _operand(op, operand, f"{at}: {name}.{op}")))
    return tuple(out)


def _operand(op: str, operand: Any, where: str) -> Any:
    if op in ("min", "max"):
        num = as_number(operand)
        if num is None or isinstance(operand, str):
            raise PolicyError(f"{where} must be a number")
        return num
    if op in ("in", "not_in"):
        if not isinstance(operand, list):
            raise PolicyError(f"{where} must be a list")
        for item in operand:
            _scalar(item, f"{where} item")
        return tuple(operand)
    if op in ("eq", "ne"):
        return _scalar(operand, where)
    if op == "glob":
        if not isinstance(operand, str):
            raise PolicyError(f"{where} must be a string pattern")
        return compile_globs((operand,))
    if op == "max_length" and (not isinstance(operand, int) or isinstance(operand, bool)):
        raise PolicyError(f"{where} must be an integer")
    return operand


def _scalar(operand: Any, where: str) -> Any:
    """An eq/in operand, which is compared with one JSON value: YAML's dates, binaries and
    sets never equal one, so a rule written with them would never match."""
    if isinstance(operand, date | time):
        raise PolicyError(f"{where} is a YAML date or time: quote it to compare a string")
    if operand is not None and not isinstance(operand, bool | int | float | str):
        raise PolicyError(f"{where} must be a string, a number, true, false or null")
    if isinstance(operand, float) and not math.isfinite(operand):
        raise PolicyError(f"{where} must be a finite number")
    return operand


def _entry(
    section: str,
    index: int,
    node: Any,
    source: str,
    allowed: frozenset[str],
    needs: Mapping[str, str],
) -> str:
    """Check ``section[index]`` is a mapping with only ``allowed`` keys and every key of
    ``needs`` (key -> how the error names it); returns its location for later messages."""
    where = _where(source, node)
    if not isinstance(node, Mapping):
        raise PolicyError(f"{where}: {section}[{index}] must be a mapping")
    _check_keys(node, allowed, f"{section}[{index}]", source)
    for key, named in needs.items():
        if key not in node:
            raise PolicyError(f"{where}: {section}[{index}] needs {named}")
    return where


def _rule(index: int, node: Any, source: str) -> Rule:
    _entry("rules", index, node, source, _RULE_KEYS, {"targets": "targets", "effect": "an effect"})
    conditions = node.get("conditions") or {}
    if not isinstance(conditions, Mapping):
        raise PolicyError(f"{_where(source, node, 'conditions')}: conditions must be a mapping")
    _check_keys(conditions, _CONDITION_KEYS, f"rules[{index}].conditions", source)
    roles = conditions.get("roles")
    types = conditions.get("identity_types")
    attrs = conditions.get("attrs") or {}
    if not isinstance(attrs, Mapping):
        raise PolicyError(f"{_where(source, conditions, 'attrs')}: attrs must be a mapping")
    cwhere = _where(source, conditions)
    callers = _str_list(node.get("callers", ["*"]), "callers", _where(source, node, "callers"))
    targets = _str_list(node["targets"], "targets", _where(source, node, "targets"))
    description = node.get("description")
    if description is not None and not isinstance(description, str):
        raise PolicyError(f"{_where(source, node, 'description')}: description must be a string")
    return Rule(
        index=index,
        description=description or f"rule {index}",
        callers=compile_globs(callers),
        targets=compile_globs(targets),
        caller_globs=callers,
        target_globs=targets,
        effect=_effect(node["effect"], _where(source, node, "effect")),
        roles=None if roles is None else frozenset(_str_list(roles, "roles", cwhere)),
        identity_types=None if types is None else frozenset(_str_list(types, "types", cwhere)),
        attrs=tuple(sorted(attrs.items())),
        arguments=_arg_conditions(conditions["arguments"], source)
        if "arguments" in conditions
        else (),
    )


def parse_rate(text: Any, where: str) -> tuple[int, float]:
    """``"30/min"`` -> (30, 60.0). Units: s, min, h, day (with an optional count: 10/5min)."""
    match = _RATE.match(str(text)) if isinstance(text, str | int) else None
    unit = _PERIODS.get(match.group(3).rstrip("s") or "s") if match else None
    if match is None or unit is None:
        raise PolicyError(f"{where}: rate must look like '30/min' (units s, min, hour, day)")
    count, multiple = int(match.group(1)), int(match.group(2) or 1)
    if count < 1 or multiple < 1:
        raise PolicyError(f"{where}: rate must be positive")
    return count, unit * multiple


def _limit(index: int, node: Any, source: str) -> Limit:
    where = _entry("limits", index, node, source, _LIMIT_KEYS, {"rate": "a rate"})
    count, period = parse_rate(node["rate"], _where(source, node, "rate"))
    return Limit(
        index=index,
        callers=compile_globs(_str_list(node.get("callers", ["*"]), "callers", where)),
        targets=compile_globs(_str_list(node.get("targets", ["*"]), "targets", where)),
        count=count,
        period=period,
        text=str(node["rate"]),
    )


def _budget(index: int, node: Any, source: str) -> Budget:
    where = _entry("budgets", index, node, source, _BUDGET_KEYS, {})
    per = node.get("per", "principal")
    if per not in _BUDGET_SCOPES:
        raise PolicyError(
            f"{_where(source, node, 'per')}: per must be principal, run or team (got {per!r})"
        )
    limits: dict[str, Any] = {}
    for metric, kind in (("tokens", int), ("cost", float), ("calls", int)):
        value = node.get(metric)
        if value is None:
            continue
        number = _float(value)
        if (
            isinstance(value, bool | str)
            or number is None
            or number < 0
            or (kind is int and not float(number).is_integer())
        ):
            what = "a whole number" if kind is int else "a number (US dollars)"
            raise PolicyError(f"{_where(source, node, metric)}: {metric} must be {what} >= 0")
        limits[metric] = kind(number)
    if not limits:
        raise PolicyError(f"{where}: budgets[{index}] needs tokens, cost or calls")
    period, period_text = None, None
    if node.get("period") is not None:
        period_text = str(node["period"])
        at = _where(source, node, "period")
        try:
            period = parse_rate(f"1/{period_text}", at)[1]
        except PolicyError:
            raise PolicyError(f"{at}: period must look like hour, day or 7day") from None
    name = node.get("name", f"budget {index}")
    if not isinstance(name, str) or not name.strip():
        raise PolicyError(f"{_where(source, node, 'name')}: name must be a non-empty string")
    return Budget(
        index=index,
        name=name.strip(),
        callers=compile_globs(_str_list(node.get("callers", ["*"]), "callers", where)),
        targets=compile_globs(_str_list(node.get("targets", ["*"]), "targets", where)),
        per=per,
        period=period,
        tokens=limits.get("tokens"),
        cost=limits.get("cost"),
        calls=limits.get("calls"),
        period_text=period_text,
    )


def compile_policy(data: Any, source: str = "policy") -> CompiledPolicy:
    """Validate a policy document and compile its globs; raises PolicyError naming the line."""
    if data is None:
        raise PolicyError(f"{source}: the policy is empty")
    if not isinstance(data, Mapping):
        raise PolicyError(f"{_where(source, data)}: a policy must be a mapping")
    _check_keys(data, _TOP_KEYS, "the policy", source)
    default = _effect(data.get("default_effect", "deny"), _where(source, data, "default_effect"))
    rules = data.get("rules") or []
    if not isinstance(rules, list):
        raise PolicyError(f"{_where(source, data, 'rules')}: rules must be a list")
    limits = data.get("limits") or []
    if isinstance(limits, Mapping):
        limits = [limits]
    if not isinstance(limits, list):
        raise PolicyError(f"{_where(source, data, 'limits')}: limits must be a list")
    budgets = data.get("budgets") or []
    if not isinstance(budgets, list):
        raise PolicyError(f"{_where(source, data, 'budgets')}: budgets must be a list")
    compiled_budgets = tuple(_budget(i, b, source) for i, b in enumerate(budgets))
    names = [b.name for b in compiled_budgets]
    for name in names:
        if names.count(name) > 1:
            raise PolicyError(f"{_where(source, data, 'budgets')}: two budgets are named {name!r}")
    return CompiledPolicy(
        default_effect=default,
        rules=tuple(_rule(i, r, source) for i, r in enumerate(rules)),
        limits=tuple(_limit(i, lim, source) for i, lim in enumerate(limits)),
        redaction=_redaction(data.get("redaction"), source, data),
        budgets=compiled_budgets,
    )


def _redaction(node: Any, source: str, parent: Any) -> Redactor:
    """The ``redaction:`` section: extra value ``patterns`` (a list of regexes, or names to
    regexes), built-in patterns to ``disable`` (names, or ``all``) and ``span_arguments``
    (redacted argument values on telemetry spans; default false)."""
    if node is None:
        return DEFAULT_REDACTOR
    where = _where(source, parent, "redaction")
    if not isinstance(node, Mapping):
        raise PolicyError(f"{where}: redaction must be a mapping")
    _check_keys(node, _REDACTION_KEYS, "redaction", source)
    patterns = node.get("patterns") or []
    if not isinstance(patterns, list | Mapping):
        raise PolicyError(f"{where}: redaction.patterns must be a list or a mapping of regexes")
    if len(patterns) > MAX_PATTERNS:
        raise PolicyError(f"{where}: redaction.patterns holds more than {MAX_PATTERNS} patterns")
    items = patterns.items() if isinstance(patterns, Mapping) else enumerate(patterns)
    for key, pattern in items:
        if not isinstance(pattern, str):
            raise PolicyError(f"{where}: redaction pattern {key!r} must be a string")
        try:
            check_policy_pattern(str(key), pattern)  # before any compiling: see its doc
        except ValueError as exc:
            raise PolicyError(f"{where}: redaction {exc}") from None
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PolicyError(f"{where}: redaction pattern {key!r} is invalid: {exc}") from None
    disable = node.get("disable") or ()
    off = _str_list(disable, "redaction.disable", where) if disable else ()
    span_arguments = node.get("span_arguments", False)
    if not isinstance(span_arguments, bool):
        raise PolicyError(f"{where}: redaction.span_arguments must be true or false")
    try:
        return Redactor(patterns, disable=off, span_arguments=span_arguments)
    except ValueError as exc:
        raise PolicyError(f"{where}: redaction: {exc}") from None
