"""The dashboard's grant with edited arguments, over real HTTP on 127.0.0.1: the approver's
edit (a JSON body field, or the inbox's edit form) is what the waiting call runs, once, without
asking again; it is checked where it is granted (schema, then the policy on the edit)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from dashboard.support import IDENTITIES, TOKENS, binding, http_sign_in
from support.scripted import wait_until
from toolcards.core.spec import annotate
from toolcards.governance import (
    ApprovalBroker,
    AuditLog,
    CapabilityRegistry,
    Executor,
    Identity,
    Policy,
    SqliteApprovalStore,
)
from toolcards.governance.executor.pipeline import ExecutionResult
from toolcards.governance.redaction.redactor import args_digest
from toolcards.surfaces.dashboard import BackgroundServer, Dashboard
from toolcards.surfaces.http.tokens import TokenTable

pytestmark = pytest.mark.timeout(60)
AGENT = IDENTITIES["agent"]
CALLED = {"amount": 5000, "to": "acme"}
POLICY = {
    "default_effect": "allow",
    "rules": [
        {
            "description": "Nothing goes to mallory, approved or not",
            "targets": ["transfer_money"],
            "effect": "deny",
            "conditions": {"arguments": {"to": ["mallory"]}},
        }
    ],
}


@dataclass
class Desk:
    """An executor whose approval-required calls wait for the dashboard's inbox."""

    executor: Executor
    audit: AuditLog
    server: BackgroundServer
    runs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def broker(self) -> ApprovalBroker:
        return self.executor.approvals

    def call_later(self, args: dict[str, Any]) -> dict[str, ExecutionResult]:
        """The agent's call on a thread, waiting for a decision; its result lands in the box."""
        box: dict[str, ExecutionResult] = {}
        waiter = self.broker.waiter(30)

        def run() -> None:
            call = self.executor.call("transfer_money", args, AGENT, approver=waiter)
            box["result"] = asyncio.run(call)

        threading.Thread(target=run, daemon=True).start()
        wait_until(lambda: bool(self.broker.pending()))
        return box


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    root: Path = tmp_path_factory.mktemp("edits")
    runs: list[dict[str, Any]] = []

    def transfer_money(amount: float, to: str) -> str:
        """Send money (a human approves each call)."""
        runs.append({"amount": amount, "to": to})
        return f"sent {amount:g} to {to}"

    annotate(transfer_money, requires_approval=True)
    audit = AuditLog(root / "audit.db")
    broker = ApprovalBroker(store=SqliteApprovalStore(root / "approvals.db"), audit=audit)
    registry = CapabilityRegistry.from_tools([transfer_money])
    executor = Executor(registry, Policy.from_dict(POLICY), approvals=broker, audit=audit)
    tokens = TokenTable.from_tokens((TOKENS[k], IDENTITIES[k]) for k in TOKENS)
    dashboard = Dashboard(audit=audit, approvals=broker, tokens=tokens)
    server = BackgroundServer(dashboard.app()).start()
    yield Desk(executor, audit, server, runs)
    server.stop()
    audit.close()


@pytest.fixture(scope="module")
def approver(desk: Desk) -> Iterator[httpx.Client]:
    client = http_sign_in(desk.server.url, "approver")
    yield client
    client.close()


def grant_json(client: httpx.Client, request: Any, edit: Any) -> httpx.Response:
    body = {"csrf": client.csrf, **binding(request), "args": edit}  # type: ignore[attr-defined]
    return client.post(
        f"/approvals/{request.approval_id}/grant", json=body, headers={"Accept": "application/json"}
    )


def result_of(box: dict[str, ExecutionResult]) -> ExecutionResult:
    wait_until(lambda: "result" in box)
    return box["result"]


def test_the_edited_arguments_run_once_and_not_the_call(desk: Desk, approver: httpx.Client) -> None:
    box = desk.call_later(CALLED)
    (request,) = desk.broker.pending()
    edit = {"amount": 50, "to": "acme"}
    response = grant_json(approver, request, edit)
    assert response.status_code == 200, response.text
    assert response.json()["runs"] == edit
    assert response.json()["approved_args_digest"] == args_digest(edit)
    result = result_of(box)
    assert result.ok and result.value == "sent 50 to acme"  # no second approval asked
    assert desk.runs[-1:] == [{"amount": 50.0, "to": "acme"}]
    rows = [e for e in desk.audit.query(limit=1000) if e.call_id == request.call_id]
    ran = [e for e in rows if e.outcome == "ok"]
    assert [(e.args_digest, e.approved_args_digest) for e in ran] == [
        (args_digest(CALLED), args_digest(edit))
    ]


