"""An API key given in code reaches the embedding provider, never the store; a write that did
not happen is never reported as stored.

The OpenAI embeddings endpoint is the one thing stood in for (an ``httpx.MockTransport``);
the team, its SQLite store, the actor and the provider are the real ones.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.listener import Listener, Seen
from toolcards import HostTrust, PlanningTool
from toolcards.core import ToolFactory, ToolFunc
from toolcards.runtime import Team
from toolcards.tools.vector_store.card import VectorStoreTool

DIM = 8
Handler = Callable[[httpx.Request], httpx.Response]


class Endpoint:
    """Answers like ``POST /v1/embeddings`` and records the Authorization header of each request."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.auth: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.auth.append(request.headers.get("authorization"))
        if self.status != 200:
            message = "Incorrect API key provided.\nYou can find your key in your settings."
            return httpx.Response(self.status, json={"error": {"message": message}})
        texts = json.loads(request.content)["input"]
        data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(texts)]
        return httpx.Response(200, json={"data": data, "model": "text-embedding-3-small"})


def _vector(text: str) -> list[float]:
    return [1.0 + text.lower().count(c) for c in "aeioustr"]


@pytest.fixture(autouse=True)
def _no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _key() -> str:
    return f"sk-code-{secrets.token_hex(12)}"


def _card(key: str | None, endpoint: Handler, name: str = "VectorStore") -> VectorStoreTool:
    card = VectorStoreTool(
        name=name,
        provider="openai",
        model="text-embedding-3-small",
        dimension=DIM,
        api_key=key,
        vector_add=True,
    )
    card._transport = httpx.MockTransport(endpoint)
    return card


def _tools(factory: ToolFactory) -> dict[str, ToolFunc]:
    return {t.__name__: t for t in factory.get_tools()}


def test_a_key_given_in_code_reaches_the_provider_in_a_team(tmp_path: Path) -> None:
    key, endpoint = _key(), Endpoint()
    with Team("key-team", store=tmp_path / "team.db") as team:
        tools = _tools(team.bind([_card(key, endpoint)], member="alice"))
        assert tools["vector_add"](text="write the quarterly report", id="r1") == (
            "stored 'r1' in 'default'"
        )
        assert "r1: write the quarterly report" in tools["vector_search"](query_text="report")
    assert len(endpoint.auth) == 2 and set(endpoint.auth) == {f"Bearer {key}"}


def test_a_key_given_in_code_reaches_the_provider_in_a_plain_tool_factory() -> None:
    key, endpoint = _key(), Endpoint()
    tools = _tools(ToolFactory([_card(key, endpoint, name="PlainKeyed")]))
    assert tools["vector_add_plainkeyed"](text="book the flights", id="f1") == (
        "stored 'f1' in 'default'"
    )
    assert "f1: book the flights" in tools["vector_search_plainkeyed"](query_text="flights")
    assert len(endpoint.auth) == 2 and set(endpoint.auth) == {f"Bearer {key}"}


def test_the_key_given_in_code_is_never_written_to_the_store(tmp_path: Path) -> None:
    key, db = _key(), tmp_path / "team.db"
    with Team("key-store", store=db) as team:
        tools = _tools(team.bind([_card(key, Endpoint())], member="alice"))
        assert tools["vector_add"](text="fix the login bug", id="b1").startswith("stored")
        rows = _all_rows(db)
        files = [p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("team.db")]
    assert any("text-embedding-3-small" in row for row in rows)  # the config row is there
    assert any("fix the login bug" in row for row in rows)  # and the state rows
    assert not [row for row in rows if key in row]
    assert not [blob for blob in files if key.encode() in blob]  # nor the WAL, nor free pages


