"""An issuer's signing keys: found from its metadata (or a configured ``jwks_uri``), fetched
over HTTPS, kept for ``jwks_ttl`` seconds, at most ``jwks_max_keys`` of them.

A token naming a ``kid`` the cache does not hold makes one refetch (a key rotation), at most
one per ``jwks_refetch_interval`` seconds whatever the tokens say, so made-up ``kid``s cannot
turn the server into a flood of requests to the issuer. Documents are read uncompressed with
a size bound, each fetch within ``fetch_timeout`` seconds from connect to last byte, no
redirect is followed, and only public signature keys of a public-key type are kept
(symmetric ``oct`` keys and keys with private parts are ignored). A token check waits for
one fetch at most, its own or the one under way.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio

from toolcards.core import outside_json
from toolcards.core.tls import default_verify
from toolcards.core.trust import private_host
from toolcards.surfaces.http.oauth_config import OAuthSpec, checked_url
from toolcards.surfaces.http.tokens import InvalidToken

log = logging.getLogger(__name__)

MAX_DOCUMENT = 256 * 1024
"""Bytes of a metadata or JWKS document read at most."""
_KEY_TYPES = frozenset({"RSA", "EC"})
_PRIVATE_PARTS = ("d", "p", "q", "dp", "dq", "qi", "k")


class KeysUnavailable(InvalidToken):
    """The issuer's keys could not be fetched (the token cannot be checked)."""


async def fetch_json(url: str, timeout: float) -> dict[str, Any]:
    """The JSON object at ``url`` (200 only, no redirects, at most :data:`MAX_DOCUMENT`
    bytes, connect to last byte within ``timeout`` seconds); :class:`KeysUnavailable`
    otherwise. The deadline is the whole fetch's: a per-read timeout lets an issuer trickle a
    byte a second while the token checks queue behind the fetch."""
    try:
        with anyio.fail_after(timeout):
            body = await _download(url, timeout)
    except TimeoutError:
        raise KeysUnavailable(f"{url}: no whole answer within {timeout:g} s") from None
    try:
        return outside_json.load_object(body)
    except ValueError as exc:
        raise KeysUnavailable(f"{url}: {exc}") from None


async def _download(url: str, timeout: float) -> bytes:
    """The body at ``url`` as sent: identity is asked for and an encoded answer refused, so
    the bound counts the bytes received (a few KB of stacked gzip inflate to gigabytes, each
    chunk whole, before a bound on the decoded bytes could run)."""
    import httpx  # lazy: httpx, ~3x python -c pass; only fetching the issuer's keys

    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    try:
        async with (
            httpx.AsyncClient(
                timeout=timeout, follow_redirects=False, verify=default_verify(httpx)
            ) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            if response.status_code != 200:
                raise KeysUnavailable(f"{url}: HTTP {response.status_code}")
            if response.headers.get("content-encoding", "identity").strip().lower() != "identity":
                raise KeysUnavailable(f"{url}: an encoded answer (identity was asked for)")
            body = bytearray()
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > MAX_DOCUMENT:
                    raise KeysUnavailable(f"{url}: document larger than {MAX_DOCUMENT} bytes")
    except httpx.HTTPError as exc:
        raise KeysUnavailable(f"{url}: {type(exc).__name__}") from None
    return bytes(body)


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer publishes its metadata: RFC 8414's path-inserted well-known URL,
    then OpenID Connect discovery's appended one."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    oauth = urlunsplit((parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server"
                        + path, "", ""))  # fmt: skip
    oidc = issuer.rstrip("/") + "/.well-known/openid-configuration"
    return [oauth, oidc]


def usable_keys(document: dict[str, Any], limit: int) -> dict[str | None, list[dict[str, Any]]]:
    """The public signature keys of a JWKS document by ``kid`` (the first ``limit``)."""
    keys = document.get("keys")
    if not isinstance(keys, list):
        raise KeysUnavailable("the JWKS document has no 'keys' list")
    found: dict[str | None, list[dict[str, Any]]] = {}
    kept = 0
    for key in keys:
        if kept >= limit:
            break
        if not isinstance(key, dict) or key.get("kty") not in _KEY_TYPES:
            continue
        if key.get("use", "sig") != "sig" or any(part in key for part in _PRIVATE_PARTS):
            continue
        kid = key.get("kid")
        if kid is not None and not isinstance(kid, str):
            continue
        found.setdefault(kid, []).append(key)
        kept += 1
    return found


