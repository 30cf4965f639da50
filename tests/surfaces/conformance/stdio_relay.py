"""A streamable-HTTP front for a stdio MCP server, so the conformance suite (HTTP only) can
test `toolcards serve` over stdio: each HTTP session gets its own stdio server process, and
every JSON-RPC line is relayed unchanged.

    python stdio_relay.py PORT -- toolcards serve --config toolcards.yaml

Server processes are forked by ``fork_server.py`` from one interpreter that has imported the
serving stack (each runs the ``toolcards`` entry point with the command's arguments, over one
socket as its stdin and stdout), and one spare is kept started, so a new session waits
neither for an interpreter start nor for the server's set-up. A POSTed request gets an SSE
stream carrying what the server sends until its response (notifications in between ride
along while it is the only request in flight); other server messages go to the session's GET
stream. Host and Origin must be loopback names.
A 2026-07-28 request (no session: it carries its own ``_meta`` envelope) goes to one server
process shared by all such requests, under an id of the relay's (their ids may repeat).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import uvicorn
from anyio.abc import ByteReceiveStream, ByteSendStream, UNIXSocketStream
from anyio.streams.memory import MemoryObjectSendStream
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
ENVELOPE_KEY = "io.modelcontextprotocol/protocolVersion"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"  # a listen stream's frames


MODERN = "2026-07-28"


def _enveloped(message: dict[str, Any], version_header: str | None) -> bool:
    """A 2026-07-28 request (it needs no session): it carries the per-request envelope, or
    the HTTP header claims that revision (a malformed envelope is then the server's to
    refuse)."""
    if not isinstance(message, dict) or message.get("method") == "initialize":
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return version_header == MODERN or (isinstance(meta, dict) and ENVELOPE_KEY in meta)


@dataclass
class Forked:
    """A server process of the fork server: its stdin and stdout are one socket."""

    pid: int
    stream: UNIXSocketStream
    sock: socket.socket

    @property
    def stdin(self) -> ByteSendStream:
        return self.stream

    @property
    def stdout(self) -> ByteReceiveStream:
        return self.stream

    def terminate(self) -> None:
        """The end of its stdin: a stdio server then ends (the fork server reaps it)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class ForkServer:
    """``fork_server.py`` started beside the relay, asked for one process per session."""

    def __init__(self, command: list[str]) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="fork-server-"), "socket")
        here = os.path.dirname(os.path.abspath(__file__))
        argv = [sys.executable, os.path.join(here, "fork_server.py"), self.path, "--", *command]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not os.path.exists(self.path):  # it appears once the imports are done
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fork server did not start")
            time.sleep(0.05)

    def _fork(self) -> tuple[int, socket.socket]:
        mine, theirs = socket.socketpair()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control, theirs:
            control.connect(self.path)
            socket.send_fds(control, [b"x"], [theirs.fileno()])
            pid = int(control.makefile("rb").readline())
        return pid, mine

    async def start(self) -> Forked:
        pid, sock = await anyio.to_thread.run_sync(self._fork)
        return Forked(pid, await UNIXSocketStream.from_socket(sock), sock)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


