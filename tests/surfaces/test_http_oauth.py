"""`toolcards serve --transport http` as an OAuth resource server: bearer JWTs of a local
issuer (keys made here, metadata and JWKS served on 127.0.0.1) checked by a real server
process, called with the official MCP client and raw httpx."""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import json
import threading
import tracemalloc
import uuid
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from mcp_clients import http_session
from oauth_issuer import Issuer, RawJwks
from oauth_tools import write_policy

from support.processes import ListeningProcess, free_port
from surfaces.surface_support import HEADERS, INIT, SURFACE_ENV, TOOLCARDS, token_for, write_config
from toolcards.governance import Identity
from toolcards.surfaces.http.jwks import KeySet, KeysUnavailable, fetch_json
from toolcards.surfaces.http.oauth_config import OAuthSpec
from toolcards.surfaces.http.tokens import InvalidToken

pytestmark = pytest.mark.anyio

CAROL = Identity("carol", "user", ["crm_admin"])
SCOPES = {"crm.admin": ["crm_admin"], "crm.read": ["reader"]}


class OAuthServer(ListeningProcess):
    """A served config whose ``principals.oauth`` trusts ``issuer``, plus a static token."""

    def __init__(self, directory: Path, issuer: Issuer, *flags: str, **oauth: Any) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        spec = {"issuer": issuer.url, "resource": self.url, "scopes": SCOPES, **oauth}
        config = write_config(directory, tokens=[CAROL], tools=["oauth_tools:TOOLS"],
                              policy=write_policy(directory))  # fmt: skip
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        data["principals"]["oauth"] = spec
        config.write_text(yaml.safe_dump(data), encoding="utf-8")
        argv = [str(TOOLCARDS), "serve", "--config", str(config), "--transport", "http",
                "--port", str(port), *flags]  # fmt: skip
        super().__init__(argv, port, SURFACE_ENV, what="toolcards serve")


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    found = Issuer()
    yield found
    found.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[OAuthServer]:
    srv = OAuthServer(tmp_path_factory.mktemp("oauth"), issuer, jwks_refetch_interval=3600)
    yield srv
    srv.stop()


