"""OAuth authorization code + PKCE against a local authorization server, with refresh."""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from mcp_support import SERVERS, ServerProcess, call_tools, free_port, make_agent

from toolcards import HostTrust, ToolFactory, load_cards
from toolcards.tools.mcp import MCPAuth, MCPOAuth, MCPTool
from toolcards.tools.mcp._http import http
from toolcards.tools.mcp.oauth import OAuthError, OAuthFlow, _Tokens, loopback_handler
from toolcards.tools.mcp.oauth_discovery import server_endpoints

OAUTH = SERVERS / "oauth_server.py"
REDIRECT = "http://127.0.0.1:9/callback"


async def consent(url: str) -> str:
    """The user's browser: open the authorization URL, return where it redirects."""
    async with httpx.AsyncClient() as client:
        response = await client.get(url, follow_redirects=False)
    assert response.status_code in (302, 307), response.text
    return response.headers["location"]


def oauth_card(server: ServerProcess) -> MCPTool:
    card = MCPTool(
        name="secured",
        transport="streamable-http",
        url=server.url,
        auth=MCPAuth(oauth=MCPOAuth(client_id="test-client", redirect_uri=REDIRECT)),
    )
    return card.set_authorization_handler(consent)


def stats(server: ServerProcess) -> dict[str, int]:
    return dict(httpx.get(f"http://127.0.0.1:{server.port}/stats").json())


