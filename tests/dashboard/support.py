"""A scripted team behind a dashboard, for the dashboard tests.

Importable as ``dashboard.support`` (``tests`` is on the test path). Members are driven by
pydantic-ai ``FunctionModel`` s: a message ``<verb> <text>`` makes the member call one tool
with arguments built from ``text``, then answer with what the tool returned.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from support.launch import TOOLCARDS
from support.processes import ListeningProcess
from support.scripted import is_prompt
from toolcards import KnowledgeGraphTool, PlanningTool
from toolcards.governance import AuditLog, Identity, Policy
from toolcards.governance.approvals.broker import ApprovalBroker
from toolcards.governance.approvals.view import reads_as_itself
from toolcards.governance.executor.budget import Budgets
from toolcards.runtime import RoleProfile, Team
from toolcards.surfaces.dashboard import BackgroundServer, Dashboard, InboxApprover
from toolcards.surfaces.http.tokens import TokenTable

TOKENS = {"approver": "tok-approver-ann", "viewer": "tok-viewer-vera", "agent": "tok-agent-bot"}
IDENTITIES = {
    "approver": Identity("ann", "user", ["approver"]),
    "viewer": Identity("vera", "user", ["viewer"]),
    "agent": Identity("agent.bot", "agent", ["member"]),
}
POLICY = {
    "default_effect": "deny",
    "rules": [
        {
            "description": "Graph changes need a human",
            "callers": ["agent.*"],
            "targets": ["update_graph"],
            "effect": "approve",
        },
        {
            "description": "Members use the team's tools",
            "callers": ["agent.*"],
            "targets": ["*"],
            "effect": "allow",
        },
    ],
    "budgets": [
        {"name": "graph changes", "per": "team", "targets": ["update_graph"], "calls": 10000}
    ],
}
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

Build = Callable[[str], tuple[str, dict[str, Any]]]


def one_call_model(build: Build) -> FunctionModel:
    """A model that answers each message with one tool call (``build(prompt)``), then with
    ``result: <what the tool returned>``."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt, results = "", list[str]()
        for message in messages:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if is_prompt(part):  # not the team state rendered beside it
                    prompt, results = str(part.content), []
                elif isinstance(part, ToolReturnPart | RetryPromptPart):
                    content = part.content
                    results.append(content if isinstance(content, str) else json.dumps(content))
        if results:
            return ModelResponse(parts=[TextPart("result: " + results[-1])])
        tool, args = build(prompt)
        return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=uuid.uuid4().hex)])

    return FunctionModel(respond)


def _task(prompt: str) -> tuple[str, dict[str, Any]]:
    return "update_planning", {"create": [{"description": prompt}]}


def entity_call(prompt: str) -> tuple[str, dict[str, Any]]:
    """An entity named by the prompt; a prompt longer than a name may be goes whole into the
    entity's observations (500 characters each), and one with hidden characters (which a name
    may not hold) into its description, so the arguments stay valid."""
    if not reads_as_itself(prompt):
        name = "".join(char for char in prompt if reads_as_itself(char))[:200]
        entity = {"name": name, "entity_type": "concept", "description": f"about {prompt}"}
    elif len(prompt) <= 200:
        entity = {"name": prompt, "entity_type": "concept", "description": f"about {prompt}"}
    else:
        chunks = [prompt[i : i + 500] for i in range(0, len(prompt), 500)]
        entity = {"name": prompt[:200], "entity_type": "concept", "observations": chunks}
    return "update_graph", {"create_entities": [entity]}


@dataclass
class World:
    """A team (planner and curator members), its audit log and approvals, a dashboard
    served on 127.0.0.1."""

    root: Path
    team: Team
    audit: AuditLog
    broker: ApprovalBroker
    dashboard: Dashboard
    server: BackgroundServer
    planner: str = ""
    curator: str = ""
    threads: list[threading.Thread] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.server.url

    def send_later(self, member: str, text: str) -> dict[str, str]:
        """Send ``text`` to ``member`` on a thread; the reply lands in the returned dict."""
        box: dict[str, str] = {}

        def run() -> None:
            try:
                box["reply"] = self.team.send(member, text, timeout=60)
            except Exception as exc:  # the test reads it
                box["error"] = repr(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads.append(thread)
        box["_thread"] = thread  # type: ignore[assignment]
        return box

    def graph_tools(self) -> dict[str, Any]:
        """The graph tools bound for a test hand (ungoverned)."""
        factory = self.team.bind([KnowledgeGraphTool(vector_store=False)], member="@tester")
        return {t.__name__: t for t in factory.get_tools()}

    def close(self) -> None:
        self.server.stop()
        self.team.stop(timeout=5)
        for thread in self.threads:
            thread.join(5)
        self.audit.close()


def build_world(root: Path, approval_timeout: float = 30.0) -> World:
    audit = AuditLog(root / "audit.db")
    broker = ApprovalBroker(audit=audit)
    cards: list[Any] = [PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)]
    profiles = [
        RoleProfile(
            role="planner",
            description="Plans",
            model=one_call_model(_task),
            cards=cards,
            roles=["member"],
            messaging=False,
        ),
        RoleProfile(
            role="curator",
            description="Keeps the graph",
            model=one_call_model(entity_call),
            cards=cards,
            roles=["member"],
            messaging=False,
        ),
    ]
    team = Team(
        "dash-team",
        store=root / "team.db",
        profiles=profiles,
        policy=Policy.from_dict(POLICY),
        audit=audit,
        approver=InboxApprover(broker, timeout=approval_timeout),
    )
    tokens = TokenTable.from_tokens((TOKENS[k], IDENTITIES[k]) for k in TOKENS)
    report = functools.partial(Budgets(team.budgets).report, team.policy)
    dashboard = Dashboard(team=team, audit=audit, approvals=broker, tokens=tokens, budgets=report)
    server = BackgroundServer(dashboard.app()).start()
    world = World(root, team, audit, broker, dashboard, server)
    world.planner = team.hire("planner")
    world.curator = team.hire("curator")
    return world