def test_an_edit_the_policy_denies_is_refused_and_still_waits(
    desk: Desk, approver: httpx.Client
) -> None:
    before = len(desk.runs)
    box = desk.call_later(CALLED)
    (request,) = desk.broker.pending()
    response = grant_json(approver, request, {"amount": 50, "to": "mallory"})
    assert response.status_code == 422
    assert "edited arguments is not permitted for agent.bot" in response.json()["message"]
    assert [r.approval_id for r in desk.broker.pending()] == [request.approval_id]
    desk.broker.deny(request, approver=IDENTITIES["approver"])
    assert not result_of(box).ok and len(desk.runs) == before


def test_an_edit_failing_validation_is_refused_in_one_line(
    desk: Desk, approver: httpx.Client
) -> None:
    box = desk.call_later(CALLED)
    (request,) = desk.broker.pending()
    response = grant_json(approver, request, {"amount": "lots"})
    message = response.json()["message"]
    assert response.status_code == 422 and "\n" not in message
    assert "invalid arguments for transfer_money" in message and "lots" not in message
    desk.broker.deny(request, approver=IDENTITIES["approver"])
    result_of(box)


def test_a_principal_cannot_approve_its_own_call_by_editing_it(
    desk: Desk, approver: httpx.Client
) -> None:
    own = desk.broker.request(
        tool_id="transfer_money",
        args=CALLED,
        identity=Identity("ann", "user", ["approver"]),
        reason="needs a human",
    )
    try:
        response = grant_json(approver, own, {"amount": 1, "to": "acme"})
        assert response.status_code == 403 and "own call" in response.json()["message"]
        assert desk.broker.edit_of(own) is None
    finally:
        desk.broker.withdraw(own)


def test_the_inbox_offers_the_exact_arguments_to_edit_and_shows_what_will_run(
    desk: Desk, approver: httpx.Client
) -> None:
    box = desk.call_later(CALLED)
    (request,) = desk.broker.pending()
    page = approver.get("/panel/approvals").text
    shown = re.search(r'data-testid="edit-args">([^<]*)</textarea>', page)
    assert (
        shown is not None and shown.group(1).replace("&#34;", '"') == '{"amount":5000,"to":"acme"}'
    )
    form = {"csrf": approver.csrf, **binding(request), "args": '{"to": "acme", "amount": 60}'}  # type: ignore[attr-defined]
    answer = approver.post(f"/approvals/{request.approval_id}/grant", data=form)
    assert answer.status_code == 200
    runs = re.search(r'data-testid="edited-runs">([^<]*)</pre>', answer.text)
    assert runs is not None and runs.group(1).replace("&#34;", '"') == '{"amount":60,"to":"acme"}'
    assert result_of(box).value == "sent 60 to acme"


@pytest.mark.parametrize("body", [b"[1, 2]", b"[" * 5_000], ids=["array", "too-deep"])
def test_a_body_that_is_not_one_json_object_is_refused(
    desk: Desk, approver: httpx.Client, body: bytes
) -> None:
    response = approver.post(
        "/approvals/nothing/grant",
        content=body,
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-CSRF-Token": approver.csrf,  # type: ignore[attr-defined]
        },
    )
    assert response.status_code == 422 and "one JSON object" in response.json()["message"]


def _signed_in_inbox(context: Any, desk: Desk) -> Any:
    """A page of ``context`` on the dashboard, signed in as the approver."""
    page = context.new_page()
    page.goto(desk.server.url + "/login")
    page.fill("#token", TOKENS["approver"])
    page.click("[data-testid=sign-in]")
    page.wait_for_url(desk.server.url + "/")
    return page


def test_an_approver_edits_the_arguments_in_the_inbox_and_sees_what_will_run(
    desk: Desk, browser: Any
) -> None:
    box = desk.call_later(CALLED)
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    try:
        page = _signed_in_inbox(context, desk)
        page.click("[data-testid=approval-edit] summary")
        assert page.input_value("[data-testid=edit-args]") == '{"amount":5000,"to":"acme"}'
        page.fill("[data-testid=edit-args]", '{"amount": 70, "to": "acme"}')
        page.click("[data-testid=approve-edited]")
        shown = page.text_content("[data-testid=edited-runs]")
    finally:
        context.close()
    assert shown == '{"amount":70,"to":"acme"}'
    assert result_of(box).value == "sent 70 to acme"
    assert desk.runs[-1] == {"amount": 70.0, "to": "acme"}