def test_full_flow_then_refresh_after_expiry(
    start_server: type[ServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = start_server(OAUTH, "oauth").start()  # its tokens live an hour
    card = oauth_card(server)
    agent, script = make_agent([ToolFactory([card]).toolset()])
    assert asyncio.run(call_tools(agent, script, [("echo", {"text": "one"})])) == ["one"]
    first = stats(server)
    assert first["authorization_code"] == 1 and first["refresh_token"] == 0
    assert first["unauthorized"] >= 1 and first["rejected"] == 0
    flow = card._oauth_flow
    assert flow is not None
    flow.clock = lambda: time.time() + 3600  # an hour on: the token has expired
    assert asyncio.run(call_tools(agent, script, [("echo", {"text": "two"})])) == ["two"]
    second = stats(server)
    assert second["authorization_code"] == 1 and second["refresh_token"] >= 1
    assert flow._tokens is not None
    for secret in (flow._tokens.access, flow._tokens.refresh or "refresh"):
        assert secret not in caplog.text and secret not in repr(card.get_toolsets()[0])


def test_revoked_token_is_refreshed_on_401(start_server: type[ServerProcess]) -> None:
    server = start_server(OAUTH, "oauth").start()
    card = oauth_card(server)
    agent, script = make_agent([ToolFactory([card]).toolset()])

    async def main() -> list[str]:
        async with agent:
            await call_tools(agent, script, [("echo", {"text": "a"})])
            async with httpx.AsyncClient() as client:
                await client.post(f"http://127.0.0.1:{server.port}/revoke")
            return await call_tools(agent, script, [("echo", {"text": "b"})])

    assert asyncio.run(main()) == ["b"]
    after = stats(server)
    assert after["authorization_code"] == 1 and after["refresh_token"] == 1


def test_wrong_state_is_refused_and_isolated(start_server: type[ServerProcess]) -> None:
    server = start_server(OAUTH, "oauth").start()

    async def forged(url: str) -> str:
        location = await consent(url)
        code = parse_qs(urlsplit(location).query)["code"][0]
        return f"{REDIRECT}?{urlencode({'code': code, 'state': 'forged'})}"

    card = oauth_card(server).set_authorization_handler(forged)
    agent, script = make_agent([ToolFactory([card]).toolset()])
    assert asyncio.run(call_tools(agent, script, [])) == []
    assert script.seen_tools == []
    assert "wrong state" in (card.get_toolsets()[0].last_error or "")
    assert stats(server)["authorization_code"] == 0


def test_refused_consent_is_reported(start_server: type[ServerProcess]) -> None:
    server = start_server(OAUTH, "oauth").start()

    async def deny(url: str) -> str:
        state = parse_qs(urlsplit(url).query)["state"][0]
        return f"{REDIRECT}?{urlencode({'error': 'access_denied', 'state': state})}"

    card = oauth_card(server).set_authorization_handler(deny)
    agent, script = make_agent([ToolFactory([card]).toolset()])
    asyncio.run(call_tools(agent, script, []))
    assert "access_denied" in (card.get_toolsets()[0].last_error or "")


def test_tokens_never_in_repr() -> None:
    flow = OAuthFlow(
        client_id="c",
        redirect_uri=REDIRECT,
        server_url="https://mcp.example/mcp",
        client_secret="s3cr3t-value",
        issuer="https://auth.example",
    )
    assert "s3cr3t-value" not in repr(flow) and "authorized=False" in repr(flow)


def test_the_access_token_goes_only_under_the_folder_of_the_servers_url() -> None:
    """Not to the rest of its origin: another path there may be another tenant's."""
    flow = OAuthFlow(client_id="c", redirect_uri=REDIRECT, server_url="https://mcp.example/a/sse")
    flow._tokens = _Tokens(access="t0k3n", refresh=None, refresh_at=None)

    def sent(url: str) -> str | None:
        request = http.Request("POST", url, headers={"Authorization": "Bearer other"})
        flow._authorize(request)
        return request.headers.get("Authorization")

    assert sent("https://mcp.example/a/messages?session_id=1") == "Bearer t0k3n"
    assert sent("https://mcp.example/a/sse") == "Bearer t0k3n"
    for elsewhere in (
        "https://mcp.example/b/messages",
        "https://mcp.example/ab",
        "http://mcp.example/a/sse",
    ):
        assert sent(elsewhere) is None


@pytest.mark.parametrize("url", ["https://mcp.example/a", "https://mcp.example/a/"])
def test_a_card_from_data_sends_its_access_token_only_under_the_hosts_grant(url: str) -> None:
    """A URL that is the grant itself has the origin as its folder, one ending in '/' is its
    own folder: neither lets the token reach another tenant's path of the origin."""
    data = {
        "type": "MCPTool",
        "transport": "sse",
        "url": url,
        "auth": {"oauth": {"client_id": "c", "redirect_uri": REDIRECT}},
    }
    (card,) = load_cards([data], trust=HostTrust(urls=["https://mcp.example/a"]))
    assert isinstance(card, MCPTool)
    flow = card._auth()
    assert flow is not None
    assert flow._for_server("https://mcp.example/a/messages?session_id=1")
    for elsewhere in ("https://mcp.example/b/messages", "https://mcp.example/ab"):
        assert not flow._for_server(elsewhere)


def test_insecure_endpoints_refused() -> None:
    with pytest.raises(OAuthError, match="https"):
        OAuthFlow(
            client_id="c",
            redirect_uri=REDIRECT,
            server_url="https://mcp.example/mcp",
            authorization_endpoint="http://auth.example/authorize",
            token_endpoint="http://auth.example/token",
        )


async def get_when_listening(client: httpx.AsyncClient, url: str) -> httpx.Response:
    """GET ``url`` once the loopback listener accepts connections."""
    for _ in range(200):
        try:
            return await client.get(url)
        except httpx.ConnectError:
            await asyncio.sleep(0.05)
    raise AssertionError(f"nothing listens at {url}")


def test_loopback_handler_captures_the_redirect() -> None:
    port = free_port()
    handler = loopback_handler(f"http://127.0.0.1:{port}/cb", open_browser=False)

    async def main() -> str:
        waiting = asyncio.create_task(handler("https://auth.example/authorize?x=1"))
        async with httpx.AsyncClient() as client:
            await get_when_listening(client, f"http://127.0.0.1:{port}/cb?code=abc&state=xyz")
        return await asyncio.wait_for(waiting, 10)

    assert asyncio.run(main()) == f"http://127.0.0.1:{port}/cb?code=abc&state=xyz"


def test_a_stray_callback_with_a_forged_state_is_answered_400_and_ignored() -> None:
    port = free_port()
    handler = loopback_handler(f"http://127.0.0.1:{port}/cb", open_browser=False)
    callback = f"http://127.0.0.1:{port}/cb"

    async def main() -> tuple[int, int, str]:
        waiting = asyncio.create_task(handler("https://auth.example/authorize?state=right"))
        async with httpx.AsyncClient() as client:
            forged = await get_when_listening(client, f"{callback}?code=evil&state=forged")
            right = await client.get(f"{callback}?code=abc&state=right")
        return forged.status_code, right.status_code, await asyncio.wait_for(waiting, 10)

    assert asyncio.run(main()) == (400, 200, f"{callback}?code=abc&state=right")


def test_loopback_handler_needs_loopback_redirect() -> None:
    with pytest.raises(OAuthError, match="loopback"):
        loopback_handler("https://example.com/callback")


def test_issuer_mix_up_refused() -> None:
    metadata = {
        "issuer": "https://evil.example",
        "authorization_endpoint": "https://evil.example/authorize",
        "token_endpoint": "https://evil.example/token",
    }
    url = "https://auth.example/.well-known/oauth-authorization-server"
    with pytest.raises(OAuthError, match="different issuer"):
        server_endpoints(url, metadata, "https://auth.example")
