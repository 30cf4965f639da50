"""MCP sessions over HTTP: server memory per 1,000 open sessions (resident set growth of a
real `toolcards serve` process, beside a minimal official-SDK server in the same run), what
the default caps let an anonymous flood hold, and that idle sessions expire.

Run: .venv/bin/python benchmarks/bench_sessions.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import yaml
from _results import record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.processes import free_port, serving

TOOLCARDS = Path(sys.executable).parent / "toolcards"
TOOLS_MODULE = '''
def lookup(key: str) -> str:
    """Look a key up."""
    return key

TOOLS = [lookup]
'''
PEER_SERVER = """
import sys
import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("peer", log_level="WARNING")

@server.tool()
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return key

uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=int(sys.argv[1]),
            log_level="warning")
"""
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def open_sessions(url: str, n: int, ids: list[str] | None = None) -> dict[int, int]:
    """Open ``n`` sessions (initialize requests, 8 at a time); HTTP status -> count. The ids
    of the opened ones are appended to ``ids``."""
    statuses: dict[int, int] = {}
    with httpx.Client(timeout=30) as client, ThreadPoolExecutor(8) as pool:
        for reply in pool.map(lambda _: client.post(url, json=INIT, headers=HEADERS), range(n)):
            statuses[reply.status_code] = statuses.get(reply.status_code, 0) + 1
            if ids is not None and "mcp-session-id" in reply.headers:
                ids.append(reply.headers["mcp-session-id"])
    return statuses


def still_open(url: str, ids: list[str]) -> int:
    """How many of ``ids`` the server still serves (404: ended)."""
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with httpx.Client(timeout=30) as client:
        replies = [
            client.post(url, json=listing, headers={**HEADERS, "mcp-session-id": sid})
            for sid in ids
        ]
    return sum(1 for reply in replies if reply.status_code != 404)


WARM_UP = 20


def growth(proc: subprocess.Popen[bytes], url: str, n: int) -> tuple[float, dict[int, int]]:
    """RSS growth (MiB) of ``proc`` while ``n`` sessions are opened after ``WARM_UP`` ones
    (the first requests import and allocate what every later one shares), and the statuses
    of all of them."""
    statuses = open_sessions(url, WARM_UP)
    time.sleep(0.5)
    before = rss_mib(proc.pid)
    for status, count in open_sessions(url, n).items():
        statuses[status] = statuses.get(status, 0) + count
    time.sleep(0.5)
    return rss_mib(proc.pid) - before, statuses


def write_config(base: Path, name: str, sessions: dict[str, Any] | None) -> Path:
    data: dict[str, Any] = {
        "store": ":memory:",
        "policy": "policy.yaml",
        "tools": ["bench_session_tools:TOOLS"],
        "audit": None,
    }
    if sessions is not None:
        data["sessions"] = sessions
    path = base / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer sessions (< 60 s)")
    args = parser.parse_args()
    n = 500 if args.quick else 1000
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "bench_session_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
        (base / "peer_server.py").write_text(PEER_SERVER, encoding="utf-8")
        (base / "policy.yaml").write_text("default_effect: allow\n", encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(base)}
        unbounded = {"max": 1_000_000, "per_principal": 1_000_000, "idle_timeout": 3600}
        roomy = write_config(base, "roomy.yaml", unbounded)
        defaults = write_config(base, "defaults.yaml", None)
        idle = write_config(base, "idle.yaml", {**unbounded, "idle_timeout": 2})

        def serve(config: Path, port: int) -> list[str]:
            return [str(TOOLCARDS), "serve", "--config", str(config), "--transport", "http",
                    "--port", str(port)]  # fmt: skip

        port = free_port()
        with serving(serve(roomy, port), port, env) as proc:
            ours, _ = growth(proc, f"http://127.0.0.1:{port}/mcp", n)
        port = free_port()
        with serving([sys.executable, str(base / "peer_server.py"), str(port)], port, env) as proc:
            peer, _ = growth(proc, f"http://127.0.0.1:{port}/mcp", n)
        port = free_port()
        flood = 3 * n + WARM_UP
        with serving(serve(defaults, port), port, env) as proc:
            capped, statuses = growth(proc, f"http://127.0.0.1:{port}/mcp", flood - WARM_UP)
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        with serving(serve(idle, port), port, env):
            ids: list[str] = []
            open_sessions(url, n, ids)
            live_before = still_open(url, ids[-50:])  # the newest: opened within 2 s
            time.sleep(4.0)  # > idle_timeout (2 s)
            live_after = still_open(url, ids[-50:])

    per_1000 = ours * 1000 / n
    peer_per_1000 = peer * 1000 / n
    print(f"server memory per 1,000 open MCP sessions ({n} opened)")
    print(f"  toolcards serve      {per_1000:7.1f} MiB")
    print(f"  official SDK server  {peer_per_1000:7.1f} MiB")
    record("RSS per 1,000 HTTP sessions", per_1000, "MiB",
           peer="mcp MCPServer", peer_value=peer_per_1000)  # fmt: skip
    accepted = statuses.get(200, 0)
    print(f"anonymous flood of {flood} sessions against the default caps")
    print(f"  accepted {accepted}, refused {flood - accepted} "
          f"({', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))}); "
          f"RSS growth {capped:.1f} MiB")  # fmt: skip
    record("anonymous flood: sessions held (default caps)", accepted, "sessions")
    record("anonymous flood: RSS growth (default caps)", capped, "MiB")
    print(f"idle expiry (timeout 2 s): {len(ids)} sessions opened; of 50 sampled, "
          f"{live_before} open at once, {live_after} open after 4 s idle")  # fmt: skip
    record("idle sessions left after 2x the idle timeout (of 50)", live_after, "sessions")


if __name__ == "__main__":
    main()
