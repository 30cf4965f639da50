"""MCPTool's OAuth client against a hostile MCP server and hostile authorization servers.

The remote servers are an httpx mock transport (``hostile_oauth.HostileNet``); a loopback
target is a real ``Listener`` on 127.0.0.1 that records whether anything connected to it.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Iterator

import pytest
from hostile_oauth import (
    ACCESS,
    HOSTILE_AS,
    PRIVATE,
    PUBLIC,
    SERVER,
    SERVER_HOST,
    TRUSTED_AS,
    HostileNet,
    Listener,
    authorization_server,
    form_of,
)
from pydantic import SecretStr, ValidationError

from toolcards.tools.mcp import MCPAuth, MCPOAuth, MCPTool
from toolcards.tools.mcp._http import http as httpx
from toolcards.tools.mcp.oauth import OAuthError, OAuthFlow
from toolcards.tools.mcp.oauth_discovery import under_issuer

PRM = (SERVER_HOST, "/.well-known/prm")
HOSTILE_META = ("as.hostile.example", "/.well-known/oauth-authorization-server")
TRUSTED_META = ("as.trusted.example", "/.well-known/oauth-authorization-server")


@pytest.fixture
def net() -> HostileNet:
    return HostileNet()


@pytest.fixture
def listener() -> Iterator[Listener]:
    target = Listener()
    yield target
    target.close()


# ---- 4: the client secret, the resource and the token go only where they belong ----------------


def test_a_client_secret_without_a_configured_authorization_server_is_refused() -> None:
    with pytest.raises(ValidationError, match="client_secret needs its authorization server"):
        MCPTool(
            transport="streamable-http",
            url=SERVER,
            auth=MCPAuth(oauth=MCPOAuth(client_id="app", client_secret=SecretStr("s3cr3t"))),
        )


def test_the_client_secret_goes_only_to_the_configured_authorization_server(
    net: HostileNet,
) -> None:
    flow = net.flow(client_secret="s3cr3t", issuer=TRUSTED_AS)
    assert asyncio.run(net.get(flow)).status_code == 200
    assert [form_of(r)["client_secret"] for r in net.sent("as.trusted.example", "/token")] == [
        "s3cr3t"
    ]
    assert not [h for h, _, _ in net.requests if h == "as.hostile.example"]
    assert not net.sent(*PRM)


def test_a_resource_named_by_the_server_metadata_is_refused(net: HostileNet) -> None:
    net.pages[PRM] = {
        "resource": "https://api.victim.example",
        "authorization_servers": [HOSTILE_AS],
    }
    with pytest.raises(OAuthError, match="names the resource 'https://api.victim.example'"):
        asyncio.run(net.get(net.flow()))
    assert net.consents == [] and not net.sent("as.hostile.example", "/token")


def test_the_requested_resource_is_the_canonical_server_url(net: HostileNet) -> None:
    flow = net.flow(server_url="HTTPS://MCP.Hostile.Example:443/mcp/", issuer=TRUSTED_AS)
    assert asyncio.run(net.get(flow)).status_code == 200
    [consent] = net.consents
    assert f"resource={SERVER.replace(':', '%3A').replace('/', '%2F')}" in consent
    [exchange] = net.sent("as.trusted.example", "/token")
    assert form_of(exchange)["resource"] == SERVER


def test_the_token_is_never_sent_to_another_origin(net: HostileNet) -> None:
    flow = net.flow(issuer=TRUSTED_AS)

    async def main() -> None:
        assert (await net.get(flow)).status_code == 200
        await net.get(flow, "https://other.example/collect")

    asyncio.run(main())
    assert flow.authorized
    [stray] = net.sent("other.example", "/collect")
    assert "authorization" not in stray.headers
    assert [r.headers["authorization"] for r in net.sent(SERVER_HOST, "/mcp")][-1] == (
        f"Bearer {ACCESS}"
    )


def test_the_card_asks_for_a_token_for_its_own_url() -> None:
    auth = MCPAuth(oauth=MCPOAuth(client_id="app"))
    card = MCPTool(transport="streamable-http", url=SERVER, auth=auth)
    flow = card._auth()
    assert flow is not None and flow.resource == SERVER and flow.server_url == SERVER


def test_a_configured_resource_of_another_server_is_refused() -> None:
    with pytest.raises(ValidationError, match="resource must be the MCP server's URL"):
        MCPTool(
            transport="streamable-http",
            url=SERVER,
            auth=MCPAuth(oauth=MCPOAuth(client_id="app", resource="https://api.victim.example")),
        )


# ---- 5: discovery URLs pass the SSRF guard ------------------------------------------------------


def test_a_remote_server_cannot_send_discovery_to_a_loopback_http_url(
    net: HostileNet, listener: Listener
) -> None:
    net.challenge = f'Bearer resource_metadata="http://127.0.0.1:{listener.port}/x"'
    with pytest.raises(OAuthError, match="must use https"):
        asyncio.run(net.get(net.flow()))
    assert not listener.contacted


def test_a_remote_server_cannot_send_discovery_to_a_loopback_https_url(
    net: HostileNet, listener: Listener
) -> None:
    net.challenge = f'Bearer resource_metadata="https://127.0.0.1:{listener.port}/x"'
    with pytest.raises(OAuthError, match="loopback"):
        asyncio.run(net.get(net.flow()))
    assert not listener.contacted


def test_a_remote_server_cannot_name_an_authorization_server_resolving_to_loopback(
    net: HostileNet, listener: Listener
) -> None:
    net.dns["rebind.hostile.example"] = "127.0.0.1"
    rebind = f"https://rebind.hostile.example:{listener.port}"
    net.pages[PRM] = {"resource": SERVER, "authorization_servers": [rebind]}
    with pytest.raises(OAuthError, match="resolves to 127.0.0.1"):
        asyncio.run(net.get(net.flow()))
    assert not listener.contacted


def test_a_token_endpoint_on_a_loopback_address_is_refused_before_consent(
    net: HostileNet, listener: Listener
) -> None:
    token = f"https://127.0.0.1:{listener.port}/token"
    net.pages[HOSTILE_META] = authorization_server(HOSTILE_AS, token_endpoint=token)
    with pytest.raises(OAuthError, match="token endpoint"):
        asyncio.run(net.get(net.flow()))
    assert net.consents == [] and not listener.contacted


def test_discovery_connects_to_the_address_that_was_checked(net: HostileNet) -> None:
    assert asyncio.run(net.get(net.flow())).status_code == 200
    discovery = net.sent(*HOSTILE_META) + net.sent("as.hostile.example", "/token")
    assert len(discovery) == 2 and {r.url.host for r in discovery} == {PUBLIC}


def test_discovery_on_the_mcp_server_own_private_origin_is_allowed(net: HostileNet) -> None:
    net.dns["mcp.corp.example"] = PRIVATE
    net.challenge = 'Bearer resource_metadata="https://mcp.corp.example/.well-known/prm"'
    resource = {"resource": "https://mcp.corp.example/mcp", "authorization_servers": [HOSTILE_AS]}
    net.pages[("mcp.corp.example", "/.well-known/prm")] = resource
    flow = net.flow(server_url="https://mcp.corp.example/mcp")
    assert asyncio.run(net.get(flow, "https://mcp.corp.example/mcp")).status_code == 200


def test_a_remote_server_cannot_name_an_authorization_server_on_a_private_address(
    net: HostileNet,
) -> None:
    net.dns["sso.corp.example"] = PRIVATE
    net.pages[PRM] = {"resource": SERVER, "authorization_servers": ["https://sso.corp.example"]}
    with pytest.raises(OAuthError, match="a private address"):
        asyncio.run(net.get(net.flow()))
    assert not [h for h, _, _ in net.requests if h == "sso.corp.example"]


# ---- 7: the configured issuer's metadata does not choose where the client secret goes ----------


def test_the_issuer_metadata_cannot_send_the_token_request_to_a_loopback_http_url(
    net: HostileNet, listener: Listener
) -> None:
    token = f"http://127.0.0.1:{listener.port}/token"
    net.pages[TRUSTED_META] = authorization_server(TRUSTED_AS, token_endpoint=token)
    flow = net.flow(client_secret="s3cr3t", issuer=TRUSTED_AS)
    with pytest.raises(OAuthError, match="token endpoint must use https"):
        asyncio.run(net.get(flow))
    assert net.consents == [] and not listener.contacted


def test_the_issuer_metadata_cannot_send_the_client_secret_to_another_origin(
    net: HostileNet,
) -> None:
    net.dns["collector.other.example"] = PUBLIC
    token = "https://collector.other.example/token"
    net.pages[TRUSTED_META] = authorization_server(TRUSTED_AS, token_endpoint=token)
    flow = net.flow(client_secret="s3cr3t", issuer=TRUSTED_AS)
    with pytest.raises(OAuthError, match="client_secret goes only to a token endpoint"):
        asyncio.run(net.get(flow))
    assert net.consents == [] and not net.sent("collector.other.example", "/token")


TENANT_A = "https://idp.shared.example/tenant-a"
TENANT_A_META = ("idp.shared.example", "/.well-known/oauth-authorization-server/tenant-a")


def _tenant_a_flow(net: HostileNet, token: str) -> OAuthFlow:
    """A flow with a client secret whose issuer is tenant-a, its metadata naming ``token`` (a
    path of the issuer's origin) as the token endpoint."""
    net.dns["idp.shared.example"] = PUBLIC
    endpoint = f"https://idp.shared.example{token}"
    net.pages[TENANT_A_META] = authorization_server(TENANT_A, token_endpoint=endpoint)
    return net.flow(client_secret="s3cr3t", issuer=TENANT_A)


@pytest.mark.parametrize(
    "token", ["/tenant-b/token", "/tenant-ab/token", "/tenant-a/../tenant-b/token", "/token"]
)
def test_the_issuer_metadata_cannot_send_the_client_secret_outside_the_issuer_path(
    net: HostileNet, token: str
) -> None:
    # the host grants tenant-a's URL prefix; its metadata names a path of the origin beyond it
    flow = _tenant_a_flow(net, token)
    with pytest.raises(OAuthError, match="name authorization_endpoint and token_endpoint"):
        asyncio.run(net.get(flow))
    assert net.consents == [] and not [r for _, _, r in net.requests if r.method == "POST"]


@pytest.mark.parametrize("token", ["/tenant-a/token", "/tenant-a/oauth/token"])
def test_the_client_secret_goes_to_a_token_endpoint_under_the_issuer_path(
    net: HostileNet, token: str
) -> None:
    flow = _tenant_a_flow(net, token)
    net.pages[("idp.shared.example", token)] = {"access_token": ACCESS, "expires_in": 3600}
    assert asyncio.run(net.get(flow)).status_code == 200
    [exchange] = net.sent("idp.shared.example", token)
    assert form_of(exchange)["client_secret"] == "s3cr3t"


@pytest.mark.parametrize(
    ("issuer", "token", "under"),
    [
        ("https://idp.example", "https://idp.example/any/token", True),
        ("https://idp.example/", "https://idp.example/token", True),
        ("https://idp.example/t", "https://idp.example/t/token", True),
        ("https://idp.example/t", "https://idp.example/t2/token", False),
        ("https://idp.example/t", "https://idp.example/t/%2e%2e/u/token", False),
        ("https://idp.example", "https://idp.example:8443/token", False),
    ],
)
def test_a_token_endpoint_is_under_an_issuer_by_whole_path_segments(
    issuer: str, token: str, under: bool
) -> None:
    assert under_issuer(token, issuer) is under


def test_a_public_issuers_metadata_cannot_name_a_private_token_endpoint(net: HostileNet) -> None:
    net.dns["sso.corp.example"] = PRIVATE
    token = "https://sso.corp.example/token"
    net.pages[TRUSTED_META] = authorization_server(TRUSTED_AS, token_endpoint=token)
    with pytest.raises(OAuthError, match="a private address"):
        asyncio.run(net.get(net.flow(issuer=TRUSTED_AS)))
    assert net.consents == [] and not net.sent("sso.corp.example", "/token")


def test_a_private_issuers_metadata_may_name_a_private_token_endpoint(net: HostileNet) -> None:
    net.dns["login.corp.example"] = PRIVATE
    issuer = f"https://{PRIVATE}"
    net.pages[(PRIVATE, "/.well-known/oauth-authorization-server")] = authorization_server(
        issuer, token_endpoint="https://login.corp.example/token"
    )
    assert asyncio.run(net.get(net.flow(issuer=issuer))).status_code == 200
    assert len(net.sent("login.corp.example", "/token")) == 1


def test_the_client_secret_goes_to_the_issuers_own_private_origin(net: HostileNet) -> None:
    net.dns["sso.corp.example"] = PRIVATE
    issuer = "https://sso.corp.example"
    meta = ("sso.corp.example", "/.well-known/oauth-authorization-server")
    net.pages[meta] = authorization_server(issuer)
    assert asyncio.run(net.get(net.flow(client_secret="s3cr3t", issuer=issuer))).status_code == 200
    [exchange] = net.sent("sso.corp.example", "/token")
    assert form_of(exchange)["client_secret"] == "s3cr3t"


# ---- 6: a metadata answer is bounded in bytes on the wire and in time ---------------------------


class _Endless(httpx.AsyncByteStream):
    """A response body: ``head``, then ``chunk`` up to ``limit`` times, after ``pause`` s each."""

    def __init__(self, head: bytes, chunk: bytes, limit: int, pause: float = 0.0) -> None:
        self.head, self.chunk, self.limit, self.pause = head, chunk, limit, pause
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        while self.sent < self.limit:
            if self.pause:
                await asyncio.sleep(self.pause)  # the server's pace, not a wait of the test
            self.sent += 1
            yield self.chunk


def test_a_compressed_metadata_answer_is_capped_in_bytes_received(net: HostileNet) -> None:
    body = _Endless(gzip.compress(b'{"resource": "x"}'), b"\0" * (1 << 16), limit=64)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    net.pages[PRM] = httpx.Response(200, headers=headers, stream=body)
    with pytest.raises(OAuthError, match="answered more than 1048576 bytes"):
        asyncio.run(net.get(net.flow()))
    assert body.sent <= 17  # read no further than the cap (16 chunks of 64 KiB)
    assert net.sent(*PRM)[0].headers["accept-encoding"] == "identity"


def test_a_trickling_metadata_answer_is_bounded_by_the_flow_timeout(net: HostileNet) -> None:
    body = _Endless(b'{"resource": ', b" ", limit=400, pause=0.05)
    net.pages[PRM] = httpx.Response(200, headers={"Content-Type": "application/json"}, stream=body)
    with pytest.raises(OAuthError, match="did not answer within 0.5 s"):
        asyncio.run(net.get(net.flow(timeout=0.5)))
    assert body.sent < body.limit
