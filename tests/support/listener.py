"""A recording HTTP listener on 127.0.0.1: the stand-in for an attacker's host (or a loopback
service) in the tests. Importable as ``support.listener``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    """One request the listener received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def carries(self, secret: str) -> bool:
        """True when ``secret`` is anywhere in the request: its path, headers or body."""
        text = " ".join([self.path, *self.headers.values(), self.body.decode("latin-1")])
        return secret in text


Answer = Callable[[Seen], tuple[int, Any]]
"""``request -> (status, JSON body or text)``."""


def not_found(_: Seen) -> tuple[int, Any]:
    return 404, {"error": "not found"}


class Listener:
    """An HTTP server on a free port of 127.0.0.1, in a thread, recording every request;
    ``answer`` says what to reply. Use as a context manager (stopped on exit)."""

    def __init__(self, answer: Answer = not_found, max_body: int = 1 << 20) -> None:
        self.seen: list[Seen] = []
        lock = threading.Lock()
        seen = self.seen

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = min(int(self.headers.get("Content-Length") or 0), max_body)
                request = Seen(
                    self.command, self.path, dict(self.headers.items()), self.rfile.read(length)
                )
                with lock:
                    seen.append(request)
                status, body = answer(request)
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                kind = "text/plain" if isinstance(body, str) else "application/json"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PUT = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def carried(self, secret: str) -> list[Seen]:
        """The requests that carried ``secret``."""
        return [r for r in list(self.seen) if r.carries(secret)]

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def listening(answer: Answer = not_found) -> Iterator[Listener]:
    """A fixture body: a started listener, stopped after the test."""
    with Listener(answer) as listener:
        yield listener
