"""Signing in to a dashboard whose config holds no token a viewer could use.

A config without such a token (the example config has none) would start a sign-in page
nobody can pass. Then, when the config's local principal may view, ``toolcards dashboard``
makes a one-time token for it and prints a sign-in link (the token is spent by its first
sign-in); otherwise it says in one line which config key is missing and how to make a token.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from toolcards.core.identity import Identity
from toolcards.surfaces.config import new_token
from toolcards.surfaces.dashboard.sessions import DEFAULT_VIEWER_ROLES
from toolcards.surfaces.http.tokens import TokenTable


@dataclass(frozen=True)
class FirstSignIn:
    """What to serve and say: ``tokens`` the dashboard accepts; ``token`` a one-time token
    made here (None: the config's own tokens are used); ``problem`` one line to print."""

    tokens: TokenTable
    token: str | None = None
    problem: str | None = None

    def link(self, base_url: str) -> str | None:
        """The sign-in link for ``token`` (the fragment stays in the browser)."""
        return None if self.token is None else f"{base_url}login#token={self.token}"


def first_sign_in(
    tokens: TokenTable, local: Identity, viewer_roles: Iterable[str] = DEFAULT_VIEWER_ROLES
) -> FirstSignIn:
    """The config's tokens when one of them may view, else a one-time token for ``local``
    when it may, else the config's (empty) tokens and the line saying what is missing."""
    roles = frozenset(viewer_roles)
    if any(identity.roles & roles for _, identity in tokens.entries):
        return FirstSignIn(tokens)
    if local.roles & roles:
        token = new_token()
        return FirstSignIn(TokenTable.from_tokens([(token, local)]), token)
    need = " or ".join(sorted(roles))
    return FirstSignIn(
        tokens,
        problem=(
            f"nobody can sign in: principals.tokens has no token whose roles include {need} "
            f"(nor does principals.local); run `toolcards hash-token` and add "
            f'{{token_sha256: "sha256:...", id: you, roles: [viewer]}} to principals.tokens'
        ),
    )
