"""A local OAuth issuer for the HTTP server's tests: RSA and EC keys made here, its RFC 8414
metadata and JWKS served by a real HTTP server on 127.0.0.1, tokens signed with PyJWT."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm


def _public_jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    maker = RSAAlgorithm if alg.startswith("RS") else ECAlgorithm
    jwk: dict[str, Any] = json.loads(maker.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


class Issuer:
    """``url`` is the issuer; :meth:`token` signs access tokens; :attr:`jwks_fetches` counts
    the JWKS documents served; :meth:`add_key` publishes another key (a rotation)."""

    def __init__(self) -> None:
        self.private: dict[str, tuple[Any, str]] = {}
        self.published: list[dict[str, Any]] = []
        self.jwks_fetches = 0
        self.add_key("rsa-1", "RS256")
        self.add_key("ec-1", "ES256")
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/oauth-authorization-server":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks.json",
                            "token_endpoint": issuer.url + "/token"}  # fmt: skip
                elif self.path == "/jwks.json":
                    issuer.jwks_fetches += 1
                    body = {"keys": list(issuer.published)}
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add_key(self, kid: str, alg: str, *, publish: bool = True) -> None:
        if alg.startswith("RS"):
            key: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        else:
            key = ec.generate_private_key(ec.SECP256R1())
        self.private[kid] = (key, alg)
        if publish:
            self.published.append(_public_jwk(key, kid, alg))

    def public_pem(self, kid: str) -> bytes:
        from cryptography.hazmat.primitives import serialization

        key, _ = self.private[kid]
        return bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def claims(self, audience: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": self.url, "aud": audience, "sub": "alice", "iat": now,
                  "exp": now + 300, "scope": "crm.admin"}  # fmt: skip
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, audience: str, kid: str = "rsa-1", **overrides: Any) -> str:
        key, alg = self.private[kid]
        return jwt.encode(self.claims(audience, **overrides), key, alg, headers={"kid": kid})

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class RawJwks:
    """A JWKS endpoint at ``url`` whose answer ``answer(handler)`` writes as it likes (a
    hostile issuer: a compression bomb, a trickle); :attr:`asked` counts the requests.
    Stopping it ends a trickle under way."""

    def __init__(self, answer: Any) -> None:
        self.stopping = threading.Event()
        self.asked = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                endpoint.asked += 1
                with contextlib.suppress(OSError):  # the client gave up
                    answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = self.issuer + "/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
