"""Fixtures of the dashboard tests: one scripted team and dashboard server per module, and
one headless Debian chromium per module (Playwright drives it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dashboard.support import CHROMIUM_ARGS, TOKENS, World, build_world, chromium


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    found = build_world(tmp_path_factory.mktemp("dashboard"))
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = chromium()
    if executable is None:
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        found = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield found
        finally:
            found.close()


@pytest.fixture(scope="module")
def sign_in(browser: Any, world: World) -> Iterator[Callable[..., Any]]:
    """``sign_in("approver"|"viewer", javascript=True)``: a page of a fresh browser context,
    signed in with that principal's token. Every page records the dialogs it saw."""
    contexts: list[Any] = []

    def open_page(who: str, *, javascript: bool = True) -> Any:
        context = browser.new_context(
            java_script_enabled=javascript, viewport={"width": 1360, "height": 1000}
        )
        contexts.append(context)
        page = context.new_page()
        page.dialogs = []  # every alert/confirm/prompt the page opened
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        page.goto(world.url + "/login")
        page.fill("#token", TOKENS[who])
        page.click("[data-testid=sign-in]")
        page.wait_for_url(world.url + "/")
        return page

    yield open_page
    for context in contexts:
        context.close()
