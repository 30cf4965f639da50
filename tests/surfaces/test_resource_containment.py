"""MCP resources read and list workspace files only through the workspace's containment: a
directory swapped for a link to the outside (by a host process or a sandboxed job), a FIFO
swapped in, a hard link to an outside file. The races run real renameat2 swaps (see
``resource_race``) in a process of their own against the governed MCP server in this process,
on an in-memory connection of the official SDK (the transport is not the subject: the
server's file reads race the swapper as they do in ``toolcards serve``, and against a read
that resolves its path and then opens it the read race here escaped in 6 runs of 6); the
sandboxed swapper keeps a real stdio ``toolcards serve``, whose ExecTool job it is."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client
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
with 2,000 and 3 in 6 with 500 (over stdio; in process, 6 in 6 with 1,000, 5 to 45 escapes
a run)."""
LISTINGS = 1000
"""Raced listings: an ``rglob`` listing walked outside in 0 to 27 of 250 (bursty), so more."""
IN_FLIGHT = 8
"""Requests awaiting at once on the one session: the same reads race the swapper, without a
whole round trip between two of them."""
PLANTED = "toolcards://workspace/w/planted.txt"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """The config, the workspace and the outside directory (``resource_race.prepare``), with
    the workspaces root set for a server in this process."""
    for name, value in server_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    return prepare(tmp_path)


def served(config: Path) -> contextlib.AbstractAsyncContextManager[Client]:
    """The governed MCP server of ``config`` in this process, as `toolcards serve` runs it."""
    return in_process_client(config, MODERN)


async def test_no_resource_read_escapes_while_a_directory_is_swapped_for_an_outside_link(
    workspace: tuple[Path, Path, Path],
) -> None:
    config, ws, outside = workspace
    async with served(config) as s:
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
    workspace: tuple[Path, Path, Path],
) -> None:
    config, ws, outside = workspace
    seen: set[str] = set()
    async with served(config) as s:

        async def list_once() -> None:
            seen.update(str(r.uri) for r in (await s.list_resources()).resources)

        with host_swapper(ws, outside):
            await in_parallel(LISTINGS, list_once, IN_FLIGHT)
    assert not [uri for uri in seen if OUTSIDE_ONLY in uri]


async def test_a_fifo_swapped_in_is_refused_at_once_and_the_server_keeps_answering(
    workspace: tuple[Path, Path, Path],
) -> None:
    config, ws, _ = workspace
    os.mkfifo(ws / "dir" / "pipe")
    done = threading.Event()
    blocked: list[str] = []

    def unblock() -> None:
        """Reads still going after 120 s are blocked on the FIFO (in worker threads of this
        process that no cancellation reaches): a writer opening and closing it, again and
        again, ends their waits, so the test fails instead of hanging."""
        if done.wait(120):
            return
        blocked.append("reads waited on the FIFO")
        while not done.wait(0.05):
            for name in ("pipe", "secret.txt"):
                with contextlib.suppress(OSError):
                    os.close(os.open(ws / "dir" / name, os.O_WRONLY | os.O_NONBLOCK))

    async with served(config) as s:
        watchdog = threading.Thread(target=unblock, daemon=True)
        watchdog.start()
        try:
            with host_swapper(ws, None, "dir/secret.txt", "dir/pipe"):
                tally = await raced_reads(s, READS // 4, in_flight=IN_FLIGHT)
        finally:
            done.set()
            watchdog.join()
        assert blocked == []
        with anyio.fail_after(30):  # the inside file, by one name or the other
            listed = {str(r.uri) for r in (await s.list_resources()).resources}
        assert listed & {f"toolcards://workspace/w/dir/{n}" for n in ("secret.txt", "pipe")}
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
