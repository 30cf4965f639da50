"""HostTrust: which values of the marked card fields it allows for cards loaded from data.

Each case validates a real card from data (``load_card``) with a trust, so the rule is
checked where it applies: command rules (programs, arguments, working directory, environment
names), URL prefixes, private hosts, folders, exec modes, nested models, and the config form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from toolcards import HostTrust, load_cards
from toolcards.core import load_card
from toolcards.core.trust import CommandRule, private_host


def loads(data: dict[str, Any], trust: object = None) -> bool:
    try:
        load_card(data, trust=trust)
    except ValidationError:
        return False
    return True


def stdio(command: str, *args: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "MCPTool",
        "transport": "stdio",
        "command": command,
        "args": list(args),
        **fields,
    }


def allowed(trust: HostTrust, command: str, *args: str, **fields: Any) -> bool:
    return loads(stdio(command, *args, **fields), trust)


# ---- command rules ---------------------------------------------------------------------


def test_nothing_is_allowed_without_a_decision() -> None:
    assert not allowed(HostTrust.of(None), "uvx", "mcp-server-fetch")


def test_a_bare_program_rule_allows_any_arguments() -> None:
    trust = HostTrust(["uvx"])
    assert allowed(trust, "uvx")
    assert allowed(trust, "uvx", "mcp-server-fetch", "--flag")


def test_a_bare_program_rule_never_allows_a_path_of_the_same_name() -> None:
    trust = HostTrust(["python3"])
    assert not allowed(trust, "/tmp/evil/python3")
    assert not allowed(trust, "./python3")


def test_an_absolute_rule_needs_the_same_path() -> None:
    trust = HostTrust(["/usr/bin/node"])
    assert allowed(trust, "/usr/bin/node", "server.js")
    assert allowed(trust, "/usr/bin/../bin/node")
    assert not allowed(trust, "node")
    assert not allowed(trust, "/usr/local/bin/node")


def test_the_any_program_rule_allows_every_program() -> None:
    assert allowed(HostTrust(["*"]), "/tmp/anything", "-x")
    assert not allowed(HostTrust(["* --safe"]), "/tmp/anything", "-x")


def test_argument_patterns_match_one_argument_each() -> None:
    trust = HostTrust(["uvx mcp-server-fetch --timeout *"])
    assert allowed(trust, "uvx", "mcp-server-fetch", "--timeout", "30")
    assert not allowed(trust, "uvx", "mcp-server-fetch", "--timeout")
    assert not allowed(trust, "uvx", "mcp-server-fetch", "--timeout", "30", "--evil")
    assert not allowed(trust, "uvx", "other-server", "--timeout", "30")


def test_a_final_double_star_allows_any_further_arguments() -> None:
    trust = HostTrust(["npx -y @modelcontextprotocol/server-filesystem **"])
    assert allowed(trust, "npx", "-y", "@modelcontextprotocol/server-filesystem")
    assert allowed(trust, "npx", "-y", "@modelcontextprotocol/server-filesystem", "/a", "/b")
    assert not allowed(trust, "npx", "-y", "evil-package", "/a")


def test_a_working_directory_needs_a_rule_that_names_it() -> None:
    plain = HostTrust(["node server.js"])
    placed = HostTrust([CommandRule("node", ("server.js",), cwd="/opt/mcp")])
    assert allowed(plain, "node", "server.js")
    assert not allowed(plain, "node", "server.js", cwd="/tmp/attacker")
    assert allowed(placed, "node", "server.js", cwd="/opt/mcp/")
    assert not allowed(placed, "node", "server.js", cwd="/tmp/attacker")


def test_environment_names_need_listing_on_both_sides_of_env_from() -> None:
    trust = HostTrust(["srv"], env=["GITHUB_TOKEN"])
    assert allowed(trust, "srv", env_from={"GITHUB_TOKEN": "GITHUB_TOKEN"})
    assert not allowed(trust, "srv", env_from={"GITHUB_TOKEN": "AWS_SECRET_ACCESS_KEY"})
    assert not allowed(trust, "srv", env_from={"LD_PRELOAD": "GITHUB_TOKEN"})
    assert not allowed(trust, "srv", env={"PATH": "/tmp"})


def test_environment_names_of_one_rule_do_not_apply_to_another() -> None:
    trust = HostTrust([CommandRule("a", env=frozenset({"TOKEN"})), CommandRule("b")])
    assert allowed(trust, "a", env_from={"TOKEN": "TOKEN"})
    assert not allowed(trust, "b", env_from={"TOKEN": "TOKEN"})


# ---- URLs, private hosts, folders, modes ---------------------------------------------------


def search(**fields: Any) -> dict[str, Any]:
    return {"type": "SearchTool", **fields}


def test_a_url_is_allowed_under_a_trusted_prefix_by_whole_segments() -> None:
    trust = HostTrust(env=["K"], urls=["https://search.example/v1"])
    assert loads(search(base_url="https://search.example/v1", api_key_env="K"), trust)
    assert loads(search(base_url="https://search.example/v1/eu", api_key_env="K"), trust)
    assert loads(search(base_url="https://SEARCH.example:443/v1", api_key_env="K"), trust)
    assert not loads(search(base_url="https://search.example/v10"), trust)
    assert not loads(search(base_url="https://search.example.evil/v1"), trust)
    assert not loads(search(base_url="http://search.example/v1"), trust)
    assert not loads(search(base_url="https://search.example:8443/v1"), trust)
    for spelling in ("/v1/../admin", "/v1/%2E%2E/admin", "/v1/./x", "/v1\\..\\admin"):
        assert not loads(search(base_url="https://search.example" + spelling), trust), spelling


def test_a_new_key_name_needs_the_destination_granted_too() -> None:
    assert not loads(search(api_key_env="K"), HostTrust(env=["K"]))
    assert loads(search(api_key_env="K"), HostTrust(env=["K"], urls=["https://api.tavily.com"]))


def test_default_values_need_no_trust() -> None:
    (card,) = load_cards([search(base_url="https://api.tavily.com/", allow_private=False)])
    assert card.card_type == "SearchTool"
    assert loads({"type": "ExecTool", "mode": "auto", "env_allow": ["LANG", "TZ"]})


def test_an_isolating_exec_mode_needs_no_trust_and_local_does() -> None:
    assert loads({"type": "ExecTool", "mode": "bwrap", "allowed_commands": "any"})
    assert not loads({"type": "ExecTool", "mode": "local"})
    assert loads({"type": "ExecTool", "mode": "local"}, HostTrust(execution=["local"]))


def test_a_docker_image_other_than_the_default_needs_the_hosts_grant() -> None:
    # the host's daemon pulls the image from the registry it names, with the host's logins
    card = {"type": "ExecTool", "mode": "docker"}
    assert loads(card)
    assert loads({**card, "docker_image": "python:3.12-slim"})  # the default, spelled out
    for image in ("10.0.0.5:5000/evil:latest", "127.0.0.1:5000/x", "corp.example/private:prod"):
        assert not loads({**card, "docker_image": image}), image
        assert not loads({**card, "mode": "auto", "docker_image": image}), image
        assert not loads({**card, "docker_image": image}, HostTrust(execution=["local"])), image
        assert loads({**card, "docker_image": image}, HostTrust(execution=[image])), image


def test_a_url_without_a_credential_needs_trust_only_on_a_private_host() -> None:
    card = {"type": "MCPTool", "transport": "streamable-http"}
    assert loads({**card, "url": "https://mcp.example/mcp"})
    for url in ("http://127.0.0.1:9/mcp", "http://[::1]/mcp", "http://10.1.2.3/", "http://qdrant/"):
        assert not loads({**card, "url": url}), url
        assert loads({**card, "url": url}, HostTrust(private_network=True)), url
        assert loads({**card, "url": url}, HostTrust(urls=[url])), url


def test_private_hosts_are_read_from_the_url_as_written() -> None:
    assert private_host("http://169.254.169.254/latest")
    assert private_host("http://localhost:8080/") and private_host("http://a.localhost/")
    assert private_host("http://127.1:8080/") and private_host("http://0x7f.0.0.1/")
    assert not private_host("https://api.openai.com/v1")


@pytest.mark.parametrize(
    "url",
    [
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://metadata.azure.com/",
        "http://[2002:a9fe:a9fe::]:6333/",  # 6to4 of 169.254.169.254
        "http://[64:ff9b::a00:1]:6333/",  # NAT64 of 10.0.0.1
        "http://[64:ff9b:1::a00:1]:6333/",  # local-use NAT64
        "http://[::7f00:1]:6333/",  # IPv4-compatible 127.0.0.1
        "http://[fec0::1]:6333/",  # site-local
    ],
)
def test_a_host_the_url_guard_refuses_is_private_to_the_trust_check(url: str) -> None:
    """Metadata names and the IPv4 inside 6to4 and NAT64 addresses are the URL guard's
    rule, and the load-time check reads hosts by the same rule: such a card needs trust."""
    assert private_host(url)
    for card in (
        {"type": "VectorStoreTool", "provider": "hash", "backend": "qdrant", "qdrant_url": url},
        {"type": "MCPTool", "transport": "sse", "url": url},
    ):
        assert not loads(card), card
        assert loads(card, HostTrust(private_network=True)), card


@pytest.mark.parametrize(
    "url", ["http://127\u30020\u30020.1:9/mcp", "http://169.254.169\uff0e254/latest"]
)
def test_a_private_host_spelled_with_other_dots_is_private_as_clients_read_it(url: str) -> None:
    """HTTP clients map a host to ASCII first (UTS #46: the ideographic and full-width full
    stops are dots), so the check does too: a card naming it needs the host's trust."""
    assert httpx.URL(url).host in ("127.0.0.1", "169.254.169.254")
    assert private_host(url)
    card = {"type": "MCPTool", "transport": "streamable-http", "url": url}
    assert not loads(card)
    assert loads(card, HostTrust(private_network=True))


