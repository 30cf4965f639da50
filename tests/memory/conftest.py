"""Teams for the memory tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolcards.runtime import Team


@pytest.fixture
def team() -> Iterator[Team]:
    with Team("memory-test", ":memory:") as t:
        yield t
