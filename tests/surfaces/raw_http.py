"""Raw HTTP/1.1 over sockets, for what a well-behaved client never sends: half-sent headers,
trickled bodies, huge bodies; and the memory of a server process from ``/proc``."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

from support.processes import ListeningProcess, free_port
from surfaces.surface_support import SURFACE_ENV, TOOLCARDS

MiB = 1024 * 1024


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    """A TCP connection to 127.0.0.1:``port`` from the address ``source``."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(port: int, *lines: str, method: str = "POST", path: str = "/mcp") -> bytes:
    """A request head (ending in the blank line) with ``lines`` as extra header lines."""
    found = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *lines, "", ""]
    return "\r\n".join(found).encode()


def until_closed(sock: socket.socket, timeout: float = 60.0) -> bytes:
    """Everything the server sends until it closes the connection (at most ``timeout``
    seconds: then TimeoutError)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    received = b""
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def status(response: bytes) -> int:
    """The status code of a raw response (0 when there is none)."""
    parts = response.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def send_in_background(sock: socket.socket, chunks: int, chunk: bytes) -> threading.Thread:
    """Send ``chunk`` ``chunks`` times on a thread, stopping when the server hung up."""

    def run() -> None:
        with contextlib.suppress(OSError):
            for _ in range(chunks):
                sock.sendall(chunk)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1]) * 1024
    raise LookupError(name)


class PeakMemory:
    """The peak resident memory of process ``pid`` since :meth:`reset` (the kernel's
    ``VmHWM``, reset through ``clear_refs``; where that is refused, the resident memory
    now), and how far it rose over the resident memory at the reset."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start = 0

    def reset(self) -> PeakMemory:
        self.start = _status_field(self.pid, "VmRSS")
        with contextlib.suppress(OSError):
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        return self

    def growth(self) -> int:
        """Bytes the peak rose above the resident memory at :meth:`reset`."""
        peak = max(_status_field(self.pid, "VmHWM"), _status_field(self.pid, "VmRSS"))
        return peak - self.start


class ServeWith(ListeningProcess):
    """`toolcards serve --transport http --config CONFIG OPTIONS...` on a free port."""

    def __init__(self, config: Path, *options: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        argv = [str(TOOLCARDS), "serve", "--config", str(config), "--transport", "http",
                "--port", str(port), *options]  # fmt: skip
        super().__init__(argv, port, SURFACE_ENV, what="toolcards serve")
