"""Who an HTTP request comes from: a static bearer token (``principals.tokens``), or, with
``principals.oauth`` configured, a JWT access token of the issuer (:mod:`.oauth`).

Without OAuth a request with no ``Authorization`` header is the anonymous caller (a
default-deny policy rejects it). With OAuth it is answered 401 with the MCP authorization
spec's challenge, ``WWW-Authenticate: Bearer resource_metadata="<url>"``, so a client can find
the authorization server in the protected-resource metadata document (RFC 9728) served at
``/.well-known/oauth-protected-resource[/<resource path>]``. A refused token is 401 with
``error="invalid_token"`` (403 ``insufficient_scope`` for a valid token lacking a required
scope). The text of a refusal is a fixed line: nothing of the token is echoed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolcards.core.errors import ToolcardsError
from toolcards.core.identity import ANONYMOUS, Identity
from toolcards.surfaces.http.oauth_config import OAuthSpec
from toolcards.surfaces.http.tokens import InvalidToken, TokenTable

if TYPE_CHECKING:
    from toolcards.surfaces.http.oauth import JwtVerifier

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Unauthorized(ToolcardsError):
    """A request refused before it reaches MCP: ``status``, one line, the challenge."""

    def __init__(self, status: int, message: str, challenge: str) -> None:
        super().__init__(message)
        self.status, self.message, self.challenge = status, message, challenge


@dataclass
class HttpAuth:
    """Static tokens, and JWTs when ``oauth`` is set."""

    tokens: TokenTable
    oauth: OAuthSpec | None = None
    verifier: JwtVerifier | None = None

    def __post_init__(self) -> None:
        if self.oauth is not None:
            static = self.tokens.entries
            self.oauth.refuse_shared_ids(
                (f"tokens[{i}]", who.id) for i, (_, who) in enumerate(static)
            )
        if self.oauth is not None and self.verifier is None:
            # lazy: extra oauth, ~0.5x python -c pass; only with principals.oauth
            from toolcards.surfaces.http.oauth import JwtVerifier

            self.verifier = JwtVerifier(self.oauth)

    def challenge(self, error: str | None = None, description: str | None = None) -> str:
        """The ``WWW-Authenticate`` value (``error``/``description`` are fixed texts)."""
        params = []
        if error is not None:
            params.append(f'error="{error}"')
        if description is not None:
            params.append(f'error_description="{description.replace(chr(34), chr(39))}"')
        if self.oauth is not None:
            params.append(f'resource_metadata="{self.oauth.metadata_url}"')
            if error == "insufficient_scope" and self.oauth.required_scopes:
                params.append(f'scope="{" ".join(self.oauth.required_scopes)}"')
        return "Bearer " + ", ".join(params) if params else "Bearer"

    async def caller(self, authorization: str | None) -> Identity:
        """The identity behind an ``Authorization`` header value; :class:`Unauthorized`."""
        if authorization is None or not authorization.strip():
            if self.oauth is None:
                return ANONYMOUS
            raise Unauthorized(401, "an access token is required", self.challenge())
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            message = "expected 'Authorization: Bearer <token>'"
            raise Unauthorized(401, message, self.challenge("invalid_request", message))
        try:
            return self.tokens.resolve(token)
        except InvalidToken as exc:
            static_refusal = str(exc)
        if self.verifier is None:
            raise Unauthorized(401, static_refusal, self.challenge("invalid_token"))
        # lazy: extra oauth, ~0.5x python -c pass; only with principals.oauth
        from toolcards.surfaces.http.oauth import InsufficientScope, looks_like_jwt

        if not looks_like_jwt(token):
            raise Unauthorized(401, static_refusal, self.challenge("invalid_token"))
        try:
            return await self.verifier.identity(token)
        except InsufficientScope as exc:
            challenge = self.challenge("insufficient_scope", str(exc))
            raise Unauthorized(403, str(exc), challenge) from None
        except InvalidToken as exc:
            raise Unauthorized(401, str(exc), self.challenge("invalid_token", str(exc))) from None

    def metadata_routes(self) -> list[Any]:
        """Starlette routes serving the protected-resource metadata (none without OAuth)."""
        if self.oauth is None:
            return []
        # lazy: starlette; a CLI loads this module and never serves
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        body = json.dumps(self.oauth.metadata(), indent=2).encode()

        async def document(_request: Request) -> Response:
            headers = {"cache-control": "max-age=300"}
            return Response(body, media_type="application/json", headers=headers)

        return [
            Route(path, endpoint=document, methods=["GET"]) for path in self.oauth.metadata_paths
        ]


class BearerAuth:
    """ASGI middleware: the caller of each HTTP request into ``scope[key]``, or the refusal."""

    def __init__(self, app: ASGIApp, auth: HttpAuth, key: str) -> None:
        self.app, self.auth, self.key = app, auth, key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = [
            bytes(v) for k, v in scope.get("headers") or () if bytes(k).lower() == b"authorization"
        ]
        try:
            if len(found) > 1:
                message = "one Authorization header only"
                raise Unauthorized(401, message, self.auth.challenge("invalid_request", message))
            who = await self.auth.caller(found[0].decode("latin-1") if found else None)
        except Unauthorized as refused:
            await refuse(send, refused)
            return
        scope[self.key] = who
        await self.app(scope, receive, send)


async def refuse(send: Send, refused: Unauthorized) -> None:
    """Answer ``refused`` without reading the request's body; the connection then closes
    (what is left of the body is never read as a next request)."""
    body = f"{refused.message}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"www-authenticate", refused.challenge.encode("latin-1", "replace")),
               (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]  # fmt: skip
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
