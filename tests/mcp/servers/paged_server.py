"""A hand-written stdio MCP server (2025-06-18) answering tools/list in pages: ``PAGES`` pages
of ``TOOLS`` tools, each described in ``DESC`` characters, ``nextCursor`` (``CURSOR``
characters long, when given) on all but the last (argv: PAGES TOOLS DESC [CURSOR])."""

import json
import sys

PAGES, TOOLS, DESC, CURSOR = (int(a) for a in [*sys.argv[1:], "0"][:4])


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tools_page(page: int) -> dict[str, object]:
    tools = [
        {"name": f"t{page}_{i}", "description": "d" * DESC, "inputSchema": {"type": "object"}}
        for i in range(TOOLS)
    ]
    more = {"nextCursor": str(page + 1).rjust(CURSOR, "c")} if page + 1 < PAGES else {}
    return {"tools": tools, **more}


for line in sys.stdin:
    message = json.loads(line)
    mid, method = message.get("id"), message.get("method")
    if mid is None:
        continue
    result: dict[str, object] = {}
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "paged", "version": "1"},
        }
    elif method == "tools/list":
        cursor = (message.get("params") or {}).get("cursor") or "0"
        result = tools_page(int(cursor.lstrip("c")))
    send({"jsonrpc": "2.0", "id": mid, "result": result})
