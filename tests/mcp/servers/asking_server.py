"""An MCP server whose tools ask the client: elicitation, sampling and roots (official SDK).

Usage: ``python asking_server.py stdio`` or ``python asking_server.py http PORT``. On an MCP
2026-07-28 connection a tool asks with an ``InputRequiredResult`` (that revision has no
server-initiated requests); on the handshake-era revisions it sends the request itself.
Each tool returns what the client answered, as JSON text.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

warnings.simplefilter("ignore")  # sampling and roots are deprecated in 2026-07-28
server = MCPServer("asker", log_level="WARNING")

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "nights": {"type": "integer"}},
    "required": ["city"],
}


def _modern(ctx: Context) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _answered(ctx: Context) -> Any:
    """The client's answer on a later round, or the round that asks for it (None)."""
    got = ctx.input_responses
    return got["q"] if got and "q" in got else None


def _sampling_request(text: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[message], max_tokens=max_tokens, system_prompt="Answer briefly."
        )
    )


@server.tool()
async def book(ctx: Context) -> str | types.InputRequiredResult:
    """Ask the user where to travel."""
    return await _ask(ctx, SCHEMA)


@server.tool()
async def book_with(ctx: Context, form: str) -> str | types.InputRequiredResult:
    """Ask the user to fill in ``form`` (JSON: a requested schema, as this server makes it)."""
    return await _ask(ctx, json.loads(form))


async def _ask(ctx: Context, schema: dict[str, Any]) -> str | types.InputRequiredResult:
    params = types.ElicitRequestFormParams(message="Where to?", requested_schema=schema)
    if _modern(ctx):
        answer = _answered(ctx)
        if answer is None:
            request = types.ElicitRequest(params=params)
            return types.InputRequiredResult(input_requests={"q": request})
    else:
        answer = await ctx.session.elicit_form(
            params.message, schema, related_request_id=ctx.request_id
        )
    return json.dumps({"action": answer.action, "content": answer.content})


@server.tool()
async def book_twice(ctx: Context) -> str | types.InputRequiredResult:
    """Ask two questions at once (on 2026-07-28; one after the other before it)."""
    params = types.ElicitRequestFormParams(message="Where to?", requested_schema=SCHEMA)
    if _modern(ctx):
        got = ctx.input_responses
        if not got:
            asks = {key: types.ElicitRequest(params=params) for key in ("a", "b")}
            return types.InputRequiredResult(input_requests=asks)
        answers = [got["a"], got["b"]]
    else:
        answers = [
            await ctx.session.elicit_form(params.message, SCHEMA, related_request_id=ctx.request_id)
            for _ in range(2)
        ]
    return json.dumps(sorted(a.action for a in answers))


@server.tool()
async def summarize(
    ctx: Context, text: str, max_tokens: int = 50
) -> str | types.InputRequiredResult:
    """Ask the client's model to summarize ``text``."""
    request = _sampling_request(text, max_tokens)
    if _modern(ctx):
        answer = _answered(ctx)
        if answer is None:
            return types.InputRequiredResult(input_requests={"q": request})
    else:
        answer = await ctx.session.create_message(
            request.params.messages,
            max_tokens=max_tokens,
            system_prompt=request.params.system_prompt,
            related_request_id=ctx.request_id,
        )
    content = answer.content
    return json.dumps({"text": getattr(content, "text", None), "model": answer.model})


@server.tool()
async def summarize_and_leave(ctx: Context, text: str) -> str:
    """Ask the client's model once (handshake era), then drop the connection unanswered."""
    request = _sampling_request(text, 50)
    await ctx.session.create_message(
        request.params.messages,
        max_tokens=50,
        system_prompt=request.params.system_prompt,
        related_request_id=ctx.request_id,
    )
    os._exit(0)


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
async def where(ctx: Context) -> str | types.InputRequiredResult:
    """The client's roots (read-only: an agent may call it twice at once)."""
    if _modern(ctx):
        answer = _answered(ctx)
        if answer is None:
            return types.InputRequiredResult(input_requests={"q": types.ListRootsRequest()})
    else:
        answer = await ctx.session.list_roots()
    return json.dumps([str(root.uri) for root in answer.roots])


@server.tool()
async def flood(ctx: Context, times: int) -> str:
    """Asks the client for its roots ``times`` times during one call (handshake era)."""
    refused = 0
    for _ in range(times):
        try:
            await ctx.session.list_roots()
        except Exception:
            refused += 1
    return f"{refused} of {times} refused"


@server.tool()
def era(ctx: Context) -> str:
    """The negotiated protocol version."""
    return str(ctx.protocol_version)


def main() -> None:
    if sys.argv[1] == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")


if __name__ == "__main__":
    main()
