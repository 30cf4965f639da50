"""Fixtures for the surface tests: per-principal configs, real `toolcards serve` processes
(always terminated), and the policy decision table."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from table_tools import TABLE_PATH  # noqa: E402

from toolcards.governance import Identity  # noqa: E402

TOOLCARDS = Path(sys.executable).parent / "toolcards"
POLICY = TABLE_PATH.parent / "policy.yaml"
SURFACE_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
}


def principal_spec(identity: Identity) -> dict[str, Any]:
    return {"id": identity.id, "type": identity.type, "roles": sorted(identity.roles)}


def token_for(identity: Identity) -> str:
    return f"token-{identity.id}"


def write_config(
    directory: Path,
    *,
    local: Identity | None = None,
    tokens: list[Identity] = (),  # type: ignore[assignment]
    audit: Path | bool | None = None,
    tools: list[str] | None = None,
    policy: Path | str = POLICY,
    name: str = "toolcards.yaml",
    **extra: Any,
) -> Path:
    """A config serving the table tools (or ``tools``) under ``policy`` (``audit=False``:
    no ``audit:`` key, so the default location applies)."""
    from toolcards.surfaces.config import hash_token

    directory.mkdir(parents=True, exist_ok=True)
    principals: dict[str, Any] = {
        "tokens": [{"token_sha256": hash_token(token_for(i)), **principal_spec(i)} for i in tokens]
    }
    if local is not None and not local.is_anonymous:
        principals["local"] = principal_spec(local)
    data = {
        "team_id": "surfaces",
        "store": ":memory:",
        "policy": str(policy),
        "tools": tools if tools is not None else ["table_tools:TOOLS"],
        "principals": principals,
        **extra,
    }
    if audit is not False:
        data["audit"] = str(audit if isinstance(audit, Path) else directory / "audit.db")
    path = directory / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
"""A raw MCP initialize request (it opens a session over HTTP)."""
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def toolcards_json(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``toolcards --json --config CONFIG ARGS...`` as a real process (bounded)."""
    return subprocess.run(
        [str(TOOLCARDS), "--json", "--config", str(config), *args],
        env=SURFACE_ENV,
        capture_output=True,
        text=True,
        timeout=90,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class HttpServer:
    """`toolcards serve --transport http` on 127.0.0.1, stopped by :meth:`stop`."""

    def __init__(self, config: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [str(TOOLCARDS), "serve", "--config", str(config), "--transport", "http",
             "--port", str(self.port)],
            env={**SURFACE_ENV, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"server exited: {self.log.read().decode()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not start listening")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()


def audit_rows(path: Path) -> list[tuple[Any, ...]]:
    """Audit rows without what differs by surface (surface, time, duration, call id, row id),
    sorted so runs in a different order compare equal."""
    from toolcards.governance import AuditLog

    with AuditLog(path) as log:
        entries = log.query(limit=100_000)
    return sorted(
        (e.principal, e.principal_type, e.roles, e.tool, e.args_digest, repr(e.args),
         e.decision, e.reason or "", e.outcome, e.error or "")
        for e in entries
    )  # fmt: skip
