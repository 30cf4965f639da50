"""MCP resources read and list workspace files only through the workspace's containment: a
directory swapped for a link to the outside (by a host process or a sandboxed job), a FIFO
swapped in, a hard link to an outside file. The races run against a real ``toolcards serve``
over stdio with the official ``mcp`` client and real renameat2 swaps (see ``resource_race``);
what a file is (a hard link, a dotfile) is asked of the same server in process, on an
in-memory connection."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_clients import stdio_session
from resource_race import (
    OUTSIDE_ONLY,
    exec_swapper,
    host_swapper,
    in_parallel,
    prepare,
    raced_reads,
    server_env,
)
from revision_clients import MODERN, in_process_client

from toolcards.tools.exec.backends.bwrap import BwrapBackend

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

READS = 1000
"""Raced reads per race. Against a read that resolves the path and then opens it (the code
before the descriptor walk), the two read races failed 6 times in 6 with 1,000 reads, 5 in 6
with 2,000 and 3 in 6 with 500."""
LISTINGS = 1000
"""Raced listings: an ``rglob`` listing walked outside in 0 to 27 of 250 (bursty), so more."""
IN_FLIGHT = 8
"""Requests awaiting at once on the one session: the same reads race the swapper, without a
whole round trip between two of them."""
PLANTED = "toolcards://workspace/w/planted.txt"


async def test_no_resource_read_escapes_while_a_directory_is_swapped_for_an_outside_link(
    tmp_path: Path,
) -> None:
    config, ws, outside = prepare(tmp_path)
    async with stdio_session(config, env=server_env(tmp_path)) as s:
        with host_swapper(ws, outside):
            tally = await raced_reads(s, READS, in_flight=IN_FLIGHT)
    assert tally.escapes == 0
    assert tally.inside > 0 and tally.refused > 0  # both sides of the swap were seen


async def test_no_resource_read_escapes_while_a_sandboxed_job_swaps_the_link(
    tmp_path: Path,
) -> None:
    reason = BwrapBackend.unavailable_reason()
    if reason is not None:
        pytest.skip(f"bwrap cannot run here: {reason}")
    config, ws, outside = prepare(tmp_path, with_exec=True)
    async with (
        stdio_session(config, env=server_env(tmp_path)) as s,
        exec_swapper(s, ws, outside),
    ):
        tally = await raced_reads(s, READS, in_flight=IN_FLIGHT)
    assert tally.escapes == 0
    assert tally.inside > 0 and tally.refused > 0


async def test_no_resource_listing_walks_into_a_directory_swapped_for_an_outside_link(
    tmp_path: Path,
) -> None:
    config, ws, outside = prepare(tmp_path)
    seen: set[str] = set()
    async with stdio_session(config, env=server_env(tmp_path)) as s:

        async def list_once() -> None:
            seen.update(str(r.uri) for r in (await s.list_resources()).resources)

        with host_swapper(ws, outside):
            await in_parallel(LISTINGS, list_once, IN_FLIGHT)
    assert not [uri for uri in seen if OUTSIDE_ONLY in uri]


async def test_a_fifo_swapped_in_is_refused_at_once_and_the_server_keeps_answering(
    tmp_path: Path,
) -> None:
    config, ws, _ = prepare(tmp_path)
    os.mkfifo(ws / "dir" / "pipe")
    async with stdio_session(config, env=server_env(tmp_path)) as s:
        with host_swapper(ws, None, "dir/secret.txt", "dir/pipe"):
            with anyio.fail_after(120):  # a read blocked on the FIFO would never answer
                tally = await raced_reads(s, READS // 4, in_flight=IN_FLIGHT)
        with anyio.fail_after(30):
            await s.send_ping()
    assert tally.errors == 0 and tally.escapes == 0
    assert tally.inside > 0 and tally.refused > 0


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The config of a workspace holding a hard link to the outside file and a dotfile, for
    a server in this process."""
    config, ws, outside = prepare(tmp_path)
    os.link(outside / "secret.txt", ws / "planted.txt")
    (ws / ".env").write_text("API_KEY=abc123\n", encoding="utf-8")
    for name, value in server_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    return config


async def test_a_hard_link_to_an_outside_file_is_not_listed(planted: Path) -> None:
    async with in_process_client(planted, MODERN) as s:
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
    assert PLANTED not in uris
    assert "toolcards://workspace/w/dir/secret.txt" in uris


async def test_a_hard_link_to_an_outside_file_is_not_read(planted: Path) -> None:
    async with in_process_client(planted, MODERN) as s:
        with pytest.raises(MCPError) as refused:
            await s.read_resource(PLANTED)
    assert refused.value.error.code == -32002


async def test_a_dotfile_is_neither_listed_nor_read(planted: Path) -> None:
    async with in_process_client(planted, MODERN) as s:
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        with pytest.raises(MCPError) as refused:
            await s.read_resource("toolcards://workspace/w/.env")
        with pytest.raises(MCPError) as spelled:
            await s.read_resource("toolcards://workspace/w/dir/%2E%2E/%2Eenv")
    assert "toolcards://workspace/w/.env" not in uris
    assert "toolcards://workspace/w/dir/secret.txt" in uris
    assert refused.value.error.code == spelled.value.error.code == -32002


async def test_a_file_name_that_is_not_utf8_is_listed_and_read_by_its_escaped_bytes(
    planted: Path,
) -> None:
    """A name a process made from bytes that are not UTF-8 (here ``\\xff``) neither breaks
    the listing nor the reads of other files: it is listed by its bytes, percent-encoded,
    and read by that URI."""
    ws = planted.parent / "workspaces" / "w"
    assert ws.is_dir(), sorted(p.name for p in planted.parent.iterdir())
    with open(os.path.join(os.fsencode(ws), b"bad\xff.txt"), "wb") as f:
        f.write(b"odd name\n")
    async with in_process_client(planted, MODERN) as s:
        uris = {str(r.uri) for r in (await s.list_resources()).resources}
        odd = await s.read_resource("toolcards://workspace/w/bad%FF.txt")
        plain = await s.read_resource("toolcards://workspace/w/dir/secret.txt")
    assert "toolcards://workspace/w/bad%FF.txt" in uris
    assert "toolcards://workspace/w/dir/secret.txt" in uris
    assert [getattr(c, "text", None) for c in odd.contents] == ["odd name\n"]
    assert plain.contents
