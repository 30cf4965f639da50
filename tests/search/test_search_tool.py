"""SearchTool against a mocked Tavily API (httpx.MockTransport) and a fake resolver."""

from __future__ import annotations

import asyncio
import email.message
import encodings
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from toolcards import RetriableError
from toolcards.core import ToolNotConfigured
from toolcards.core.registry import dump_card, load_card
from toolcards.tools.search import SearchTool, WebCrawl, WebFetch, WebSearch
from toolcards.tools.search.text import clean, html_to_text

KEY = "tvly-secret-0123456789"
Handler = Callable[[httpx.Request], httpx.Response]


def make_card(
    handler: Handler, resolve: dict[str, list[str]] | None = None, **fields: Any
) -> tuple[SearchTool, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    fields.setdefault("api_key", SecretStr(KEY))
    card = SearchTool(**fields)
    card._transport = httpx.MockTransport(record)
    table = {"example.com": ["93.184.216.34"], **(resolve or {})}

    async def resolver(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("name not known")
        return table[host]

    card._resolver = resolver
    return card, seen


def tool(card: SearchTool, name: str) -> Callable[..., Any]:
    return {fn.__name__: fn for fn in card.get_tools()}[name]


def call(card: SearchTool, name: str, *args: Any, **kwargs: Any) -> Any:
    return asyncio.run(tool(card, name)(*args, **kwargs))


def search_reply(request: httpx.Request) -> httpx.Response:
    results = [
        {"title": f"Result {i}", "url": f"https://example.com/{i}", "content": f"snippet {i}"}
        for i in range(3)
    ]
    return httpx.Response(200, json={"query": "q", "results": results, "answer": None})


def test_search_sends_key_and_formats_results() -> None:
    card, seen = make_card(search_reply)
    out = call(card, "web_search", "pydantic ai", max_results=3)
    assert seen[0].url == "https://api.tavily.com/search"
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(seen[0].content)["query"] == "pydantic ai"
    assert "1. Result 0\n   https://example.com/0\n   snippet 0" in out
    assert "3. Result 2" in out


def test_search_caps_max_results_to_config() -> None:
    card, seen = make_card(search_reply, web_search=WebSearch(max_results=4))
    call(card, "web_search", "q", max_results=50)
    assert json.loads(seen[0].content)["max_results"] == 4


def test_search_bounds_huge_results_with_markers() -> None:
    big = "x" * 200_000

    def reply(request: httpx.Request) -> httpx.Response:
        results = [{"title": "t", "url": "https://example.com", "content": big}] * 20
        return httpx.Response(200, json={"results": results})

    card, _ = make_card(reply, web_search=WebSearch(snippet_chars=100, max_chars=2_000))
    out = call(card, "web_search", "q")
    assert len(out) < 2_100
    assert "[... truncated:" in out


def test_an_answer_with_more_results_than_asked_is_formatted_to_the_cap() -> None:
    """The API (or whatever answers for it) sends 3,000 results for a search of 2 and a
    crawl of 2: only the first 2 are read and formatted (every one was, 13 s for 2.6
    million, to keep 12 KB of text; past MAX_VALUES an answer is now refused unparsed)."""
    many = [{"title": f"r{i}", "url": f"https://example.com/{i}", "content": "c"} for i in range(5)]
    many += [{}] * 3_000

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=json.dumps({"results": many}).encode())

    card, _ = make_card(reply, web_search=WebSearch(max_results=2), web_crawl=WebCrawl(max_pages=2))
    out = call(card, "web_search", "q")
    crawled = call(card, "web_crawl", "https://example.com/")
    assert "2. r1" in out and "3." not in out
    assert crawled.startswith("Crawled 2 page(s)")


def test_empty_query_is_retriable_and_sends_nothing() -> None:
    card, seen = make_card(search_reply)
    with pytest.raises(RetriableError, match="empty"):
        call(card, "web_search", "   ")
    assert seen == []


def test_missing_key_is_a_not_configured_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    card, seen = make_card(search_reply, api_key=None)
    with pytest.raises(ToolNotConfigured, match="TAVILY_API_KEY"):
        call(card, "web_search", "q")
    assert seen == []


def test_rejected_key_is_a_not_configured_error_without_the_key() -> None:
    card, _ = make_card(lambda r: httpx.Response(401, json={"detail": {"error": "boom"}}))
    with pytest.raises(ToolNotConfigured, match="rejected the API key") as caught:
        call(card, "web_search", "q")
    assert KEY not in str(caught.value)


def test_key_from_named_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TAVILY", "tvly-from-env")
    card, seen = make_card(search_reply, api_key=None, api_key_env="MY_TAVILY")
    call(card, "web_search", "q")
    assert seen[0].headers["authorization"] == "Bearer tvly-from-env"


@pytest.mark.parametrize(
    ("status", "expected"),
    [(429, "rate limit"), (500, "failed (HTTP 500)")],
)
def test_http_errors_are_readable(status: int, expected: str) -> None:
    card, _ = make_card(lambda r: httpx.Response(status, json={"detail": {"error": "boom"}}))
    out = call(card, "web_search", "q")
    assert out.startswith("error:") and expected in out
    assert KEY not in out


def test_bad_request_is_retriable_with_detail() -> None:
    card, _ = make_card(lambda r: httpx.Response(400, json={"detail": {"error": "bad topic"}}))
    with pytest.raises(RetriableError, match="bad topic"):
        call(card, "web_search", "q")


def test_timeout_and_non_json_are_readable() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    card, _ = make_card(slow)
    assert "timed out" in call(card, "web_search", "q")
    card, _ = make_card(lambda r: httpx.Response(200, text="<html>oops</html>"))
    assert "not JSON" in call(card, "web_search", "q")


def test_oversized_response_is_dropped() -> None:
    card, _ = make_card(lambda r: httpx.Response(200, content=b"[" + b"1," * 4_500_000 + b"1]"))
    assert "exceeded" in call(card, "web_search", "q")


def test_secret_key_never_serialized_or_shown() -> None:
    card = SearchTool(api_key=SecretStr(KEY))
    for text in (card.model_dump_json(), json.dumps(dump_card(card)), repr(card), str(card)):
        assert KEY not in text
    again = load_card(dump_card(card))
    assert isinstance(again, SearchTool) and again.api_key is None
    assert again.api_key_env == "TAVILY_API_KEY"


def test_unknown_fields_and_bad_base_url_rejected() -> None:
    with pytest.raises(ValueError):
        SearchTool.model_validate({"apikey": "x"})
    with pytest.raises(ValueError):
        SearchTool(base_url="file:///etc")


def extract_reply(request: httpx.Request) -> httpx.Response:
    url = json.loads(request.content)["urls"][0]
    return httpx.Response(
        200, json={"results": [{"url": url, "raw_content": "Hello   world\n\n\n\nbye"}]}
    )


def test_fetch_uses_extract_and_cleans_text() -> None:
    card, seen = make_card(extract_reply)
    out = call(card, "web_fetch", "https://example.com/page")
    assert seen[0].url.path == "/extract"
    assert out == "## https://example.com/page\nHello world\n\nbye"


def test_fetch_failure_listed() -> None:
    reply = {"results": [], "failed_results": [{"url": "https://example.com/x", "error": "404"}]}
    card, _ = make_card(lambda r: httpx.Response(200, json=reply))
    out = call(card, "web_fetch", "https://example.com/x")
    assert out.startswith("error: could not fetch") and "404" in out


HOSTILE = [
    "http://127.0.0.1/",
    "http://10.1.2.3/admin",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8080/",
    "http://[::ffff:127.0.0.1]/",
    "http://0.0.0.0/",
    "http://192.168.1.1/",
    "http://localhost:9000/",
    "http://metadata.google.internal/",
    "file:///etc/passwd",
    "ftp://example.com/",
    "gopher://example.com/",
    "https://user:pw@example.com/",
    "http://2130706433/",
    "not a url",
]


@pytest.mark.parametrize("url", HOSTILE)
@pytest.mark.parametrize("name", ["web_fetch", "web_crawl"])
def test_private_and_odd_urls_refused_before_any_request(name: str, url: str) -> None:
    card, seen = make_card(extract_reply)
    with pytest.raises(RetriableError):
        call(card, name, url)
    assert seen == []


def test_dns_name_resolving_to_loopback_refused() -> None:
    card, seen = make_card(extract_reply, resolve={"evil.test": ["8.8.8.8", "127.0.0.1"]})
    with pytest.raises(RetriableError, match=r"127\.0\.0\.1, a loopback"):
        call(card, "web_fetch", "https://evil.test/")
    assert seen == []


def test_allow_private_lets_loopback_through() -> None:
    card, seen = make_card(extract_reply, allow_private=True)
    assert "## http://127.0.0.1:8000/" in call(card, "web_fetch", "http://127.0.0.1:8000/")
    assert len(seen) == 1


def direct_site(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/to-private":
        return httpx.Response(302, headers={"location": "http://169.254.169.254/"})
    if request.url.path == "/to-public":
        return httpx.Response(301, headers={"location": "/final"})
    if request.url.path == "/big":
        return httpx.Response(200, text="A" * 50_000, headers={"content-type": "text/plain"})
    if request.url.path == "/bin":
        return httpx.Response(200, content=b"\x00" * 10, headers={"content-type": "image/png"})
    html = "<html><head><title>T</title><script>evil()</script></head><body><p>Hi</p></body></html>"
    return httpx.Response(200, text=html, headers={"content-type": "text/html"})


def direct_card(**fields: Any) -> tuple[SearchTool, list[httpx.Request]]:
    return make_card(direct_site, web_fetch=WebFetch(backend="direct", **fields), api_key=None)


def test_direct_fetch_names_a_redirect_target_and_the_next_call_strips_its_html() -> None:
    card, seen = direct_card()
    out = call(card, "web_fetch", "https://example.com/to-public")
    assert out == (
        "error: https://example.com/to-public redirects to https://example.com/final; "
        "call web_fetch with that URL to read it"
    )
    out = call(card, "web_fetch", "https://example.com/final")
    assert [r.url.path for r in seen] == ["/to-public", "/final"]
    assert out == "## https://example.com/final\n# T\nHi"


def test_direct_fetch_connects_to_the_checked_address() -> None:
    card, seen = direct_card()
    call(card, "web_fetch", "https://example.com/page")
    (request,) = seen
    assert request.url.host == "93.184.216.34"
    assert request.headers["host"] == "example.com"
    assert request.extensions["sni_hostname"] == "example.com"


def test_direct_fetch_refuses_redirect_to_metadata_address() -> None:
    card, seen = direct_card()
    with pytest.raises(RetriableError, match=r"169\.254\.169\.254"):
        call(card, "web_fetch", "https://example.com/to-private")
    assert len(seen) == 1


def test_direct_fetch_bounds_size_and_types() -> None:
    card, _ = direct_card(max_bytes=1_000)
    assert "[... truncated: page larger than 1000 bytes]" in call(
        card, "web_fetch", "https://example.com/big"
    )
    assert "not a text page" in call(card, "web_fetch", "https://example.com/bin")


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, compresslevel=9)


BOMB = _gzip(b"\0" * (64 << 20))  # 64 MiB of zeros in about 64 KB


def bomb_site(request: httpx.Request) -> httpx.Response:
    """Bodies sent as a server sends them (a stream: a body given as bytes is inflated by
    httpx when the test builds it)."""
    text = {"content-type": "text/plain"}
    body, encoding = {
        "/twice": (_gzip(BOMB), "gzip, gzip"),
        "/br": (b"x", "br"),
    }.get(request.url.path, (BOMB, "gzip"))
    headers = {**text, "content-encoding": encoding}
    return httpx.Response(200, stream=httpx.ByteStream(body), headers=headers)


def call_traced(card: Any, tool: str, arg: str) -> tuple[str, int]:
    """``call`` with the peak of Python's allocations while it ran."""
    import tracemalloc

    tracemalloc.start()
    try:
        out = call(card, tool, arg)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_compressed_page_is_inflated_only_as_far_as_the_cap() -> None:
    """64 MiB behind 64 KB of gzip: at most ``max_bytes`` of it is ever inflated (httpx
    inflated each chunk whole); two layers, or an encoding not read, are refused."""

    card, seen = make_card(
        bomb_site, web_fetch=WebFetch(backend="direct", max_bytes=100_000), api_key=None
    )
    out, peak = call_traced(card, "web_fetch", "https://example.com/once")
    assert "[... truncated: page larger than 100000 bytes]" in out
    assert peak < 16 << 20, peak
    assert seen[0].headers["accept-encoding"] == "gzip, deflate"
    assert "does not read (gzip, gzip)" in call(card, "web_fetch", "https://example.com/twice")
    assert "does not read (br)" in call(card, "web_fetch", "https://example.com/br")


@pytest.mark.parametrize(
    ("body", "encoding", "expected"),
    [(BOMB, "gzip", "exceeded 8000000 bytes"), (_gzip(BOMB), "gzip, gzip", "does not read")],
    ids=["gzip", "gzip-twice"],
)
def test_a_compressed_search_answer_is_inflated_only_as_far_as_the_cap(
    body: bytes, encoding: str, expected: str
) -> None:
    """The Tavily answer was read with aiter_bytes(): every layer inflated a whole chunk at a
    time, the 8 MB cap checked after (1,833 bytes of ``gzip, gzip`` were 2 GiB)."""

    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json", "content-encoding": encoding}
        return httpx.Response(200, stream=httpx.ByteStream(body), headers=headers)

    card, seen = make_card(answer)
    out, peak = call_traced(card, "web_search", "q")
    assert expected in out
    assert peak < 40 << 20, peak
    assert seen[0].headers["accept-encoding"] == "gzip, deflate"


async def _endless(head: bytes, filler: bytes) -> Any:
    yield head
    while True:  # only the fetch's own deadline, or its cap, stops this
        yield filler
        await asyncio.sleep(0)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("head", "filler", "encoding", "expected"),
    [  # zlib kept every byte after the gzip end, and nothing inflates from empty blocks
        (_gzip(b"hello"), b"\0" * 65536, "gzip", "## https://example.com/page\nhello"),
        (b"\x78\x9c", b"\0\0\0\xff\xff" * 4096, "deflate", "truncated: page larger than 1000"),
    ],
    ids=["after-the-gzip-end", "empty-deflate-blocks"],
)
def test_a_compressed_page_is_read_only_to_its_end_or_as_far_as_the_cap(
    head: bytes, filler: bytes, encoding: str, expected: str
) -> None:
    def site(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/plain", "content-encoding": encoding}
        return httpx.Response(200, content=_endless(head, filler), headers=headers)

    card, _ = make_card(
        site,
        web_fetch=WebFetch(backend="direct", max_bytes=1_000),
        api_key=None,
        timeout_seconds=2.0,
    )
    assert expected in call(card, "web_fetch", "https://example.com/page")


@pytest.mark.timeout(30)
def test_a_page_slow_to_convert_is_cut_at_the_fetch_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """html_to_text ran on the event loop, past the deadline: 2 MB of ``<p>`` stalled it 4 s.
    It runs in a worker thread now, abandoned at the deadline."""
    import threading

    release = threading.Event()

    def stuck(html: str) -> tuple[str, str]:
        release.wait(20)  # a hang guard: on the event loop this blocks the deadline too
        return "", "converted"

    monkeypatch.setattr("toolcards.tools.search.fetch.html_to_text", stuck)
    card, _ = direct_card()
    card.timeout_seconds = 0.5
    try:
        out = call(card, "web_fetch", "https://example.com/page")
    finally:
        release.set()
    assert "took longer than 0.5 s" in out


def test_a_page_sent_a_byte_at_a_time_is_cut_at_the_fetch_timeout() -> None:
    async def drip() -> Any:
        while True:  # never ends: only the fetch's own deadline stops it
            yield b"a"
            await asyncio.sleep(0.05)

    def slow(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=drip(), headers={"content-type": "text/plain"})

    card, _ = make_card(
        slow, web_fetch=WebFetch(backend="direct"), api_key=None, timeout_seconds=1.0
    )
    assert "took longer than 1 s" in call(card, "web_fetch", "https://example.com/slow")


@pytest.mark.timeout(30)
def test_a_search_answer_sent_a_byte_at_a_time_is_cut_at_the_timeout() -> None:
    """httpx's timeouts bound each read: an answer whose every byte came within one took as
    long as its server liked."""

    async def drip() -> Any:
        while True:
            yield b" "
            await asyncio.sleep(0.05)

    card, _ = make_card(lambda r: httpx.Response(200, content=drip()), timeout_seconds=1.0)
    assert "timed out" in call(card, "web_search", "q")


@pytest.mark.timeout(30)
def test_a_search_answer_of_too_many_values_is_refused_unparsed() -> None:
    """Within the 8 MB cap, 7.6 KB of gzip held 2.6 M ``{}``: parsed whole on the event loop
    (180 MiB, a second of it). A search service on 127.0.0.1 stands in for the remote one."""
    import http.server
    import threading

    body = _gzip(('{"results":[' + ",".join(["{}"] * 200_000) + "]}").encode())

    class Service(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            for name, value in [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        card = SearchTool(api_key=SecretStr(KEY), base_url=f"http://127.0.0.1:{server.server_port}")
        out = call(card, "web_search", "q")
    finally:
        server.shutdown()
        server.server_close()
    assert out == "error: Tavily search returned more than 10000 values; dropped"


@pytest.mark.timeout(30)
def test_a_search_answer_slow_to_parse_is_cut_at_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer was parsed on the event loop once the deadline was over: it is parsed within
    it now, in a worker thread abandoned at the deadline."""
    import threading

    from toolcards.core import outside_json

    release = threading.Event()
    load = outside_json.load_object

    def stuck(text: bytes) -> dict[str, Any]:
        release.wait(10)  # a hang guard: on the event loop this blocks the deadline too
        return load(text)

    monkeypatch.setattr(outside_json, "load_object", stuck)
    card, _ = make_card(search_reply, timeout_seconds=0.5)
    try:
        out = call(card, "web_search", "q")
    finally:
        release.set()
    assert out == "error: Tavily search timed out; try again later"


FLOOD = "\n\na" * 100_000
"""300,000 characters that clean to 200,000: blank lines, as the 7.9 MB of a hostile answer."""


@pytest.mark.parametrize(
    ("name", "arg", "answer"),
    [
        ("web_search", "q", {"answer": FLOOD, "results": [{"title": FLOOD, "content": FLOOD}]}),
        ("web_fetch", "https://example.com/", {"results": [{"url": FLOOD, "raw_content": FLOOD}]}),
        ("web_fetch", "https://example.com/", {"failed_results": [{"url": FLOOD}, FLOOD]}),
        ("web_crawl", "https://example.com/", {"results": [{"raw_content": FLOOD}] * 3}),
    ],
    ids=["search", "extract", "extract-failed", "crawl"],
)
def test_the_text_of_an_answer_is_cleaned_only_as_far_as_it_is_kept_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch, name: str, arg: str, answer: dict[str, Any]
) -> None:
    """12 KB of gzip held 7.9 MB of blank lines in 3 values: each was cleaned whole, on the
    event loop after the call's deadline (2 s of it, for 1,000 characters kept). A value is
    cut to a few times its limit before it is cleaned, in the thread that parses the answer."""
    import threading

    from toolcards.tools.search import text

    cleaned: list[tuple[int, bool]] = []  # (characters, on the event loop's thread)
    real = text.clean

    def spy(value: object) -> str:
        size = len(value) if isinstance(value, str) else 0
        cleaned.append((size, threading.current_thread() is threading.main_thread()))
        return real(value)

    monkeypatch.setattr(text, "clean", spy)
    card, _ = make_card(
        lambda r: httpx.Response(200, json=answer),
        web_fetch=WebFetch(max_chars=1_000),
        web_crawl=WebCrawl(page_chars=1_000),
    )
    out = call(card, name, arg)
    assert "[... truncated: " in out
    assert cleaned and max(size for size, _ in cleaned) <= 4_000
    assert not any(on_loop for _, on_loop in cleaned)


def test_a_value_that_is_no_text_reads_as_nothing_and_a_number_as_its_digits() -> None:
    """``clean`` took the ``str`` of whatever it was given: a Tavily answer nested 975 deep
    raised RecursionError out of ``web_search``, ending an ungoverned agent run."""
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert [clean(v) for v in (deep, {"a": "b"}, None, 42, 1.5)] == ["", "", "", "42", "1.5"]
    nested = json.loads("[" * 50 + "]" * 50)
    reply = {"answer": nested, "results": [{"title": {"t": "x"}, "url": nested, "content": 7}]}
    card, _ = make_card(lambda r: httpx.Response(200, json=reply))
    assert call(card, "web_search", "q") == "1. (untitled)\n   \n   7"


PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Fish &amp; Chips</title>
<style>p > a { color: red }</style><script>if (a < b) document.write("</p>")</script></head>
<body><h1>Menu</h1><!-- <p>hidden</p> --><p title="a > b">Cod &lt;large&gt; &eacute;&#233;&#x41;</p>
<ul><li>one</li><li>two</li></ul>x<br/>y<noscript>no js</noscript><div>a < b<span>!</span></div>
<svg><path d="M0 0"/></svg><template><p>later</p></template><p>Done&nbsp;.</body></html>"""


def test_html_to_text_keeps_the_text_of_an_ordinary_page() -> None:
    title, text = html_to_text(PAGE)
    assert title == "Fish & Chips"
    assert text == "Menu\n\nCod <large> \xe9\xe9A\n\none\n\ntwo\nx\n\ny\na < b!\n\nDone\xa0."


UNFINISHED = ["<a", "</", "<?", "<!--", "<!", "<a b='", "<script>"]


@pytest.mark.timeout(10)  # a hang guard: html.parser took hours on 2 MB of these
@pytest.mark.parametrize("unit", UNFINISHED)
def test_html_to_text_reads_2_mb_of_unfinished_markup_in_one_pass(unit: str) -> None:
    """Markup the page ends inside is dropped, and finding that out reads the rest once."""
    page = "<p>Hi</p>" + unit * (2_000_000 // len(unit))
    assert html_to_text(page) == ("", "Hi")


@pytest.mark.timeout(10)
def test_direct_fetch_of_a_page_of_unfinished_tags_returns_its_text() -> None:
    body = ("<html><p>Hi</p>" + "<a" * 999_000).encode()
    card, _ = make_card(
        lambda r: httpx.Response(200, content=body, headers={"content-type": "text/html"}),
        web_fetch=WebFetch(backend="direct"),
        api_key=None,
        timeout_seconds=2.0,
    )
    assert call(card, "web_fetch", "https://example.com/page") == "## https://example.com/page\nHi"


def _fetched(body: bytes, content_type: str) -> str:
    card, _ = make_card(
        lambda r: httpx.Response(200, content=body, headers={"content-type": content_type}),
        web_fetch=WebFetch(backend="direct"),
        api_key=None,
        timeout_seconds=2.0,
    )
    return str(call(card, "web_fetch", "https://example.com/page"))


@pytest.mark.parametrize(
    ("ref", "char"),
    [
        ("&#" + "1" * 5_000 + ";", "\ufffd"),
        ("&#" + "0" * 5_000 + "65;", "A"),
        ("&#000000065", "A"),
        ("&#12345678;", "\ufffd"),
        ("&#x" + "f" * 5_000 + ";", "\ufffd"),
    ],
    ids=["5000-digits", "5000-zeros", "zeros-no-semicolon", "8-digits", "hex"],
)
def test_a_character_reference_of_thousands_of_digits_reads_as_one_character(
    ref: str, char: str
) -> None:
    """``html.unescape`` reads a decimal reference with ``int()``, which raises ValueError
    past 4,300 digits: it went out of ``web_fetch`` and ended an ungoverned agent run."""
    body = f"<title>{ref}</title><p>a {ref} b</p>".encode()
    assert _fetched(body, "text/html") == f"## https://example.com/page\n# {char}\na {char} b"


def test_c1_controls_bidi_controls_and_line_separators_do_not_reach_the_model() -> None:
    """C1 controls (an 8-bit CSI ``\\x9b`` drives a terminal as ``ESC [`` does), also written
    as a character reference, bidi overrides (a title showing ``exe.txt`` reversed) and U+2028
    (a line break the snippet's indent missed: a fake numbered result) were kept."""
    content = "ok\x9b31mRED\x85next\u20282. Fake\u2029x\u200f"
    reply = {"results": [{"title": "Docs\u202etxt.exe\u2069", "url": "https://e.example/",
                          "content": content}]}  # fmt: skip
    card, _ = make_card(lambda r: httpx.Response(200, json=reply))
    shown = "1. Docstxt.exe\n   https://e.example/\n   ok31mRED\n   next\n   2. Fake\n   x"
    assert call(card, "web_search", "q") == shown
    body = "<title>&#x202e;T</title><p>a\x9b2Jb &#x81;&#x8d;c\u2028d</p>".encode()
    assert _fetched(body, "text/html") == "## https://example.com/page\n# T\na2Jb c\nd"


@pytest.mark.timeout(20)  # a hang guard: punycode decoded 2 MB in 332 s, on the event loop
@pytest.mark.parametrize("charset", ["punycode", "base64", "rot13", "unicode_escape", "nope"])
def test_a_page_naming_a_charset_that_is_no_text_encoding_reads_as_utf8(charset: str) -> None:
    """``punycode`` decodes in quadratic time, ``base64`` raised LookupError out of the tool:
    a page names a charset, the fetch decodes only text encodings with it."""
    text = _fetched(b"caf\xc3\xa9 " + b"a" * 2_000_000, f"text/plain; charset={charset}")
    assert text.startswith("## https://example.com/page\ncaf\xe9 aaaa")


@pytest.mark.parametrize(
    ("charset", "body"),
    [
        ("iso-8859-1", b"caf\xe9"),
        ("Shift_JIS", "\u65e5\u672c".encode("sjis")),
        ("latin1", b"caf\xe9"),
        ("Windows-1252", b"\x93caf\xe9\x94"),
        ("KOI8-U", "\u0457".encode("koi8-u")),
        ("utf8", b"caf\xc3\xa9"),
        ("US-ASCII", b"cafe"),
    ],
)
def test_a_page_in_a_text_encoding_it_names_is_decoded_with_it(charset: str, body: bytes) -> None:
    assert _fetched(body, f"text/plain; charset={charset}").endswith(body.decode(charset))


@pytest.mark.parametrize(
    ("content_type", "body", "text"),
    [
        ('text/plain; a="' + ";" * 20_000, b"caf\xc3\xa9", "caf\xe9"),
        ('text/plain; charset="iso-8859-1"', b"caf\xe9", "caf\xe9"),
        ("text/plain; format=flowed; Charset = 'iso-8859-1'", b"caf\xe9", "caf\xe9"),
        ("text/plain; charset=iso-8859-1" + "; a=b" * 50, b"caf\xe9", "caf\ufffd"),
    ],
    ids=["open-quote", "quoted", "spaced", "over-256"],
)
def test_the_charset_is_read_from_a_short_content_type_without_the_email_parser(
    monkeypatch: pytest.MonkeyPatch, content_type: str, body: bytes, text: str
) -> None:
    """httpx's ``charset_encoding`` reads the header with the stdlib email parser, quadratic on
    an open quote: 95 KB of ``a="`` and ``;`` held the event loop 6 s past a 2 s deadline. A
    header over 256 characters names no charset."""
    parsed: list[str] = []
    parse = email.message.Message.get_content_charset

    def counted(message: email.message.Message, failobj: Any = None) -> Any:
        parsed.append(str(message["content-type"])[:40])
        return parse(message, failobj)

    monkeypatch.setattr(email.message.Message, "get_content_charset", counted)
    assert _fetched(body, content_type).endswith(text)
    assert parsed == []


def test_charset_names_a_page_sends_are_not_kept_by_the_codec_registry() -> None:
    """``codecs.lookup`` keeps every name it is asked for, found or not, for the life of the
    process: 2,000 pages naming a 90 KB charset each kept 180 MB."""
    _fetched(b"warm", "text/plain; charset=utf-8")
    kept = set(encodings._cache)
    names = [f"x{i}" for i in range(20)] + ["cp99999", "iso8859_99", "mac_none", "y" * 200]
    for name in names:
        assert _fetched(b"caf\xc3\xa9", f"text/plain; charset={name}").endswith("caf\xe9")
    assert set(encodings._cache) == kept


def test_crawl_caps_pages_and_page_size() -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        pages = [
            {"url": f"https://example.com/{i}", "raw_content": "y" * 10_000} for i in range(30)
        ]
        return httpx.Response(200, json={"base_url": "https://example.com", "results": pages})

    card, seen = make_card(reply, web_crawl=WebCrawl(max_pages=5, page_chars=300))
    out = call(card, "web_crawl", "https://example.com", instructions="docs", max_depth=9, limit=50)
    sent = json.loads(seen[0].content)
    assert sent["limit"] == 5 and sent["max_depth"] == 2 and sent["instructions"] == "docs"
    assert out.startswith("Crawled 5 page(s)") and out.count("## https://") == 5
    assert out.count("[... truncated: 9700 more chars]") == 5


def test_capabilities_can_be_switched_off() -> None:
    card = SearchTool(web_fetch=False, web_crawl=False)
    assert [fn.__name__ for fn in card.get_tools()] == ["web_search"]


def test_expose_without_tool_call_removes_the_tool() -> None:
    card = SearchTool(web_search=WebSearch(expose=set()), web_fetch=False, web_crawl=WebCrawl())
    assert [fn.__name__ for fn in card.get_tools()] == ["web_crawl"]


def test_exposing_a_search_tool_as_a_command_is_a_clear_error() -> None:
    from pydantic import ValidationError

    from toolcards.core import Channels

    with pytest.raises(
        ValidationError, match="cannot be exposed on command; it supports: tool_call"
    ):
        WebSearch(expose={Channels.COMMAND})
