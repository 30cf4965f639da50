"""Bearer tokens checked against stored sha256 digests, in constant time."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from toolcards.core.errors import ToolcardsError
from toolcards.core.identity import ANONYMOUS, Identity


class InvalidToken(ToolcardsError):
    """A bearer token was presented but matches no configured principal."""


@dataclass(frozen=True, slots=True)
class TokenTable:
    """Identities by token digest. :meth:`resolve` compares against every entry with
    ``hmac.compare_digest`` (no early exit), so timing does not reveal which digest matched."""

    entries: tuple[tuple[bytes, Identity], ...] = ()

    @classmethod
    def from_digests(cls, pairs: Iterable[tuple[str, Identity]]) -> TokenTable:
        """``pairs`` of (hex sha256 digest, identity); a ``sha256:`` prefix is accepted."""
        entries = []
        for digest, identity in pairs:
            raw = bytes.fromhex(digest.removeprefix("sha256:"))
            if len(raw) != 32:
                raise ValueError("a token digest is 32 bytes of sha256")
            entries.append((raw, identity))
        return cls(tuple(entries))

    @classmethod
    def from_tokens(cls, pairs: Iterable[tuple[str, Identity]]) -> TokenTable:
        """``pairs`` of (plain token, identity), hashed here (for code-built servers)."""
        return cls(tuple((hashlib.sha256(t.encode()).digest(), i) for t, i in pairs))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def resolve(self, token: str) -> Identity:
        """The identity of ``token``; raises :class:`InvalidToken` when none matches."""
        presented = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: Identity | None = None
        for digest, identity in self.entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = identity
        if found is None:
            raise InvalidToken("invalid bearer token")
        return found

    def from_header(self, authorization: str | None) -> Identity:
        """The caller behind an ``Authorization`` header value: no header is anonymous; a
        bearer token must match (else :class:`InvalidToken`); other schemes are refused."""
        if authorization is None or not authorization.strip():
            return ANONYMOUS
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise InvalidToken("expected 'Authorization: Bearer <token>'")
        return self.resolve(token.strip())
