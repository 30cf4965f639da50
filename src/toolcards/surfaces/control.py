"""The CLI beside a running server: ``toolcards serve`` records where it listens, and
``toolcards list|describe|call|team status`` on the same config forward to it instead of
failing on the store lock.

The record is ``<store>.endpoint`` beside the store's ``.lock`` (``<config>.endpoint`` for a
``:memory:`` store): JSON with the server's pid, its control socket (a unix socket only this
user can open) and its HTTP address when serving HTTP. Over the socket the CLI sends one
JSON line (``{"op": ..., ...}``) and reads one back. The server answers as the config's local
principal (the identity never comes from the request), through the same executor, so the
decision and the audit row are those of a local run (``surface="cli"``).

Reading the record needs only the YAML config (no team, no registry): forwarding is fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolcards.surfaces.runtime import SurfaceRuntime

MAX_LINE = 16 * 1024 * 1024
CONNECT_TIMEOUT = 2.0
CALL_TIMEOUT = 3600.0


def endpoint_path(config: Path) -> Path:
    """Where a server on ``config`` records its endpoint (readable without pydantic)."""
    from toolcards.core.yaml_safe import YamlError, load_yaml

    config = Path(config)
    try:
        data = load_yaml(config.read_text(encoding="utf-8"), str(config)) or {}
    except (OSError, YamlError):
        data = {}
    store = data.get("store", "team.db") if isinstance(data, dict) else "team.db"
    if not isinstance(store, str) or store == ":memory:" or "://" in store:
        target = config.resolve()
    else:
        target = Path(store).expanduser()
        if not target.is_absolute():
            target = config.resolve().parent / target
    return target.with_name(target.name + ".endpoint")


def _socket_path(record: Path) -> Path:
    """A short path (unix sockets allow ~100 bytes) in a directory only this user may use."""
    import hashlib
    import tempfile

    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir())
    directory = base / f"toolcards-{os.getuid()}"
    directory.mkdir(mode=0o700, exist_ok=True)
    if directory.stat().st_uid != os.getuid() or directory.stat().st_mode & 0o077:
        raise PermissionError(f"{directory} must belong to this user, mode 0700")
    digest = hashlib.sha256(str(record.resolve()).encode()).hexdigest()[:20]
    return directory / f"{digest}.sock"


@dataclass(frozen=True)
class ServerEndpoint:
    socket: Path
    pid: int
    http: str | None = None

    def request(self, op: str, timeout: float = CALL_TIMEOUT, **fields: Any) -> Any:
        """Send one operation; its ``data``, or RuntimeError with the server's message."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(str(self.socket))
            sock.settimeout(timeout)
            sock.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
            with sock.makefile("rb") as reader:
                line = reader.readline(MAX_LINE + 1)
        if not line:
            raise RuntimeError("the server closed the connection")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(str(reply["error"]))
        return reply.get("data")


def find_server(config: Path) -> ServerEndpoint | None:
    """The running server recorded for ``config``, or None (no record, or it is gone)."""
    record = endpoint_path(config)
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
        endpoint = ServerEndpoint(Path(data["socket"]), int(data["pid"]), data.get("http"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(endpoint.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    try:  # a record left by a killed server: nobody listens on its socket
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(CONNECT_TIMEOUT)
            probe.connect(str(endpoint.socket))
    except OSError:
        return None
    return endpoint


# -- the server side ------------------------------------------------------------------------


async def _answer(rt: SurfaceRuntime, request: dict[str, Any]) -> Any:
    import toolcards.surfaces.operations as ops

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
        return ops.team_data(rt, int(request.get("events", 10)))
    raise ValueError(f"unknown operation {op!r}")


@contextlib.asynccontextmanager
async def control_endpoint(
    rt: SurfaceRuntime, config: Path, http: str | None = None
) -> AsyncIterator[Path]:
    """Listen for forwarded CLI commands while the context is open; the endpoint record
    exists exactly as long."""
    import anyio
    from anyio.abc import SocketStream
    from anyio.streams.buffered import BufferedByteReceiveStream
    from pydantic_core import to_json

    record = endpoint_path(config)
    path = _socket_path(record)
    path.unlink(missing_ok=True)
    listener = await anyio.create_unix_listener(path)
    os.chmod(path, 0o600)

    async def handle(stream: SocketStream) -> None:
        async with stream:
            buffered = BufferedByteReceiveStream(stream)
            try:
                line = await buffered.receive_until(b"\n", MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, OSError):
                return  # a liveness probe, or a client that left
            except anyio.BrokenResourceError:
                return
            try:
                reply = {"data": await _answer(rt, json.loads(line))}
            except Exception as exc:  # a bad request never takes the server down
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await stream.send(to_json(reply, fallback=str) + b"\n")

    tmp = record.with_name(record.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "socket": str(path), "http": http}))
    os.replace(tmp, record)
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
        with contextlib.suppress(OSError, ValueError):
            if json.loads(record.read_text()).get("pid") == os.getpid():
                record.unlink()
