"""Bearer JWTs as callers: a token of the configured issuer, signed by one of its published
keys with an allowed public-key algorithm, for this server (``aud``), in its validity window,
becomes the identity ``id_prefix + sub`` with the roles its scopes map to."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolcards.core.identity import Identity
from toolcards.governance.approvals.view import reads_as_itself
from toolcards.surfaces.http.jwks import KeySet
from toolcards.surfaces.http.oauth_config import OAuthSpec
from toolcards.surfaces.http.tokens import InvalidToken

MAX_TOKEN = 16 * 1024
"""Characters of a bearer JWT read at most."""
_MAX_SUB = 256


class InsufficientScope(InvalidToken):
    """A valid token without a scope the server requires (answered 403)."""


def looks_like_jwt(token: str) -> bool:
    """Three base64url parts: the compact JWS form (a static token never has dots)."""
    return token.count(".") == 2


def token_scopes(claims: dict[str, Any]) -> set[str]:
    """The scopes granted: ``scope`` (space-separated, RFC 9068) or ``scp`` (a list)."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return set(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return {s for s in scp if isinstance(s, str)}
    if isinstance(scp, str):
        return set(scp.split())
    return set()


class JwtVerifier:
    """Checks access tokens of ``spec.issuer`` (see :mod:`toolcards.surfaces.http.oauth_config`)."""

    def __init__(self, spec: OAuthSpec, keys: KeySet | None = None) -> None:
        import jwt.algorithms  # lazy: extra oauth

        if not jwt.algorithms.has_crypto:  # RSA and EC keys need it
            raise ImportError("cryptography is not installed", name="cryptography")
        self.spec = spec
        self.keys = keys if keys is not None else KeySet(spec)

    def roles_of(self, scopes: Iterable[str]) -> set[str]:
        return {role for scope in scopes for role in self.spec.scopes.get(scope, [])}

    async def identity(self, token: str) -> Identity:
        """The caller ``token`` stands for; :class:`InvalidToken` (one fixed line naming
        what is wrong, never echoing the token) when it is not acceptable."""
        import jwt  # lazy: extra oauth

        if len(token) > MAX_TOKEN:
            raise InvalidToken("the access token is too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the access token is not a well-formed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.spec.algorithms:
            raise InvalidToken("the access token's signing algorithm is not allowed")
        if "crit" in header:
            raise InvalidToken("the access token has critical header parameters")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the access token's kid is not a string")
        key = await self.keys.key_for(kid, alg)
        claims = self._claims(token, key, alg)
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub or len(sub) > _MAX_SUB:
            raise InvalidToken("the access token's sub is not a usable principal id")
        if not reads_as_itself(sub):  # it could read as another caller's id to an approver
            raise InvalidToken("the access token's sub has hidden or control characters")
        scopes = token_scopes(claims)
        missing = [s for s in self.spec.required_scopes if s not in scopes]
        if missing:
            raise InsufficientScope("the access token lacks a required scope")
        attrs: dict[str, Any] = {"issuer": claims["iss"], "scopes": sorted(scopes)}
        client = claims.get("client_id", claims.get("azp"))
        if isinstance(client, str):
            attrs["client_id"] = client
        return Identity(self.spec.id_prefix + sub, self.spec.type, self.roles_of(scopes), attrs)

    def _claims(self, token: str, key: Any, alg: str) -> dict[str, Any]:
        import jwt  # lazy: extra oauth

        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.spec.resource,
                issuer=self.spec.issuer,
                leeway=self.spec.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the access token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the access token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the access token is not for this server (aud)") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the access token is from another issuer (iss)") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the access token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidToken(f"the access token has no {exc.claim} claim") from None
        except jwt.PyJWTError:
            raise InvalidToken("the access token is invalid") from None
        return claims
