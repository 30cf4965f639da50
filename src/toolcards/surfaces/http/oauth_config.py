"""The ``principals.oauth:`` section: the HTTP server as an OAuth 2.1 resource server.

```yaml
principals:
  oauth:
    issuer: https://auth.example.com/            # the tokens' `iss`, compared exactly
    resource: https://mcp.example.com/mcp        # this server's canonical URL: the required `aud`
    jwks_uri: https://auth.example.com/jwks.json # optional: else from the issuer's metadata
    algorithms: [RS256, ES256]                   # asymmetric only: never none, never HS*
    leeway: 30                                   # seconds of clock skew for exp / nbf
    scopes: {crm.read: [reader], crm.admin: [data_admin]}   # scope -> roles
    required_scopes: []                          # a token lacking one is 403 insufficient_scope
    type: user                                   # the identity type of a token's caller
    id_prefix: "oauth:"                          # caller id = id_prefix + sub
```

A token's caller never shares an id with a static principal (``principals.local``,
``tokens``, ``terminal_approver``): no static id may start with ``id_prefix``.

URLs are ``https://``; ``http://`` only on a loopback host (a local issuer under test).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"}
)
"""The signature algorithms a token may use: public-key ones only (``none`` and the HMAC
family ``HS*`` would let a JWKS's public key, or no key, stand for a signature)."""
METADATA_PATH = "/.well-known/oauth-protected-resource"


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def checked_url(value: str, what: str) -> str:
    """``value`` as an absolute ``https://`` URL (``http://`` on loopback only), with its
    scheme and host lowercased and no fragment; ValueError naming ``what`` otherwise."""
    parts = urlsplit(value.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{what} must be an absolute https:// URL")
    if scheme == "http" and not _loopback(parts.hostname):
        raise ValueError(f"{what} must use https:// (http:// only on a loopback host)")
    if parts.fragment or value.strip().endswith("#"):
        raise ValueError(f"{what} must not have a fragment")
    if parts.username or parts.password:
        raise ValueError(f"{what} must not carry credentials")
    return urlunsplit((scheme, parts.netloc.lower(), parts.path, parts.query, ""))


class OAuthSpec(BaseModel):
    """Bearer JWTs from one issuer, checked against its published keys (RFC 9068 style
    access tokens, the MCP authorization spec's resource-server side)."""

    model_config = ConfigDict(extra="forbid")

    issuer: str
    resource: str
    jwks_uri: str | None = None
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256"], min_length=1)
    leeway: float = Field(default=30.0, ge=0, le=300)
    scopes: dict[str, list[str]] = Field(default_factory=dict)
    required_scopes: list[str] = Field(default_factory=list)
    type: str = Field(default="user", min_length=1)
    id_prefix: str = "oauth:"
    """Prepended to a token's ``sub``: token callers are apart from the static principals."""
    jwks_ttl: float = Field(default=300.0, gt=0, le=86400)
    """Seconds the fetched keys are used before they are fetched again."""
    jwks_max_keys: int = Field(default=20, ge=1, le=200)
    """Keys kept from one JWKS document (the rest are ignored)."""
    jwks_refetch_interval: float = Field(default=30.0, ge=0, le=3600)
    """At most one refetch per this many seconds on a token whose ``kid`` is unknown."""
    fetch_timeout: float = Field(default=5.0, gt=0, le=60)

    @field_validator("issuer")
    @classmethod
    def _issuer(cls, value: str) -> str:
        checked_url(value, "issuer")
        if urlsplit(value).query or "#" in value:
            raise ValueError("issuer must have no query and no fragment (RFC 8414)")
        return value  # compared with `iss` exactly as written

    @field_validator("resource")
    @classmethod
    def _resource(cls, value: str) -> str:
        return checked_url(value, "resource")

    @field_validator("jwks_uri")
    @classmethod
    def _jwks_uri(cls, value: str | None) -> str | None:
        return None if value is None else checked_url(value, "jwks_uri")

    @field_validator("algorithms")
    @classmethod
    def _asymmetric(cls, value: list[str]) -> list[str]:
        refused = [alg for alg in value if alg not in ASYMMETRIC_ALGORITHMS]
        if refused:
            allowed = ", ".join(sorted(ASYMMETRIC_ALGORITHMS))
            raise ValueError(f"{', '.join(refused)} not allowed; use public-key ones: {allowed}")
        return value

    def refuse_shared_ids(self, static: Iterable[tuple[str, str]]) -> None:
        """ValueError when a token could stand for a static principal: one of ``static``
        (where it is configured, its id) starts with ``id_prefix``."""
        for where, principal in static:
            if principal.startswith(self.id_prefix):
                sub = principal[len(self.id_prefix) :]
                raise ValueError(
                    f"oauth.id_prefix {self.id_prefix!r}: a token with sub {sub!r} would be the "
                    f"static principal {where} ({principal!r}); use an id_prefix no static id "
                    "starts with (the default is 'oauth:')"
                )

    @property
    def metadata_url(self) -> str:
        """The protected-resource metadata document's URL (RFC 9728 section 3.1: the
        well-known path inserted before the resource's path)."""
        parts = urlsplit(self.resource)
        path = METADATA_PATH + parts.path.rstrip("/")
        return urlunsplit((parts.scheme, parts.netloc, path, "", ""))

    @property
    def metadata_paths(self) -> list[str]:
        """The local paths the document is served at (RFC 9728's and the bare one)."""
        inserted = urlsplit(self.metadata_url).path
        return sorted({inserted, METADATA_PATH})

    def metadata(self) -> dict[str, object]:
        """The protected-resource metadata document (RFC 9728 section 2)."""
        document: dict[str, object] = {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        }
        scopes = sorted({*self.scopes, *self.required_scopes})
        if scopes:
            document["scopes_supported"] = scopes
        return document
