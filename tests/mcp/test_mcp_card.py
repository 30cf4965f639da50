"""MCPTool configuration: validation, secrets never serialized, provider-safe names."""

from __future__ import annotations

import json
import random
import re

import pytest
from pydantic import SecretStr

from toolcards import HostTrust
from toolcards.core.registry import dump_card, load_card
from toolcards.tools.mcp import MCPAuth, MCPOAuth, MCPTool
from toolcards.tools.mcp.names import sanitize_names

SECRET = "sk-live-very-secret-token"


def test_bearer_secret_never_serialized_or_shown() -> None:
    card = MCPTool(
        transport="streamable-http",
        url="https://mcp.example/mcp",
        auth=MCPAuth(
            bearer_token=SecretStr(SECRET),
            oauth=MCPOAuth(
                client_id="app", client_secret=SecretStr(SECRET), issuer="https://auth.example"
            ),
        ),
    )
    for text in (card.model_dump_json(), json.dumps(dump_card(card)), repr(card), str(card)):
        assert SECRET not in text
    trust = HostTrust(urls=["https://mcp.example/mcp"])  # read back, the card is data
    again = load_card(json.loads(json.dumps(dump_card(card))), trust=trust)
    assert isinstance(again, MCPTool)
    assert again.auth.bearer_token is None and again.auth.oauth is not None
    assert again.auth.oauth.client_secret is None and again.transport == "streamable-http"


def test_env_reference_round_trips() -> None:
    auth = MCPAuth(bearer_token_env="MY_TOKEN")
    card = MCPTool(transport="sse", url="http://127.0.0.1:1/sse", auth=auth)
    trust = HostTrust(env=["MY_TOKEN"], urls=["http://127.0.0.1:1/sse"])
    again = load_card(dump_card(card), trust=trust)
    assert isinstance(again, MCPTool) and again.auth.bearer_token_env == "MY_TOKEN"


FLAT = [
    ({"bearer_token_env": "T"}, {"auth": {"bearer_token_env": "T"}}),
    ({"oauth": {"client_id": "app"}}, {"auth": {"oauth": {"client_id": "app"}}}),
    (
        {"sampling": "agent", "sampling_max_tokens": 64},
        {"sampling": {"mode": "agent", "max_tokens": 64}},
    ),
    (
        {"sampling_model": "test", "sampling_max_requests": 2, "sampling_max_chars": 500},
        {"sampling": {"model": "test", "max_requests": 2, "max_chars": 500}},
    ),
]


@pytest.mark.parametrize(("flat", "nested"), FLAT)
def test_the_former_flat_keys_load_nested_with_a_warning_naming_the_new_key(
    flat: dict[str, object], nested: dict[str, object]
) -> None:
    base = {"transport": "sse", "url": "https://mcp.example/sse"}
    with pytest.warns(FutureWarning, match=r"is now (auth|sampling)\.\w+") as caught:
        old = MCPTool.model_validate({**base, **flat})
    assert len(caught) == 1
    for key in flat:
        assert key in str(caught[0].message)
    assert old == MCPTool.model_validate({**base, **nested})


def test_a_former_flat_key_beside_its_new_key_is_refused() -> None:
    fields = {"transport": "sse", "url": "https://mcp.example/sse", "sampling_model": "a"}
    with pytest.raises(ValueError, match=r"sampling_model and sampling\.model both given"):
        MCPTool.model_validate({**fields, "sampling": {"model": "b"}})


def test_a_former_flat_key_from_data_needs_the_same_trust() -> None:
    card = {"type": "MCPTool", "transport": "sse", "url": "https://mcp.example/sse"}
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match=r"MCPTool\.url = "):
        load_card({**card, "bearer_token_env": "T"})
    trust = HostTrust(env=["T"], urls=["https://mcp.example/sse"])
    with pytest.warns(FutureWarning):
        again = load_card({**card, "bearer_token_env": "T"}, trust=trust)
    assert isinstance(again, MCPTool) and again.auth.bearer_token_env == "T"


def test_a_secret_given_in_code_in_the_flat_form_is_kept() -> None:
    with pytest.warns(FutureWarning, match="bearer_token is now auth.bearer_token"):
        card = MCPTool(transport="sse", url="https://mcp.example/sse", bearer_token=SECRET)
    assert card.auth.token("x") == SECRET


