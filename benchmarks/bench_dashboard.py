"""Dashboard: how fast a team change reaches an open page, and how long a page takes to render.

- event -> page: a task created on the team's planning board, from the event's commit to the
  task appearing in the plan panel of a real chromium page (SSE, then the panel's refresh);
  p50 and p95 (the issue's goal: within one second).
- event -> SSE client: the same, to a plain HTTP client reading the event stream.
- full page: GET / of a team with 200 tasks, 150 entities and a busy audit log.
- a small request (the sign-in page) on a kept-alive connection, p50, beside the same app
  served by uvicorn on a socket it makes itself (Nagle's algorithm off on its connections).

Run: .venv/bin/python benchmarks/bench_dashboard.py [--quick]

``--quick`` (a smoke run): 3 events each way, a tenth of the full page's data (20 tasks, 15
entities, 500 audit rows), 2 renders and 5 small requests on each server.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from _results import record
from pydantic_core import to_jsonable_python

from toolcards import KnowledgeGraphTool, PlanningTool
from toolcards.governance import AuditLog, Identity
from toolcards.governance.approvals.broker import ApprovalBroker
from toolcards.governance.audit.log import AuditRecord
from toolcards.runtime import Team
from toolcards.surfaces.dashboard import BackgroundServer, Dashboard
from toolcards.surfaces.http.tokens import TokenTable

TOKEN = "bench-viewer-token"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def sign_in(url: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=10)
    page = client.get("/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    client.post("/login", data={"token": TOKEN, "csrf": csrf.group(1)})
    return client


def event_time(team: Team, title: str) -> float:
    for event in reversed(team.events(max(0, team.log.position - 20))):
        if event.tool_id == "#PlanningTool" and title in json.dumps(
            event.payload, default=to_jsonable_python
        ):
            return event.timestamp
    raise LookupError(title)


def browser_latency(url: str, team: Team, create: Any, n: int) -> list[float] | None:
    executable = shutil.which("chromium")
    if executable is None:
        print("chromium is not installed: event -> page not measured")
        return None
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url + "/login")
        page.fill("#token", TOKEN)
        page.click("[data-testid=sign-in]")
        page.wait_for_selector("#live-state.on")
        page.evaluate(
            """() => {
                window.__seen = {};
                new MutationObserver(() => {
                    for (const el of document.querySelectorAll('[data-testid=task] .description')) {
                        const seen = window.__seen;
                        if (!(el.textContent in seen)) seen[el.textContent] = Date.now();
                    }
                }).observe(document.body, {childList: true, subtree: true});
            }"""
        )
        for i in range(n):
            title = f"bench task {i}"
            create(title)
            page.wait_for_function("t => t in window.__seen", arg=title, timeout=10_000)
            seen = page.evaluate("t => window.__seen[t]", title) / 1000
            out.append((seen - event_time(team, title)) * 1000)
            time.sleep(0.05)
        browser.close()
    return out


def stream_latency(url: str, team: Team, create: Any, n: int) -> list[float]:
    client = sign_in(url)
    arrived: dict[str, float] = {}
    ready = threading.Event()

    def read() -> None:
        with client.stream("GET", "/events", timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("event: hello"):
                    ready.set()
                found = re.search(r"stream task \d+", line)
                if line.startswith("data:") and found:
                    arrived.setdefault(found.group(), time.time())
                    if len(arrived) == n:
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready.wait(10)
    out = []
    for i in range(n):
        title = f"stream task {i}"
        create(title)
        deadline = time.monotonic() + 10
        while title not in arrived and time.monotonic() < deadline:
            time.sleep(0.001)
        out.append((arrived[title] - event_time(team, title)) * 1000)
    reader.join(5)
    client.close()
    return out


def fill(audit: AuditLog, scale: int = 1) -> None:
    """200 tasks, 150 entities with 150 relations, 5,000 audit rows (each divided by
    ``scale``; in the same batches: two of tasks, three of entities and three of relations)."""
    tasks, entities, rows = 200 // scale, 150 // scale, 5000 // scale
    for start in range(0, tasks, tasks // 2):
        batch = [{"description": f"filler task {i}"} for i in range(start, start + tasks // 2)]
        plan_tools["update_planning"](create=batch)
    step = entities // 3
    for start in range(0, entities, step):
        plan_tools["update_graph"](
            create_entities=[{"name": f"entity {i}", "entity_type": "t"}
                             for i in range(start, start + step)]
        )  # fmt: skip
    for start in range(0, entities, step):
        plan_tools["update_graph"](
            create_relations=[{"from_entity": f"entity {i}", "relation_type": "links",
                               "to_entity": f"entity {(i * 7 + 1) % entities}"}
                              for i in range(start, start + step)]
        )  # fmt: skip
    for i in range(rows):
        audit.record(
            AuditRecord(ts=time.time(), principal="agent.bench", principal_type="agent", roles=(),
                        surface="bench", tool="t", call_id=str(i), args={"i": i},
                        decision="allow", outcome="ok")
        )  # fmt: skip
    audit.flush()


def page_render(url: str, n: int) -> float:
    """Median milliseconds of GET / (every panel rendered on the server)."""
    client = sign_in(url)
    times = []
    for _ in range(n):
        start = time.perf_counter()
        assert client.get("/").status_code == 200
        times.append((time.perf_counter() - start) * 1000)
    client.close()
    return statistics.median(times)


def small_request(url: str, n: int) -> float:
    """Median milliseconds of GET /login on one kept-alive connection."""
    with httpx.Client(base_url=url) as client:
        client.get("/login")
        times = []
        for _ in range(n):
            start = time.perf_counter()
            assert client.get("/login").status_code == 200
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def small_request_plain_uvicorn(app: Any, base_path: str, n: int) -> float:
    """The same, with uvicorn making its own listening socket (``base_path``: the dashboard's
    secret path, which every route is under)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        return small_request(f"http://127.0.0.1:{port}{base_path}", n)
    finally:
        server.should_exit = True
        thread.join(10)