def test_a_host_that_maps_to_no_ascii_name_is_private() -> None:
    assert private_host("http://exa\u2024mple.com/")
    assert not private_host("https://b\u00fccher.example/")  # a real international name


def test_a_folder_outside_the_workspace_needs_a_trusted_parent(tmp_path: Path) -> None:
    inside = tmp_path / "indexes" / "team"
    link = tmp_path / "link"
    link.symlink_to("/etc")
    card = {"type": "VectorStoreTool", "provider": "hash"}
    trust = HostTrust(paths=[str(tmp_path / "indexes")])
    assert loads({**card, "index_dir": str(inside)}, trust)
    assert not loads({**card, "index_dir": str(tmp_path / "indexes-other")}, trust)
    assert not loads({**card, "index_dir": str(link)}, HostTrust(paths=[str(tmp_path)]))


def test_a_nested_model_is_checked_with_its_own_fields() -> None:
    oauth = {"client_id": "c", "client_secret_env": "S", "issuer": "https://auth.example"}
    card = {
        "type": "MCPTool",
        "transport": "streamable-http",
        "url": "https://mcp.example/mcp",
        "auth": {"oauth": oauth},
    }
    with pytest.raises(ValidationError, match=r"MCPTool\.url = "):
        load_card(card)
    mcp_only = HostTrust(urls=["https://mcp.example/mcp"])
    with pytest.raises(ValidationError, match=r"MCPTool\.auth\.oauth\.client_secret_env = 'S'"):
        load_card(card, trust=mcp_only)
    assert loads(card, HostTrust(env=["S"], urls=["https://mcp.example", "https://auth.example"]))