def test_an_edit_in_progress_survives_another_request_arriving_in_the_inbox(
    desk: Desk, browser: Any
) -> None:
    box = desk.call_later(CALLED)
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    try:
        page = _signed_in_inbox(context, desk)
        page.click("[data-testid=approval-edit] summary")
        page.fill("[data-testid=edit-args]", '{"amount": 70, "to": "acme"}')
        first = desk.broker.pending()[0]
        later = desk.call_later({"amount": 1, "to": "later"})  # the inbox hears of it live
        wait_until(lambda: len(desk.broker.pending()) == 2)
        wait_until(lambda: page.text_content("#approval-count") == "2")  # the event came
        kept = page.input_value("[data-testid=edit-args]")  # not replaced under the approver
        page.click("[data-testid=approve-edited]")
        shown = page.text_content("[data-testid=edited-runs]")
    finally:
        context.close()
    assert kept == '{"amount": 70, "to": "acme"}'
    assert shown == '{"amount":70,"to":"acme"}'
    assert result_of(box).value == "sent 70 to acme"
    other = [r for r in desk.broker.pending() if r.approval_id != first.approval_id]
    desk.broker.deny(other[0], approver=IDENTITIES["approver"])
    assert result_of(later).outcome is not None


def _in_view(element: Any, spots: list[dict[str, float]]) -> bool:
    """Scroll ``element`` into view and note where it is; False while it is being replaced."""
    from playwright.sync_api import Error

    try:
        element.scroll_into_view_if_needed(timeout=2000)
        spot = element.bounding_box(timeout=2000)
    except Error:
        return False
    if spot is not None:
        spots.append(spot)
    return spot is not None


def test_a_click_pressed_while_the_inbox_refreshes_still_follows_its_link(
    desk: Desk, browser: Any
) -> None:
    """A refresh between the press and the release of a click replaced the panel: the release
    landed on the new panel's link, no click happened, and the link did not answer."""
    box = desk.call_later(CALLED)
    first = desk.broker.pending()[0]
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    try:
        page = _signed_in_inbox(context, desk)
        card = page.locator(f"[data-approval-id='{first.approval_id}']")
        link = card.locator("[data-testid=approval-open-full]")
        spots: list[dict[str, float]] = []
        wait_until(lambda: _in_view(link, spots))  # the panel may be mid-refresh (detached)
        spot = spots[-1]
        page.mouse.move(spot["x"] + 3, spot["y"] + spot["height"] / 2)
        page.mouse.down()
        later = desk.call_later({"amount": 1, "to": "later"})
        wait_until(lambda: page.text_content("#approval-count") == "2")  # the event came
        deadline = time.monotonic() + 2  # while pressed, the inbox keeps its one card
        while time.monotonic() < deadline:
            assert page.locator("[data-testid=approval]").count() == 1
        with page.expect_navigation():
            page.mouse.up()
        opened = page.url
    finally:
        context.close()
    assert opened == f"{desk.server.url}/approvals/{first.approval_id}"
    for request in desk.broker.pending():
        desk.broker.deny(request, approver=IDENTITIES["approver"])
    assert result_of(box).outcome is not None and result_of(later).outcome is not None


SPILLING = """(selector) => {
  const box = document.querySelector(selector);
  const edge = box.getBoundingClientRect().right;
  const spills = (el) => el.getBoundingClientRect().right > edge + 0.5 ||
    (getComputedStyle(el).overflowX === "visible" && el.scrollWidth > el.clientWidth + 1);
  return Array.from(box.querySelectorAll("*"))
    .filter((el) => el.getClientRects().length && spills(el))
    .map((el) => el.tagName.toLowerCase() + "[" + (el.dataset.testid || "") + "]");
}"""
"""The elements inside ``selector`` that reach past its right edge or spill their text."""


def test_the_edit_box_and_the_approved_digest_stay_inside_their_cards(
    desk: Desk, browser: Any
) -> None:
    """Long arguments, the edit box (stretched by its resize handle) and the 64-digit digest
    stay inside their card (before: the granted page's digest line, digest and arguments ran
    past its right edge, and the edit box was 20 characters wide and could be dragged out)."""
    long_name = "acme-" + "x" * 300
    box = desk.call_later({"amount": 5, "to": long_name})
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    try:
        page = _signed_in_inbox(context, desk)
        (request,) = desk.broker.pending()
        card = f"[data-approval-id='{request.approval_id}']"
        edit = f"{card} [data-testid=edit-args]"
        page.click(f"{card} [data-testid=approval-edit] summary")
        page.eval_on_selector(edit, "box => { box.style.width = '3000px'; }")  # as if dragged
        in_the_inbox = page.evaluate(SPILLING, card)
        edit_width = page.eval_on_selector(edit, "box => box.getBoundingClientRect().width")
        card_width = page.eval_on_selector(card, "box => box.clientWidth")
        page.fill(edit, f'{{"amount": 6, "to": "{long_name}"}}')
        page.click(f"{card} [data-testid=approve-edited]")
        page.wait_for_selector("[data-testid=edited-runs]")
        on_the_granted_page = page.evaluate(SPILLING, ".card")
    finally:
        context.close()
    assert in_the_inbox == [] and on_the_granted_page == []
    assert edit_width > card_width / 2  # room to read the arguments being edited
    assert result_of(box).value == f"sent 6 to {long_name}"
