"""A `toolcards serve` (stdio) driven line by line, for what the SDK client cannot send or
would hide: malformed JSON-RPC, cancellation, timings."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from surfaces.surface_support import SURFACE_ENV, TOOLCARDS


class RawStdio:
    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [str(TOOLCARDS), "serve", "--config", str(config)],
            env={**SURFACE_ENV, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._next = 100
        threading.Thread(target=self._read, daemon=True).start()
        init = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
            timeout=30,
        )
        self.server_info = init["result"]["serverInfo"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:  # closed at the server's end of output, not left to the collector
            for line in self.proc.stdout:
                if line.strip():
                    self.lines.put(json.loads(line))

    def send(self, message: dict[str, Any] | str) -> None:
        assert self.proc.stdin is not None
        text = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def next_id(self) -> int:
        self._next += 1
        return self._next

    def start(self, method: str, params: dict[str, Any] | None = None) -> int:
        ident = self.next_id()
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}})
        return ident

    def wait_for(self, ident: Any, timeout: float = 10.0) -> dict[str, Any]:
        """The response to ``ident`` (messages before it are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no response to {ident!r}")
            message = self.lines.get(timeout=left)
            if message.get("id") == ident and "method" not in message:
                return message

    def request(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 10.0
    ) -> dict[str, Any]:
        return self.wait_for(self.start(method, params), timeout)

    def received(self, seconds: float) -> list[dict[str, Any]]:
        """Everything that arrives within ``seconds``."""
        found = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                found.append(self.lines.get(timeout=left))
            except queue.Empty:
                break
        return found

    def server_pid(self) -> int:
        """The server process: the one that reads this side's pipe (the command started may be
        a launcher that hands the pipe on to a process it does not parent)."""
        assert self.proc.stdin is not None
        pipe = f"pipe:[{os.fstat(self.proc.stdin.fileno()).st_ino}]"
        for entry in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if entry.name.isdigit() and os.readlink(entry / "fd" / "0") == pipe:
                    return int(entry.name)
        raise LookupError("no process reads the server's standard input")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system, every thread) process ``pid`` has spent."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
