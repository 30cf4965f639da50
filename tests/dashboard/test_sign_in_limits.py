"""Dashboard sign-in under attack: wrong tokens from one address are slowed down (429 with a
growing Retry-After), one principal's sessions never push out another's (the app in process,
through an ASGI client from a chosen address), and the token a real `toolcards dashboard
--store` prints works once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from dashboard.support import IDENTITIES, TOKENS, Process, form_token
from support.processes import free_port
from toolcards.surfaces.dashboard import Dashboard
from toolcards.surfaces.dashboard.sessions import LOGIN_COOKIE, SESSION_COOKIE
from toolcards.surfaces.dashboard.throttle import SignInThrottle
from toolcards.surfaces.http.tokens import TokenTable

pytestmark = pytest.mark.timeout(120)


class Clock:
    """The clock the sign-in backoff counts on, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def app(clock: Clock) -> Any:
    """A fresh dashboard's ASGI app (no team: only sign-in matters here), its backoff on
    ``clock``."""
    tokens = TokenTable.from_tokens((TOKENS[k], IDENTITIES[k]) for k in ("approver", "viewer"))
    return Dashboard(tokens=tokens, throttle=SignInThrottle(clock=clock)).app()


def client_of(dashboard: str | Any, source: str = "127.0.0.1") -> httpx.Client:
    """An HTTP client from ``source`` of a served dashboard (its URL) or of its app."""
    if isinstance(dashboard, str):
        transport = httpx.HTTPTransport(local_address=source)
        return httpx.Client(base_url=dashboard, transport=transport, timeout=10)
    base = "http://127.0.0.1" + dashboard.base_path  # the app's secret path
    return TestClient(dashboard, base_url=base, client=(source, 50000), follow_redirects=False)


class SignIn:
    """Sign-in attempts from one client address, each a bare POST with the form's token."""

    def __init__(self, dashboard: str | Any, source: str = "127.0.0.1") -> None:
        self.client = client_of(dashboard, source)
        page = self.client.get("/login")
        self.nonce = page.cookies[LOGIN_COOKIE]
        self.csrf = form_token(page.text)

    def attempt(self, token: str) -> httpx.Response:
        self.client.cookies.clear()
        return self.client.post(
            "/login",
            data={"token": token, "csrf": self.csrf},
            headers={"cookie": f"{LOGIN_COOKIE}={self.nonce}"},
        )

    def close(self) -> None:
        self.client.close()


def test_three_hundred_wrong_tokens_get_only_a_handful_checked(app: Any) -> None:
    attacker = SignIn(app)
    answers = [attacker.attempt(f"guess-{n}") for n in range(300)]
    attacker.close()
    checked = [a for a in answers if a.status_code == 401]
    slowed = [a for a in answers if a.status_code == 429]
    assert len(checked) <= 15
    assert len(checked) + len(slowed) == 300
    assert all(int(a.headers["retry-after"]) >= 1 for a in slowed)


def test_the_wait_doubles_with_each_failure_after_the_free_ones(app: Any, clock: Clock) -> None:
    attacker = SignIn(app)
    for n in range(5):
        assert attacker.attempt(f"guess-{n}").status_code == 401
    waits = []
    for n in range(2):
        refused = attacker.attempt("one more")
        assert refused.status_code == 429
        waits.append(int(refused.headers["retry-after"]))
        clock.now += waits[-1]  # the address opens again once the wait is over
        assert attacker.attempt(f"wrong again {n}").status_code == 401
    attacker.close()
    assert waits[1] > waits[0] >= 1


def test_a_right_token_from_a_closed_address_waits_too(app: Any) -> None:
    attacker = SignIn(app)
    for n in range(6):
        attacker.attempt(f"guess-{n}")
    assert attacker.attempt(TOKENS["approver"]).status_code == 429
    attacker.close()


def test_a_closed_address_leaves_other_addresses_open(app: Any) -> None:
    attacker = SignIn(app)
    for n in range(6):
        attacker.attempt(f"guess-{n}")
    neighbour = SignIn(app, source="127.0.0.2")
    assert attacker.attempt(TOKENS["viewer"]).status_code == 429
    assert neighbour.attempt(TOKENS["viewer"]).status_code == 303
    attacker.close()
    neighbour.close()


def page_of(dashboard: str | Any, session: str) -> httpx.Response:
    with client_of(dashboard) as client:
        client.cookies.set(SESSION_COOKIE, session)
        return client.get("/")


def test_a_viewer_opening_1001_sessions_never_ends_the_approvers_session(app: Any) -> None:
    approver = SignIn(app).attempt(TOKENS["approver"]).cookies[SESSION_COOKIE]
    viewer = SignIn(app)
    sessions = [viewer.attempt(TOKENS["viewer"]).cookies[SESSION_COOKIE] for _ in range(1001)]
    viewer.close()
    assert page_of(app, approver).status_code == 200
    assert page_of(app, sessions[-1]).status_code == 200
    signed_out = page_of(app, sessions[0]).headers.get("location")  # its own oldest
    assert signed_out == app.base_path + "/login"


def test_the_one_time_token_of_dashboard_store_opens_one_session_only(tmp_path: Path) -> None:
    from toolcards.runtime import Team

    with Team("stored", store=tmp_path / "team.db"):
        pass
    process = Process(
        "dashboard", "--store", str(tmp_path / "team.db"), "--team", "stored", port=free_port()
    )
    try:
        found = re.search(r"one-time token: (\S+)", process.output())
        assert found is not None
        first = SignIn(process.url).attempt(found.group(1))
        second = SignIn(process.url).attempt(found.group(1))
        signed_in = page_of(process.url, first.cookies[SESSION_COOKIE])
    finally:
        process.stop()
    assert first.status_code == 303
    assert signed_in.status_code == 200
    assert second.status_code == 401
    assert "already used" in second.text