def test_a_token_variable_in_the_cards_auth_needs_the_cards_url_and_the_variable() -> None:
    card = {
        "type": "MCPTool",
        "transport": "streamable-http",
        "url": "https://mcp.example/mcp",
        "auth": {"bearer_token_env": "T"},
    }
    with pytest.raises(ValidationError, match=r"MCPTool\.url = .* receives a host credential"):
        load_card(card, trust=HostTrust(env=["T"]))
    url_only = HostTrust(urls=["https://mcp.example/mcp"])
    with pytest.raises(ValidationError, match=r"MCPTool\.auth\.bearer_token_env = 'T'"):
        load_card(card, trust=url_only)
    assert loads(card, HostTrust(env=["T"], urls=["https://mcp.example/mcp"]))
    assert loads({**card, "auth": {}})  # no credential: a public URL needs no grant


def test_the_refusal_is_one_line_naming_the_field_and_the_grant() -> None:
    with pytest.raises(ValidationError) as caught:
        load_card(search(allow_private=True))
    (error,) = caught.value.errors()
    message = error["msg"]
    assert "\n" not in message
    assert message.startswith("Value error, SearchTool.allow_private = True ")
    assert "HostTrust(private_network=True)" in message


# ---- the forms a trust decision takes ------------------------------------------------------


