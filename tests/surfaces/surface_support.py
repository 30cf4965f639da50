"""Fixtures for the surface tests: per-principal configs, real `toolcards serve` processes
(always terminated), and the policy decision table."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner, Result

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from table_tools import TABLE_PATH  # noqa: E402

from support.launch import PYTHON, TOOLCARDS  # noqa: E402
from support.processes import ListeningProcess, free_port  # noqa: E402
from toolcards.governance import Identity  # noqa: E402
from toolcards.surfaces.commands import app  # noqa: E402

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


ECHO_ARGS = [str(HERE.parent / "mcp" / "servers" / "echo_server.py"), "stdio"]
ECHO_CARD: dict[str, Any] = {
    "type": "MCPTool",
    "name": "echo",
    "transport": "stdio",
    "command": PYTHON,
    "args": ECHO_ARGS,
    "connect_timeout_seconds": 20,
}
"""A stdio MCPTool card for the small real MCP server of the MCP tests (echo, add, pid...)."""

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


def toolcards_in_process(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``toolcards --json --config CONFIG ARGS...`` through the command line in this process
    (typer's runner), answered as :func:`toolcards_json` answers: its exit code, standard
    output and standard error (with the traceback of an exception the command let out)."""
    argv = ["--json", "--config", str(config), *args]
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        result = CliRunner().invoke(app, argv)
    else:  # an async test: the command runs event loops of its own, on a thread of its own
        ran: list[Result] = []
        runner = threading.Thread(target=lambda: ran.append(CliRunner().invoke(app, argv)))
        runner.start()
        runner.join()
        (result,) = ran
    stderr = result.stderr
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    return subprocess.CompletedProcess(argv, result.exit_code, result.stdout, stderr)


class HttpServer(ListeningProcess):
    """`toolcards serve --transport http` on 127.0.0.1, stopped by :meth:`stop`."""

    def __init__(
        self,
        config: Path,
        env: dict[str, str] | None = None,
        timeout: float = 60.0,
        command: Path = TOOLCARDS,
    ) -> None:
        """``command``: :data:`support.launch.REAL_TOOLCARDS` for a test of the process
        itself (its pid)."""
        port = free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        argv = [str(command), "serve", "--config", str(config), "--transport", "http",
                "--port", str(port)]  # fmt: skip
        env = {**SURFACE_ENV, **(env or {})}
        super().__init__(argv, port, env, what="toolcards serve", timeout=timeout)


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
