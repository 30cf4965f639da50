"""Who may fire whom, and the per-name report of a batch of hires or fires.

The rules are pure functions of the caller's name, the card's protected globs and the roster,
so they are tested without a team:

- a name is taken as the roster names it (``alice`` is ``@alice``, :func:`member_name`), and
  a role exactly (:func:`role_name`): blank space or a hidden character around either is
  refused, never cleaned, so a policy rule decides on the name or role acted on;
- a ``#`` name is a tool actor, never a member;
- the caller never fires itself (its name comes from the bound observer, never from input);
- a name matching one of the card's ``protected`` globs is refused;
- a name that is not on the roster (unknown, or fired already) is reported as such.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from toolcards.core.errors import RetriableError
from toolcards.core.names import glob_matcher
from toolcards.runtime.messaging import member_name
from toolcards.runtime.profiles import ROLE_PATTERN

MAX_NAME_CHARS = 80


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one requested name or role."""

    subject: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"- {self.subject}: {self.detail}"


def shown(value: object) -> str:
    """A model-supplied value, cut for display."""
    text = value if isinstance(value, str) else repr(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_NAME_CHARS else text[: MAX_NAME_CHARS - 3] + "..."


def role_name(role: object) -> str:
    """``role`` unchanged when it can name a role (roles are looked up exactly); else
    RetriableError, before a policy decides (``PathArgs(role_name, fields=("role",))``)."""
    if not isinstance(role, str) or not ROLE_PATTERN.fullmatch(role):
        raise RetriableError(f"{role!r:.80} is not a role name such as researcher")
    return role


def is_protected(name: str, globs: Iterable[str]) -> bool:
    """True when ``name`` (with or without its ``@``) matches one of ``globs``."""
    matches = glob_matcher(globs)
    return matches(name) or matches(name.removeprefix("@"))


def fire_refusal(
    name: object, caller: str, protected: Iterable[str], is_member: Callable[[str], bool]
) -> tuple[str | None, str | None]:
    """``(member, None)`` when ``name`` may be fired by ``caller``, else ``(None, reason)``."""
    if isinstance(name, str) and name.startswith("#"):
        return None, "refused: names starting with '#' are tool actors, not members"
    try:
        member = member_name(name)
    except RetriableError as exc:
        return None, f"refused: {exc}"
    if member == caller:
        return None, "refused: you cannot fire yourself"
    if is_protected(member, protected):
        return None, "refused: this member is protected"
    if not is_member(member):
        return None, "not fired: no such member on the team (unknown or already fired)"
    return member, None


def report(verb: str, outcomes: list[Outcome]) -> str:
    """``"<verb> 2 of 3:"`` and one line per requested item, in request order."""
    done = sum(1 for o in outcomes if o.ok)
    head = f"{verb} {done} of {len(outcomes)}:"
    return "\n".join([head, *(o.line() for o in outcomes)])
