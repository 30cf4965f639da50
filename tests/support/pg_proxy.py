"""A TCP proxy on 127.0.0.1 in front of a PostgreSQL server that loses a COMMIT on its way.

It forwards bytes both ways, unchanged. Armed with a marker (a text some statement of the
transaction to hit carries), the next ``COMMIT`` a connection sends after the marker is cut
in one of two ways, and the client's connection is closed:

* ``"answer"``: the COMMIT reaches the server, which commits and answers; the answer is
  withheld. The client cannot know the transaction committed.
* ``"commit"``: the COMMIT never reaches the server, which rolls the transaction back when the
  connection closes. The client sees exactly the same as above.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import SplitResult, urlsplit, urlunsplit

_COMMIT = b"COMMIT\x00"  # the query text of a simple or extended-protocol COMMIT
# psycopg prepares a statement it ran often (COMMIT too): Parse names it once, and each later
# COMMIT is a Bind of that name, without the text
_PARSED_COMMIT = re.compile(rb"P.{4}([^\x00]+)\x00COMMIT\x00", re.DOTALL)


class CommitCuttingProxy:
    """Forwards 127.0.0.1:<port> to the server of ``url``; see the module doc."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = urlunsplit(parts._replace(netloc=_netloc(parts, self.port)))
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._mode = "answer"
        self.cuts = 0
        """How many armed COMMITs were cut."""
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, name="pg-proxy", daemon=True).start()

    def arm(self, marker: str, mode: str = "answer") -> None:
        """Cut the next COMMIT of a transaction whose statements carried ``marker``."""
        assert mode in ("answer", "commit")
        with self._lock:
            self._marker, self._mode = marker.encode(), mode

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        for sock in list(self._sockets):
            _close(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._target, timeout=10)
            except OSError:
                _close(client)
                continue
            server.settimeout(None)
            self._sockets += [client, server]
            _Link(self, client, server).start()

    def _take(self, sent: bytes, marked: bool, commits: bool) -> tuple[bool, str | None]:
        """Whether the connection has now sent the marker, and the cut its COMMIT (``sent``
        ``commits``) gets."""
        with self._lock:
            marker = self._marker
            if marker is None:
                return False, None
            marked = marked or marker in sent
            if marked and commits:
                self._marker = None
                self.cuts += 1
                return False, self._mode
            return marked, None


class _Link:
    """One client connection and its server connection."""

    def __init__(self, proxy: CommitCuttingProxy, client: socket.socket, server: socket.socket):
        self.proxy = proxy
        self.client = client
        self.server = server
        self.withhold = threading.Event()
        self.prepared_commits: set[bytes] = set()

    def start(self) -> None:
        threading.Thread(target=self._upstream, daemon=True).start()
        threading.Thread(target=self._downstream, daemon=True).start()

    def _commits(self, data: bytes) -> bool:
        """Whether ``data`` sends a COMMIT: as text, or as a Bind of a prepared COMMIT."""
        self.prepared_commits.update(m.group(1) for m in _PARSED_COMMIT.finditer(data))
        if _COMMIT in data:
            return True
        return any(b"\x00" + name + b"\x00" in data for name in self.prepared_commits)

    def _upstream(self) -> None:
        marked = False
        try:
            while data := self.client.recv(65536):
                marked, cut = self.proxy._take(data, marked, self._commits(data))
                if cut == "commit":
                    self._end()
                    return
                if cut == "answer":
                    self.withhold.set()
                self.server.sendall(data)
        except OSError:
            pass
        self._end()

    def _downstream(self) -> None:
        try:
            while data := self.server.recv(65536):
                if self.withhold.is_set():  # the server answered the COMMIT: it committed
                    self._end()
                    return
                self.client.sendall(data)
        except OSError:
            pass
        self._end()

    def _end(self) -> None:
        _close(self.client)
        _close(self.server)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def _netloc(parts: SplitResult, port: int) -> str:
    netloc = parts.netloc
    head, _, _ = netloc.rpartition(":")
    return f"{head}:{port}" if head else f"{netloc}:{port}"


@contextmanager
def commit_cutting_proxy(url: str) -> Iterator[CommitCuttingProxy]:
    """A :class:`CommitCuttingProxy` to the server of ``url``, closed after the block."""
    proxy = CommitCuttingProxy(url)
    try:
        yield proxy
    finally:
        proxy.close()
