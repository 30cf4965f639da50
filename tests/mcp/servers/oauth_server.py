"""A test authorization server guarding an MCP endpoint (streamable HTTP at ``/mcp``).

Usage: ``python oauth_server.py [MODE] PORT``; ``ACCESS_TTL`` sets the token lifetime (s).
Implements protected-resource metadata (RFC 9728), authorization-server metadata (RFC 8414),
``/authorize`` (consent granted at once: redirects with a code), ``/token`` (authorization code
with PKCE S256, and refresh with rotation), plus ``/stats`` and ``/revoke`` for the tests.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlencode

import uvicorn
from echo_server import server as mcp_server
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

CLIENT_ID = "test-client"
PORT = int(sys.argv[-1])
BASE = f"http://127.0.0.1:{PORT}"
TTL = float(os.environ.get("ACCESS_TTL", "3600"))

codes: dict[str, dict[str, str]] = {}
access: dict[str, float] = {}
refresh: set[str] = set()
stats = {"authorization_code": 0, "refresh_token": 0, "unauthorized": 0, "rejected": 0}


async def resource_metadata(request: Request) -> Response:
    return JSONResponse({"resource": f"{BASE}/mcp", "authorization_servers": [BASE]})


async def server_metadata(request: Request) -> Response:
    return JSONResponse(
        {
            "issuer": BASE,
            "authorization_endpoint": f"{BASE}/authorize",
            "token_endpoint": f"{BASE}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
        }
    )


async def authorize(request: Request) -> Response:
    q = request.query_params
    if q.get("response_type") != "code" or q.get("client_id") != CLIENT_ID:
        return JSONResponse({"error": "invalid_request"}, status_code=400)
    if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
        return JSONResponse({"error": "invalid_request", "error_description": "PKCE"}, 400)
    code = secrets.token_urlsafe(16)
    codes[code] = {
        "challenge": q["code_challenge"],
        "redirect_uri": q.get("redirect_uri", ""),
        "resource": q.get("resource", ""),
    }
    target = q.get("redirect_uri", "")
    return RedirectResponse(f"{target}?{urlencode({'code': code, 'state': q.get('state', '')})}")


def _issue() -> JSONResponse:
    token, renew = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    access[token] = time.time() + TTL
    refresh.add(renew)
    body = {
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": TTL,
        "refresh_token": renew,
    }
    return JSONResponse(body)


def _reject(error: str) -> JSONResponse:
    stats["rejected"] += 1
    return JSONResponse({"error": error}, status_code=400)


async def token(request: Request) -> Response:
    form = {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}
    if form.get("client_id") != CLIENT_ID:
        return _reject("invalid_client")
    if form.get("grant_type") == "authorization_code":
        grant = codes.pop(form.get("code", ""), None)
        if grant is None or grant["redirect_uri"] != form.get("redirect_uri"):
            return _reject("invalid_grant")
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != grant["challenge"]:
            return _reject("invalid_grant")
        stats["authorization_code"] += 1
        return _issue()
    if form.get("grant_type") == "refresh_token":
        old = form.get("refresh_token", "")
        if old not in refresh:
            return _reject("invalid_grant")
        refresh.discard(old)
        stats["refresh_token"] += 1
        return _issue()
    return _reject("unsupported_grant_type")


async def show_stats(request: Request) -> Response:
    return JSONResponse(stats)


async def revoke(request: Request) -> Response:
    access.clear()
    return JSONResponse({"revoked": True})


routes = Starlette(
    routes=[
        Route("/.well-known/oauth-protected-resource", resource_metadata),
        Route("/.well-known/oauth-protected-resource/mcp", resource_metadata),
        Route("/.well-known/oauth-authorization-server", server_metadata),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/stats", show_stats),
        Route("/revoke", revoke, methods=["POST"]),
    ]
)
mcp_app = mcp_server.streamable_http_app()


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        await mcp_app(scope, receive, send)
        return
    if scope["type"] == "http" and scope["path"].startswith("/mcp"):
        header = dict(scope["headers"]).get(b"authorization", b"").decode()
        presented = header.removeprefix("Bearer ")
        if not header.startswith("Bearer ") or access.get(presented, 0) < time.time():
            stats["unauthorized"] += 1
            challenge = f'Bearer resource_metadata="{BASE}/.well-known/oauth-protected-resource"'
            response = JSONResponse(
                {"error": "invalid_token"}, status_code=401, headers={"WWW-Authenticate": challenge}
            )
            await response(scope, receive, send)
            return
        await mcp_app(scope, receive, send)
        return
    await routes(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
