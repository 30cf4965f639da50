"""The dashboard's HTTP contract, checked with a plain HTTP client against a real server:
headers, sign-in, CSRF, Host and Origin checks, approval decisions and the event stream."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.support import (
    IDENTITIES,
    TOKENS,
    World,
    binding,
    form_token,
    http_sign_in,
)
from surfaces.raw_http import MiB, connect, head, send_in_background, status, until_closed
from toolcards.core.identity import Identity
from toolcards.governance.approvals.broker import ApprovalBroker
from toolcards.runtime import Team
from toolcards.surfaces.dashboard import BackgroundServer, Dashboard
from toolcards.surfaces.http.tokens import TokenTable

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def approver(world: World) -> Iterator[httpx.Client]:
    client = http_sign_in(world.url, "approver")
    yield client
    client.close()


@pytest.fixture
def pending(world: World) -> Iterator[Any]:
    """A request waiting in the inbox (recorded by an agent's call), withdrawn afterwards."""
    request = world.broker.request(
        tool_id="deploy",
        args={"env": "prod"},
        identity=IDENTITIES["agent"],
        reason="deploys need a human",
    )
    yield request
    world.broker.withdraw(request)


def test_every_page_forbids_inline_script_and_framing(world: World) -> None:
    response = httpx.get(world.url + "/login")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"


def test_the_session_cookie_is_httponly_and_samesite_strict(world: World) -> None:
    with httpx.Client(base_url=world.url) as client:
        token = form_token(client.get("/login").text)
        response = client.post("/login", data={"token": TOKENS["viewer"], "csrf": token})
    cookie = response.headers["set-cookie"].lower()
    assert "toolcards_session=" in cookie
    assert "httponly" in cookie and "samesite=strict" in cookie


def test_signing_in_without_the_forms_token_is_refused(world: World) -> None:
    with httpx.Client(base_url=world.url) as client:
        client.get("/login")
        response = client.post("/login", data={"token": TOKENS["approver"]})
    assert response.status_code == 403
    assert "toolcards_session" not in response.headers.get("set-cookie", "")


def test_pages_panels_and_events_need_a_session(world: World) -> None:
    assert httpx.get(world.url + "/").headers["location"] == world.dashboard.base_path + "/login"
    assert httpx.get(world.url + "/panel/plan").status_code == 401
    assert httpx.get(world.url + "/events").status_code == 401


def test_the_page_and_its_cookies_live_under_a_secret_path_no_other_path_reveals(
    world: World,
) -> None:
    """Another server of this machine (an agent's, on another port) gets the browser's cookies
    of Path=/ (browsers keep cookies apart by no port; for SameSite, 127.0.0.1 on any port is
    one site): before, the session cookie had Path=/, the agent replayed it and granted its
    own call. Now both cookies are scoped to a random path, and outside it every request, a
    signed-in one too, gets a plain 404 that neither redirects to the path nor names it."""
    from http.cookies import SimpleCookie

    base = world.dashboard.base_path
    assert world.url.endswith(base) and len(base) >= 22  # "/" and 128 random bits
    with httpx.Client(base_url=world.url) as client:
        form = client.get("/login")
        data = {"token": TOKENS["viewer"], "csrf": form_token(form.text)}
        signed_in = client.post("/login", data=data)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == base + "/"
    assert SimpleCookie(form.headers["set-cookie"])["toolcards_login"]["path"] == base + "/login"
    session = SimpleCookie(signed_in.headers["set-cookie"])["toolcards_session"]
    assert session["path"] == base
    origin = world.url.removesuffix(base)
    cookie = {"cookie": f"toolcards_session={session.value}"}
    for path in ("/", "/login", "/events", "/panel/approvals", "/static/dashboard.css",
                 base[:-1] + "/", base + "x/", "/x" + base + "/"):  # fmt: skip
        outside = httpx.get(origin + path, headers=cookie)
        assert (outside.status_code, outside.text) == (404, "Not Found\n"), path
        assert "location" not in outside.headers and "set-cookie" not in outside.headers
    posted = httpx.post(origin + "/approvals/x/grant", headers=cookie, data={"csrf": "x"})
    assert posted.status_code == 404
    assert httpx.get(world.url + "/", headers=cookie).status_code == 200  # inside: the page


@pytest.mark.parametrize(
    ("path", "answer"),
    [("/nope", 404), ("{base}x/login", 404), ("{base}/approvals/x/grant", 401),
     ("{base}/logout", 401), ("{base}/login", 413)],
)  # fmt: skip
def test_a_strangers_body_is_refused_before_it_is_read(
    world: World, path: str, answer: int
) -> None:
    """A client knowing neither the secret path nor a session made the dashboard read (and
    hold) a body of up to 4 MiB for up to 15 s before its 404 or 401: 4 MiB a connection, 64
    connections an address. Now, with the body never sent, a path outside is 404, a post
    inside without a session 401, and the sign-in form announcing 1 MiB 413 (its cap is 64
    KiB), each at once and closing the connection."""
    port = world.server.port
    target = path.format(base=world.dashboard.base_path)
    lines = ("Content-Type: application/x-www-form-urlencoded", f"Content-Length: {MiB}")
    with connect(port) as sock:
        sock.sendall(head(port, *lines, path=target))  # the body is never sent
        response = until_closed(sock, timeout=30)
    assert status(response) == answer
    assert b"connection: close" in response.lower()


def test_a_chunked_sign_in_body_is_cut_at_the_forms_cap(world: World) -> None:
    port = world.server.port
    lines = ("Content-Type: application/x-www-form-urlencoded", "Transfer-Encoding: chunked")
    chunk = b"4000\r\n" + b"a" * 0x4000 + b"\r\n"  # 16 KiB a chunk, 1 MiB in all, no end
    with connect(port) as sock:
        sock.sendall(head(port, *lines, path=world.dashboard.base_path + "/login"))
        send_in_background(sock, 64, chunk)
        response = until_closed(sock, timeout=30)
    assert status(response) == 413 and b"sign-in form" in response


def test_a_signed_in_decision_is_still_read_and_decided(
    world: World, approver: httpx.Client, pending: Any
) -> None:
    """The gate lets a session's body through to the handler, whose own limit judges it (a
    body over the form's 64 KiB reads as no fields: no CSRF token)."""
    url = f"/approvals/{pending.approval_id}/grant"
    too_long = approver.post(url, data={"pad": "a" * 100_000})
    assert (too_long.status_code, too_long.text) == (403, "missing or wrong CSRF token\n")
    fields = {"csrf": approver.csrf, **binding(pending)}  # type: ignore[attr-defined]
    assert approver.post(url, data=fields).status_code == 303
    assert world.broker.state(pending).value == "granted"


def test_a_request_for_another_host_name_is_refused(world: World) -> None:
    response = httpx.get(world.url + "/login", headers={"Host": "attacker.example:80"})
    assert response.status_code == 400


def test_a_post_from_another_origin_is_refused(
    world: World, approver: httpx.Client, pending: Any
) -> None:
    response = approver.post(
        f"/approvals/{pending.approval_id}/grant",
        data={"csrf": approver.csrf, **binding(pending)},  # type: ignore[attr-defined]
        headers={"Origin": "http://attacker.example"},
    )
    assert response.status_code == 403
    assert world.broker.get(pending) is not None


def test_a_grant_for_other_arguments_than_shown_is_refused_and_audited(
    world: World, approver: httpx.Client, pending: Any
) -> None:
    shown = {**binding(pending), "args_digest": "digest-of-something-else"}
    response = approver.post(
        f"/approvals/{pending.approval_id}/grant",
        data={"csrf": approver.csrf, **shown},  # type: ignore[attr-defined]
    )
    assert response.status_code == 409
    assert world.broker.get(pending) is not None
    [row] = [
        e
        for e in world.audit.query(principal="ann", outcome="approval_rejected", limit=100)
        if e.call_id == pending.call_id
    ]
    assert "differs" in (row.reason or "")


def test_a_principal_cannot_approve_its_own_call(world: World, approver: httpx.Client) -> None:
    own = world.broker.request(
        tool_id="deploy",
        args={"env": "staging"},
        identity=Identity("ann", "user", ["approver"]),
        reason="deploys need a human",
    )
    try:
        response = approver.post(
            f"/approvals/{own.approval_id}/grant",
            data={"csrf": approver.csrf, **binding(own)},  # type: ignore[attr-defined]
            headers={"Accept": "application/json"},
        )
        assert response.status_code == 403
        assert "own call" in response.json()["message"]
    finally:
        world.broker.withdraw(own)


def test_a_granted_request_answers_json_when_asked(
    world: World, approver: httpx.Client, pending: Any
) -> None:
    response = approver.post(
        f"/approvals/{pending.approval_id}/grant",
        data={"csrf": approver.csrf, **binding(pending)},  # type: ignore[attr-defined]
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 200
    assert response.json() == {"ok": True, "message": "granted: deploy for agent.bot"}
    assert world.broker.state(pending).value == "granted"


def test_signing_out_ends_the_session(world: World) -> None:
    client = http_sign_in(world.url, "viewer")
    response = client.post("/logout", data={"csrf": client.csrf})  # type: ignore[attr-defined]
    assert response.status_code == 303
    assert client.get("/").status_code == 303  # back to the sign-in page
    client.close()


def _stream_until(client: httpx.Client, url: str, wanted: str, act: Any) -> list[str]:
    """Open the event stream, run ``act()``, read until a line mentions ``wanted``."""
    lines: list[str] = []
    with client.stream("GET", url, timeout=15) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        acted = False
        for line in response.iter_lines():
            lines.append(line)
            if line.startswith("event: hello") and not acted:
                act()
                acted = True
            if wanted in line:
                return lines
    raise AssertionError(f"{wanted!r} never arrived: {lines[-10:]}")


def test_the_event_stream_replays_missed_events_then_live_ones(
    world: World, approver: httpx.Client
) -> None:
    tools = world.graph_tools()
    tools["update_graph"](create_entities=[{"name": "Missed one", "entity_type": "t"}])
    since = world.team.log.position - 1  # the page was rendered before that event

    def act() -> None:
        tools["update_graph"](create_entities=[{"name": "Live one", "entity_type": "t"}])

    lines = _stream_until(approver, f"/events?since={since}", "Live one", act)
    data = [json.loads(x[5:]) for x in lines if x.startswith("data:") and "entities" in x]
    assert ["Missed one" in d["text"] for d in data] == [True, False]


NOT_A_NUMBER = {"a superscript digit": "\u00b2", "5,000 digits": "5" * 5_000, "19 digits": "9" * 19}


@pytest.mark.parametrize("given", NOT_A_NUMBER.values(), ids=list(NOT_A_NUMBER))
def test_an_event_stream_since_what_is_not_a_position_starts_from_now(
    approver: httpx.Client, given: str
) -> None:
    """``str.isdigit`` takes ``²``, and ``int`` refuses it and more than 4,300 digits."""
    with approver.stream("GET", "/events", params={"since": given}, timeout=15) as response:
        assert response.status_code == 200
        assert next(response.iter_lines()) == "event: hello"


@pytest.mark.parametrize("given", NOT_A_NUMBER.values(), ids=list(NOT_A_NUMBER))
def test_an_audit_page_before_what_is_not_an_entry_id_says_so(
    approver: httpx.Client, given: str
) -> None:
    response = approver.get("/panel/audit", params={"before": given})
    assert response.status_code == 200
    assert "before: expected an entry id" in response.text


def _deploy_waits(world: World, env: str) -> Any:
    """An agent's deploy to ``env``, waiting in the inbox (withdraw it afterwards)."""
    return world.broker.request(
        tool_id="deploy",
        args={"env": env},
        identity=IDENTITIES["agent"],
        reason="deploys need a human",
    )


def test_a_new_pending_approval_is_announced_on_the_stream(
    world: World, approver: httpx.Client
) -> None:
    assert _announced(world, approver, "qa")


def _announced(world: World, approver: httpx.Client, tag: str) -> bool:
    """Whether a request made to wait (tagged ``tag``) once the approver's page listens is
    announced on its stream (the page is on the watcher's list once it said hello)."""
    made: list[Any] = []

    def act() -> None:
        made.append(_deploy_waits(world, tag))

    try:
        lines = _stream_until(approver, "/events", "event: approvals", act)
    finally:
        for request in made:
            world.broker.withdraw(request)
    return any(line.startswith("event: approvals") for line in lines)


def test_an_open_event_stream_ends_with_its_session(world: World) -> None:
    """Signed out while its stream is open: the next change ends the stream instead of
    reaching the page (the session was checked only when the stream opened)."""
    viewer = http_sign_in(world.url, "viewer")
    made: list[Any] = []
    lines: list[str] = []
    try:
        with viewer.stream("GET", "/events", timeout=15) as response:
            for line in response.iter_lines():
                lines.append(line)
                if line.startswith("event: hello"):
                    out = viewer.post("/logout", data={"csrf": viewer.csrf})  # type: ignore[attr-defined]
                    assert out.status_code == 303
                    made.append(_deploy_waits(world, "after-logout"))
    finally:
        viewer.close()
        for request in made:
            world.broker.withdraw(request)
    assert made and not any(line.startswith("event: approvals") for line in lines), lines


def test_the_audit_panel_pages_back_fifty_rows_at_a_time(
    world: World, approver: httpx.Client
) -> None:
    from toolcards.governance.audit.log import AuditRecord

    for i in range(120):
        world.audit.record(
            AuditRecord(
                ts=time.time(), principal="pager", principal_type="agent", roles=(),
                surface="test", tool="t", call_id=f"row-{i}", args={"i": i},
                decision="allow", outcome="ok",
            )
        )  # fmt: skip
    seen: list[int] = []
    url: str | None = "/panel/audit?principal=pager"
    while url is not None:
        html = approver.get(url).text
        rows = re.findall(r'data-testid="audit-row" data-id="(\d+)"', html)
        assert 0 < len(rows) <= 50
        seen.extend(int(r) for r in rows)
        older = re.search(r'href="/[\w-]+/\?([^"#]+)#audit" data-testid="audit-older"', html)
        url = None if older is None else "/panel/audit?" + older.group(1).replace("&amp;", "&")
    assert len(seen) == 120 and seen == sorted(seen, reverse=True)


def test_the_approval_watcher_polls_the_ids_not_the_pending_requests(
    world: World, approver: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An open page's watcher asks four times a second what waits: the pending ids alone
    (before: every pending request whole, each with up to 4 MiB of arguments decoded, and
    an expiry DELETE each time, for as long as any viewer's page stayed open)."""
    read: list[float] = []
    store = world.broker.store
    whole = store.pending

    def pending(now: float) -> Any:
        read.append(now)
        return whole(now)

    monkeypatch.setattr(store, "pending", pending)
    assert _announced(world, approver, "watched")
    assert read == []


def test_a_panel_that_cannot_be_read_leaves_the_page_and_its_inbox_up(
    world: World, approver: httpx.Client, pending: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader that raises (a stored row no reader expected: a plan task that is no task, a
    roster time of 'yesterday') costs its own panel, never the page (before: GET / answered
    500, and the approvers lost the inbox to one planted row)."""
    from dataclasses import replace

    from toolcards.surfaces.dashboard import views

    def unreadable(*_args: Any) -> Any:
        raise ValueError("a stored row no reader expected")

    plan = world.dashboard.panels["plan"]
    monkeypatch.setitem(world.dashboard.panels, "plan", replace(plan, read=unreadable))
    monkeypatch.setattr(views, "team_view", unreadable)
    page = approver.get("/")
    assert page.status_code == 200
    assert page.text.count('data-testid="panel-unreadable"') == 2
    assert f'data-approval-id="{pending.approval_id}"' in page.text
    assert 'data-testid="approve"' in page.text
    one = approver.get("/panel/plan")
    assert one.status_code == 200 and 'data-testid="panel-unreadable"' in one.text
    assert 'data-testid="panel-unreadable"' not in approver.get("/panel/approvals").text


def test_a_panel_that_cannot_be_shown_leaves_the_page_and_its_inbox_up(
    world: World, approver: httpx.Client, pending: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template that raises on a stored value costs its own panel, like a reader that
    raises (before: rendering was unguarded, and GET / answered 500 without the inbox)."""

    def overflow(_ts: object) -> str:
        raise OverflowError("timestamp out of range for platform time_t")

    monkeypatch.setitem(world.dashboard.templates.filters, "clock", overflow)
    page = approver.get("/")
    assert page.status_code == 200
    assert page.text.count('data-testid="panel-unreadable"') == 2  # the audit and the live
    assert f'data-approval-id="{pending.approval_id}"' in page.text
    assert 'data-testid="approve"' in page.text
    one = approver.get("/panel/events")
    assert one.status_code == 200 and 'data-testid="panel-unreadable"' in one.text


def test_an_event_time_no_clock_can_show_leaves_the_page_and_its_inbox_up(
    tmp_path: Path,
) -> None:
    """One planted event row with the time 1e300: time.localtime overflowed in the ``clock``
    filter, and GET / and /panel/events answered 500, the approvals inbox gone with them.
    The time shows as "-"."""
    broker = ApprovalBroker()
    request = broker.request(
        tool_id="deploy", args={"env": "prod"}, identity=IDENTITIES["agent"], reason="r"
    )
    tokens = TokenTable.from_tokens((TOKENS[k], IDENTITIES[k]) for k in TOKENS)
    with Team("planted", store=tmp_path / "team.db") as team:
        with sqlite3.connect(tmp_path / "team.db") as db:
            (last,) = db.execute("SELECT COALESCE(MAX(team_pos), 0) FROM events").fetchone()
            db.execute(
                "INSERT INTO events (team_id, tool_id, seq, payload, timestamp, team_pos, "
                "display_type) VALUES ('planted', '#planted', 1, '{}', 1e300, ?, 'tool')",
                (last + 1_000,),  # clear of the positions the running team takes
            )
        dashboard = Dashboard(team=team, approvals=broker, tokens=tokens)
        with BackgroundServer(dashboard.app()) as server:
            client = http_sign_in(server.url, "approver")
            page = client.get("/")
            events = client.get("/panel/events")
            client.close()
    assert page.status_code == 200 and 'data-testid="panel-unreadable"' not in page.text
    assert f'data-approval-id="{request.approval_id}"' in page.text
    assert events.status_code == 200 and "#planted" in events.text
    assert '<span class="time">-</span> <code class="tool">#planted</code>' in events.text
