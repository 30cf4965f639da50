"""The dashboard in a real browser: Debian chromium driven by Playwright.

One team, one dashboard server and one browser for the whole module; each test signs in a
fresh browser context (or reuses the module's signed-in pages) and checks one behaviour.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest

from dashboard.support import (
    IDENTITIES,
    TOKENS,
    World,
    fresh,
    reply_of,
    screenshot_dir,
    wait_pending,
)
from runtime.stateful_cards import CounterActor
from toolcards.surfaces.dashboard.sessions import SESSION_COOKIE

pytestmark = pytest.mark.timeout(120)

GRAPH_EVENTS = "#KnowledgeGraphTool"


@pytest.fixture(scope="module")
def approver_page(sign_in: Callable[..., Any]) -> Any:
    return sign_in("approver")


@pytest.fixture(scope="module")
def viewer_page(sign_in: Callable[..., Any]) -> Any:
    return sign_in("viewer")


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshot_dir(tmp_path_factory.mktemp("shots"))


def graph_events_naming(world: World, name: str) -> list[Any]:
    return [
        e
        for e in world.team.events()
        if e.tool_id == GRAPH_EVENTS and name in e.model_dump_json(include={"payload"})
    ]


@pytest.fixture
def waiting_call(world: World) -> Iterator[Any]:
    """A curator call that waits in the inbox; denied afterwards if still pending."""
    name = f"Gamma {uuid.uuid4().hex[:6]}"
    box = world.send_later(world.curator, name)
    request = wait_pending(world, name)
    yield request
    if world.broker.get(request) is not None:
        world.broker.deny(request, approver=IDENTITIES["approver"])
    reply_of(box)


# -- sign-in -------------------------------------------------------------------------------


def test_signing_in_with_an_approver_token_opens_every_panel(approver_page: Any) -> None:
    page = approver_page
    assert page.locator("[data-testid=principal]").inner_text() == "ann"
    for panel in ("team", "approvals", "plan", "graph", "audit", "live"):
        assert page.locator(f"section#{panel}").is_visible()


def test_a_token_of_nobody_is_refused(browser: Any, world: World) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(world.url + "/login")
    page.fill("#token", "not-a-token")
    with page.expect_navigation() as nav:
        page.click("[data-testid=sign-in]")
    assert nav.value.status == 401
    assert "matches no principal" in page.locator("[data-testid=login-error]").inner_text()
    assert page.goto(world.url + "/").url.endswith("/login")
    context.close()


def test_an_agent_token_without_a_viewer_role_cannot_sign_in(browser: Any, world: World) -> None:
    context = browser.new_context()
    page = context.new_page()
    page.goto(world.url + "/login")
    page.fill("#token", TOKENS["agent"])
    with page.expect_navigation() as nav:
        page.click("[data-testid=sign-in]")
    assert nav.value.status == 403
    assert "may not open the dashboard" in page.locator("[data-testid=login-error]").inner_text()
    context.close()


def test_a_server_on_another_loopback_port_gets_no_session_cookie(
    sign_in: Callable[..., Any], world: World
) -> None:
    """The approver, signed in, opens the link of an agent's "preview server" on 127.0.0.1:
    it gets no session (before: the cookie had Path=/, which Chromium sends to every port of
    127.0.0.1, SameSite=Strict too; the agent replayed it and granted its own call)."""
    page = sign_in("approver")
    heard: list[str | None] = []

    class Preview(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            heard.append(self.headers.get("cookie"))
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(b"<p>preview</p>")

        def log_message(self, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Preview) as preview:
        threading.Thread(target=preview.serve_forever, daemon=True).start()
        origin = f"http://127.0.0.1:{preview.server_address[1]}"
        try:
            for path in ("/", "/login", "/events", "/static/dashboard.css"):
                page.goto(origin + path)
        finally:
            preview.shutdown()
    assert len(heard) >= 4 and set(heard) == {None}
    (session,) = [c for c in page.context.cookies() if c["name"] == SESSION_COOKIE]
    assert session["path"] == world.dashboard.base_path  # kept, for the dashboard only
    page.goto(world.url + "/")
    assert page.locator("[data-testid=principal]").inner_text() == "ann"  # still signed in


# -- team, plan, live ------------------------------------------------------------------------


def test_the_roster_shows_members_with_role_and_state(approver_page: Any, world: World) -> None:
    page = fresh(approver_page, world)
    rows = page.locator("[data-testid=roster-member]")
    names = rows.evaluate_all("rows => rows.map(r => r.dataset.name)")
    assert names == [world.planner, world.curator]
    planner = rows.nth(0).inner_text()
    assert "planner" in planner and ("idle" in planner or "busy" in planner)


def test_a_task_created_by_an_agent_appears_on_the_plan_within_one_second(
    approver_page: Any, world: World
) -> None:
    page = fresh(approver_page, world)
    title = f"Ship release {uuid.uuid4().hex[:6]}"
    page.evaluate(
        """title => {
            window.__seen = null;
            new MutationObserver((_, observer) => {
                for (const el of document.querySelectorAll('[data-testid=task] .description')) {
                    if (el.textContent !== title) continue;
                    window.__seen = Date.now();
                    observer.disconnect();
                }
            }).observe(document.body, {childList: true, subtree: true});
        }""",
        title,
    )
    assert "created ids" in reply_of(world.send_later(world.planner, title))
    page.wait_for_function("() => window.__seen !== null", timeout=10_000)
    [event] = [
        e
        for e in world.team.events()
        if e.tool_id == "#PlanningTool" and title in e.model_dump_json(include={"payload"})
    ]
    latency = page.evaluate("window.__seen") / 1000 - event.timestamp
    print(f"plan event -> page: {latency * 1000:.0f} ms")
    assert latency < 1.0  # the bound: within one second, without reload


def test_team_events_stream_to_the_live_panel_without_reload(
    approver_page: Any, world: World
) -> None:
    page = fresh(approver_page, world)
    page.evaluate("() => { window.__sameDocument = true; }")
    before = page.locator("[data-testid=event]").count()
    title = f"Stream check {uuid.uuid4().hex[:6]}"
    reply_of(world.send_later(world.planner, title))
    page.locator("[data-testid=event]", has_text=title).first.wait_for(timeout=5_000)
    assert page.locator("[data-testid=event]").count() > before
    assert page.evaluate("() => window.__sameDocument === true")


def test_the_live_panel_hides_starts_and_stops_until_asked(
    approver_page: Any, world: World
) -> None:
    """Lifecycle events (the team's and its actors' starts and stops) are in the list but
    hidden, also those that arrive live; the checkbox shows them (without script too)."""
    page = fresh(approver_page, world)
    world.team.tool_actor("#LiveProbe", CounterActor)  # a start and a stop, live
    world.team.stop_actor("#LiveProbe")
    reply_of(world.send_later(world.planner, f"Wake {uuid.uuid4().hex[:6]}"))
    starts = page.locator("[data-testid=event][data-display-type=lifecycle]")
    work = page.locator("[data-testid=event]:not([data-display-type=lifecycle])")
    page.wait_for_function(
        "() => document.querySelectorAll('#events li.fresh.lifecycle').length >= 2"
    )
    assert starts.count() >= 2 and work.count() > 0
    assert not any(starts.nth(i).is_visible() for i in range(starts.count()))
    assert work.first.is_visible()
    shown = int(page.text_content("[data-testid=lifecycle-count]") or "0")
    assert shown == starts.count()
    page.check("[data-testid=show-lifecycle]")
    assert all(starts.nth(i).is_visible() for i in range(starts.count()))


def test_tool_actors_show_their_state_size(approver_page: Any, world: World) -> None:
    reply_of(world.send_later(world.planner, "Count me"))
    page = fresh(approver_page, world)
    actor = page.locator("[data-testid=tool-actor]", has_text="#PlanningTool")
    size = world.team.state_of("#PlanningTool").count()
    assert size > 0
    assert f"{size} state entries" in actor.inner_text()


# -- approvals ---------------------------------------------------------------------------------


def test_an_approved_call_runs_exactly_once_and_the_agent_gets_its_result(
    approver_page: Any, world: World, shots: Path
) -> None:
    page = fresh(approver_page, world)
    name = f"Alpha {uuid.uuid4().hex[:6]}"
    box = world.send_later(world.curator, name)
    item = page.locator("[data-testid=approval]", has_text=name)
    item.wait_for(timeout=10_000)  # arrives live, without reload
    assert "update_graph" in item.inner_text()
    assert f"agent.{world.curator}" in item.inner_text()
    assert name in item.locator("[data-testid=approval-args]").inner_text()
    page.locator("section#approvals").screenshot(path=str(shots / "dashboard-approvals.png"))
    form = item.locator("form").first
    fields = {
        k: form.locator(f"input[name={k}]").get_attribute("value")
        for k in ("csrf", "call_id", "tool", "args_digest", "principal")
    }
    action = form.get_attribute("action")
    with page.expect_navigation():
        item.locator("[data-testid=approve]").click()
    assert "entities: 1 created" in reply_of(box)
    again = page.request.post(urljoin(world.url, action), form=fields)  # the action's path
    assert again.status == 409  # spent: a second approval runs nothing
    assert len(graph_events_naming(world, name)) == 1
    ran = [
        e
        for e in world.audit.query(tool="update_graph", outcome="ok", limit=1000)
        if name in json.dumps(e.args)
    ]
    assert len(ran) == 1
    [granted] = [
        e
        for e in world.audit.query(outcome="approval_granted", limit=1000)
        if name in json.dumps(e.args)
    ]
    assert granted.principal == "ann" and granted.surface == "dashboard"


def test_a_denied_call_is_refused_and_the_agent_is_told(approver_page: Any, world: World) -> None:
    page = fresh(approver_page, world)
    name = f"Beta {uuid.uuid4().hex[:6]}"
    box = world.send_later(world.curator, name)
    item = page.locator("[data-testid=approval]", has_text=name)
    item.wait_for(timeout=10_000)
    with page.expect_navigation():
        item.locator("[data-testid=deny]").click()
    assert "approval for update_graph was refused" in reply_of(box)
    assert graph_events_naming(world, name) == []
    [denied] = [
        e
        for e in world.audit.query(outcome="approval_denied", limit=1000)
        if name in json.dumps(e.args)
    ]
    assert denied.principal == "ann"
    assert page.locator("[data-testid=approval]", has_text=name).count() == 0


def test_a_viewer_sees_the_inbox_but_gets_403_on_approve(
    viewer_page: Any, world: World, waiting_call: Any
) -> None:
    page = fresh(viewer_page, world)
    name = waiting_call.args["create_entities"][0]["name"]
    item = page.locator("[data-testid=approval]", has_text=name)
    item.first.wait_for(timeout=10_000)
    assert page.locator("[data-testid=approve]").count() == 0
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    response = page.request.post(
        f"{world.url}/approvals/{waiting_call.approval_id}/grant",
        form={
            "csrf": csrf,
            "call_id": waiting_call.call_id,
            "tool": waiting_call.tool_id,
            "args_digest": waiting_call.args_digest,
            "principal": waiting_call.principal,
        },
    )
    assert response.status == 403
    assert world.broker.get(waiting_call) is not None  # still waiting
    refused = [
        e
        for e in world.audit.query(principal="vera", outcome="approval_rejected", limit=100)
        if e.call_id == waiting_call.call_id
    ]
    assert len(refused) == 1


def test_a_post_without_its_csrf_token_is_refused(
    approver_page: Any, world: World, waiting_call: Any
) -> None:
    response = approver_page.request.post(
        f"{world.url}/approvals/{waiting_call.approval_id}/grant",
        form={
            "call_id": waiting_call.call_id,
            "tool": waiting_call.tool_id,
            "args_digest": waiting_call.args_digest,
            "principal": waiting_call.principal,
        },
    )
    assert response.status == 403
    assert "CSRF" in response.text()
    assert world.broker.get(waiting_call) is not None


# -- screenshots -------------------------------------------------------------------------------


def test_the_overview_shows_every_panel_with_data(
    approver_page: Any, world: World, shots: Path
) -> None:
    tools = world.graph_tools()
    tools["update_graph"](
        create_entities=[
            {"name": n, "entity_type": t, "description": d, "is_root": t == "release"}
            for n, t, d in (
                ("toolcards 0.1", "release", "The first release"),
                ("governed executor", "feature", "Identity, ACL, approvals, audit"),
                ("team state", "feature", "Plan and graph that survive a restart"),
                ("dashboard", "feature", "This page"),
                ("audit log", "component", "Every decision, in SQLite"),
                ("approvals inbox", "component", "Where calls wait for a human"),
            )
        ],
        create_relations=[
            {"from_entity": a, "to_entity": b, "relation_type": r}
            for a, r, b in (
                ("toolcards 0.1", "ships", "governed executor"),
                ("toolcards 0.1", "ships", "team state"),
                ("toolcards 0.1", "ships", "dashboard"),
                ("governed executor", "writes", "audit log"),
                ("dashboard", "shows", "audit log"),
                ("dashboard", "hosts", "approvals inbox"),
                ("governed executor", "waits in", "approvals inbox"),
            )
        ],
    )
    box = world.send_later(world.curator, "Delta")
    request = wait_pending(world, "Delta")
    page = fresh(approver_page, world)
    page.locator("[data-testid=approval]", has_text="Delta").wait_for(timeout=10_000)
    page.screenshot(path=str(shots / "dashboard.png"), full_page=True)
    page.locator("section#graph").screenshot(path=str(shots / "dashboard-graph.png"))
    world.broker.deny(request, approver=IDENTITIES["approver"])
    reply_of(box)
    for testid in ("roster-member", "task", "audit-row", "event", "graph"):
        assert page.locator(f"[data-testid={testid}]").count() > 0, testid
    for png in ("dashboard.png", "dashboard-graph.png"):
        assert (shots / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- graph and audit ---------------------------------------------------------------------------


def test_graph_search_finds_entities_with_the_cards_search(
    approver_page: Any, world: World
) -> None:
    world.graph_tools()["update_graph"](
        create_entities=[
            {"name": "Quasar engine", "entity_type": "part", "description": "drives the ship"}
        ]
    )
    page = fresh(approver_page, world)
    page.fill("[data-testid=graph-search] input[name=q]", "quasar")
    with page.expect_navigation():
        page.click("[data-testid=graph-search] button")
    hits = page.locator("[data-testid=graph-hit]")
    assert "Quasar engine" in hits.first.inner_text()
    assert page.locator('[data-testid=graph-node].hit[data-name="Quasar engine"]').count() == 1


def test_audit_rows_filter_by_principal(approver_page: Any, world: World) -> None:
    page = fresh(approver_page, world)
    page.fill("[data-testid=audit-filters] input[name=principal]", f"agent.{world.planner}")
    with page.expect_navigation():
        page.click("[data-testid=audit-filters] button")
    rows = page.locator("[data-testid=audit-row]")
    assert rows.count() > 0
    principals = rows.evaluate_all("rows => rows.map(r => r.children[1].textContent)")
    assert set(principals) == {f"agent.{world.planner}"}


# -- hostile text ------------------------------------------------------------------------------


def test_markup_in_a_task_title_renders_as_text(approver_page: Any, world: World) -> None:
    payload = "<img src=x onerror=alert(1)>"
    page = fresh(approver_page, world)
    reply_of(world.send_later(world.planner, payload))
    task = page.locator("[data-testid=task]", has_text=payload)
    task.wait_for(timeout=5_000)  # arrives live, through the fragment refresh
    assert task.locator(".description").inner_text() == payload
    assert page.locator("[data-testid=task] img").count() == 0
    page.reload()
    assert page.locator("[data-testid=task]", has_text=payload).count() == 1
    assert page.dialogs == []


def test_markup_in_a_graph_entity_renders_as_text(approver_page: Any, world: World) -> None:
    payload = "<svg onload=alert(2)>"
    world.graph_tools()["update_graph"](
        create_entities=[
            {"name": payload, "entity_type": "<b>x</b>", "description": "<script>alert(4)</script>"}
        ]
    )
    page = fresh(approver_page, world)
    node = page.locator("[data-testid=graph-node]", has_text=payload)
    assert node.count() == 1
    assert node.locator("text").text_content() == payload
    assert page.locator("section#graph svg svg, section#graph script, section#graph b").count() == 0
    assert page.dialogs == []


def test_markup_in_an_audit_argument_renders_as_text(approver_page: Any, world: World) -> None:
    payload = "<img src=y onerror=alert(3)>"
    reply_of(world.send_later(world.planner, payload))
    page = fresh(approver_page, world)
    row = page.locator("[data-testid=audit-row]", has_text=payload).first
    assert payload in row.locator("td.args").inner_text()
    assert page.locator("table.audit img").count() == 0
    assert page.dialogs == []


# -- without JavaScript ------------------------------------------------------------------------


def test_the_page_reads_without_javascript(sign_in: Callable[..., Any], world: World) -> None:
    title = f"Static task {uuid.uuid4().hex[:6]}"  # this test's own rows: no other test's order
    reply_of(world.send_later(world.planner, title))
    world.graph_tools()["update_graph"](
        create_entities=[{"name": title, "entity_type": "note", "description": "static"}]
    )
    page = sign_in("viewer", javascript=False)
    for testid in ("roster-member", "task", "audit-row", "event", "graph-node"):
        assert page.locator(f"[data-testid={testid}]").count() > 0, testid
    assert page.locator("#live-state").inner_text() == "static"


def test_without_javascript_changes_show_only_after_a_reload(
    sign_in: Callable[..., Any], world: World
) -> None:
    page = sign_in("viewer", javascript=False)
    live = sign_in("viewer")  # a page with scripts, for when the change reached the pages
    title = f"Quiet task {uuid.uuid4().hex[:6]}"
    reply_of(world.send_later(world.planner, title))
    live.locator("[data-testid=task]", has_text=title).wait_for(timeout=30_000)
    assert page.locator("[data-testid=task]", has_text=title).count() == 0
    page.reload()
    assert page.locator("[data-testid=task]", has_text=title).count() == 1
