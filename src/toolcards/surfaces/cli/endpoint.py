"""The server's side of the CLI beside a running server (:mod:`.control` is the client's):
while ``toolcards serve`` runs on a config with an embedded store it listens on a unix socket
only this user can open, records it in ``<store>.endpoint``, and answers each forwarded
command (one JSON line in, one out) as the config's local principal, through its executor:
only a command on that very config file (the request's ``config``, a real path), never one
on another config that names its store or finds its socket in a planted record.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic_core import to_json

import toolcards.surfaces.cli.operations as ops
from toolcards.surfaces.cli.control import MAX_LINE, endpoint_path, read_record
from toolcards.surfaces.runtime import SurfaceRuntime

__all__ = ["control_endpoint", "socket_path"]


def socket_path(record: Path) -> Path:
    """A short path (unix sockets allow ~100 bytes) in a directory only this user may use."""
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    directory = base / f"toolcards-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    if directory.stat().st_uid != os.getuid() or directory.stat().st_mode & 0o077:
        raise PermissionError(f"{directory} must belong to this user, mode 0700")
    digest = hashlib.sha256(str(record.resolve()).encode()).hexdigest()[:20]
    return directory / f"{digest}.sock"


async def _answer(rt: SurfaceRuntime, request: dict[str, Any], config: str) -> Any:
    if request.get("config") != config:
        raise PermissionError(f"it serves {config}, not this config file")
    op = request.get("op")
    if op == "list":
        return ops.list_rows(rt, bool(request.get("all")))
    if op == "describe":
        return ops.describe_data(rt, str(request.get("tool")))
    if op == "schema":
        return ops.schema_of(rt, str(request.get("tool")))
    if op == "call":
        args = request.get("args")
        if not isinstance(args, dict):
            raise ValueError("args must be an object")
        return await ops.call_data(rt, str(request.get("tool")), args)
    if op == "team":
        # off the server's loop: the team's store is read (the loop serves MCP meanwhile)
        return await anyio.to_thread.run_sync(ops.team_data, rt, int(request.get("events", 10)))
    raise ValueError(f"unknown operation {op!r}")


@contextlib.asynccontextmanager
async def control_endpoint(
    rt: SurfaceRuntime, config: Path, http: str | None = None
) -> AsyncIterator[Path | None]:
    """Listen for forwarded CLI commands while the context is open; the endpoint record
    exists exactly as long. None: another server on this config holds the endpoint (one
    warning line; this server runs on without one)."""

    record = endpoint_path(config)
    own = os.path.realpath(config)
    try:
        path = socket_path(record)
    except OSError as exc:  # another user made the folder first, or it cannot be made
        logging.getLogger(__name__).warning(
            "no control endpoint for forwarded CLI commands (%s); this server runs without one",
            exc,
        )
        yield None
        return
    claim = _claim(path)
    if claim is None:  # another server on this config holds the endpoint: it answers the CLI
        logging.getLogger(__name__).warning(
            "another toolcards serve on %s answers forwarded CLI commands; this one serves "
            "without a control endpoint",
            config,
        )
        yield None
        return
    try:
        path.unlink(missing_ok=True)  # a socket left by a killed server: the claim proves it
        listener = await anyio.create_unix_listener(path)
        os.chmod(path, 0o600)
    except BaseException:
        os.close(claim)
        raise

    async def handle(stream: SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            try:
                line = await buffered.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, OSError):
                return  # a liveness probe, or a client that left
            except anyio.BrokenResourceError:
                return
            reply = await _reply_unless_left(rt, own, line, buffered)
            if reply is None:
                return  # the client left (Ctrl-C): its call was cancelled, nobody to answer
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await stream.send(to_json(reply, fallback=str) + b"\n")

    _write_record(record, {"pid": os.getpid(), "socket": str(path), "http": http})
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(listener.serve, handle)
            try:
                yield path
            finally:
                tasks.cancel_scope.cancel()
    finally:
        await listener.aclose()
        path.unlink(missing_ok=True)
        mine = read_record(record)
        if mine is not None and mine.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                record.unlink()
        os.close(claim)  # the lock goes with the descriptor


async def _reply_unless_left(
    rt: SurfaceRuntime, config: str, line: bytes, client: BufferedByteReceiveStream
) -> dict[str, Any] | None:
    """The reply to the request ``line`` on ``config`` (the server's own config file, real
    path: a request on another is refused); None when the client hung up first (one request
    per connection: its end of the stream means it left, and the call is cancelled, audited
    ``cancelled`` as a local command's Ctrl-C is, instead of running on for nobody)."""
    reply: dict[str, Any] | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_cancel_when_gone, client, tasks.cancel_scope)
        try:
            reply = {"data": await _answer(rt, json.loads(line), config)}
        except Exception as exc:  # a bad request never takes the server down
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        tasks.cancel_scope.cancel()  # answered: stop watching
    return reply


async def _cancel_when_gone(client: BufferedByteReceiveStream, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once ``client`` closes its end (bytes after its request are ignored)."""
    with contextlib.suppress(
        anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError
    ):
        while True:
            await client.receive()
    scope.cancel()


def _write_record(record: Path, data: dict[str, Any]) -> None:
    """Write ``record`` whole at once, through a new file of a name nobody could guess: a
    link planted at a predictable temporary name beside the store is never written through."""
    fd, tmp = tempfile.mkstemp(prefix=record.name + ".", suffix=".tmp", dir=record.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(tmp, record)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _claim(path: Path) -> int | None:
    """An exclusive lock on ``<socket>.lock`` (its descriptor), held while this process owns
    the control socket; None when another live process holds it. Checking for a listener
    and binding are then one step: two servers started at once never unlink or bind over
    each other's socket."""

    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
