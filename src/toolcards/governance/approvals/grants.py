"""Remembered approvals: grants, made by an approver from a pending call, and checked by the
approval gate before it asks anyone.

A grant (:class:`~toolcards.core.grants.Grant`) says: this principal may call this tool with
arguments matching this pattern, until this time, and optionally only in the session the call
came from. It is made from a request the approver is deciding (:meth:`Remember.grant`): the
principal and the tool are the request's, never globs, and the pattern must cover the request's
own arguments, so a grant starts from what the approver saw; its pattern, as stored, is what is
shown and what is matched.

A pattern names every argument a covered call may pass (a call with another argument is not
covered): ``{"eq": value}`` (exactly that JSON value), ``{"glob": "notes/*"}`` (a string
matching the shell-style pattern, where ``*`` also matches ``/``), or ``"any"`` (any value, or
none). It is matched against the call's canonical arguments (the paths the tool will act on,
every path of a call that writes several), as the policy decides.

A grant is only ever asked inside the approval gate, after the policy decided ``approve``: it
never widens a ``deny`` (a call the policy denies ends before), and a reloaded policy that
denies a call stops it whatever grants exist. It never lets a principal approve its own calls:
its maker must hold the approver role and differ from the principal, checked when it is made
and again when it is used.

:class:`GrantBook` is the gate's view of one store's grants: a copy kept in this process,
read again when the store's stamp says a grant was made or revoked by any process (a SQLite
file's stamp is eight mapped bytes; PostgreSQL's moves on a notification, and each use is
confirmed by one query), so an expired or revoked grant stops at once everywhere.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.errors import ToolcardsError
from toolcards.core.grants import Grant
from toolcards.core.identity import Identity
from toolcards.stores.base import GrantStore

__all__ = [
    "MAX_GRANTS",
    "MAX_GRANT_SECONDS",
    "GrantBook",
    "GrantError",
    "Remember",
    "covers",
    "describe",
    "exact_pattern",
    "parse_duration",
    "parse_matches",
    "parse_pattern",
]

MAX_GRANT_SECONDS = 30 * 86400.0
"""The longest a grant may last (30 days)."""
MAX_GRANTS = 10_000
"""Live grants one team may hold (a grant more is refused)."""
MAX_PATTERN = 65_536
"""Characters of canonical JSON a pattern may have."""
_MAX_GLOB = 1_000
_ANY = "any"


class GrantError(ToolcardsError, ValueError):
    """A grant that cannot be made or revoked; the message is one line."""


@dataclass(frozen=True, slots=True)
class Remember:
    """What an approver asks to remember when granting a request: for ``seconds`` from now
    (at most :data:`MAX_GRANT_SECONDS`), only in the request's ``session`` or in any, with
    ``pattern`` (None: the request's exact arguments; else each argument's matcher, see the
    module doc; arguments it leaves out stay exact)."""

    seconds: float
    session: bool = False
    pattern: Mapping[str, Any] | None = None

    def grant(self, request: ApprovalRequest, approver: Identity, now: float) -> Grant:
        """The grant of ``request`` by ``approver``; :class:`GrantError` when it cannot be."""
        if not 0 < self.seconds <= MAX_GRANT_SECONDS:
            raise GrantError(f"a grant lasts more than 0 s and at most {MAX_GRANT_SECONDS:g} s")
        args = request.exact_args
        if args is None:
            raise GrantError("its exact arguments were not recorded, so nobody can have seen them")
        pattern = exact_pattern(args)
        if self.pattern is not None:
            given = parse_pattern(self.pattern)
            unknown = sorted(set(given) - set(args))
            if unknown:
                raise GrantError(
                    f"the pattern names {', '.join(unknown)}, which the request does not pass"
                )
            pattern.update(given)
        if not covers(pattern, args):
            raise GrantError("the pattern does not cover the request the approver saw")
        if self.session and not request.session:
            raise GrantError("the request came from no session, so none can be remembered")
        return Grant(
            principal=request.principal,
            tool_id=request.tool_id,
            pattern=pattern,
            expires_at=now + self.seconds,
            created_by=approver.id,
            created_at=now,
            session=request.session if self.session else "",
            approval_id=request.approval_id,
        )


def exact_pattern(args: Mapping[str, Any]) -> dict[str, Any]:
    """The pattern covering exactly ``args``."""
    return {name: {"eq": value} for name, value in args.items()}


def parse_pattern(data: Any) -> dict[str, Any]:
    """A pattern given as data, checked (one line, :class:`GrantError`, when malformed)."""
    if not isinstance(data, Mapping):
        raise GrantError("a pattern is a mapping of argument names to matchers")
    out: dict[str, Any] = {}
    for name, spec in data.items():
        if not isinstance(name, str) or not name:
            raise GrantError("a pattern's argument names are non-empty strings")
        if spec == _ANY:
            out[name] = _ANY
        elif isinstance(spec, Mapping) and set(spec) == {"eq"}:
            out[name] = {"eq": spec["eq"]}
        elif isinstance(spec, Mapping) and set(spec) == {"glob"}:
            glob = spec["glob"]
            if not isinstance(glob, str) or not glob or len(glob) > _MAX_GLOB:
                raise GrantError(f"{name}: a glob is a non-empty string of at most {_MAX_GLOB}")
            out[name] = {"glob": glob}
        else:
            raise GrantError(f'{name}: a matcher is "any", {{"eq": value}} or {{"glob": "..."}}')
    try:
        text = json.dumps(out, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        raise GrantError("a pattern's values must be JSON") from None
    if len(text) > MAX_PATTERN:
        raise GrantError(f"the pattern is longer than {MAX_PATTERN} characters of JSON")
    return out


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hour|d|day)s?\s*$")
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


def parse_duration(text: str) -> float:
    """``"8h"`` -> 28800.0 (units s, m/min, h, d); :class:`GrantError` when malformed or
    longer than :data:`MAX_GRANT_SECONDS`."""
    found = _DURATION.match(text) if isinstance(text, str) else None
    if found is None:
        raise GrantError(f"a duration looks like 30m, 8h or 7d, not {text!r:.40}")
    seconds = float(found.group(1)) * _UNITS[found.group(2)]
    if not 0 < seconds <= MAX_GRANT_SECONDS:
        days = MAX_GRANT_SECONDS / 86400
        raise GrantError(f"a grant lasts more than 0 s and at most {days:g} days")
    return seconds


def parse_matches(items: Sequence[str]) -> dict[str, Any]:
    """``NAME=any`` / ``NAME=glob:PATTERN`` items (a command line's) as a pattern."""
    pattern: dict[str, Any] = {}
    for item in items:
        name, sep, spec = item.partition("=")
        if not sep or not name:
            raise GrantError(f"a match is NAME=any or NAME=glob:PATTERN, not {item!r:.60}")
        if spec == _ANY:
            pattern[name] = _ANY
        elif spec.startswith("glob:"):
            pattern[name] = {"glob": spec.removeprefix("glob:")}
        else:
            raise GrantError(f"{name}: a match is any or glob:PATTERN (other arguments stay exact)")
    return parse_pattern(pattern)


def covers(
    pattern: Mapping[str, Any], args: Mapping[str, Any], each: Mapping[str, Sequence[Any]] = {}
) -> bool:
    """Whether ``pattern`` covers a call with (canonical) ``args``."""
    return _matcher(pattern)(args, each)


def describe(grant: Grant) -> str:
    """The grant as it will match, in one line."""
    parts = []
    for name, spec in sorted(grant.pattern.items()):
        if spec == _ANY:
            parts.append(f"{name} any value")
        elif "glob" in spec:
            parts.append(f"{name} matching {json.dumps(spec['glob'], ensure_ascii=False)}")
        else:
            value = json.dumps(spec["eq"], sort_keys=True, separators=(",", ":"))
            parts.append(f"{name} = {value if len(value) <= 80 else value[:77] + '...'}")
    args = ", ".join(parts) if parts else "no arguments"
    until = datetime.fromtimestamp(grant.expires_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    where = f", in session {grant.session}" if grant.session else ""
    return f"{grant.principal} may call {grant.tool_id} with {args}, until {until}{where}"


Test = Callable[[Any], bool]
Covers = Callable[[Mapping[str, Any], Mapping[str, Sequence[Any]]], bool]
_SCALARS = (str, int, float, bool, type(None))
_MISSING = object()
_GLOB_MARKS = frozenset("*?[")


def _equals(operand: Any) -> Test:
    """A test of one JSON value: exactly ``operand`` (a scalar compared by type and value)."""
    kind = type(operand)
    if kind in _SCALARS:
        return lambda value: type(value) is kind and value == operand
    return lambda value: _same(value, operand)


def _glob(glob: str) -> Test:
    """A test of one string: matching the shell-style ``glob`` (``*`` also matches ``/``)."""
    head = glob[:-1]
    if glob.endswith("*") and not _GLOB_MARKS.intersection(head):  # the common prefix/*
        return lambda value: type(value) is str and value.startswith(head)
    match = re.compile(fnmatch.translate(glob), re.S).fullmatch
    return lambda value: type(value) is str and match(value) is not None


def _matcher(pattern: Mapping[str, Any]) -> Covers:
    """The test of ``pattern`` on a call's arguments (and every path of the call): the names a
    call may pass, the arguments that must be exactly a string or null, the string prefixes
    (``notes/*``), then a test per other argument that is not ``any``. Built for the common
    shapes to cost a fraction of a microsecond: the gate asks it before every call a grant may
    cover."""
    exact: list[tuple[str, Any]] = []
    prefixes: list[tuple[str, str]] = []
    tests: list[tuple[str, Test]] = []
    globs: list[tuple[str, Test]] = []
    for name, spec in pattern.items():
        if spec == _ANY:
            continue
        if "glob" in spec:
            glob: str = spec["glob"]
            head = glob[:-1]
            globs.append((name, _glob(glob)))
            if glob.endswith("*") and not _GLOB_MARKS.intersection(head):
                prefixes.append((name, head))
            else:
                tests.append(globs[-1])
        elif spec["eq"] is None or type(spec["eq"]) is str:  # no other value equals one
            exact.append((name, spec["eq"]))
        else:
            tests.append((name, _equals(spec["eq"])))
    allowed = frozenset(pattern).issuperset
    exactly, starts, checks, paths = tuple(exact), tuple(prefixes), tuple(tests), tuple(globs)

    def covers(args: Mapping[str, Any], each: Mapping[str, Sequence[Any]]) -> bool:
        if not allowed(args):
            return False
        for name, value in exactly:
            if args.get(name, _MISSING) != value:
                return False
        for name, head in starts:
            value = args.get(name)
            if type(value) is not str or not value.startswith(head):
                return False
        for name, test in checks:
            if name not in args or not test(args[name]):
                return False
        if each:
            for name, test in paths:  # every path of the call
                if not all(test(other) for other in each.get(name, ())):
                    return False
        return True

    return covers


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (``True`` is not ``1``, ``1`` is not ``1.0``)."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


class GrantBook:
    """The grants of a broker's store as the approval gate asks them (see the module doc): a
    copy in this process, by (principal, tool), read again when the store's stamp moves."""

    def __init__(self, source: Any, clock: Callable[[], float] = time.time) -> None:
        self._source = source
        """What holds the store (an approval broker): its grants are read from the store it
        holds now (a program may give the broker another store before serving)."""
        self._clock = clock
        self._lock = threading.Lock()
        self.admitting: Admitting = _none
        self._bind()

    def _bind(self) -> None:
        """Read the grants of the store the source holds now, through a new :meth:`admitting`
        (a closure over its state: the gate asks it before every call a grant may cover)."""
        held = getattr(self._source, "store", None)
        found = getattr(held, "grants", None)
        store = found if isinstance(found, GrantStore) else None
        self.store = store
        read_stamp = store.stamp if store is not None else _no_stamp
        confirmed = None if store is None or store.fresh else store.live
        clock, source, lock = self._clock, self._source, self._lock
        seen: list[object] = [_UNREAD]  # the stamp the grants were read at
        kept: list[dict[tuple[str, str], tuple[_Entry, ...]]] = [{}]  # by (principal, tool)

        def reload(stamp: object) -> None:
            with lock:
                if stamp == seen[0] or store is None:
                    return
                by_key: dict[tuple[str, str], list[_Entry]] = {}
                for grant in store.listing(clock(), limit=MAX_GRANTS):
                    if grant.created_by == grant.principal:  # never its own approver
                        continue
                    entry = (grant.expires_at, grant.session, grant, _matcher(grant.pattern))
                    by_key.setdefault((grant.principal, grant.tool_id), []).append(entry)
                kept[0] = {key: tuple(entries) for key, entries in by_key.items()}
                seen[0] = stamp  # read before the grants: a change meanwhile reads them again

        def admitting(
            principal: str,
            tool_id: str,
            args: Mapping[str, Any],
            each: Mapping[str, Sequence[Any]],
            session: str | None,
        ) -> Grant | None:
            """The live grant covering this call (None: none does, and a human is asked)."""
            if source.store is not held:
                self._bind()
                return self.admitting(principal, tool_id, args, each, session)
            stamp = read_stamp()
            if stamp != seen[0]:
                reload(stamp)
            found = kept[0].get((principal, tool_id))
            if not found:
                return None
            now = clock()
            for expires_at, only, grant, covers in found:
                if expires_at <= now or (only and only != session) or not covers(args, each):
                    continue
                if confirmed is None or confirmed(grant.grant_id, now):
                    return grant
            return None

        self.admitting = admitting


Admitting = Callable[
    [str, str, Mapping[str, Any], Mapping[str, Sequence[Any]], str | None], Grant | None
]
_Entry = tuple[float, str, Grant, Covers]
"""A grant as the book keeps it: its expiry, its session ("" for any), itself, its test."""
_UNREAD = object()


def _none(*_: Any) -> Grant | None:
    return None


def _no_stamp() -> object:
    return _UNREAD  # no store: never read, nothing found
