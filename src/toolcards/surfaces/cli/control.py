"""The CLI beside a running server: ``toolcards serve`` records where it listens, and
``toolcards list|describe|call|team status`` on the same config forward to it instead of
failing on the store lock.

The record is ``<store>.endpoint`` beside the store's ``.lock`` (``<config>.endpoint`` for a
``:memory:`` store): JSON with the server's pid, its control socket (a unix socket only this
user can open) and its HTTP address when serving HTTP. Over the socket the CLI sends one
JSON line (``{"op": ..., ...}``) and reads one back. The server answers as the config's local
principal (the identity never comes from the request), through the same executor, so the
decision and the audit row are those of a local run (``surface="cli"``).

Finding the record needs only the YAML config (no team, no registry), and once a config was
read its record's path is cached (:func:`record_of`), so a forwarded command imports neither
YAML nor pydantic: this module's client half needs only ``json``, ``os``, ``socket`` and
``pathlib``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from pathlib import Path

from toolcards._lazy import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from typing import Any

    from toolcards.surfaces.runtime import SurfaceRuntime

MAX_LINE = 16 * 1024 * 1024
CONNECT_TIMEOUT = 2.0
CALL_TIMEOUT = 3600.0


def endpoint_path(config: Path) -> Path:
    """Where a server on ``config`` records its endpoint (readable without pydantic)."""
    config = Path(config)
    try:
        text: str | None = config.read_text(encoding="utf-8")
    except OSError:
        text = None
    return _record_for(config, text)


def _record_for(config: Path, text: str | None) -> Path:
    """The endpoint record of ``config`` when its text is ``text`` (None: unreadable)."""
    from toolcards.core.yaml_safe import YamlError, load_yaml

    try:
        data = (load_yaml(text, str(config)) or {}) if text is not None else {}
    except YamlError:
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


def record_of(config: Path) -> Path:
    """:func:`endpoint_path` of ``config``, from a cache entry when one was written for this
    config file with this very text (and this home directory, for a ``~`` store path)."""
    where = os.path.realpath(config)
    key = json.dumps([where, os.environ.get("HOME")])
    cache = _record_cache(key)
    try:
        with open(where, encoding="utf-8") as file:
            text = file.read()
    except OSError:
        return endpoint_path(config)
    try:
        with open(cache, encoding="utf-8") as cached:
            entry = json.load(cached)
        if entry["key"] == key and entry["config"] == text:
            return Path(entry["record"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    record = _record_for(Path(config), text)
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = f"{cache}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump({"key": key, "config": text, "record": str(record)}, out)
        os.replace(tmp, cache)
    except OSError:
        pass
    return record


def _record_cache(key: str) -> str:
    import zlib

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "toolcards", f"endpoint-{zlib.crc32(key.encode()):08x}.json")


class ServerEndpoint:
    """A running server's control socket, its pid and its HTTP address (if it serves HTTP)."""

    __slots__ = ("http", "pid", "socket")

    def __init__(self, socket: Path, pid: int, http: str | None = None) -> None:
        self.socket = socket
        self.pid = pid
        self.http = http

    def __repr__(self) -> str:
        return f"ServerEndpoint(socket={self.socket!r}, pid={self.pid!r}, http={self.http!r})"

    def request(self, op: str, timeout: float = CALL_TIMEOUT, **fields: Any) -> Any:
        """Send one operation; its ``data``, or RuntimeError with the server's message."""
        sock = _connect(str(self.socket))
        try:
            sock.settimeout(timeout)
            sock.sendall(json.dumps({"op": op, **fields}).encode() + b"\n")
            line = _read_line(sock)
        finally:
            sock.close()
        if not line:
            raise RuntimeError("the server closed the connection")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(str(reply["error"]))
        return reply.get("data")


def find_server(config: Path) -> ServerEndpoint | None:
    """The running server recorded for ``config``, or None (no record, or it is gone)."""
    record = record_of(config)
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
    if not _private_socket(endpoint.socket):
        return None  # a record naming a socket others could have placed: not a server of ours
    try:  # a record left by a killed server: nobody listens on its socket
        _connect(str(endpoint.socket)).close()
    except OSError:
        return None
    return endpoint


def _private_socket(path: Path) -> bool:
    """Whether ``path`` is a socket of this user in a directory only this user may change
    (as a server makes it): a record beside a store is only as trusted as that folder."""
    try:
        folder, sock = os.stat(path.parent), os.stat(path)
    except OSError:
        return False
    uid = os.getuid()
    return folder.st_uid == uid and not folder.st_mode & 0o077 and sock.st_uid == uid


def _connect(path: str) -> socket.socket:
    """A unix stream socket connected to ``path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT)
        sock.connect(path)
    except BaseException:
        sock.close()
        raise
    return sock


def _read_line(sock: socket.socket) -> bytes:
    """Bytes up to and including the first newline, at most ``MAX_LINE + 1`` of them, or
    what came before the server closed the connection."""
    line = bytearray()
    while len(line) <= MAX_LINE:
        chunk = sock.recv(min(65536, MAX_LINE + 1 - len(line)))
        if not chunk:
            break
        end = chunk.find(b"\n")
        if end >= 0:
            line += chunk[: end + 1]
            break
        line += chunk
    return bytes(line)


# -- the server side ------------------------------------------------------------------------


async def _answer(rt: SurfaceRuntime, request: dict[str, Any]) -> Any:
    import toolcards.surfaces.cli.operations as ops

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
) -> AsyncIterator[Path | None]:
    """Listen for forwarded CLI commands while the context is open; the endpoint record
    exists exactly as long. None: another server on this config holds the endpoint (one
    warning line; this server runs on without one)."""
    import anyio
    from anyio.abc import SocketStream
    from anyio.streams.buffered import BufferedByteReceiveStream
    from pydantic_core import to_json

    record = endpoint_path(config)
    path = _socket_path(record)
    claim = _claim(path)
    if claim is None:  # another server on this config holds the endpoint: it answers the CLI
        import logging

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
        os.close(claim)  # the lock goes with the descriptor


def _claim(path: Path) -> int | None:
    """An exclusive lock on ``<socket>.lock`` (its descriptor), held while this process owns
    the control socket; None when another live process holds it. Checking for a listener
    and binding are then one step: two servers started at once never unlink or bind over
    each other's socket."""
    import fcntl

    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd
