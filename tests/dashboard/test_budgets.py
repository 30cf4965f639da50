"""The dashboard's Budgets panel, through an ASGI client: each budget's counters of the
current window with what is spent and what is left, read from the store the team's processes
share; a spent counter is marked."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

import httpx
import pytest

from dashboard.support import IDENTITIES, TOKENS, form_token
from toolcards.governance import CapabilityRegistry, Executor, Identity, Policy
from toolcards.stores.open import open_budgets
from toolcards.surfaces.dashboard import Dashboard
from toolcards.surfaces.http.tokens import TokenTable

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
POLICY = {
    "default_effect": "allow",
    "budgets": [
        {"name": "pings", "per": "principal", "calls": 2},
        {"name": "team cost", "per": "team", "period": "day", "cost": 2.5},
    ],
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def ping() -> str:
    """Ping."""
    return "pong"


async def test_the_budgets_panel_shows_what_is_spent_and_left(tmp_path: Path) -> None:
    store, close = open_budgets(tmp_path / "budgets.db", "t1")
    policy = Policy.from_dict(POLICY)
    executor = Executor(CapabilityRegistry.from_tools([ping]), policy, budgets=store)
    for _ in range(3):
        await executor.call("ping", {}, Identity("agent.a", "agent"))
    await executor.call("ping", {}, Identity("agent.b", "agent"))
    tokens = TokenTable.from_tokens((TOKENS[k], IDENTITIES[k]) for k in TOKENS)
    report = functools.partial(executor.budgets.report, policy)
    dashboard = Dashboard(tokens=tokens, budgets=report)
    transport = httpx.ASGITransport(app=dashboard.app())
    base = "http://127.0.0.1" + dashboard.base_path
    async with httpx.AsyncClient(transport=transport, base_url=base) as client:
        login = await client.get("/login")
        token = {"token": TOKENS["viewer"], "csrf": form_token(login.text)}
        assert (await client.post("/login", data=token)).status_code == 303
        panel = (await client.get("/panel/budgets")).text
        page = (await client.get("/")).text
    assert 'href="#budgets"' in page and 'data-panel="budgets"' in page
    rows = panel.split('data-testid="budget"')[1:]
    shown = [
        (row.split('data-scope="')[1].split('"')[0],
         row.split('data-testid="budget-spent">')[1].split("<")[0],
         row.split('data-testid="budget-left">')[1].split("<")[0],
         'class="spent"' in row)
        for row in rows
    ]  # fmt: skip
    assert shown == [
        ("agent.a", "2 calls", "0 calls", True),
        ("agent.b", "1 calls", "1 calls", False),
        ("", "0.0000 USD", "2.5000 USD", False),
    ]
    await asyncio.to_thread(lambda: close() if close is not None else None)
