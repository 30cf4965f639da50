"""The stdio transport, with the JSON-RPC edge checks the SDK leaves out.

A line that is not JSON is answered ``-32700`` (parse error, ``id: null``); a JSON value that
is not a JSON-RPC 2.0 message (no ``"jsonrpc": "2.0"``, a method that is not a string, a
batch array, ...) is answered ``-32600`` (invalid request, with its ``id`` when readable), as
is a message of more than :data:`~toolcards.core.outside_json.MAX_VALUES` values, before it is
parsed (``id: null``). Everything else goes to the SDK, which answers unknown methods with
``-32601``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp.types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types.jsonrpc import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter

from toolcards.core import outside_json
from toolcards.core.threads import background_thread
from toolcards.surfaces.http.limits import MAX_BODY


def checked_message(raw: str | bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(message, None)`` for a well-formed JSON-RPC message (parsed), else ``(None, the
    JSON-RPC error response)``."""
    if outside_json.over_values(raw):
        return None, invalid_request(None, _TOO_MANY_VALUES)
    try:
        data = outside_json.loads(raw)
    except ValueError:
        return None, _error(None, PARSE_ERROR, "Parse error")
    ident = data.get("id") if isinstance(data, dict) else None
    if not isinstance(ident, str | int) or isinstance(ident, bool):
        ident = None
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        return None, _error(ident, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
    if "method" in data and not isinstance(data["method"], str):
        return None, _error(ident, INVALID_REQUEST, "Invalid Request: method must be a string")
    if "method" not in data and "result" not in data and "error" not in data:
        return None, _error(ident, INVALID_REQUEST, "Invalid Request: no method")
    try:
        jsonrpc_message_adapter.validate_python(data, by_name=False)
    except ValueError:
        return None, _error(ident, INVALID_REQUEST, "Invalid Request")
    return data, None


def edge_error(raw: str | bytes) -> dict[str, Any] | None:
    """The JSON-RPC error response for a malformed message, or None when it is well formed."""
    return checked_message(raw)[1]


def invalid_request(ident: Any, why: str) -> dict[str, Any]:
    """The ``-32600`` answer to request ``ident`` (None: not known) saying ``why``."""
    return _error(ident, INVALID_REQUEST, f"Invalid Request: {why}")


_TOO_MANY_VALUES = f"more than {outside_json.MAX_VALUES:,} values"
"""Why a message is refused unparsed: parsed, its values would cost far more than its bytes."""


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


class _NoLines:
    """Given to the SDK's stdio server as its stdin: this module reads stdin itself."""

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        raise StopAsyncIteration


_READ_AHEAD = 16  # stdin lines read before the server took them
_CHUNK = 65_536


class _TooLong(int):
    """In place of a line longer than the limit (its value): the line is dropped unread."""


async def _stdin_lines(fd: int, max_line: int) -> AsyncIterator[str | _TooLong]:
    """The lines of file descriptor ``fd`` (stdin), read by a daemon thread, a few lines ahead
    at most. A shutdown (SIGTERM while the client keeps stdin open) never waits for a line that
    may never come, as a worker thread blocked in ``readline`` makes it wait; plain ``os.read``
    holds no buffer lock that the interpreter's exit would trip over. A line longer than
    ``max_line`` bytes is dropped as it arrives (a :class:`_TooLong` takes its place): a
    client that never ends its line holds at most ``max_line`` bytes of memory."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | _TooLong | None] = asyncio.Queue(maxsize=_READ_AHEAD)

    def hand_over(line: str | _TooLong | None) -> None:
        asyncio.run_coroutine_threadsafe(lines.put(line), loop).result()

    def read() -> None:
        pending = bytearray()
        dropping = False  # inside a line over the limit: its bytes are dropped to its end
        try:
            while chunk := os.read(fd, _CHUNK):
                if dropping:
                    end = chunk.find(b"\n")
                    if end < 0:
                        continue
                    dropping, chunk = False, chunk[end + 1 :]
                    hand_over(_TooLong(max_line))
                cut = chunk.rfind(b"\n") + 1
                if not cut:
                    pending += chunk
                    if len(pending) > max_line:
                        pending, dropping = bytearray(), True
                    continue
                pending += chunk[:cut]
                text = pending.decode("utf-8", errors="replace")
                pending = bytearray(chunk[cut:])
                for line in text.split("\n")[:-1]:  # only \n ends a line (not U+2028)
                    hand_over(_TooLong(max_line) if len(line) > max_line else line)
            if pending:
                hand_over(pending.decode("utf-8", errors="replace"))
            hand_over(None)
        except (RuntimeError, OSError, concurrent.futures.CancelledError):
            return  # the loop or stdin is gone: so is the reader

    background_thread(read, name="toolcards-stdin").start()
    while (line := await lines.get()) is not None:
        yield line


async def _read_messages(
    lines: Any, messages: Any, errors: anyio.abc.ObjectSendStream[dict[str, Any]]
) -> None:
    """Each stdin line parsed once; a malformed one is answered, not passed on."""
    async with messages:
        async for line in lines:
            if isinstance(line, _TooLong):
                why = f"Invalid Request: a message longer than {int(line)} bytes"
                await errors.send(_error(None, INVALID_REQUEST, why))
                continue
            if not line.strip():
                continue
            if outside_json.over_values(line):
                await errors.send(invalid_request(None, _TOO_MANY_VALUES))
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                problem = edge_error(line)
                if problem is not None:
                    await errors.send(problem)
                continue
            await messages.send(SessionMessage(message))


@contextlib.asynccontextmanager
async def stdio_transport(max_line: int = MAX_BODY) -> AsyncIterator[tuple[Any, Any]]:
    """``(read, write)`` streams over this process's stdin and stdout (stdout through the
    SDK's writer, which also keeps stray prints off the wire); a message longer than
    ``max_line`` bytes is answered as an invalid request, never held whole."""
    send_errors, errors = anyio.create_memory_object_stream[dict[str, Any]](16)
    send_messages, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    no_stdin: Any = _NoLines()
    async with stdio_server(stdin=no_stdin) as (_unused, write):

        async def answer_errors() -> None:
            async with errors:
                async for problem in errors:
                    message = types.jsonrpc.JSONRPCError.model_validate(problem)
                    await write.send(SessionMessage(message))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_errors)
            lines = _stdin_lines(sys.stdin.fileno(), max_line)
            tasks.start_soon(_read_messages, lines, send_messages, send_errors)
            try:
                yield read, write
            finally:
                tasks.cancel_scope.cancel()