def test_transport_is_required_and_never_guessed() -> None:
    with pytest.raises(ValueError, match="transport"):
        MCPTool.model_validate({"url": "http://127.0.0.1:1/sse"})
    card = MCPTool(transport="streamable-http", url="http://127.0.0.1:1/sse")
    assert type(card._transport()).__name__ == "StreamableHttpTransport"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"transport": "stdio"}, "needs a command"),
        ({"transport": "stdio", "command": "x", "url": "http://a/mcp"}, "HTTP transports"),
        ({"transport": "sse"}, "needs an http"),
        ({"transport": "sse", "url": "file:///x"}, "needs an http"),
        ({"transport": "sse", "url": "http://u:p@a/sse"}, "credentials"),
        ({"transport": "sse", "url": "http://a/sse", "command": "x"}, "stdio only"),
        (
            {"transport": "sse", "url": "http://a/sse", "headers": {"Authorization": "Bearer x"}},
            "auth",
        ),
        (
            {"transport": "sse", "url": "http://a/sse", "auth": {"bearer_token_env": "A B"}},
            "pattern",
        ),
        ({"transport": "stdio", "command": "x", "auth": {"bearer_token_env": "T"}}, "HTTP"),
        ({"transport": "sse", "url": "http://a/sse", "auth": {"token": "x"}}, "Extra inputs"),
        ({"transport": "sse", "url": "http://a/sse", "sampling": {"mode": "on"}}, "'agent'"),
        ({"transport": "stdio", "command": "x", "tool_prefix": "bad prefix"}, "pattern"),
        ({"transport": "stdio", "command": "x", "colour": "red"}, "Extra inputs"),
    ],
)
def test_invalid_configurations_rejected(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCPTool.model_validate(fields)


@pytest.mark.parametrize(
    "name",
    [
        "Host",
        " host ",
        ":authority",
        "Forwarded",
        "X-Forwarded-Host",
        "x-forwarded-for",
        "X-Real-IP",
        "X-Original-URL",
        "X-Rewrite-URL",
        "X-Original-Host",
        "X_Forwarded_Host",  # CGI and WSGI servers read it as X-Forwarded-Host
        "X-Forwarded_Host",
        "X-Forwarded",
        "X-Host",
        "X-HTTP-Host-Override",
    ],
)
def test_a_header_choosing_where_the_request_goes_is_refused(name: str) -> None:
    """A front end or gateway routing by these would take the card's credential to the
    virtual host they name, whatever folder of the granted URL the request keeps to."""
    data = {"type": "MCPTool", "transport": "sse", "url": "https://mcp.example/tenant-a/sse"}
    with pytest.raises(ValueError, match=rf"header {re.escape(repr(name))} is refused: the url"):
        load_card({**data, "headers": {name: "tenant-b.mcp.example"}})
    card = load_card({**data, "headers": {"X-Tenant": "a", "Accept-Language": "en"}})
    assert isinstance(card, MCPTool) and card.headers == {"X-Tenant": "a", "Accept-Language": "en"}


@pytest.mark.parametrize("name", [" Proxy-Authorization ", "Proxy_Authorization"])
def test_a_credential_header_padded_with_spaces_is_refused_too(name: str) -> None:
    headers = {name: "Basic eA=="}
    with pytest.raises(ValueError, match="put credentials in auth"):
        MCPTool(transport="sse", url="https://mcp.example/sse", headers=headers)


def test_missing_token_env_is_a_readable_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_TOKEN", raising=False)
    auth = MCPAuth(bearer_token_env="NOT_SET_TOKEN")
    card = MCPTool(transport="sse", url="http://127.0.0.1:1/sse", auth=auth)
    with pytest.raises(ValueError, match="NOT_SET_TOKEN is not set"):
        card._transport()


def test_env_from_copies_named_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARENT_KEY", "v1")
    card = MCPTool(
        transport="stdio", command="srv", env={"A": "1"}, env_from={"CHILD": "PARENT_KEY"}
    )
    assert card._transport().env == {"A": "1", "CHILD": "v1"}
    assert "v1" not in card.model_dump_json()


def test_one_toolset_per_card() -> None:
    card = MCPTool(transport="stdio", command="srv")
    assert card.get_toolsets()[0] is card.get_toolsets()[0]


VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def test_names_valid_unique_and_order_independent() -> None:
    names = ["docs.search", "docs_search", "a" * 80, "a" * 81, "x y", "x/y", "ok", "ü", ""]
    first = sanitize_names(names, "pre_")
    shuffled = names[:]
    random.Random(7).shuffle(shuffled)
    assert sanitize_names(shuffled, "pre_") == first
    assert all(VALID.fullmatch(n) for n in first.values())
    assert len(set(first.values())) == len(names)
    assert first["docs_search"] == "pre_docs_search" and first["ok"] == "pre_ok"
    assert first["docs.search"].startswith("pre_docs_search_")


@pytest.mark.parametrize("prefix", ["crm", "crm_"])
def test_a_prefix_is_joined_with_one_underscore(prefix: str) -> None:
    assert sanitize_names(["foo", "docs.search"], prefix)["foo"] == "crm_foo"
    assert sanitize_names(["foo"], prefix)["foo"] == "crm_foo"


def test_long_names_keep_a_readable_head() -> None:
    out = sanitize_names(["b" * 100])
    assert len(out["b" * 100]) == 64 and out["b" * 100].startswith("b" * 50)