def test_a_resumed_team_gives_the_key_to_its_restored_store(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    with Team("key-resume", store=db) as team:
        tools = _tools(team.bind([_card(_key(), Endpoint())], member="alice"))
        assert tools["vector_add"](text="fix the login bug", id="b1").startswith("stored")
    key, endpoint = _key(), Endpoint()
    with Team.resume("key-resume", store=db) as team:
        assert team.actor("#VectorStore") is not None  # restored from its recorded config
        tools = _tools(team.bind([_card(key, endpoint)], member="alice"))
        assert tools["vector_add"](text="plan the offsite", id="o1").startswith("stored")
        assert "b1: fix the login bug" in tools["vector_search"](query_text="login bug")
    assert endpoint.auth and set(endpoint.auth) == {f"Bearer {key}"}


def test_a_failing_provider_makes_vector_add_report_failure(tmp_path: Path) -> None:
    endpoint = Endpoint(status=401)
    with Team("key-refused", store=tmp_path / "team.db") as team:
        tools = _tools(team.bind([_card(_key(), endpoint)], member="alice"))
        result = tools["vector_add"](text="write the quarterly report", id="r1")
    assert endpoint.auth  # the request was sent, and refused
    assert result.startswith("error: 'r1' was not stored") and "HTTP 401" in result
    assert "\n" not in result


def test_a_failing_provider_makes_vector_search_an_error_result() -> None:
    tools = _tools(ToolFactory([_card(_key(), Endpoint(status=401), name="Refusing")]))
    result = tools["vector_search_refusing"](query_text="report")
    assert result.startswith("error: vector search failed") and "HTTP 401" in result
    assert "\n" not in result


def test_a_second_key_for_the_same_store_is_refused_without_showing_either(
    tmp_path: Path,
) -> None:
    first, second = _key(), _key()
    with Team("key-clash", store=tmp_path / "team.db") as team:
        card = _card(first, Endpoint())
        team.bind([card], member="alice")
        other = _card(second, Endpoint())
        other._transport = card._transport
        with pytest.raises(ValueError, match="another api_key") as caught:
            team.bind([other], member="bob")
    assert first not in str(caught.value) and second not in str(caught.value)


def _all_rows(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return [str(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"')]


def test_tools_bound_before_the_key_arrived_use_it_afterwards(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    with Team("key-late", store=db) as team:
        team.bind([_card(_key(), Endpoint())], member="alice")
    key, endpoint = _key(), Endpoint()
    with Team.resume("key-late", store=db) as team:
        keyless = _card(None, endpoint)
        early = _tools(team.bind([keyless], member="alice"))
        keyed = _card(key, endpoint)
        keyed._transport = keyless._transport
        team.bind([keyed], member="bob")
        assert early["vector_add"](text="plan the offsite", id="o1") == "stored 'o1' in 'default'"
    assert endpoint.auth == [f"Bearer {key}"]


def _change_recorded_config(db: Path, actor: str, **changes: Any) -> None:
    """What a writer of the store (not the host's code) could do to a recorded config."""
    with sqlite3.connect(db) as conn:
        (config,) = conn.execute("SELECT config FROM actors WHERE name=?", (actor,)).fetchone()
        changed = json.dumps({**json.loads(config), **changes})
        conn.execute("UPDATE actors SET config=? WHERE name=?", (changed, actor))


def _embeddings(seen: Seen) -> tuple[int, Any]:
    """Answers like ``POST /v1/embeddings``."""
    texts = json.loads(seen.body)["input"]
    data = [{"index": i, "embedding": _vector(t)} for i, t in enumerate(texts)]
    return 200, {"data": data, "model": "text-embedding-3-small"}


def _openai_store() -> VectorStoreTool:
    return VectorStoreTool(provider="openai", model="text-embedding-3-small", dimension=DIM)


def test_a_recorded_config_changed_in_the_store_never_sends_the_hosts_key_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, db = _key(), tmp_path / "team.db"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with Team("key-row", store=db) as team:
        team.bind([_openai_store()], member="alice")  # built in code: OpenAI's own endpoint
    with Listener(_embeddings) as attacker:
        _change_recorded_config(db, "#VectorStore", openai_base_url=f"{attacker.url}/v1")
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            resumed = Team.resume("key-row", store=db)
        with resumed as team:
            planning = _tools(team.bind([PlanningTool(vector_store=True)], member="alice"))
            planning["update_planning"](create=[{"description": "rotate the signing keys"}])
            assert "rotate" in planning["search_planning"](query="signing keys")
            assert not attacker.carried(key)  # the query was not embedded there
            with pytest.raises(ValueError, match="openai_base_url"):  # the row does not win
                team.bind([_openai_store()], member="bob")
    said = [str(w.message) for w in warned]
    assert [s for s in said if "#VectorStore waits for its card" in s and "openai_base_url" in s]


def test_a_recorded_url_the_host_trusts_is_restarted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, db = _key(), tmp_path / "team.db"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with Listener(_embeddings) as proxy:
        store = _openai_store().model_copy(update={"openai_base_url": f"{proxy.url}/v1"})
        with Team("key-proxy", store=db) as team:
            team.bind([store], member="alice")
        trust = HostTrust(urls=[proxy.url])
        with Team.resume("key-proxy", store=db, trust=trust) as team:
            assert team.actor("#VectorStore") is not None
            planning = _tools(team.bind([PlanningTool(vector_store=True)], member="alice"))
            planning["update_planning"](create=[{"description": "rotate the signing keys"}])
            assert "rotate" in planning["search_planning"](query="signing keys")
    assert proxy.carried(key)  # the query was embedded there, with the host's key