class KeySet:
    """The signing keys of ``spec.issuer``, fetched lazily and refreshed as described above.
    One instance per server; safe for concurrent requests on one event loop."""

    def __init__(self, spec: OAuthSpec) -> None:
        self.spec = spec
        self.jwks_uri = spec.jwks_uri
        self.fetches = 0
        """JWKS documents fetched so far."""
        self._keys: dict[str | None, list[dict[str, Any]]] = {}
        self._built: dict[tuple[int, str], Any] = {}
        self._fetched_at = -float("inf")
        self._refetched_at = -float("inf")
        self._retry_at = -float("inf")
        self._generation = 0
        self._lock = anyio.Lock()

    async def key_for(self, kid: str | None, alg: str) -> Any:
        """The key (a ``jwt.PyJWK``) to check a token signed with ``alg`` under ``kid``;
        :class:`InvalidToken` when the issuer publishes none."""
        now = time.monotonic()
        fresh = now - self._fetched_at < self.spec.jwks_ttl
        if not fresh:  # one refresh per check at most: its wait is one fetch's deadline
            await self._refresh(self._generation)
        key = self._find(kid, alg)
        unknown = key is None and kid is not None and kid not in self._keys
        if fresh and unknown and now - self._refetched_at >= self.spec.jwks_refetch_interval:
            self._refetched_at = now
            await self._refresh(self._generation)
            key = self._find(kid, alg)
        if key is None:
            raise InvalidToken("no signing key of the issuer matches the token")
        return key

    def _find(self, kid: str | None, alg: str) -> Any:
        if kid is None:  # no kid: only an unambiguous key will do
            candidates = [k for keys in self._keys.values() for k in keys]
        else:
            candidates = self._keys.get(kid, [])
        matching = [k for k in (self._build(data, alg) for data in candidates) if k is not None]
        return matching[0] if len(matching) == 1 else None

    def _build(self, data: dict[str, Any], alg: str) -> Any:
        import jwt  # lazy: extra oauth

        if data.get("alg", alg) != alg:
            return None
        cached = self._built.get((id(data), alg))
        if cached is not None:
            return cached
        try:
            key = jwt.PyJWK(data, algorithm=alg)
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
            return None  # a key of another type than the algorithm's (or a broken one)
        self._built[(id(data), alg)] = key
        return key

    async def _refresh(self, generation: int) -> None:
        """Fetch the keys again, unless another request did since ``generation`` was read.
        After a failure nothing is fetched for ``jwks_refetch_interval`` (at least a second)
        and no key is trusted (stale keys are not kept: a key the issuer withdrew stops
        working when it is seen gone, never later).

        The generation moves when a fetch ends, so a request queued behind a running fetch
        takes its outcome rather than fetching again: it waits for one fetch at most."""
        async with self._lock:
            if time.monotonic() < self._retry_at:
                raise KeysUnavailable("the issuer's signing keys cannot be fetched")
            if self._generation != generation:
                return
            try:
                uri = self.jwks_uri or await self._discover()
                self.jwks_uri = uri
                self.fetches += 1
                document = await fetch_json(uri, self.spec.fetch_timeout)
                keys = usable_keys(document, self.spec.jwks_max_keys)
            except KeysUnavailable as exc:
                log.warning("cannot fetch the signing keys of %s: %s", self.spec.issuer, exc)
                self._keys, self._built = {}, {}
                self._retry_at = time.monotonic() + max(1.0, self.spec.jwks_refetch_interval)
                self._generation += 1
                raise KeysUnavailable("the issuer's signing keys cannot be fetched") from None
            self._keys, self._built = keys, {}
            self._fetched_at = time.monotonic()
            self._generation += 1

    async def _discover(self) -> str:
        """The ``jwks_uri`` of the issuer's metadata (whose ``issuer`` must be the one
        configured, RFC 8414 section 3.3)."""
        problems = []
        for url in metadata_urls(self.spec.issuer):
            try:
                document = await fetch_json(url, self.spec.fetch_timeout)
            except KeysUnavailable as exc:
                problems.append(str(exc))
                continue
            if document.get("issuer") != self.spec.issuer:
                problems.append(f"{url}: issuer is not {self.spec.issuer!r}")
                continue
            uri = document.get("jwks_uri")
            try:
                found = checked_url(uri if isinstance(uri, str) else "", "jwks_uri")
            except ValueError as exc:
                problems.append(f"{url}: {exc}")
                continue
            if private_host(found) and not private_host(self.spec.issuer):
                # the metadata is the issuer's data: it does not open this host's network
                problems.append(
                    f"{url}: jwks_uri {found} names a private host and the issuer is public "
                    "(set oauth.jwks_uri in the config to use it)"
                )
                continue
            return found
        raise KeysUnavailable("no usable metadata: " + "; ".join(problems))
