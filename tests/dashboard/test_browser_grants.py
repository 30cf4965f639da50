"""The dashboard's grant buttons and list (headless chromium): an approver approves a team
member's waiting call and remembers it (one argument widened to any value); the page shows the
grant exactly as it will match; the member's later covered call runs without waiting; the
approvals panel lists the grant with a Revoke button, and after a revoke the member's next
call waits in the inbox again; the Budgets panel lists what the team's graph changes spent."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from dashboard.support import IDENTITIES, World, fresh, reply_of, wait_pending

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def approver_page(sign_in: Callable[..., Any]) -> Any:
    return sign_in("approver")


def test_approve_and_remember_then_revoke_from_the_page(approver_page: Any, world: World) -> None:
    tag = f"Omega {uuid.uuid4().hex[:8]}"
    first = world.send_later(world.curator, f"{tag} first")
    request = wait_pending(world, tag)
    page = fresh(approver_page, world)
    card = page.locator(f'[data-testid=approval][data-approval-id="{request.approval_id}"]')
    card.locator("[data-testid=approval-remember] summary").click()
    field = card.locator('[data-testid=remember-field][data-name="create_entities"]')
    field.locator("[data-testid=remember-match]").select_option("any")
    card.locator("[data-testid=remember-for]").select_option("1h")
    card.locator("[data-testid=approve-remember]").click()
    page.locator("[data-testid=remembered]").wait_for(timeout=10_000)
    shown = page.locator("[data-testid=remembered]").inner_text()
    assert shown.startswith(f"agent.{world.curator} may call update_graph with create_entities any")
    assert page.locator("[data-testid=remembered-pattern]").inner_text() == (
        '{"create_entities":"any"}'
    )
    assert "result:" in reply_of(first)

    covered = world.send_later(world.curator, f"{tag} second, never seen by anyone")
    assert "result:" in reply_of(covered)  # it ran without waiting for the inbox
    [grant] = world.broker.grants()

    page = fresh(approver_page, world)
    listed = page.locator(f'[data-testid=grant][data-grant-id="{grant.grant_id}"]')
    assert listed.locator("[data-testid=grant-matches]").inner_text() == shown
    listed.locator("[data-testid=revoke-grant]").click()
    page.wait_for_url(world.url + "/#approvals")
    assert page.locator(f'[data-testid=grant][data-grant-id="{grant.grant_id}"]').count() == 0
    assert world.broker.grants() == []

    after = world.send_later(world.curator, f"{tag} third")
    waiting = wait_pending(world, f"{tag} third")  # asked again
    world.broker.deny(waiting, approver=IDENTITIES["approver"])
    assert "denied" in reply_of(after)

    page = fresh(approver_page, world)  # the graph changes that ran count against the budget
    row = page.locator('[data-testid=budget][data-budget="graph changes"]')
    spent = float(row.locator("[data-testid=budget-spent]").inner_text().split()[0])
    left = float(row.locator("[data-testid=budget-left]").inner_text().split()[0])
    assert spent >= 2 and spent + left == 10000  # the denied third is never charged
