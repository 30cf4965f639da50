"""Every edge is bounded (invariant 6), at the MCP client: a server's answer is bounded while it
is read, not after. A real MCP server process (``servers/large_server.py``, the official SDK)
answers 30 MB of text, a 6 MB image, 40,000 items or 150 tools, over stdio, streamable HTTP
and SSE; the memory this process allocates meanwhile is measured with ``tracemalloc`` (the
code before: a 30 MB text grew it by 86 MiB, a 15 MB image by 253 MiB and went to the model
whole)."""

from __future__ import annotations

import asyncio
import logging
import tracemalloc
from collections.abc import Awaitable
from types import SimpleNamespace
from typing import Any

import anyio
import httpx2
import pytest
from mcp_support import SERVERS, ServerProcess, call_tools, make_agent
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel

from support.launch import PYTHON
from support.scripted import SequenceScript
from toolcards import ToolFactory
from toolcards.tools.mcp import MCPTool
from toolcards.tools.mcp.answers import MAX_SERVER_LOG_CHARS, MAX_SERVER_LOGS
from toolcards.tools.mcp.toolset import LISTING_PAGES, bounded_listing
from toolcards.tools.mcp.wire import FIELD, RAW_DATA, _Events
from toolcards.tools.mcp.wire_json import MAX_VALUES, WireBounds

pytestmark = pytest.mark.timeout(300)

LARGE = SERVERS / "large_server.py"
LOGGING = SERVERS / "logging_server.py"
TEXT = 30_000_000
IMAGE = 6_000_000
GROWTH = 40 << 20
"""What one large answer may make this process allocate at its peak (bytes)."""
KEPT = 256 << 10
"""What the event reader may keep of an event that never ends (bytes)."""


def card(
    transport: str,
    start_server: type[ServerProcess],
    env: dict[str, str] | None = None,
    **fields: Any,
) -> MCPTool:
    fields.setdefault("connect_timeout_seconds", 60.0)
    if transport == "stdio":
        return MCPTool(
            transport="stdio", command=PYTHON, args=[str(LARGE)], env=env or {}, **fields
        )
    server = start_server(LARGE, transport, env).start()
    return MCPTool(transport=transport, url=server.url, **fields)


def one_call(tool: MCPTool, name: str, args: dict[str, Any]) -> tuple[str, int]:
    """One agent run calling ``name`` (after a first call has connected and warmed up): the
    result the model read, and the peak allocation of the large call."""
    agent, script = make_agent([ToolFactory([tool]).toolset()])

    async def run() -> tuple[str, int]:
        async with agent:
            await call_tools(agent, script, [("items", {"count": 1})])
            (text,), peak = await peak_in(call_tools(agent, script, [(name, args)]))
            return text, peak

    return asyncio.run(run())