def chromium() -> str | None:
    """The Debian chromium executable, when installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot_dir(default: Path) -> Path:
    """Where the browser tests save screenshots: ``$TOOLCARDS_SCREENSHOTS`` (``make
    screenshots`` points it at docs/img) or a temporary folder."""
    found = os.environ.get("TOOLCARDS_SCREENSHOTS")
    path = Path(found) if found else default
    path.mkdir(parents=True, exist_ok=True)
    return path


def form_token(html: str) -> str:
    """The CSRF token a rendered page carries in its forms."""
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, "no CSRF field on the page"
    return found.group(1)


def http_sign_in(url: str, who: str) -> httpx.Client:
    """An HTTP client signed in as ``who`` (``approver``, ``viewer``), with its CSRF token in
    ``client.csrf``."""
    client = httpx.Client(base_url=url, timeout=10, follow_redirects=False)
    token = form_token(client.get("/login").text)
    response = client.post("/login", data={"token": TOKENS[who], "csrf": token})
    assert response.status_code == 303, response.text
    client.csrf = form_token(client.get("/").text)  # type: ignore[attr-defined]
    return client


def binding(request: Any) -> dict[str, str]:
    """The form fields of an approval as the page shows it."""
    return {
        "call_id": request.call_id,
        "tool": request.tool_id,
        "args_digest": request.args_digest,
        "principal": request.principal,
    }


class Process(ListeningProcess):
    """A ``toolcards`` command serving on 127.0.0.1:``port`` (started in the constructor,
    ended by :meth:`stop`); ``output()`` is what it wrote to stderr. ``origin`` is the
    server's (MCP is at ``origin + "/mcp"``), ``url`` the dashboard's, its secret path as the
    command printed it."""

    def __init__(self, *args: str, port: int) -> None:
        self.origin = f"http://127.0.0.1:{port}"
        super().__init__([str(TOOLCARDS), *args, "--port", str(port)], port, what=args[0])
        printed = re.search(
            rf"^dashboard .*at ({re.escape(self.origin)}/[\w-]+)/$", self.output(), re.M
        )
        assert printed is not None, self.output()
        self.url = printed.group(1)


def write_config(directory: Path, policy: dict[str, Any]) -> Path:
    """A surfaces config: a planning board, ``policy``, an agent, an approver and a viewer."""
    from toolcards.surfaces.config import hash_token

    (directory / "policy.yaml").write_text(yaml.safe_dump(policy), encoding="utf-8")
    tokens = [
        {
            "token_sha256": hash_token(TOKENS[k]),
            "id": i.id,
            "type": i.type,
            "roles": sorted(i.roles),
        }
        for k, i in IDENTITIES.items()
    ]
    data = {
        "team_id": "served",
        "store": "team.db",
        "cards": [{"type": "PlanningTool", "vector_store": False}],
        "policy": "policy.yaml",
        "audit": "audit.db",
        "principals": {"tokens": tokens},
    }
    path = directory / "toolcards.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def listening_addresses(port: int) -> set[str]:
    """The local IPv4 addresses with a socket listening on ``port`` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":  # LISTEN
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


# -- browser helpers ---------------------------------------------------------------------------


def fresh(page: Any, world: World) -> Any:
    """Reload the dashboard and wait until its live stream is connected."""
    page.goto(world.url + "/")
    if page.context.browser and page.evaluate("() => !!window.EventSource"):
        page.wait_for_selector("#live-state.on", timeout=10_000)
    return page


def wait_pending(world: World, text: str, timeout: float = 20.0) -> Any:
    """The pending approval whose arguments mention ``text``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for request in world.broker.pending():
            if text in json.dumps(dict(request.args)):
                return request
        time.sleep(0.05)
    raise AssertionError(f"no approval for {text!r} arrived")


def reply_of(box: dict[str, Any], timeout: float = 30.0) -> str:
    box["_thread"].join(timeout)
    assert "error" not in box, box.get("error")
    return str(box["reply"])
