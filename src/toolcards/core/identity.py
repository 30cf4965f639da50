"""Identity: who is calling (set by the surface, never read from tool arguments), and the keys
that name one call (:func:`joined_key`, :func:`durable_call_key`)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True, init=False)
class Identity:
    """A principal: ``id`` (matched by policy ``callers`` globs), ``type`` (user, agent, service,
    anonymous), ``roles`` and free-form ``attrs``. Frozen and hashable."""

    id: str
    type: str
    roles: frozenset[str]
    attrs: Mapping[str, Any] = field(compare=True, hash=False)
    _hash: int = field(init=False, repr=False, compare=False, hash=False)

    def __init__(
        self,
        id: str,
        type: str = "user",
        roles: Iterable[str] = (),
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(id, str) or not id:
            raise ValueError("Identity.id must be a non-empty string")
        if isinstance(roles, str):
            roles = (roles,)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "type", str(type))
        object.__setattr__(self, "roles", frozenset(str(r) for r in roles))
        object.__setattr__(self, "attrs", MappingProxyType(dict(attrs)) if attrs else _EMPTY)
        object.__setattr__(self, "_hash", hash((self.id, self.type, self.roles)))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Identity):
            return NotImplemented
        return (
            self.id == other.id
            and self.type == other.type
            and self.roles == other.roles
            and dict(self.attrs) == dict(other.attrs)
        )

    @classmethod
    def anonymous(cls) -> Identity:
        """The caller nobody vouched for; a default-deny policy rejects it."""
        return ANONYMOUS

    @property
    def is_anonymous(self) -> bool:
        return self.type == "anonymous"

    def __repr__(self) -> str:
        roles = ",".join(sorted(self.roles))
        return f"Identity({self.id!r}, type={self.type!r}, roles=[{roles}])"


ANONYMOUS = Identity("anonymous", "anonymous")

calling_principal: ContextVar[Identity | None] = ContextVar(
    "toolcards_calling_principal", default=None
)
"""The principal of the governed call whose tool runs in this context (the executor sets it;
a tool that records who wrote something reads it)."""


_MAX_KEY = 400
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # PostgreSQL refuses a NUL, UTF-8 a surrogate


def joined_key(*parts: str) -> str:
    """One unambiguous key of ``parts`` (each length-prefixed: ``r/1`` + ``x`` is not ``r`` +
    ``1/x``); a key longer than 400 characters, or one no store takes (a NUL, a lone
    surrogate: a model's tool call id may hold one), is its SHA-256 digest, never dropped."""
    key = "/".join(f"{len(part)}:{part}" for part in parts)
    if len(key) <= _MAX_KEY and not UNSTORABLE.search(key):
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def durable_call_key(run_id: str | None, run_step: int, tool_call_id: str | None) -> str | None:
    """The key of one tool call of one run: the run, the step whose model response made it (a
    response never repeats an id; a later one may, for another call) and its tool call id
    (None when either id is missing)."""
    if not run_id or not tool_call_id:
        return None
    return joined_key(run_id, str(run_step), tool_call_id)
