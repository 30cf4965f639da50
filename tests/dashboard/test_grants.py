"""Remembered approvals in the dashboard, through an ASGI client: an approver approves a
waiting call and remembers it (for how long, in which session, each argument exact, any or
matching a glob); the answer shows the grant exactly as it will match; later covered calls run
without asking; the inbox lists live grants to approvers only; a revoke stops the grant for the
next call; viewers and callers cannot revoke or remember their own calls."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.support import IDENTITIES, TOKENS, binding, form_token
from support.scripted import wait_until
from toolcards.core.spec import annotate
from toolcards.governance import (
    ApprovalBroker,
    AuditLog,
    CapabilityRegistry,
    Executor,
    Identity,
    Outcome,
    Policy,
    SqliteApprovalStore,
)
from toolcards.governance.executor.pipeline import ExecutionResult
from toolcards.surfaces.dashboard import Dashboard
from toolcards.surfaces.http.tokens import TokenTable

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
AGENT = IDENTITIES["agent"]
SELF = Identity(AGENT.id, "agent", ["approver"])  # the caller, holding the approver role
PEOPLE = {**TOKENS, "self": "tok-self-agent"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Desk:
    executor: Executor
    audit: AuditLog
    dashboard: Dashboard
    runs: list[str]

    @property
    def broker(self) -> ApprovalBroker:
        return self.executor.approvals

    async def call(self, path: str, who: Identity = AGENT) -> ExecutionResult:
        """A call that must not wait (none waits: a needs_approval result)."""
        return await self.executor.call("publish", {"path": path, "draft": False}, who)

    def call_later(self, path: str) -> tuple[Any, dict[str, ExecutionResult]]:
        """A call waiting for the inbox on a thread: its request, and the box of its result."""
        box: dict[str, ExecutionResult] = {}
        waiter = self.broker.waiter(30)
        before = {r.approval_id for r in self.broker.pending()}

        def run() -> None:
            call = self.executor.call("publish", {"path": path, "draft": False}, AGENT,
                                      approver=waiter)  # fmt: skip
            box["result"] = asyncio.run(call)

        threading.Thread(target=run, daemon=True).start()
        wait_until(lambda: any(r.approval_id not in before for r in self.broker.pending()))
        [request] = [r for r in self.broker.pending() if r.approval_id not in before]
        return request, box


@pytest.fixture
def desk(tmp_path: Path) -> Iterator[Desk]:
    runs: list[str] = []

    def publish(path: str, draft: bool) -> str:
        """Publish a page (a human approves each call)."""
        runs.append(path)
        return f"published {path}"

    annotate(publish, requires_approval=True)
    audit = AuditLog(tmp_path / "audit.db", durability="sync")
    broker = ApprovalBroker(store=SqliteApprovalStore(tmp_path / "approvals.db"), audit=audit)
    registry = CapabilityRegistry.from_tools([publish])
    executor = Executor(registry, Policy.allow_all(), approvals=broker, audit=audit)
    tokens = TokenTable.from_tokens(
        [*((TOKENS[k], IDENTITIES[k]) for k in TOKENS), (PEOPLE["self"], SELF)]
    )
    yield Desk(executor, audit, Dashboard(audit=audit, approvals=broker, tokens=tokens), runs)
    audit.close()


async def signed_in(desk: Desk, who: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=desk.dashboard.app())
    base = "http://127.0.0.1" + desk.dashboard.base_path
    client = httpx.AsyncClient(transport=transport, base_url=base)
    login = await client.get("/login")
    token = {"token": PEOPLE[who], "csrf": form_token(login.text)}
    answer = await client.post("/login", data=token)
    assert answer.status_code == 303, answer.text
    client.csrf = form_token((await client.get("/")).text)  # type: ignore[attr-defined]
    return client


@pytest.fixture
async def approver(desk: Desk) -> AsyncIterator[httpx.AsyncClient]:
    client = await signed_in(desk, "approver")
    yield client
    await client.aclose()


async def remember(client: httpx.AsyncClient, request: Any, **fields: str) -> httpx.Response:
    form = {"csrf": client.csrf, **binding(request), "remember": "1h", **fields}  # type: ignore[attr-defined]
    return await client.post(f"/approvals/{request.approval_id}/grant", data=form)


async def test_approve_and_remember_shows_the_grant_and_covers_later_calls(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    request, box = desk.call_later("blog/a.html")
    page = await remember(approver, request, **{"match.path": "glob", "glob.path": "blog/*"})
    assert page.status_code == 200, page.text
    assert f"{AGENT.id} may call publish with draft = false, path matching &#34;blog/*&#34;" in (
        page.text
    )
    wait_until(lambda: "result" in box)
    assert box["result"].ok  # the waiting call ran, once
    [grant] = desk.broker.grants()
    assert grant.pattern == {"path": {"glob": "blog/*"}, "draft": {"eq": False}}
    later = await desk.call("blog/b.html")
    assert later.ok and later.grant_id == grant.grant_id
    assert (await desk.call("shop/b.html")).outcome is Outcome.NEEDS_APPROVAL
    assert desk.runs == ["blog/a.html", "blog/b.html"]


async def test_the_inbox_lists_live_grants_to_approvers_only(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    request, _ = desk.call_later("blog/a.html")
    await remember(approver, request)
    [grant] = desk.broker.grants()
    panel = (await approver.get("/panel/approvals")).text
    assert f'data-grant-id="{grant.grant_id}"' in panel and 'data-testid="revoke-grant"' in panel
    viewer = await signed_in(desk, "viewer")
    shown = (await viewer.get("/panel/approvals")).text
    assert grant.grant_id not in shown and "blog/a.html" not in shown
    assert 'data-testid="grant-count">1<' in shown
    await viewer.aclose()


async def test_a_revoke_stops_the_grant_at_the_next_call(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    request, _ = desk.call_later("blog/a.html")
    await remember(approver, request, **{"match.path": "any"})
    [grant] = desk.broker.grants()
    assert (await desk.call("anything")).ok
    form = {"csrf": approver.csrf}  # type: ignore[attr-defined]
    answer = await approver.post(f"/grants/{grant.grant_id}/revoke", data=form)
    assert answer.status_code == 303
    assert (await desk.call("anything")).outcome is Outcome.NEEDS_APPROVAL
    again = await approver.post(
        f"/grants/{grant.grant_id}/revoke", data=form, headers={"Accept": "application/json"}
    )
    assert again.status_code == 409 and "already expired or was revoked" in again.json()["message"]
    assert [e.grant_id for e in desk.audit.query(outcome="grant_revoked")] == [grant.grant_id]


async def test_a_viewer_cannot_revoke_and_a_form_without_csrf_is_refused(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    request, _ = desk.call_later("blog/a.html")
    await remember(approver, request)
    [grant] = desk.broker.grants()
    viewer = await signed_in(desk, "viewer")
    refused = await viewer.post(
        f"/grants/{grant.grant_id}/revoke",
        data={"csrf": viewer.csrf},  # type: ignore[attr-defined]
        headers={"Accept": "application/json"},
    )
    assert refused.status_code == 403
    forged = await approver.post(f"/grants/{grant.grant_id}/revoke", data={"csrf": "x"})
    assert forged.status_code == 403
    assert [g.grant_id for g in desk.broker.grants()] == [grant.grant_id]
    await viewer.aclose()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"remember": "forever"}, "a duration looks like"),
        ({"match.path": "regex"}, "a match is exact, any or glob"),
        ({"match.path": "glob", "glob.path": "shop/*"}, "does not cover the request"),
    ],
)
async def test_a_remember_that_cannot_be_made_is_refused_and_the_call_still_waits(
    desk: Desk, approver: httpx.AsyncClient, fields: dict[str, str], message: str
) -> None:
    request, box = desk.call_later("blog/a.html")
    answer = await remember(approver, request, **fields)
    assert answer.status_code in (409, 422)
    assert message in answer.text
    assert desk.broker.grants() == [] and "result" not in box
    assert [r.approval_id for r in desk.broker.pending()] == [request.approval_id]
    desk.broker.deny(request, approver=IDENTITIES["approver"])


async def test_a_caller_holding_the_role_cannot_remember_its_own_call(desk: Desk) -> None:
    request, _ = desk.call_later("blog/a.html")
    itself = await signed_in(desk, "self")
    answer = await remember(itself, request)
    assert answer.status_code == 403 and "a caller cannot approve its own call" in answer.text
    assert desk.broker.grants() == []
    await itself.aclose()
    desk.broker.deny(request, approver=IDENTITIES["approver"])


RLO = "\u202e"


def shown_pattern(html: str, testid: str) -> Any:
    """The pattern a page shows (its escapes marked), decoded as JSON."""
    found = re.search(rf'data-testid="{testid}">(.*?)</code>', html, re.S)
    assert found is not None
    return json.loads(unescape(re.sub(r"</?mark[^>]*>", "", found.group(1))))


async def test_a_grant_is_shown_escaped_and_whole_where_its_description_cuts_a_value(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    """A right-to-left override in a remembered value is written as an escape on the
    remembered page and the grants panel; the pattern beside a cut description is whole."""
    path = f"blog/{RLO}LMTH.xedni/" + "x" * 90
    request, _ = desk.call_later(path)
    page = (await remember(approver, request)).text
    panel = (await approver.get("/panel/approvals")).text
    whole = {"draft": {"eq": False}, "path": {"eq": path}}
    for html, testid in ((page, "remembered-pattern"), (panel, "grant-pattern")):
        assert RLO not in html and "U+202E RIGHT-TO-LEFT OVERRIDE" in html
        assert "x..., until" in html  # the description cuts the value
        assert shown_pattern(html, testid) == whole


async def test_the_remember_form_offers_no_glob_of_a_value_with_hidden_characters(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    """A form's field would hold the override raw (reading as another value) or lose a line
    break: such a value is remembered exactly or as any value."""
    request, _ = desk.call_later(f"blog/{RLO}lmth.html")
    inbox = (await approver.get("/")).text
    assert 'name="glob.path"' not in inbox and RLO not in inbox
    desk.broker.deny(request, approver=IDENTITIES["approver"])
    request, _ = desk.call_later("blog/a.html")
    assert 'name="glob.path" value="blog/a.html"' in (await approver.get("/")).text
    desk.broker.deny(request, approver=IDENTITIES["approver"])


async def test_the_remember_form_shows_argument_names_escaped_and_widens_no_hidden_one(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    """A tool taking undeclared arguments: `to` and `to\u200b` read as one name on the
    remember form, which offered "any value" for each: the approver could widen the hidden
    one. Names are marked escapes now, and a hidden one is remembered exactly."""
    zwsp = "\u200b"
    request = desk.broker.request(
        tool_id="publish", args={"path": "a.html", "draft": False, f"to{zwsp}": "mallory"},
        identity=AGENT, reason="the tool requires approval",
    )  # fmt: skip
    inbox = (await approver.get("/")).text
    desk.broker.deny(request, approver=IDENTITIES["approver"])
    rows = re.findall(r'<tr data-testid="remember-field".*?</tr>', inbox, re.S)
    hidden = [row for row in rows if "U+200B" in row]
    cell = '<td><code class="logical">'
    shown = hidden[0].split(cell, 1)[1].split("</code>", 1)[0] if hidden else ""
    assert len(hidden) == 1 and zwsp not in shown and "\\u200b" in shown
    assert 'value="any"' not in hidden[0] and 'name="glob.' not in hidden[0]
    assert any('value="any"' in row for row in rows if "U+200B" not in row)


async def test_the_remember_form_offers_a_glob_matching_the_value_alone(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    """A value holding `*`, `?` or `[` was offered as its own glob: "matching" as shown
    remembered every path like it (`blog/*.html` covered `blog/a.html`)."""
    import fnmatch

    request, _ = desk.call_later("blog/*?[x].html")
    offered = 'name="glob.path" value="blog/[*][?][[]x].html"'
    assert offered in (await approver.get("/")).text
    desk.broker.deny(request, approver=IDENTITIES["approver"])
    glob = "blog/[*][?][[]x].html"
    assert fnmatch.fnmatchcase("blog/*?[x].html", glob)
    assert not fnmatch.fnmatchcase("blog/ab[x].html", glob)


async def test_the_caller_and_the_reason_are_shown_escaped_in_the_inbox(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    """An OAuth caller's id is any sub: `oauth:` + RLO + `nna` would read as `oauth:ann`."""
    caller = Identity(f"oauth:{RLO}nna", "user")
    desk.broker.request(
        tool_id="publish", args={"path": "a"}, identity=caller, reason=f"why{RLO}ton"
    )
    inbox = (await approver.get("/")).text
    mark = '<mark class="esc" data-testid="escaped-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">'
    assert f'class="principal logical">oauth:{mark}\\u202e</mark>nna<' in inbox
    assert f'class="reason logical">why{mark}\\u202e</mark>ton<' in inbox
    binding = f'name="principal" value="oauth:{RLO}nna"'  # hidden: the decision's binding
    assert binding in inbox and RLO not in inbox.replace(binding, "")


