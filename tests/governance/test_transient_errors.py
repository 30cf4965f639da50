"""A store that is down right now (TransientError) is not a call with wrong arguments
(RetriableError), and it still reaches the model as a retry carrying its message."""

from __future__ import annotations

import pytest
from pydantic_ai import ModelRetry

from toolcards.core.actors import ActorUnavailable
from toolcards.core.retry import wrap_retriable
from toolcards.governance import CapabilityRegistry, Executor, Identity, Outcome, Policy
from toolcards.stores.errors import StoreUnavailable

pytestmark = pytest.mark.anyio
ALICE = Identity("alice")
DOWN = "the store at postgresql://127.0.0.1:5 cannot be reached; retry later"


def save(text: str) -> str:
    """Save a note."""
    raise StoreUnavailable(DOWN)


def ask_planner(text: str) -> str:
    """Ask the planner."""
    raise ActorUnavailable("actor #Planning is not running")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _executor() -> Executor:
    registry = CapabilityRegistry.from_tools([save, ask_planner])
    return Executor(registry, Policy.allow_all())


async def test_a_store_outage_reaches_the_model_as_a_retry_with_its_message() -> None:
    result = await _executor().call("save", {"text": "hi"}, ALICE)
    assert result.outcome is Outcome.RETRY
    assert result.message == DOWN


def test_a_store_outage_in_an_ungoverned_card_tool_is_the_frameworks_retry() -> None:
    with pytest.raises(ModelRetry, match="retry later"):
        wrap_retriable(save, ModelRetry)("hi")


async def test_an_actor_that_is_not_running_is_a_retry_with_its_message() -> None:
    result = await _executor().call("ask_planner", {"text": "hi"}, ALICE)
    assert result.outcome is Outcome.RETRY
    assert result.message == "actor #Planning is not running"