def test_trust_that_is_not_a_decision_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="HostTrust"):
        load_cards([stdio("/bin/sh")], trust=True)


def test_config_entries_are_strings_or_mappings() -> None:
    trust = HostTrust.from_config(
        [
            "uvx mcp-server-fetch",
            {"command": "/usr/bin/node", "args": ["/opt/s.js", "**"], "cwd": "/opt", "env": ["K"]},
        ]
    )
    assert allowed(trust, "uvx", "mcp-server-fetch")
    assert allowed(trust, "/usr/bin/node", "/opt/s.js", "-v", cwd="/opt", env={"K": "1"})


def test_a_config_mapping_grants_each_kind() -> None:
    trust = HostTrust.from_config(
        {
            "commands": ["uvx"],
            "env": ["K"],
            "urls": ["https://s.example"],
            "private_network": True,
            "paths": ["/srv"],
            "execution": ["local"],
        }
    )
    assert allowed(trust, "uvx", env={"K": "1"})
    assert loads(search(base_url="https://s.example", allow_private=True), trust)
    assert loads({"type": "ExecTool", "mode": "local", "network": True}, trust)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("uvx", "must be a list"),
        ([{"command": "uvx", "argz": []}], "unknown keys"),
        ([{"args": ["x"]}], "needs 'command'"),
        ([{"command": "uvx", "env": "TOKEN"}], "list of variable names"),
        (["bin/server"], "must be absolute"),
        ([{"command": "srv", "cwd": "relative"}], "must be absolute"),
        ([""], "needs a program"),
        ([42], "string or a mapping"),
        ({"private_network": "yes"}, "true or false"),
        ({"urls": ["ftp://x"]}, "http"),
        ({"paths": ["relative"]}, "must be absolute"),
        ({"networks": True}, "unknown keys"),
    ],
)
def test_malformed_config_entries_are_refused(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HostTrust.from_config(value)


def test_the_default_trust_cannot_be_widened_in_place() -> None:
    nothing = HostTrust.of(None)
    with pytest.raises(AttributeError, match="read-only"):
        nothing.private_network = True
    assert not loads(search(allow_private=True))


@pytest.mark.parametrize(
    "url",
    [
        "https://idp.example/tenant-a/..%2ftenant-b/token",
        "https://idp.example/tenant-a/..%2Ftenant-b/token",
        "https://idp.example/tenant-a/..%5ctenant-b/token",
        "https://idp.example/tenant-a/%2e%2e/tenant-b/token",
    ],
)
def test_a_url_prefix_grant_is_not_left_through_an_encoded_separator(url: str) -> None:
    trust = HostTrust(urls=["https://idp.example/tenant-a"])
    assert trust.allows_url("https://idp.example/tenant-a/oauth/token")
    assert not trust.allows_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://idp.example/tenant-a/..;/tenant-b/token",
        "https://idp.example/tenant-a/%2e%2e;/tenant-b/token",
        "https://idp.example/tenant-a/..;x=1/tenant-b/token",
        "https://idp.example/tenant-a/..%252ftenant-b/token",
        "https://idp.example/tenant-a/..%c0%aftenant-b/token",
        "https://idp.example/tenant-a/..\uff0ftenant-b/token",
        "https://idp.example/tenant-a/.. /tenant-b/token",
        "https://idp.example/tenant-a/..%/tenant-b/token",
    ],
)
def test_a_url_prefix_grant_is_not_left_through_a_path_parameter_or_a_double_escape(
    url: str,
) -> None:
    """Tomcat, Jetty and Spring read ``/..;/`` as ``/../``; a proxy that decodes twice reads
    ``%252f`` as ``/``: below the prefix only unreserved characters may be escaped."""
    trust = HostTrust(urls=["https://idp.example/tenant-a"])
    assert trust.allows_url("https://idp.example/tenant-a/oauth/token")
    assert trust.allows_url("https://idp.example/tenant-a/%7Eops/v2.0/token?x=a;b%252f")
    assert not trust.allows_url(url)