def post(server: OAuthServer, token: str | None) -> httpx.Response:
    headers = dict(HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(server.url, json=INIT, headers=headers, timeout=20)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forged(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None) -> str:
    """A compact JWT with ``header`` and ``claims``, HMAC-SHA256 signed with ``secret``
    (no signature when None)."""
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = (
        b"" if secret is None else hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    )
    return f"{signing_input}.{b64(signature)}"


def assert_refused(response: httpx.Response, description: str) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="invalid_token"' in challenge
    assert "resource_metadata=" in challenge
    assert description in response.text


async def call_text(url: str, token: str, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    async with http_session(url, token) as s:
        result = await s.call_tool(tool, args)
    return bool(result.is_error), result.content[0].text  # type: ignore[union-attr]


async def test_a_valid_token_calls_as_its_sub_with_the_roles_of_its_scopes(
    server: OAuthServer, issuer: Issuer
) -> None:
    token = issuer.token(server.url, scope="crm.admin crm.read")
    assert await call_text(server.url, token, "whoami", {}) == (
        False,
        "oauth:alice user crm_admin,reader",
    )
    assert await call_text(server.url, token, "delete_record", {"id": 7}) == (False, "deleted 7")


async def test_an_ec_signed_token_is_accepted(server: OAuthServer, issuer: Issuer) -> None:
    token = issuer.token(server.url, kid="ec-1", sub="erin", scope="crm.read")
    assert await call_text(server.url, token, "whoami", {}) == (False, "oauth:erin user reader")


async def test_the_policy_sees_the_sub_not_only_the_scope(
    server: OAuthServer, issuer: Issuer
) -> None:
    token = issuer.token(server.url, sub="mallory", scope="crm.admin")
    error, text = await call_text(server.url, token, "delete_record", {"id": 7})
    assert error is True
    assert "deleted" not in text


async def test_static_tokens_still_work_beside_oauth(server: OAuthServer) -> None:
    result = await call_text(server.url, token_for(CAROL), "whoami", {})
    assert result == (False, "carol user crm_admin")


async def test_a_token_whose_sub_is_a_static_principals_id_is_not_that_principal(
    server: OAuthServer, issuer: Issuer
) -> None:
    token = issuer.token(server.url, sub="carol", scope="crm.read")
    assert await call_text(server.url, token, "whoami", {}) == (False, "oauth:carol user reader")
    error, text = await call_text(server.url, token, "delete_record", {"id": 7})
    assert error is True
    assert "deleted" not in text


def test_a_config_whose_token_callers_could_be_a_static_principal_is_refused(
    tmp_path: Path, issuer: Issuer
) -> None:
    from toolcards.surfaces.config import ConfigError, load_config

    config = write_config(tmp_path, tokens=[CAROL], tools=["oauth_tools:TOOLS"],
                          policy=write_policy(tmp_path))  # fmt: skip
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["principals"]["oauth"] = {"issuer": issuer.url, "resource": "http://127.0.0.1:1/mcp",
                                   "id_prefix": ""}  # fmt: skip
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    message = str(refused.value)
    assert "\n" not in message
    assert "id_prefix" in message and "tokens[0]" in message and "'carol'" in message


def test_no_token_is_challenged_with_the_metadata_url(server: OAuthServer) -> None:
    response = post(server, None)
    assert response.status_code == 401
    metadata = server.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert response.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata}"'


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
def test_the_protected_resource_metadata_names_the_issuer(
    server: OAuthServer, issuer: Issuer, path: str
) -> None:
    response = httpx.get(server.url.replace("/mcp", path), timeout=20)
    assert response.status_code == 200
    assert response.json() == {
        "resource": server.url,
        "authorization_servers": [issuer.url],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["crm.admin", "crm.read"],
    }


def test_an_expired_token_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    claims = issuer.claims(server.url)
    token = issuer.token(server.url, exp=claims["iat"] - 120, iat=claims["iat"] - 600)
    assert_refused(post(server, token), "expired")


def test_a_token_not_valid_yet_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    token = issuer.token(server.url, nbf=issuer.claims(server.url)["iat"] + 600)
    assert_refused(post(server, token), "not valid yet")


def test_a_token_for_another_audience_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    token = issuer.token(server.url, aud="http://127.0.0.1:1/mcp")
    assert_refused(post(server, token), "(aud)")


def test_a_token_without_an_audience_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    assert_refused(post(server, issuer.token(server.url, aud=None)), "no aud claim")


def test_a_token_of_another_issuer_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    token = issuer.token(server.url, iss=issuer.url + "/evil")
    assert_refused(post(server, token), "(iss)")


def test_an_unsigned_alg_none_token_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    token = forged({"alg": "none", "typ": "JWT"}, issuer.claims(server.url), None)
    assert_refused(post(server, token), "algorithm is not allowed")


def test_hs256_signed_with_the_public_key_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    header = {"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}
    token = forged(header, issuer.claims(server.url), issuer.public_pem("rsa-1"))
    assert_refused(post(server, token), "algorithm is not allowed")


def test_a_token_of_an_unpublished_key_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    issuer.add_key("rogue", "RS256", publish=False)
    assert_refused(post(server, issuer.token(server.url, kid="rogue")), "no signing key")


def test_a_tampered_token_is_refused(server: OAuthServer, issuer: Issuer) -> None:
    head, _, signature = issuer.token(server.url, sub="bob", scope="crm.read").split(".")
    claims = issuer.claims(server.url, sub="alice", scope="crm.admin")
    token = f"{head}.{b64(json.dumps(claims).encode())}.{signature}"
    assert_refused(post(server, token), "signature does not verify")


@pytest.mark.parametrize(
    "sub",
    ["mallory\r\x1b[2Kcaller     ann", "\u202enna", "ann\nreason", "ann\u200b", "ann\u3164"],
    ids=["carriage return and escape", "bidi override", "line break", "zero width", "filler"],
)
def test_a_sub_with_hidden_or_control_characters_is_refused(
    server: OAuthServer, issuer: Issuer, sub: str
) -> None:
    """Such a caller's id could read as another's on an approver's screen."""
    token = issuer.token(server.url, sub=sub, scope="crm.read")
    assert_refused(post(server, token), "sub has hidden or control characters")


def test_a_token_signed_by_the_ec_key_under_the_rsa_kid_is_refused(
    server: OAuthServer, issuer: Issuer
) -> None:
    key, _ = issuer.private["ec-1"]
    import jwt

    token = jwt.encode(issuer.claims(server.url), key, "ES256", headers={"kid": "rsa-1"})
    assert_refused(post(server, token), "no signing key")


def test_unknown_kids_refetch_the_jwks_at_most_once(server: OAuthServer, issuer: Issuer) -> None:
    issuer.add_key("flood", "RS256", publish=False)
    post(server, issuer.token(server.url))  # the keys are cached
    before = issuer.jwks_fetches
    for _ in range(10):
        issuer.private[f"kid-{uuid.uuid4()}"] = issuer.private["flood"]
    tokens = [issuer.token(server.url, kid=kid) for kid in issuer.private if kid.startswith("kid-")]
    for token in tokens:
        assert post(server, token).status_code == 401
    assert issuer.jwks_fetches - before <= 1


async def test_a_rotated_key_is_fetched_on_its_first_token(tmp_path: Path) -> None:
    issuer = Issuer()
    srv = OAuthServer(tmp_path, issuer)
    try:
        assert post(srv, issuer.token(srv.url)).status_code == 200
        issuer.add_key("rsa-2", "RS256")
        token = issuer.token(srv.url, kid="rsa-2", sub="alice")
        assert await call_text(srv.url, token, "whoami", {}) == (
            False,
            "oauth:alice user crm_admin",
        )
        assert issuer.jwks_fetches == 2
    finally:
        srv.stop()
        issuer.stop()


def test_two_authorization_headers_are_refused(server: OAuthServer, issuer: Issuer) -> None:
    headers = [*HEADERS.items(), ("Authorization", f"Bearer {token_for(CAROL)}"),
               ("Authorization", f"Bearer {issuer.token(server.url)}")]  # fmt: skip
    response = httpx.post(server.url, json=INIT, headers=headers, timeout=20)
    assert response.status_code == 401
    assert 'error="invalid_request"' in response.headers["www-authenticate"]


def test_a_token_lacking_a_required_scope_gets_403_insufficient_scope(tmp_path: Path) -> None:
    issuer = Issuer()
    srv = OAuthServer(tmp_path, issuer, required_scopes=["crm.read"])
    try:
        refused = post(srv, issuer.token(srv.url, scope="crm.admin"))
        allowed = post(srv, issuer.token(srv.url, scope="crm.read"))
    finally:
        srv.stop()
        issuer.stop()
    assert refused.status_code == 403
    challenge = refused.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="crm.read"' in challenge
    assert allowed.status_code == 200


def test_with_the_dashboard_the_metadata_is_served_and_mcp_still_challenges(
    tmp_path: Path, issuer: Issuer
) -> None:
    srv = OAuthServer(tmp_path, issuer, "--dashboard")
    try:
        document = httpx.get(srv.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
        anonymous = post(srv, None)
    finally:
        srv.stop()
    assert document.status_code == 200
    assert document.json()["authorization_servers"] == [issuer.url]
    assert anonymous.status_code == 401
    assert "resource_metadata=" in anonymous.headers["www-authenticate"]


def test_an_unreachable_issuer_refuses_tokens_without_an_error(tmp_path: Path) -> None:
    issuer = Issuer()
    srv = OAuthServer(tmp_path, issuer)
    token = issuer.token(srv.url)
    issuer.stop()
    try:
        first, second = post(srv, token), post(srv, token)
        said = srv.output()
    finally:
        srv.stop()
    assert_refused(first, "cannot be fetched")
    assert_refused(second, "cannot be fetched")
    # the operator's terminal says why, once per failed fetch (the second waits for a retry)
    assert said.count(f"warning: cannot fetch the signing keys of {issuer.url}") == 1, said


def _stacked_gzip_of_zeros(size: int) -> bytes:
    """``size`` zero bytes gzipped twice (``Content-Encoding: gzip, gzip``): ~1 KB on the wire."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    step = b"\0" * (1 << 20)
    once = b"".join(inner.compress(step) for _ in range(size >> 20)) + inner.flush()
    return gzip.compress(once, 9)


async def test_a_compressed_jwks_is_refused_without_being_inflated() -> None:
    """An issuer's few compressed bytes could inflate to gigabytes on the event loop before
    the size bound saw them: identity is asked for, and an encoded answer refused unread."""
    bomb = _stacked_gzip_of_zeros(128 << 20)

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-encoding", "gzip, gzip")
        handler.send_header("content-length", str(len(bomb)))
        handler.end_headers()
        handler.wfile.write(bomb)

    endpoint = RawJwks(answer)
    tracemalloc.start()
    try:
        with pytest.raises(KeysUnavailable, match="encoded"):
            await fetch_json(endpoint.url, 5.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        endpoint.stop()
    assert len(bomb) < 4096
    assert peak < 32 << 20, f"{peak >> 20} MiB allocated for a {len(bomb)}-byte answer"


async def test_a_trickled_jwks_holds_the_token_checks_for_one_fetch_timeout_at_most() -> None:
    """fetch_timeout bounds the whole fetch, not each read: a JWKS sent at 2 bytes a second
    (30 s in all) fails both token checks, the one fetching and the one queued behind it."""
    document = json.dumps({"keys": []}).encode().ljust(60)

    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(document)))
        handler.end_headers()
        for byte in document:
            if endpoint.stopping.wait(0.5):
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()

    endpoint = RawJwks(answer)
    spec = OAuthSpec(issuer=endpoint.issuer, resource="https://mcp.example.com/mcp",
                     jwks_uri=endpoint.url, fetch_timeout=1)  # fmt: skip
    keys = KeySet(spec)
    refused: list[str] = []

    async def check(kid: str) -> None:
        with pytest.raises(InvalidToken):
            await keys.key_for(kid, "RS256")
        refused.append(kid)

    try:
        with anyio.fail_after(10):  # generous: each check should end after about 1 s
            async with anyio.create_task_group() as group:
                group.start_soon(check, "fetching")
                group.start_soon(check, "queued")
    finally:
        endpoint.stop()
    assert sorted(refused) == ["fetching", "queued"]


async def test_a_check_arriving_during_a_fetch_takes_its_keys_without_fetching_again() -> None:
    """A token check (here of a made-up ``kid``) that finds a fetch under way waits for that
    one fetch, not for it and then its own, and refetches no more after a fetch: the wait of
    a check is one fetch's deadline at most."""
    release = threading.Event()

    def answer(handler: BaseHTTPRequestHandler) -> None:
        release.wait(20)
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", "12")
        handler.end_headers()
        handler.wfile.write(b'{"keys": []}')

    endpoint = RawJwks(answer)
    spec = OAuthSpec(issuer=endpoint.issuer, resource="https://mcp.example.com/mcp",
                     jwks_uri=endpoint.url)  # fmt: skip
    keys = KeySet(spec)
    refused: list[str] = []

    async def check(name: str) -> None:
        with pytest.raises(InvalidToken):
            await keys.key_for("made-up", "RS256")
        refused.append(name)

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(check, "fetching")
                while endpoint.asked < 1:  # the fetch is under way
                    await anyio.sleep(0.01)
                group.start_soon(check, "arriving")
                while keys._lock.statistics().tasks_waiting < 1:  # queued behind it
                    await anyio.sleep(0.01)
                release.set()
    finally:
        release.set()
        endpoint.stop()
    assert sorted(refused) == ["arriving", "fetching"]
    assert endpoint.asked == keys.fetches == 1
