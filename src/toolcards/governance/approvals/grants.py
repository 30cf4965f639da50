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
its maker must hold the approver role and differ from the principal when it is made, and
differ from the principal again when it is used (a grant outlives a later change of its
maker's roles: revoke a former approver's grants).

:class:`GrantBook` is the gate's view of one store's grants: a copy kept in this process,
read again when the store's stamp says a grant was made or revoked by any process (a SQLite
file's stamp is eight mapped bytes; PostgreSQL's moves on a notification, and each use is
confirmed by one query), so an expired or revoked grant stops at once everywhere.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from types import MappingProxyType
from typing import Any, Protocol

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
    return _admitter(pattern, "", math.inf, "", None, time.time)(_Probe(args, each))


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
Admit = Callable[["Matched"], bool]
_SCALARS = (str, int, float, bool, type(None))
_GLOB_MARKS = frozenset("*?[")
_LAST = chr(0x10FFFF)


class Matched(Protocol):
    """What a grant's test reads of a call: its canonical arguments (and every path of a call
    that names several), its session; the id of the grant that covers it is set on it."""

    @property
    def args(self) -> Mapping[str, Any]: ...

    @property
    def each(self) -> Mapping[str, Sequence[Any]] | None: ...

    @property
    def session(self) -> str | None: ...

    grant_id: str | None


class Covered(Matched, Protocol):
    """A call as :attr:`GrantBook.admitting` reads it (the executor's call record)."""

    @property
    def identity(self) -> Identity: ...

    @property
    def tool_id(self) -> str: ...


@dataclass(slots=True)
class _Probe:
    """Arguments asked of a pattern outside a call (:func:`covers`)."""

    args: Mapping[str, Any]
    each: Mapping[str, Sequence[Any]] | None
    session: str | None = None
    grant_id: str | None = None


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


def _admitter(
    pattern: Mapping[str, Any],
    grant_id: str,
    expires_at: float,
    only: str,
    confirmed: Callable[[str, float], bool] | None,
    clock: Callable[[], float],
) -> Admit:
    """The test of one grant on a call, which names the grant on the call it covers: live
    (before ``expires_at``; ``confirmed`` by the store when it is given), in its session
    (``only``, "" for any), and its ``pattern`` covering the call's arguments (and every path of
    the call). Built for the common shapes to cost a fraction of a microsecond, since the gate
    asks it before every call a grant may cover: the number of arguments a call may pass (its
    names when some are ``any``), the arguments that must be exactly a string or null (one
    lookup of them all), a string prefix (``notes/*``: two comparisons), then the others."""
    exact: dict[str, Any] = {}
    prefixes: list[tuple[str, str, str]] = []  # (name, prefix, the first string after them)
    tests: list[tuple[str, Test]] = []
    globs: list[tuple[str, Test]] = []
    for name, spec in pattern.items():
        if spec == _ANY:
            continue
        if "glob" in spec:
            glob: str = spec["glob"]
            globs.append((name, _glob(glob)))
            head = glob[:-1]
            plain = head and head[-1] < _LAST and not _GLOB_MARKS.intersection(head)
            if glob.endswith("*") and plain:  # the common prefix/*
                prefixes.append((name, head, head[:-1] + chr(ord(head[-1]) + 1)))
            else:
                tests.append(globs[-1])
        elif spec["eq"] is None or type(spec["eq"]) is str:  # no other value equals one
            exact[name] = spec["eq"]
        else:
            tests.append((name, _equals(spec["eq"])))
    tests.extend((name, dict(globs)[name]) for name, _, _ in prefixes[1:])
    size, loose = len(pattern), _ANY in pattern.values()
    allowed = frozenset(pattern).issuperset
    pick = itemgetter(*exact) if exact else None  # one value, or a tuple of them
    want = tuple(exact.values()) if len(exact) > 1 else next(iter(exact.values()), None)
    first: tuple[str, str | None, str] = prefixes[0] if prefixes else ("", None, "")
    prefixed, low, high = first
    rest = _each_test(tuple(tests)) if tests else None
    paths = tuple(globs)
    session = only or None

    def admit(call: Matched) -> bool:
        now = clock()
        if now >= expires_at or (session is not None and call.session != session):
            return False
        args = call.args
        # every argument it names is checked present below, unless "any": so a call passing
        # no more than that many passes no other (a loose pattern asks for its names)
        if len(args) > size or (loose and not allowed(args)):
            return False
        if pick is not None:
            try:
                if pick(args) != want:
                    return False
            except KeyError:  # an argument it names exactly is missing
                return False
        if low is not None:  # a string starts with low when it sorts from low to before high
            value = args.get(prefixed)
            if type(value) is not str or not low <= value < high:
                return False
        if rest is not None and not rest(args):
            return False
        if call.each is not None and not _every_path(paths, call.each):
            return False
        if confirmed is not None and not confirmed(grant_id, now):
            return False
        call.grant_id = grant_id
        return True

    return admit


