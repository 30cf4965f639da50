"""Malformed and hostile URLs are retries, never exceptions out of the tools or the run.

``http://0177.0.0.1/`` used to raise ``httpx.InvalidURL`` out of ``web_fetch`` and end an
ungoverned agent run. Every URL below goes through the tool functions (Tavily and direct
backends, with and without ``allow_private``) and through a real pydantic-ai Agent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolcards import RetriableError, ToolFactory
from toolcards.governance import CapabilityRegistry, Executor, Identity, Policy
from toolcards.governance.outcomes import Outcome
from toolcards.tools._common.url_guard import check_url
from toolcards.tools._common.urls import URLRefused, normalize_url
from toolcards.tools.search import SearchTool, WebFetch

MALFORMED = [
    "http://1.2.3.999/",  # a part out of range
    "http://1.2.3.4.5/",  # five numeric parts
    "http://09.0.0.1/",  # not an octal number
    "http://0x100000000/",  # more than 32 bits
    "http://256.256.256.256/",
    "http://a.1/",  # ends in a number, but is no address
    "http://[::1/",  # unclosed bracket
    "http://[zzz]/",
    "http://[127.0.0.1]/",  # IPv4 in brackets
    "http://[fe80::1%25eth0]/",  # IPv6 zone id
    "http://[::1%25lo]:80/",
    "http://",  # empty host
    "http:///etc/passwd",
    "http://:80/",
    "http:example.com",
    "http://example.com:99999/",
    "http://example.com:-1/",
    "http://example.com:abc/",
    "http://example.com:0/",
    "http://example.com:80:80/",
    "http://user:pass@example.com/",  # userinfo
    "http://@example.com/",
    "http://127.0.0.1@example.com/",
    "http://example.com\\@127.0.0.1/",
    "http://example.com%40127.0.0.1/",
    "http://%31%32%37.0.0.1/",  # percent-encoded host
    "http://exa\x00mple.com/",  # control characters
    "http://example.com/\r\nHost: evil",
    "http://exa\u202emple.com/",  # right-to-left override
    "http://ex\u200bample.com/",  # zero-width space
    "http://a..b/",  # empty label
    "http://" + "a" * 64 + ".com/",  # label over 63 characters
    "http://" + "a." * 130 + "com/",  # host over 253 characters
    "http://" + "1" * 5_000 + "/",  # more digits than int() reads (a bare ValueError)
    "http://0x" + "0" * 11 + "1/",  # an IPv4 part over 12 characters
    "https://example.com/" + "p" * 9_000,  # over-long URL
    "http://ｅｘａｍｐｌｅ\uff0ecom\u3002\u3002/",  # mapped to an empty label
    "file:///etc/passwd",
    "gopher://example.com:70/_GET",
    "javascript:alert(1)",
    "//example.com/",
    "",
    "   ",
    "http://example.com/%2Fhr/salaries.html",  # escaped '/': some servers split there
    "http://example.com/hr%5csalaries.html",  # escaped '\\'
    "http://example.com/%u0068r/",  # '%u' escapes: 'h' to IIS
    "http://example.com/?off=50%",  # a '%' that starts no escape
]
"""Inputs that do not parse to a usable http(s) URL."""

PRIVATE_SPELLINGS = {
    "http://0177.0.0.1/": "127.0.0.1",
    "http://0x7f000001/": "127.0.0.1",
    "http://2130706433/": "127.0.0.1",
    "http://0x7f.0.0.1/": "127.0.0.1",
    "http://0177.1/": "127.0.0.1",
    "http://127.1/": "127.0.0.1",
    "http://017700000001/": "127.0.0.1",
    "http://127.0.0.1./": "127.0.0.1",
    "http://１２７.０.０.１/": "127.0.0.1",  # fullwidth digits
    "http://0/": "0.0.0.0",
    "http://0251.0376.0251.0376/": "169.254.169.254",
    "http://0xa9fea9fe/": "169.254.169.254",
    "http://2852039166/": "169.254.169.254",
    "http://169.254.43518/": "169.254.169.254",
    "http://0xA9.0xFE.0xA9.0xFE/": "169.254.169.254",
    "http://[::ffff:a9fe:a9fe]/": "::ffff:a9fe:a9fe",
    "http://[::ffff:127.0.0.1]/": "::ffff:7f00:1",
    "http://[64:ff9b::7f00:1]/": "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "http://[::1]/": "::1",
}
"""Other spellings of loopback and metadata addresses -> the normalised address."""

HOSTILE = MALFORMED + list(PRIVATE_SPELLINGS)
Handler = Callable[[httpx.Request], httpx.Response]


def page(request: httpx.Request) -> httpx.Response:
    if request.url.host == "api.tavily.com":
        body = {"results": [{"url": "https://example.com", "raw_content": "text"}]}
        return httpx.Response(200, json=body)
    return httpx.Response(200, text="hello", headers={"content-type": "text/plain"})


async def no_lookup(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} must not be resolved")


def make_card(**fields: Any) -> tuple[SearchTool, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return page(request)

    card = SearchTool(api_key=SecretStr("k"), **fields)
    card._transport = httpx.MockTransport(record)

    async def resolver(host: str, port: int) -> list[str]:
        if host == "example.com":
            return ["93.184.216.34"]
        raise OSError("name not known")

    card._resolver = resolver
    return card, seen


def tool(card: SearchTool, name: str) -> Callable[..., Any]:
    return {fn.__name__: fn for fn in card.get_tools()}[name]


VARIANTS = {
    "fetch-tavily": ("web_fetch", {}),
    "fetch-direct": ("web_fetch", {"web_fetch": WebFetch(backend="direct")}),
    "crawl": ("web_crawl", {}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_hostile_url_is_a_retry_and_sends_nothing(variant: str) -> None:
    name, fields = VARIANTS[variant]
    card, seen = make_card(**fields)
    fn = tool(card, name)
    escaped: list[str] = []
    for url in HOSTILE:
        try:
            asyncio.run(fn(url))
        except RetriableError:
            continue
        except Exception as exc:
            escaped.append(f"{url!r:.60}: {type(exc).__name__}: {exc}")
        else:
            escaped.append(f"{url!r:.60}: answered without a retry")
    assert len(HOSTILE) >= 30
    assert escaped == []
    assert seen == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_malformed_urls_are_retries_even_when_private_addresses_are_allowed(
    variant: str,
) -> None:
    name, fields = VARIANTS[variant]
    card, seen = make_card(allow_private=True, **fields)
    fn = tool(card, name)
    for url in MALFORMED:
        with pytest.raises(RetriableError):
            asyncio.run(fn(url))
    assert seen == []


@pytest.mark.parametrize(("url", "address"), sorted(PRIVATE_SPELLINGS.items()))
def test_numeric_spellings_of_private_addresses_are_refused_once_normalised(
    url: str, address: str
) -> None:
    with pytest.raises(URLRefused, match=f"refused: {address} is a "):
        asyncio.run(check_url(url, no_lookup))


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://0x5db8d822/a?b=1#frag", "http://93.184.216.34/a?b=1"),
        ("http://1572395042/", "http://93.184.216.34/"),
        ("http://0135.0270.0330.042/", "http://93.184.216.34/"),
        ("HTTP://Example.COM./x", "http://example.com/x"),
        ("https://münchen.de/", "https://xn--mnchen-3ya.de/"),
        (
            "http://example.com/%7euser/a%2db%3f?q=%7e%2f%41#x",
            "http://example.com/~user/a-b%3F?q=~%2FA",
        ),
        ("http://example.com/a/./b/../%2e%2E//c/.", "http://example.com/c/"),
        ("http://example.com/..", "http://example.com/"),
        (
            "http://[2606:2800:220:1:248:1893:25c8:1946]:8080",
            "http://[2606:2800:220:1:248:1893:25c8:1946]:8080/",
        ),
    ],
)
def test_urls_are_sent_in_canonical_form(url: str, canonical: str) -> None:
    assert normalize_url(url).url == canonical


def test_direct_fetch_connects_to_the_normalised_address() -> None:
    card, seen = make_card(web_fetch=WebFetch(backend="direct"))
    out = asyncio.run(tool(card, "web_fetch")("http://0x5db8d822/page"))
    assert "hello" in out
    assert [str(r.url) for r in seen] == ["http://93.184.216.34/page"]


def test_tavily_receives_the_normalised_url() -> None:
    card, seen = make_card()
    asyncio.run(tool(card, "web_fetch")("http://1572395042/page"))
    assert json.loads(seen[0].content)["urls"] == ["http://93.184.216.34/page"]


def redirecting_card(location: str, hops: list[str]) -> SearchTool:
    """A direct-fetch card whose every page redirects to ``location`` (hops recorded)."""

    def redirect(request: httpx.Request) -> httpx.Response:
        hops.append(str(request.url))
        return httpx.Response(302, headers={"location": location})

    return direct_card(redirect)


def direct_card(site: Callable[[httpx.Request], httpx.Response]) -> SearchTool:
    """A direct-fetch card served by ``site``, every host at one public address."""
    card = SearchTool(api_key=SecretStr("k"), web_fetch=WebFetch(backend="direct"))
    card._transport = httpx.MockTransport(site)

    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    card._resolver = resolver
    return card


def test_a_malformed_redirect_is_an_error_result_not_an_exception() -> None:
    card = redirecting_card("http://[::1/", [])
    out = asyncio.run(tool(card, "web_fetch")("http://example.com/"))
    assert out.startswith("error: fetching http://example.com/ failed")


def test_a_redirect_to_a_hex_loopback_is_refused() -> None:
    hops: list[str] = []
    card = redirecting_card("http://0x7f000001:8080/admin", hops)
    with pytest.raises(RetriableError, match=r"refused: 127\.0\.0\.1 is a loopback"):
        asyncio.run(tool(card, "web_fetch")("http://example.com/"))
    assert hops == ["http://93.184.216.34/"]


def test_a_redirect_to_a_host_of_5000_digits_is_refused() -> None:
    hops: list[str] = []
    card = redirecting_card("http://" + "1" * 5_000 + "/", hops)
    with pytest.raises(RetriableError, match="host is longer than 253 characters"):
        asyncio.run(tool(card, "web_fetch")("http://example.com/"))
    assert hops == ["http://93.184.216.34/"]


def _one_call_model(url: str) -> Callable[[list[ModelMessage], AgentInfo], ModelResponse]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("web_fetch", {"url": url})])
        return ModelResponse(parts=[TextPart("done")])

    return model


def _retries(messages: list[ModelMessage]) -> list[str]:
    """The retry prompts the model received (a retried tool return in pydantic-ai 2.x)."""
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.outcome == "retried"
    ]


@pytest.mark.parametrize("backend", ["tavily", "direct"])
def test_an_ungoverned_agent_run_survives_every_hostile_url(backend: str) -> None:
    card, seen = make_card(web_fetch=WebFetch(backend=backend))  # type: ignore[arg-type]
    toolset = ToolFactory([card]).toolset()
    ended: list[str] = []
    for url in HOSTILE:
        agent = Agent(FunctionModel(_one_call_model(url)), toolsets=[toolset])
        try:
            result = agent.run_sync("fetch it")
        except Exception as exc:
            ended.append(f"{url!r:.60}: {type(exc).__name__}: {exc}")
            continue
        if result.output != "done" or len(_retries(result.all_messages())) != 1:
            ended.append(f"{url!r:.60}: no retry prompt")
    assert ended == []
    assert seen == []


# ---- governed: the policy decides on the URL the tool fetches -------------------------------

SPELLINGS_OF_HR = [
    "https://example.com/hr",
    "HTTPS://EXAMPLE.com/hr",
    "https://example.com./hr",
    "https://example.com:443/hr",
    "https://ｅｘａｍｐｌｅ.com/hr",  # fullwidth letters
    "https://example.com?x#/hr",  # fetches https://example.com/?x
]
WHO = Identity("agent.a", type="agent")


def governed(card: SearchTool, rule: dict[str, Any], default: str) -> Executor:
    policy = Policy.from_dict({"default_effect": default, "rules": [rule]})
    return Executor(CapabilityRegistry.from_factory(ToolFactory([card])), policy)


def url_rule(effect: str, glob: str) -> dict[str, Any]:
    condition = {"arguments": {"url": {"glob": glob}}}
    return {"targets": ["web_fetch", "web_crawl"], "effect": effect, "conditions": condition}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("url", SPELLINGS_OF_HR)
def test_a_url_deny_rule_holds_for_every_spelling_of_the_url(variant: str, url: str) -> None:
    assert_denied_unsent(variant, url, "https://example.com/*")


def assert_denied_unsent(variant: str, url: str, glob: str) -> None:
    """``url`` through ``variant`` under a rule denying ``glob``: denied, nothing sent."""
    name, fields = VARIANTS[variant]
    card, seen = make_card(**fields)
    executor = governed(card, url_rule("deny", glob), "allow")
    result = asyncio.run(executor.call(name, {"url": url}, WHO))
    assert result.outcome is Outcome.DENIED
    assert seen == []


def test_an_allowed_url_reaches_the_tool_in_the_form_it_was_allowed() -> None:
    card, seen = make_card()
    executor = governed(card, url_rule("allow", "https://example.com/docs/*"), "deny")
    url = "HTTPS://Example.COM.:443/docs/a#top"
    result = asyncio.run(executor.call("web_fetch", {"url": url}, WHO))
    assert result.outcome is Outcome.OK
    assert json.loads(seen[0].content)["urls"] == ["https://example.com/docs/a"]


SPELLINGS_OF_HR_PAGE = [
    "https://example.com/%68r/salaries.html",
    "https://example.com/%68%72/%73alaries.html",
    "https://example.com/public/%2e%2e/hr/salaries.html",
    "https://example.com/public/%2E%2E/hr/salaries.html",
    "https://example.com/public/.%2e/hr/salaries.html",
    "https://example.com/public/../hr/salaries.html",
    "https://example.com/%2e/hr/salaries.html",
    "https://example.com//hr/salaries.html",
    "https://example.com///hr/salaries.html",
    "https://example.com/public/%2e%2e//hr/salaries.html",
]
"""Paths a server serves as ``/hr/salaries.html`` (RFC 3986 6.2.2, merged slashes)."""


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("url", SPELLINGS_OF_HR_PAGE)
def test_a_path_deny_rule_holds_for_every_spelling_of_the_path(variant: str, url: str) -> None:
    assert_denied_unsent(variant, url, "https://example.com/hr/*")


def test_an_allowed_path_is_fetched_in_its_normalised_form() -> None:
    card, seen = make_card(web_fetch=WebFetch(backend="direct"))
    executor = governed(card, url_rule("allow", "https://example.com/docs/*"), "deny")
    url = "https://example.com//docs/%7euser/x/%2e%2e/a%2db?q=%7e%c3%a9"
    result = asyncio.run(executor.call("web_fetch", {"url": url}, WHO))
    assert result.outcome is Outcome.OK
    assert [r.url.raw_path for r in seen] == [b"/docs/~user/a-b?q=~%C3%A9"]


@pytest.mark.parametrize(
    "url",
    [
        *SPELLINGS_OF_HR_PAGE,
        *SPELLINGS_OF_HR,
        "http://example.com/%c3%a9/é/%25/%2541/%41?a=%2f%25&b=é&c=%7E",
        "http://example.com/a/b/..",
        "http://example.com/a/b/.",
        "http://example.com/a/%2e",
        "http://example.com/a//",
        'http://example.com/"<>^`{|}?x="<>',
    ],
)
def test_normalising_twice_changes_nothing(url: str) -> None:
    once = normalize_url(url).url
    assert normalize_url(once).url == once
    if url in SPELLINGS_OF_HR_PAGE:
        assert once == "https://example.com/hr/salaries.html"


@pytest.mark.parametrize("url", MALFORMED)
def test_a_url_that_does_not_parse_is_invalid_before_the_policy(url: str) -> None:
    card, seen = make_card()
    executor = governed(card, url_rule("deny", "https://example.com/*"), "allow")
    result = asyncio.run(executor.call("web_fetch", {"url": url}, WHO))
    assert result.outcome is Outcome.INVALID_ARGS
    assert seen == []


PATH_PARAMETERS = [
    "https://example.com/hr;x/salaries.html",
    "https://example.com/public/..;/hr/salaries.html",
    "https://example.com/hr/salaries.html;jsessionid=1",
    "https://example.com/public/..%3B/hr/salaries.html",
]
"""Paths a Tomcat or Spring server serves as ``/hr/salaries.html`` (``;`` starts a path
parameter, dropped from its segment before the dot segments are removed)."""


@pytest.mark.parametrize("url", PATH_PARAMETERS)
def test_a_path_parameter_is_invalid_before_the_policy(url: str) -> None:
    card, seen = make_card(web_fetch=WebFetch(backend="direct"))
    executor = governed(card, url_rule("deny", "https://example.com/hr/*"), "allow")
    result = asyncio.run(executor.call("web_fetch", {"url": url}, WHO))
    assert result.outcome is Outcome.INVALID_ARGS
    assert "';'" in result.message
    assert seen == []


def site_with_an_open_redirect(location: str) -> tuple[SearchTool, list[str]]:
    """A direct-fetch card of a site whose every page but the denied one redirects to
    ``location`` (paths recorded); the denied page holds a secret."""
    seen: list[str] = []

    def site(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url.scheme} {request.url.path}")
        if request.url.scheme == "https" and request.url.path == "/hr/salaries.html":
            return httpx.Response(200, text="SECRET", headers={"content-type": "text/plain"})
        return httpx.Response(302, headers={"location": location})

    return direct_card(site), seen


@pytest.mark.parametrize(
    ("url", "location"),
    [
        ("https://example.com/public/go", "/hr/salaries.html"),
        ("https://example.com/public/go", "https://EXAMPLE.com/public/../hr/salaries.html"),
        ("http://example.com/hr/salaries.html", "https://example.com/hr/salaries.html"),
        ("https://example.com/hr", "/hr/salaries.html"),
    ],
)
def test_a_redirect_to_a_denied_url_fetches_nothing_of_it_and_names_it(
    url: str, location: str
) -> None:
    """The policy decided on ``url``; the redirect's target (an open redirect, an http to https
    upgrade) is the model's next call, decided by the policy in turn."""
    card, seen = site_with_an_open_redirect(location)
    executor = governed(card, url_rule("deny", "https://example.com/hr/*"), "allow")
    result = asyncio.run(executor.call("web_fetch", {"url": url}, WHO))
    assert result.outcome is Outcome.OK
    assert "SECRET" not in str(result.value)
    assert result.value == (
        f"error: {url} redirects to https://example.com/hr/salaries.html; "
        "call web_fetch with that URL to read it"
    )
    assert len(seen) == 1
    denied = asyncio.run(
        executor.call("web_fetch", {"url": "https://example.com/hr/salaries.html"}, WHO)
    )
    assert denied.outcome is Outcome.DENIED
    assert len(seen) == 1
