"""The CLI beside a running server: ``toolcards serve`` records where it listens
(:mod:`.endpoint`, the server's side), and ``toolcards list|describe|call|team status`` on
the same config forward to it instead of failing on the store lock (this module, the
client's side).

The record is ``<store>.endpoint`` beside the store's ``.lock`` (``<config>.endpoint`` for a
``:memory:`` store): JSON with the server's pid, its control socket (a unix socket only this
user can open) and its HTTP address when serving HTTP. Over the socket the CLI sends one
JSON line (``{"op": ..., "config": ..., ...}``) and reads one back. The server answers as
the config's local principal (the identity never comes from the request), through the same
executor, so the decision and the audit row are those of a local run (``surface="cli"``); a
client that closes the socket before the answer (Ctrl-C) withdraws its call, audited
``cancelled``. It answers only for its own config file (``config``: the client's, real
path): another config naming its store, or a record planted beside one, would otherwise run
that config's commands as the server's principal. A config that is data (in a workspaces
root, as :func:`toolcards.surfaces.config.load_config` tells) is never forwarded: it runs
here, and is refused here, as without a server.

Finding the record needs only the YAML config (no team, no registry), and once a config was
read its record's path is cached (:func:`_cached_record`), so a forwarded command imports neither
YAML nor pydantic: this module's client half needs only ``json``, ``os``, ``socket`` and
``pathlib``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import zlib
from pathlib import Path

from toolcards._lazy import TYPE_CHECKING
from toolcards.core import host_files

if TYPE_CHECKING:
    from typing import Any


MAX_LINE = 16 * 1024 * 1024
CONNECT_TIMEOUT = 2.0
CALL_TIMEOUT = 3600.0
MAX_PID = 1 << 22
"""Linux's largest pid: a recorded one beyond it is no process (and os.kill overflows)."""


def _config_text(config: str | Path) -> str | None:
    """The config file's text, read bounded; None when it cannot be read."""
    try:
        return host_files.read_bounded(config)
    except (OSError, UnicodeDecodeError):
        return None


def endpoint_path(config: Path) -> Path:
    """Where a server on ``config`` records its endpoint (readable without pydantic)."""
    config = Path(config)
    return _record_for(config, _config_text(config))


def _record_for(config: Path, text: str | None) -> Path:
    """The endpoint record of ``config`` when its text is ``text`` (None: unreadable)."""
    # lazy: YAML, ~3x python -c pass; a record found in the cache needs no YAML
    from toolcards.core.yaml_safe import YamlError, load_yaml

    try:
        data = (load_yaml(text, str(config)) or {}) if text is not None else {}
    except YamlError:
        data = {}
    store = data.get("store", "team.db") if isinstance(data, dict) else "team.db"
    target = config.resolve()
    if isinstance(store, str) and store != ":memory:" and "://" not in store and "\0" not in store:
        with contextlib.suppress(RuntimeError):  # ~user of no home here: the config's error
            target = target.parent / Path(store).expanduser()
    return target.with_name(target.name + ".endpoint")


def _cached_record(where: Path, text: str) -> Path:
    """:func:`endpoint_path` of the config file whose real path is ``where`` and text ``text``,
    from a cache entry when one was written for this config file with this very text (and this
    home directory, for a ``~`` store path)."""
    key = json.dumps([str(where), os.environ.get("HOME")])
    cache = _record_cache(key)
    try:
        with open(cache, encoding="utf-8") as cached:
            entry = json.load(cached)
        if entry["key"] == key and entry["config"] == text:
            return Path(entry["record"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    record = _record_for(where, text)
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
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "toolcards", f"endpoint-{zlib.crc32(key.encode()):08x}.json")


class ServerEndpoint:
    """A running server's control socket, its pid and its HTTP address (if it serves HTTP)."""

    __slots__ = ("config", "http", "pid", "socket")

    def __init__(self, socket: Path, pid: int, config: str, http: str | None = None) -> None:
        self.socket = socket
        self.pid = pid
        self.config = config  # the client's config file (real path), sent with each request
        self.http = http

    def __repr__(self) -> str:
        return f"ServerEndpoint(socket={self.socket!r}, pid={self.pid!r}, http={self.http!r})"

    def request(self, op: str, timeout: float = CALL_TIMEOUT, **fields: Any) -> Any:
        """Send one operation; its ``data``, or RuntimeError with the server's message (one
        refusing a config file that is not its own among them)."""
        sock = _connect(str(self.socket))
        try:
            sock.settimeout(timeout)
            request = {"op": op, **fields, "config": self.config}
            sock.sendall(json.dumps(request).encode() + b"\n")
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
    """The running server recorded for ``config``, or None (no record, or it is gone, or
    ``config`` is unreadable or data: it runs here, where its checks refuse what they refuse).
    The file judged is the file whose record is read and whose real path is sent."""
    try:
        file = host_files.read_host_file(config)
    except (OSError, UnicodeDecodeError):
        return None
    if file.data:  # data: run (and refused) in process
        return None
    endpoint = _endpoint(read_record(_cached_record(file.path, file.text)), str(file.path))
    if endpoint is None:
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


def _endpoint(data: dict[str, Any] | None, config: str) -> ServerEndpoint | None:
    """The endpoint a record names, for requests on ``config``; None unless it holds a pid
    that can be a process and a socket path the system can take (a record is only as
    trusted as the folder beside the store: any JSON may be planted there)."""
    if data is None:
        return None
    pid, sock, http = data.get("pid"), data.get("socket"), data.get("http")
    if type(pid) is not int or not 0 < pid <= MAX_PID:
        return None
    if not isinstance(sock, str) or not sock or "\0" in sock:
        return None
    return ServerEndpoint(Path(sock), pid, config, http if isinstance(http, str) else None)


def read_record(record: Path) -> dict[str, Any] | None:
    """The JSON object in the endpoint record, read bounded; None when there is none. The
    record lies beside the store, where others may plant a FIFO (waited on for ever) or a
    link to ``/dev/zero`` (read until memory ran out) in its place: neither is read."""
    try:
        data = json.loads(host_files.read_bounded(record, "endpoint record"))
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return None
    return data if isinstance(data, dict) else None


def _private_socket(path: Path) -> bool:
    """Whether ``path`` is a socket of this user in a directory only this user may change
    (as a server makes it): a record beside a store is only as trusted as that folder."""
    try:
        folder, sock = os.stat(path.parent), os.stat(path)
    except (OSError, ValueError):  # ValueError: a path the system cannot take
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