@dataclass
class Session:
    proc: Any
    waiting: dict[Any, MemoryObjectSendStream[dict[str, Any]]] = field(default_factory=dict)
    stray: list[MemoryObjectSendStream[dict[str, Any]]] = field(default_factory=list)

    async def write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send(json.dumps(message).encode() + b"\n")

    async def pump(self) -> None:
        assert self.proc.stdout is not None
        buffer = b""
        async for chunk in self.proc.stdout:
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    await self.route(json.loads(line))

    async def route(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        if "method" not in message and ident in self.waiting:
            await self.waiting.pop(ident).send(message)
            return
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        listen = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
        if listen is not None and listen in self.waiting:  # a frame of a listen stream
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await self.waiting[listen].send(message)
            return
        targets = list(self.waiting.values())
        if len(targets) == 1 and "id" not in message:
            await targets[0].send(message)
        for stream in list(self.stray):
            try:
                await stream.send(message)
            except anyio.BrokenResourceError:
                self.stray.remove(stream)


def _loopback(value: str | None) -> bool:
    if value is None:
        return True
    host = value.split("://", 1)[-1]
    return any(host == h or host.startswith(h + ":") for h in LOOPBACK)


def _sse(message: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


class Relay:
    def __init__(self, command: list[str], forks: ForkServer) -> None:
        self.command = command
        self.forks = forks
        self.sessions: dict[str, Session] = {}
        self.tasks: Any = None
        self.spare: Forked | None = None
        self.modern: Session | None = None
        self.relayed = 0

    async def process(self) -> Forked:
        """A started server process; the next one starts now, so a session does not wait
        for the server's set-up."""
        proc = self.spare or await self.forks.start()
        self.spare = await self.forks.start()
        return proc

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            async with anyio.create_task_group() as self.tasks:
                while (await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                for session in [*self.sessions.values(), *filter(None, [self.modern])]:
                    session.proc.terminate()
                if self.spare is not None:
                    self.spare.terminate()
                self.forks.stop()  # here: uvicorn re-raises the signal that stopped it
                await send({"type": "lifespan.shutdown.complete"})
                self.tasks.cancel_scope.cancel()
            return
        request = Request(scope, receive)
        response = await self.handle(request)
        await response(scope, receive, send)

    async def handle(self, request: Request) -> Response:
        if not _loopback(request.headers.get("host")) or not _loopback(
            request.headers.get("origin")
        ):
            return Response("forbidden host or origin", status_code=403)
        sid = request.headers.get("mcp-session-id")
        session = self.sessions.get(sid or "")
        if request.method == "DELETE":
            if session is not None:
                session.proc.terminate()
                del self.sessions[sid or ""]
            return Response(status_code=200)
        if request.method == "GET":
            if session is None:
                return Response("unknown session", status_code=404)
            send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)
            session.stray.append(send)

            async def stray() -> Any:
                async with receive:
                    async for message in receive:
                        yield _sse(message)

            return StreamingResponse(stray(), media_type="text/event-stream")
        message = json.loads(await request.body())
        if session is None and _enveloped(message, request.headers.get("mcp-protocol-version")):
            return await self.modern_request(message)
        headers = {}
        if session is None:
            if message.get("method") != "initialize":
                return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32000, "message": "no session"}}, status_code=400)  # fmt: skip
            proc = await self.process()
            sid = secrets.token_hex(16)
            session = self.sessions[sid] = Session(proc)
            self.tasks.start_soon(session.pump)
        headers["mcp-session-id"] = sid or ""
        if "id" not in message or "method" not in message:
            await session.write(message)
            return Response(status_code=202, headers=headers)
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)
        session.waiting[message["id"]] = send
        await session.write(message)

        async def answer() -> Any:
            async with receive:
                async for item in receive:
                    yield _sse(item)
                    if "method" not in item and item.get("id") == message["id"]:
                        return

        return StreamingResponse(answer(), media_type="text/event-stream", headers=headers)

    async def modern_opening(self, session: Session) -> None:
        """Open the shared process's connection in the 2026-07-28 era: its first request
        decides, so it is an enveloped ``server/discover`` of the relay's own."""
        caps = "io.modelcontextprotocol/clientCapabilities"
        opening = {"jsonrpc": "2.0", "id": "relay-0", "method": "server/discover",
                   "params": {"_meta": {ENVELOPE_KEY: MODERN, caps: {}}}}  # fmt: skip
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)
        session.waiting["relay-0"] = send
        await session.write(opening)
        with anyio.fail_after(60):
            async with receive:
                await receive.receive()

    async def modern_request(self, message: dict[str, Any]) -> Response:
        """A 2026-07-28 request: relayed to the shared process under a relay id, its
        response (and what comes before it) streamed back under the client's id."""
        if self.modern is None:
            self.modern = Session(await self.process())
            self.tasks.start_soon(self.modern.pump)
            await self.modern_opening(self.modern)
        session, ident = self.modern, message.get("id")
        if ident is None:  # a notification: the 2026-07-28 core defines none to send
            await session.write(message)
            return Response(status_code=202)
        self.relayed += 1
        relay_id = f"relay-{self.relayed}"
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)
        session.waiting[relay_id] = send
        await session.write({**message, "id": relay_id})

        async def answer() -> Any:
            done = False
            try:
                async with receive:
                    async for item in receive:
                        done = "method" not in item and item.get("id") == relay_id
                        yield _sse({**item, "id": ident} if done else item)
                        if done:
                            return
            finally:  # the client went away first (a listen it stopped reading): forget it
                if not done and session.waiting.pop(relay_id, None) is not None:
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": relay_id}}  # fmt: skip
                    with contextlib.suppress(Exception):
                        await session.write(cancel)

        return StreamingResponse(answer(), media_type="text/event-stream")


def main() -> None:
    port = int(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    forks = ForkServer(command[1:])  # the arguments of the ``toolcards`` entry point
    try:
        uvicorn.run(Relay(command, forks), host="127.0.0.1", port=port, log_level="warning")
    finally:
        forks.stop()


if __name__ == "__main__":
    main()
