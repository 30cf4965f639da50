"""A deny rule on workspace resources holds for every spelling of the URI: the server decides on
the canonical URI (decoded once, the path resolved as the workspace tools resolve it) and reads
exactly that file. Real ``toolcards serve`` over stdio, the official ``mcp`` client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_clients import stdio_session

from support.scripted import wait_until
from surfaces.surface_support import write_config
from toolcards.governance import AuditLog, Identity

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SECRET = "SECRET-KEY-MATERIAL"
BASE = "toolcards://workspace/w/"
READER = Identity("reader", "user", ["lead"])
POLICY = {
    "default_effect": "allow",
    "rules": [{"description": "keys stay private", "targets": [f"resource:{BASE}secret/*"],
               "effect": "deny"}],
}  # fmt: skip
SPELLINGS = [
    "secret/key.txt",
    "%73ecret/key.txt",
    "./secret/key.txt",
    "notes/../secret/key.txt",
    "secret%2Fkey.txt",
    "secret//key.txt",
    "secret/./key.txt",
    "%2E/secret/key.txt",
    "%20secret/key.txt",
    "SECRET/key.txt",
    "shortcut/key.txt",
    "%2573ecret/key.txt",
]
"""``shortcut`` is a link to ``secret`` inside the workspace; ``%2573`` decodes (once) to a
name that does not exist; ``SECRET`` is another directory on a case-sensitive file system."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("spellings")
    ws = base / "workspaces" / "w"
    (ws / "secret").mkdir(parents=True)
    (ws / "secret" / "key.txt").write_text(f"{SECRET}\n", encoding="utf-8")
    (ws / "notes").mkdir()
    (ws / "notes" / "ok.txt").write_text("public\n", encoding="utf-8")
    (ws / "shortcut").symlink_to("secret")
    return base


@pytest.fixture(scope="module")
async def session(base: Path) -> AsyncIterator[ClientSession]:
    policy = base / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY), encoding="utf-8")
    config = write_config(base, local=READER, policy=policy, tools=[], team_id="spell",
                          cards=[{"type": "WorkspaceTool", "workspace_id": "w"}])  # fmt: skip
    env = {"TOOLCARDS_WORKSPACES_ROOT": str(base / "workspaces")}
    async with stdio_session(config, env=env) as s:
        yield s


def texts(read: Any) -> str:
    return "".join(getattr(c, "text", "") or getattr(c, "blob", "") for c in read.contents)


@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_no_spelling_of_a_denied_resource_is_read(
    session: ClientSession, spelling: str
) -> None:
    with pytest.raises(MCPError) as refused:
        read = await session.read_resource(BASE + spelling)
        assert SECRET not in texts(read)
    assert refused.value.error.code == -32002


@pytest.mark.parametrize("spelling", ["notes/ok.txt", "./notes/ok.txt", "notes//ok.txt",
                                      "%6Eotes/ok.txt"])  # fmt: skip
async def test_an_allowed_resource_reads_under_any_spelling(
    session: ClientSession, spelling: str
) -> None:
    read = await session.read_resource(BASE + spelling)
    assert texts(read) == "public\n"


async def test_a_denied_read_is_audited_under_the_canonical_uri(
    session: ClientSession, base: Path
) -> None:
    with pytest.raises(MCPError):
        await session.read_resource(BASE + "%73ecret/./key.txt")

    def targets() -> list[tuple[str, str]]:  # the server commits its batch shortly
        with AuditLog(base / "audit.db") as log:
            rows = log.query(tool=f"resource:{BASE}secret/key.txt", limit=50)
        return [(r.decision, r.outcome) for r in rows]

    assert wait_until(lambda: ("deny", "denied") in targets(), timeout=10)


async def test_a_subscription_to_a_spelling_of_a_denied_resource_is_refused(
    session: ClientSession,
) -> None:
    with pytest.raises(MCPError) as refused:
        await session.subscribe_resource(BASE + "./secret/key.txt")
    assert refused.value.error.code == -32002