async def peak_in(work: Awaitable[Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        found = await work
        return found, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("transport", ["stdio", "streamable-http", "sse"])
def test_a_30_mb_text_is_cut_while_it_is_read(
    transport: str, start_server: type[ServerProcess]
) -> None:
    text, peak = one_call(card(transport, start_server), "text", {"size": TEXT})
    assert text == "z" * 100_000 + f"\n[... truncated: {TEXT - 100_000} more chars]"
    assert peak < GROWTH, f"{peak / 2**20:.0f} MiB allocated while reading the answer"


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
def test_an_image_over_the_file_bound_reaches_the_model_as_a_note(
    transport: str, start_server: type[ServerProcess]
) -> None:
    text, peak = one_call(card(transport, start_server), "image", {"size": IMAGE})
    assert text == (
        "[an image (image/png, about 6,000,000 bytes) was left out: over the 5,242,880-byte limit]"
    )
    assert peak < GROWTH, f"{peak / 2**20:.0f} MiB allocated while reading the answer"


def test_an_image_within_the_limit_reaches_the_model(start_server: type[ServerProcess]) -> None:
    text, _ = one_call(card("stdio", start_server, max_file_bytes=1 << 20), "image", {"size": 1000})
    assert text.startswith("BinaryImage(data=b'\\x89PNG") and "media_type='image/png'" in text


def test_an_answer_past_the_message_bound_is_an_error_at_once(
    start_server: type[ServerProcess],
) -> None:
    tool = card("stdio", start_server, max_result_chars=1_000, max_file_bytes=1024)
    bound = tool.wire_bounds().total  # 1.45 M characters
    text, _ = one_call(tool, "items", {"count": 2_000, "pad": 1_000})  # 2.1 M characters
    assert f"answer is longer than {bound:,} characters; it was not read" in text


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
def test_an_answer_of_many_blocks_is_an_error_at_once(
    transport: str, start_server: type[ServerProcess]
) -> None:
    """1.6 M characters, under the message bound, but 120,000 values: the SDK and
    pydantic-ai built and listed every block before the result was cut (400,000 blocks: 21 s
    of CPU, 1.2 GiB)."""
    text, peak = one_call(card(transport, start_server), "items", {"count": 40_000})
    refused = f"the server's answer holds more than {MAX_VALUES:,} values; it was not read"
    assert text == f"items failed: {refused}"
    assert peak < GROWTH, f"{peak / 2**20:.0f} MiB allocated while reading the answer"


def test_an_answer_of_many_blocks_under_the_value_bound_reaches_the_model(
    start_server: type[ServerProcess],
) -> None:
    text, _ = one_call(card("stdio", start_server), "items", {"count": 20_000})
    assert text.startswith('["item 0", "item 1", ') and "more chars]" in text  # cut as a text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("body", ["event-stream", "json"])
@pytest.mark.parametrize("charset", ["punycode", "base64"])
def test_a_charset_named_by_the_server_does_not_decode_its_answers(
    charset: str, body: str, start_server: type[ServerProcess]
) -> None:
    """The bounded body is UTF-8 whatever the server's Content-Type says: read with its
    charset, punycode took 12.6 s on the event loop for one 400,000-letter event and garbled
    it, and base64 broke the event parser."""
    env = {"LARGE_CHARSET": charset}
    args = {"size": 20_000, "log": body == "event-stream"}  # a notification: an event stream
    text, _ = one_call(card("streamable-http", start_server, env), "text", args)
    assert text == "z" * 20_000


def sse_events(stream: bytes) -> list[httpx2.ServerSentEvent]:
    """The events the SDK reads of ``stream`` (with its own parser)."""
    request = httpx2.Request("GET", "http://mcp.test/mcp")
    headers = {"content-type": "text/event-stream"}
    response = httpx2.Response(200, headers=headers, content=stream, request=request)
    return list(httpx2.EventSource(response))


def kept_reading(events: _Events, line: str, size: int) -> int:
    """Memory ``events`` keeps (allocated, not freed) once it has read about ``size`` bytes of
    ``line`` lines, which never end the event."""
    chunk = (line + "\n").encode() * ((1 << 17) // (len(line) + 1))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(size // len(chunk)):
            assert events.feed(chunk) == b""
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("line", "event"),
    [
        ("event:" + "a" * 5_000, "a" * (FIELD - 6)),
        (":" + "a" * 5_000, "message"),
        ("x-field: " + "a" * 1_000, "message"),
    ],
    ids=["event", "comment", "unknown"],
)
def test_an_event_of_endless_field_lines_keeps_the_last_of_each(line: str, event: str) -> None:
    """A server streaming ``event:`` lines (or comments, or fields the SDK does not read) and
    never a blank line: the client kept every one until the event ended (90 MiB a second)."""
    events = _Events(WireBounds())
    kept = kept_reading(events, line, 4 << 20)
    assert kept < KEPT, f"{kept / 2**20:.1f} MiB kept of an event not ended"
    ended = events.feed(b'data: {"jsonrpc": "2.0", "method": "ping"}\n\n')
    assert [(sse.event, sse.data) for sse in sse_events(ended)] == [
        (event, '{"jsonrpc": "2.0", "method": "ping"}')
    ]


def test_an_event_of_endless_data_lines_keeps_its_bound() -> None:
    """Data that is not JSON is kept up to its bound, line breaks included: each further
    ``data:`` line kept one line break more."""
    events = _Events(WireBounds())
    kept = kept_reading(events, "data: " + "x" * 63, 1 << 20)
    assert kept < KEPT, f"{kept / 2**20:.1f} MiB kept of an event not ended"
    (sse,) = sse_events(events.feed(b"\n"))
    assert len(sse.data) == RAW_DATA and sse.data.startswith("x" * 63 + "\n" + "x" * 63)


def test_an_event_stream_reads_as_it_was_sent() -> None:
    """What the bounds leave out the SDK does not read either: comments, fields it does not
    know, all but the last ``event:``, ``id:`` and ``retry:`` of an event."""
    stream = (
        b": keep-alive\r\n\r\nevent: endpoint\r\ndata: /messages/?session_id=ab12\r\n\r\n"
        b"event: old\nretry: 3000\nid: 7\n: note\nevent: message\nx-field: 1\n"
        b'data: {"jsonrpc": "2.0",\ndata:  "id": 1, "result": {}}\n\n'
        b'id: 8\ndata: {"jsonrpc": "2.0", "method": "log", "params": {"data": "\xc3\xa9"}}\n\n'
    )
    events = _Events(WireBounds())
    read = b"".join(events.feed(stream[i : i + 5]) for i in range(0, len(stream), 5))
    assert sse_events(read) == sse_events(stream)
    assert [sse.id for sse in sse_events(read)] == ["", "7", "8"]


def test_a_server_listing_over_100_tools_is_deferred_to_tool_search(
    start_server: type[ServerProcess],
) -> None:
    tool = card("stdio", start_server, env={"LARGE_TOOLS": "150"})
    script = SequenceScript([
        ("search_tools", {"queries": ["numbered tool 132"]}),
        ("tool_132", {"x": 7}),
    ])  # fmt: skip
    instructions: list[str | None] = []

    def model(messages: list[Any], info: Any) -> Any:
        instructions.append(info.instructions)
        return script(messages, info)

    agent = Agent(FunctionModel(model), toolsets=[ToolFactory([tool]).toolset()])
    result = agent.run_sync("go")
    assert script.seen_tools[0] == []  # none of the 153 definitions is in the request
    assert "tool_132" in script.seen_tools[1] and len(script.seen_tools[1]) < 20
    assert result.output.splitlines()[-1] == "tool_132: success: 132:7"
    note = "MCP server 'mcp' offers 153 tools, more than 100: find the one you need with tool"
    assert all(note in str(said) for said in instructions)  # told from the first request on


def test_a_server_within_the_tool_bound_lists_its_tools(start_server: type[ServerProcess]) -> None:
    tool = card("stdio", start_server, env={"LARGE_TOOLS": "5"})
    agent, script = make_agent([ToolFactory([tool]).toolset()])

    async def run() -> list[str]:
        async with agent:
            return await call_tools(agent, script, [])

    asyncio.run(run())
    assert {f"tool_{i}" for i in range(5)} <= set(script.seen_tools)


def paged_listing(
    pages: int, tools: int, desc: int, cursor: int = 0
) -> tuple[list[str], str | None]:
    """The tools the model sees of ``servers/paged_server.py`` and the instructions."""
    script = [str(SERVERS / "paged_server.py"), *(str(n) for n in (pages, tools, desc, cursor))]
    fields: dict[str, Any] = {"connect_timeout_seconds": 60.0, "protocol": "legacy"}
    tool = MCPTool(name="pg", transport="stdio", command=PYTHON, args=script, **fields)
    agent, said = make_agent([ToolFactory([tool]).toolset()])
    asyncio.run(call_tools(agent, said, []))
    return said.seen_tools, said.instructions


def test_a_listing_of_many_pages_is_refused_past_its_bound() -> None:
    """Each page is under the message bound, the listing is not (the client kept all 250 pages
    a server sent: 3 GiB): the server is unavailable, and says why."""
    seen, instructions = paged_listing(30, 1_000, 100)
    assert not any(name.startswith("t") for name in seen)
    assert "MCP server 'pg' is unavailable (ListingTooLarge:" in str(instructions)


def test_a_listing_of_a_few_pages_is_read_whole() -> None:
    seen, _ = paged_listing(3, 5, 100)
    assert {f"t{page}_{i}" for page in range(3) for i in range(5)} <= set(seen)


def test_a_listing_of_empty_pages_is_refused_past_its_page_bound() -> None:
    """Empty pages, each with a new cursor, cost no tool and no character: a server answering
    them forever kept the listing going forever (11,000 pages in 10 s)."""
    _, instructions = paged_listing(LISTING_PAGES + 50, 0, 0)
    assert "MCP server 'pg' is unavailable (ListingTooLarge:" in str(instructions)


def test_the_cursors_count_in_a_listings_characters() -> None:
    """Empty pages with 90,000-character cursors (each under the string bound), fewer than the
    page bound: the client kept every cursor (they grew it by 300 MB in 30 s)."""
    _, instructions = paged_listing(LISTING_PAGES - 1, 0, 0, cursor=90_000)
    assert "MCP server 'pg' is unavailable (ListingTooLarge:" in str(instructions)


def test_a_listing_that_takes_longer_than_its_deadline_is_refused() -> None:
    """Each page within the request timeout, the listing not: a server answering one page
    and then never again is bounded by the listing's deadline, not by each page's."""

    class Slow:
        async def list_tools_mcp(self, cursor: str | None = None) -> Any:
            if cursor is not None:
                await anyio.sleep_forever()
            return SimpleNamespace(tools=[], next_cursor="more")

    with pytest.raises(TimeoutError, match="tool listing took longer than 0.2 s"):
        anyio.run(bounded_listing(Slow(), 0.2))


def test_the_bounds_are_the_cards() -> None:
    bounds = MCPTool(transport="stdio", command="x", max_result_chars=2_000).wire_bounds()
    assert (bounds.text, bounds.file_bytes) == (50_000, 5 << 20)  # sampling.max_chars is larger


def test_a_servers_log_flood_is_cut_escaped_and_capped_on_our_logger(
    start_server: type[ServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    """The code before logged each message whole on fastmcp's logger, under the server's
    logger name, raw: a terminal reset reached stderr, and Rich drew 100,000 characters on
    the event loop for minutes, past the call's timeout."""
    caplog.set_level(logging.DEBUG, logger="toolcards.mcp")
    server = start_server(LOGGING, "http").start()
    tool = MCPTool(name="noisy", transport="streamable-http", url=server.url, timeout_seconds=30)
    agent, script = make_agent([ToolFactory([tool]).toolset()])

    async def run() -> list[str]:
        async with agent:
            return await call_tools(agent, script, [("shout", {"size": 100_000, "count": 500})])

    assert asyncio.run(run()) == ["done"]
    lines = [r for r in caplog.records if r.getMessage().startswith("MCP server 'noisy'")]
    assert {r.name for r in lines} == {"toolcards.mcp"}
    assert len(lines) == MAX_SERVER_LOGS + 1
    assert lines[-1].getMessage().endswith(f"{MAX_SERVER_LOGS} notes logged, the rest are dropped")
    (shout,) = [r for r in lines if "(error)" in r.getMessage()]
    (progress,) = [r for r in lines if "progress" in r.getMessage()]
    assert shout.levelno == logging.INFO and progress.levelno == logging.DEBUG
    for record in (shout, progress):
        assert "\\u001bc\\u009b31mpwned\\n" in record.getMessage()
        assert len(record.getMessage()) < MAX_SERVER_LOG_CHARS + 100
    shown = [r.getMessage() for r in caplog.records]
    assert not any(c in m for m in shown for c in "\x1b\x9b\n") and "governance" not in caplog.text
