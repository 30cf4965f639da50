"""What a resource request costs before the policy decides: a read or a subscription lists no
workspace (its file is found by the workspace's template), a template listing neither, and a
path completion walks a bounded part of it; a caller past its requests in flight is refused
reads, prompts, completions, subscriptions and listings before anything is looked up (the
official client in process, 2025-11-25 sessions)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from structured_tools import POLICY

from surfaces.surface_support import write_config
from toolcards.governance import Identity
from toolcards.surfaces.config import load_config
from toolcards.surfaces.mcp_server import resource_sources
from toolcards.surfaces.mcp_server.server import GovernedMCPServer
from toolcards.surfaces.mcp_server.sessions import InFlight, caller_of
from toolcards.surfaces.runtime import SurfaceRuntime
from toolcards.tools.workspace import access
from toolcards.tools.workspace.access import MAX_LIST_ENTRIES
from toolcards.tools.workspace.globs import WalkBound

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LOCAL = Identity("local.user", "user")
WS = "toolcards://workspace/ws/"
HIDDEN = 50
"""Hidden files in the workspace: walked by a listing, never shown (a read looks at none)."""


class Walks:
    """Each workspace walk of the resource surface: the entries it looked at, and its bound."""

    def __init__(self) -> None:
        self.bounds: list[WalkBound] = []

    def wrap(self, list_files: Any) -> Any:
        def walked(root: Path, limit: int, *, bound: WalkBound | None = None) -> list[str]:
            bound = WalkBound(MAX_LIST_ENTRIES, 60) if bound is None else bound
            self.bounds.append(bound)
            return list_files(root, limit, bound=bound)  # type: ignore[no-any-return]

        return walked

    @property
    def visited(self) -> list[int]:
        return [bound.visited for bound in self.bounds]


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Walks:
    found = Walks()
    monkeypatch.setattr(resource_sources, "list_files", found.wrap(access.list_files))
    return found


@contextlib.contextmanager
def runtime(base: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SurfaceRuntime]:
    """The workspace ``ws`` (``notes.md``, ``secret/key.txt``, :data:`HIDDEN` hidden files)
    under the completion tests' policy (``secret/*`` denied), with their prompts."""
    ws = base / "workspaces" / "ws"
    (ws / "secret").mkdir(parents=True)
    (ws / "notes.md").write_text("# notes\n", encoding="utf-8")
    (ws / "secret" / "key.txt").write_text("k\n", encoding="utf-8")
    for i in range(HIDDEN):
        (ws / f".h{i:03d}").write_text("", encoding="utf-8")
    monkeypatch.setenv("TOOLCARDS_WORKSPACES_ROOT", str(base / "workspaces"))
    (base / "policy.yaml").write_text(POLICY, encoding="utf-8")
    config = write_config(base, local=LOCAL, policy=base / "policy.yaml", tools=[],
                          prompts=["structured_tools:PROMPTS"], team_id="crew",
                          cards=[{"type": "WorkspaceTool", "workspace_id": "ws"}])  # fmt: skip
    with SurfaceRuntime.from_config(load_config(config), durability="sync") as rt:
        yield rt


@contextlib.asynccontextmanager
async def served(server: GovernedMCPServer) -> AsyncIterator[Client]:
    async with server.running(), Client(server.server, mode="legacy") as client:
        yield client


def read_rows(rt: SurfaceRuntime) -> list[tuple[str, str]]:
    assert rt.audit is not None
    rows = rt.audit.query(limit=100)
    return sorted((e.tool, e.outcome) for e in rows if e.tool.startswith(("resource:", "prompt:")))


def path_completion() -> tuple[types.ResourceTemplateReference, dict[str, str]]:
    ref = types.ResourceTemplateReference(type="ref/resource", uri=WS + "{+path}")
    return ref, {"name": "path", "value": ""}


async def test_a_read_or_a_subscription_lists_no_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walks: Walks
) -> None:
    """Read, missing, denied and subscribed files, and the template listing, walk nothing; each
    read is still decided and audited once. A path completion walks once, within its bound."""
    with runtime(tmp_path, monkeypatch) as rt:
        async with served(GovernedMCPServer(rt)) as client:
            read = await client.read_resource(WS + "notes.md")
            for missing in ["missing.md", "secret/key.txt", "./secret/key.txt"]:
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(WS + missing)
                assert refused.value.error.code == -32002
            await client.session.subscribe_resource(WS + "./notes.md")
            await client.session.unsubscribe_resource(WS + "notes.md")
            templates = await client.list_resource_templates()
            assert walks.bounds == []
            ref, argument = path_completion()
            completed = await client.complete(ref, argument)
            assert len(walks.bounds) == 1
            listed = await client.list_resources()
        rows = read_rows(rt)
    assert read.contents[0].mime_type == "text/markdown"
    assert getattr(read.contents[0], "text", None) == "# notes\n"
    assert [t.uri_template for t in templates.resource_templates] == [WS + "{+path}"]
    assert completed.completion.values == ["notes.md"]
    assert walks.bounds[0].entries == resource_sources.MAX_COMPLETED_ENTRIES < MAX_LIST_ENTRIES
    assert walks.visited == [HIDDEN + 3] * 2  # the hidden files, notes.md, secret/, its key
    assert WS + "notes.md" in {str(r.uri) for r in listed.resources}
    assert rows == sorted(
        [
            (f"resource:{WS}notes.md", "ok"),
            (f"resource:{WS}missing.md", "not_found"),
            (f"resource:{WS}secret/key.txt", "denied"),
            (f"resource:{WS}secret/key.txt", "denied"),
        ]
    )


async def test_a_caller_past_its_requests_in_flight_is_refused_before_any_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walks: Walks
) -> None:
    """With its one request in flight (a tool call running on after its POST closed), a
    2025-11-25 caller's read, prompt, completion, subscription and listing are refused at once:
    nothing is walked, decided or audited; once it ends, a read is served and counted."""
    with runtime(tmp_path, monkeypatch) as rt:
        in_flight = InFlight(1)
        assert in_flight.enter(LOCAL)
        async with served(GovernedMCPServer(rt, in_flight=in_flight)) as client:
            ref, argument = path_completion()
            requests: list[Any] = [
                client.read_resource(WS + "notes.md"),
                client.get_prompt("review", {"tool": "greet"}),
                client.complete(ref, argument),
                client.session.subscribe_resource(WS + "notes.md"),
                client.list_resources(),
            ]
            for request in requests:
                with pytest.raises(MCPError) as refused:
                    await request
                assert refused.value.error.code == -32000
                assert refused.value.error.message == (
                    "too many requests in flight for local.user (at most 1)"
                )
            assert walks.bounds == [] and read_rows(rt) == []
            in_flight.leave(LOCAL)
            read = await client.read_resource(WS + "notes.md")
        assert in_flight.counts[caller_of(LOCAL)] == 0
        assert read_rows(rt) == [(f"resource:{WS}notes.md", "ok")]
    assert getattr(read.contents[0], "text", None) == "# notes\n"