def _each_test(checks: tuple[tuple[str, Test], ...]) -> Callable[[Mapping[str, Any]], bool]:
    """The test of the arguments of a pattern's other shapes (each present and passing)."""
    return lambda args: all(name in args and test(args[name]) for name, test in checks)


def _every_path(paths: tuple[tuple[str, Test], ...], each: Mapping[str, Sequence[Any]]) -> bool:
    """Every path of a call that names several (``each``) passes its argument's glob."""
    return all(all(test(other) for other in each.get(name, ())) for name, test in paths)


def _any_of(admits: Sequence[Admit]) -> Admit:
    """The test of several grants of one principal and tool: the first that covers a call."""
    if len(admits) == 1:
        return admits[0]
    return lambda call: any(admit(call) for admit in admits)


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
    copy in this process, by tool and principal, read again when the store's stamp moves."""

    def __init__(self, source: Any, clock: Callable[[], float] = time.time) -> None:
        self.store: GrantStore | None = None
        """The grant store read now (the one the source holds)."""
        self.admitting: Callable[[Covered], bool] = self._book(source, clock)
        """True when a live grant covers the call (its ``grant_id`` is then set on it); else
        False, and a human is asked. One function for the book's life: the gate asks it before
        every call a grant may cover."""

    def _book(self, source: Any, clock: Callable[[], float]) -> Callable[[Covered], bool]:
        """:attr:`admitting`, over the grants of the store ``source`` (an approval broker)
        holds now: a program may give the broker another store before serving, and the next
        call reads that one's."""
        lock = threading.Lock()
        held: object = _UNREAD  # the store the source held when it was bound
        read_stamp: Callable[[], object] = _no_stamp
        seen: object = _UNREAD  # the stamp the grants were read at
        kept: dict[str, dict[str, Admit]] = {}  # by tool, then principal

        def bind() -> None:
            nonlocal held, read_stamp, seen, kept
            with lock:
                held = getattr(source, "store", None)
                found = getattr(held, "grants", None)
                self.store = found if isinstance(found, GrantStore) else None
                read_stamp = self.store.stamp if self.store is not None else _no_stamp
                seen, kept = _UNREAD, {}

        def reload() -> None:
            nonlocal seen, kept
            with lock:
                store, stamp = self.store, read_stamp()
                if stamp == seen or store is None:
                    return  # read meanwhile
                confirmed = None if store.fresh else store.live
                by_key: dict[str, dict[str, list[Admit]]] = {}
                for grant in store.listing(clock(), limit=MAX_GRANTS):
                    if grant.created_by == grant.principal:  # never its own approver
                        continue
                    admit = _admitter(
                        grant.pattern,
                        grant.grant_id,
                        grant.expires_at,
                        grant.session,
                        confirmed,
                        clock,
                    )
                    by_tool = by_key.setdefault(grant.tool_id, {})
                    by_tool.setdefault(grant.principal, []).append(admit)
                kept = {
                    tool: {who: _any_of(admits) for who, admits in by_tool.items()}
                    for tool, by_tool in by_key.items()
                }
                seen = stamp  # read before the grants: a change meanwhile reads them again

        def admitting(call: Covered) -> bool:
            if source.store is not held:
                bind()
            if read_stamp() != seen:
                reload()
            return kept.get(call.tool_id, _NO_GRANTS).get(call.identity.id, _uncovered)(call)

        bind()
        return admitting


_UNREAD = object()


def _no_stamp() -> object:
    return _UNREAD  # no store: never read, nothing found


_NO_GRANTS: Mapping[str, Admit] = MappingProxyType({})


def _uncovered(call: Matched) -> bool:
    return False  # no grant of its principal and tool
