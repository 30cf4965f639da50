"""``principals.oauth:`` in the config file: what may be configured, and the metadata URL."""

from __future__ import annotations

from typing import Any

import pytest

from toolcards.surfaces.config import ConfigError, parse_config

GOOD = {"issuer": "https://auth.example.com/", "resource": "https://MCP.example.com/mcp"}


def config_with(**oauth: Any) -> Any:
    data = {"policy": "policy.yaml", "principals": {"oauth": {**GOOD, **oauth}}}
    return parse_config(data, source="team.yaml", host_written=True)


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512"])
def test_symmetric_and_unsigned_algorithms_cannot_be_configured(alg: str) -> None:
    with pytest.raises(ConfigError, match=rf"principals\.oauth\.algorithms.*{alg} not allowed"):
        config_with(algorithms=["RS256", alg])


@pytest.mark.parametrize("field", ["issuer", "resource", "jwks_uri"])
def test_plain_http_is_refused_beyond_loopback(field: str) -> None:
    with pytest.raises(ConfigError, match=f"{field} must use https://"):
        config_with(**{field: "http://auth.example.com/x"})


def test_plain_http_on_loopback_is_allowed() -> None:
    spec = config_with(issuer="http://127.0.0.1:9000").principals.oauth
    assert spec.issuer == "http://127.0.0.1:9000"


@pytest.mark.parametrize("prefix", ["", "anon"])
def test_an_id_prefix_that_a_sub_could_make_anonymous_is_refused(prefix: str) -> None:
    """A token whose caller id is 'anonymous' would share what callers with no token hold."""
    with pytest.raises(ConfigError, match=r"id_prefix .*'anonymous'"):
        config_with(id_prefix=prefix)


def test_a_leeway_beyond_five_minutes_is_refused() -> None:
    with pytest.raises(ConfigError, match="leeway"):
        config_with(leeway=3600)


def test_the_metadata_url_inserts_the_well_known_path_before_the_resource_path() -> None:
    spec = config_with().principals.oauth
    assert spec.resource == "https://mcp.example.com/mcp"
    assert spec.metadata_url == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    assert spec.metadata_paths == [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ]


@pytest.mark.parametrize(
    "jwks_uri",
    ["http://127.0.0.1:6379/flush", "https://169.254.169.254/latest", "https://10.0.0.5/jwks"],
)
def test_a_public_issuers_metadata_cannot_send_the_key_fetch_into_the_private_network(
    jwks_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issuer's metadata is its data: a ``jwks_uri`` there naming a private host is not
    fetched (the operator names one in the config when it is meant)."""
    import anyio

    from toolcards.surfaces.http import jwks
    from toolcards.surfaces.http.oauth_config import OAuthSpec

    issuer = "https://auth.example.com"
    fetched: list[str] = []

    async def remote(url: str, timeout: float) -> dict[str, Any]:  # the issuer's answers
        fetched.append(url)
        return {"issuer": issuer, "jwks_uri": jwks_uri} if url.startswith(issuer) else {}

    monkeypatch.setattr(jwks, "fetch_json", remote)
    keys = jwks.KeySet(OAuthSpec(issuer=issuer, resource="https://mcp.example.com/mcp"))
    with pytest.raises(jwks.KeysUnavailable):
        anyio.run(keys.key_for, "any-kid", "RS256")
    assert fetched and all(url.startswith(issuer) for url in fetched)
    configured = jwks.KeySet(
        OAuthSpec(issuer=issuer, resource="https://mcp.example.com/mcp", jwks_uri=jwks_uri)
    )
    with pytest.raises(jwks.InvalidToken):  # the config's own: fetched (no key matches)
        anyio.run(configured.key_for, "any-kid", "RS256")
    assert fetched[-1] == jwks_uri
