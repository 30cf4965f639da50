"""Fixtures of the notification tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from notification.harness import Harness
from toolcards.runtime import Team


@pytest.fixture
def team() -> Iterator[Team]:
    with Team("notification-test", ":memory:") as t:
        yield t


@pytest.fixture
def harness(team: Team) -> Harness:
    return Harness(team)