plan_tools: dict[str, Any] = {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    n = 3 if args.quick else 40
    scale = 10 if args.quick else 1  # quick: 20 tasks, 15 entities, 500 audit rows
    with tempfile.TemporaryDirectory() as tmp:
        audit = AuditLog(Path(tmp) / "audit.db")
        team = Team("bench", store=Path(tmp) / "team.db")
        factory = team.bind(
            [PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)]
        )
        plan_tools.update({t.__name__: t for t in factory.get_tools()})

        def create(title: str) -> None:
            plan_tools["update_planning"](create=[{"description": title}])

        tokens = TokenTable.from_tokens([(TOKEN, Identity("bench", roles=["viewer"]))])
        dash = Dashboard(team=team, audit=audit, approvals=ApprovalBroker(), tokens=tokens)
        with BackgroundServer(dash.app()) as server:
            page = browser_latency(server.url, team, create, n)
            stream = stream_latency(server.url, team, create, n)
            fill(audit, scale)
            render = page_render(server.url, 2 if args.quick else 20)
            small = small_request(server.url, 5 if args.quick else 200)
        plain = small_request_plain_uvicorn(dash.app(), dash.base_path, 5 if args.quick else 200)
        team.stop()
        audit.close()
    if page is not None:
        print(
            f"event -> page (chromium): p50 {pct(page, 0.5):.1f} ms, p95 {pct(page, 0.95):.1f} ms"
        )
        record("event -> page p50", pct(page, 0.5), "ms", goal="< 1000 ms")
        record("event -> page p95", pct(page, 0.95), "ms", goal="< 1000 ms")
    print(f"event -> SSE client: p50 {pct(stream, 0.5):.1f} ms, p95 {pct(stream, 0.95):.1f} ms")
    record("event -> SSE client p50", pct(stream, 0.5), "ms")
    sizes = f"{200 // scale} tasks, {150 // scale} entities, {5000 // scale:,} audit rows"
    print(f"full page, {sizes}: {render:.1f} ms (median)")
    record("full page render", render, "ms")
    print(
        f"small request (sign-in page), kept-alive connection: {small:.2f} ms p50 | "
        f"the same app on uvicorn's own socket {plain:.2f} ms -> {small / plain:.2f}x"
    )
    record(
        "small request p50",
        small,
        "ms",
        peer="the same app, uvicorn's own socket",
        peer_value=plain,
        goal="<= 1.2x the peer",
    )


if __name__ == "__main__":
    main()