async def test_the_call_id_and_the_surface_are_shown_escaped_on_the_card(
    desk: Desk, approver: httpx.AsyncClient
) -> None:
    """Under pydantic-ai the call id is the model's `tool_call_id`: an RLO in it reversed the
    "the decision binds the arguments digest sha256:..." text written after it."""
    request = desk.broker.request(
        tool_id="publish", args={"path": "a"}, identity=AGENT, reason="r",
        call_id=f"call_{RLO}A1", surface=f"mcp{RLO}x",
    )  # fmt: skip
    mark = '<mark class="esc" data-testid="escaped-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">'
    binding = f'name="call_id" value="call_{RLO}A1"'  # hidden: the decision's binding
    for path in ("/", f"/approvals/{request.approval_id}"):
        page = (await approver.get(path)).text
        assert f'call <code class="logical">call_{mark}\\u202e</mark>A1</code>' in page
        assert f" · mcp{mark}\\u202e</mark>x</span>" in page
        assert binding in page and RLO not in page.replace(binding, "")


async def test_a_full_inbox_of_large_requests_is_read_no_further_than_it_is_shown(
    desk: Desk, approver: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller may keep 100 requests of up to 4 MiB pending: every render of the inbox read,
    decoded and hashed each whole (6 s and 2 GiB a render). The inbox reads the oldest
    INBOX_CARDS, each no further than it shows, says how many more wait, and offers no
    approve beside arguments it did not read whole."""
    from toolcards.governance.approvals.view import INLINE_LIMIT
    from toolcards.stores import approvals
    from toolcards.stores.governance import PENDING_PER_PRINCIPAL
    from toolcards.surfaces.dashboard.views import INBOX_CARDS

    for n in range(PENDING_PER_PRINCIPAL):
        args = {"path": f"p{n}.html", "body": "x" * 50_000}
        desk.broker.request(tool_id="publish", args=args, identity=AGENT, reason="r")
    parsed: list[int] = []  # characters of arguments each request read was made of
    record = approvals._record

    def counted(row: tuple[object, ...]) -> Any:
        parsed.append(len(str(row[7])) + len(str(row[15])))
        return record(row)

    monkeypatch.setattr(approvals, "_record", counted)
    more = f"{PENDING_PER_PRINCIPAL - INBOX_CARDS} more requests wait"
    for path in ("/", "/panel/approvals"):
        page = (await approver.get(path)).text
        assert page.count('data-testid="approval"') == INBOX_CARDS and more in page
        assert page.count('data-testid="approval-too-long"') == INBOX_CARDS
        assert 'data-testid="approve"' not in page and 'data-testid="deny"' in page
    assert len(parsed) == 2 * INBOX_CARDS and max(parsed) <= 2 * INLINE_LIMIT


async def test_a_long_run_of_hidden_characters_is_escaped_only_as_far_as_a_page_shows_it(
    desk: Desk, approver: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300,000 zero-width spaces (900 KB) were escaped whole on every approver read of the
    inbox, one object a character, and made a 27 MB page of the request."""
    from toolcards.governance.approvals import view

    escaped: list[int] = []  # each hidden character escaped
    spans = view._hidden_spans

    def counted(text: str) -> Iterator[tuple[int, int, str, int]]:
        for span in spans(text):
            escaped.append(span[0])
            yield span

    monkeypatch.setattr(view, "_hidden_spans", counted)
    request = desk.broker.request(
        tool_id="publish", args={"path": "\u200b" * 300_000}, identity=AGENT, reason="r"
    )
    inbox = (await approver.get("/")).text
    assert 'data-testid="approval-too-long"' in inbox and not escaped
    page = (await approver.get(f"/approvals/{request.approval_id}")).text
    assert len(escaped) <= view.PAGE_LIMIT // 6 + 1 and len(page) < 2 * view.PAGE_LIMIT
    shown = view.arguments_view(request, exact=True, limit=view.PAGE_LIMIT)
    assert page.count('data-testid="escaped-char"') == 1  # one run, one mark
    assert f"{shown.rest} more characters of JSON are not" in page and shown.rest > 0
    assert 'data-testid="approve"' not in page and 'data-testid="deny"' in page
