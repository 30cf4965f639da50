"""``principals.oauth:`` in the config file: what may be configured, and the metadata URL."""

from __future__ import annotations

from typing import Any

import pytest

from toolcards.surfaces.config import ConfigError, parse_config

GOOD = {"issuer": "https://auth.example.com/", "resource": "https://MCP.example.com/mcp"}


def config_with(**oauth: Any) -> Any:
    data = {"policy": "policy.yaml", "principals": {"oauth": {**GOOD, **oauth}}}
    return parse_config(data, source="team.yaml")


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
