"""The CLI beside a running `toolcards serve` on the same config (an embedded store that the
server holds): list, describe, call and team status are forwarded to the server, with the
config's principal, the same decision and the same audit trail."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.cli import InProcessCli
from support.planted import feeding_fifo
from support.scripted import wait_until
from surfaces.surface_support import HttpServer, write_config
from surfaces.surface_support import toolcards_in_process as toolcards
from toolcards.core.host_files import ROOTS_MARKER, read_host_file
from toolcards.governance import AuditLog, Identity
from toolcards.surfaces.cli import control
from toolcards.surfaces.cli.control import endpoint_path, find_server
from toolcards.surfaces.outcomes import ExitCode

pytestmark = pytest.mark.timeout(90)
BOB = Identity("bob", "user", ["sales"])
EVE = Identity("eve", "user", [])


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("forward")
    return write_config(
        base, local=BOB, store="team.db", cards=[{"type": "PlanningTool", "vector_store": False}]
    )


@pytest.fixture(scope="module")
def server(config: Path) -> Iterator[HttpServer]:
    srv = HttpServer(config)
    yield srv
    srv.stop()


def test_the_server_records_its_endpoint_beside_the_store(server: HttpServer, config: Path) -> None:
    record = endpoint_path(config)
    assert record == config.parent / "team.db.endpoint"
    found = find_server(config)
    assert found is not None and found.http == server.url
    assert (found.socket.stat().st_mode & 0o777) == 0o600


def test_list_is_forwarded_and_filtered_for_the_local_principal(
    server: HttpServer, config: Path
) -> None:
    done = toolcards(config, "list")
    assert done.returncode == 0, done.stderr
    names = {row["name"] for row in json.loads(done.stdout)}
    assert names == {"crm_read", "crm_search", "send_email"}


def test_forwarded_call_is_decided_and_audited_like_a_local_one(
    server: HttpServer, config: Path
) -> None:
    allowed = toolcards(config, "call", "crm_read", "id=5")
    hidden = toolcards(config, "call", "crm_delete", "id=5")  # bob may not see it
    assert allowed.returncode == ExitCode.OK, allowed.stderr
    assert json.loads(allowed.stdout)["value"] == {"tool": "crm_read", "args": {"id": 5}}
    assert hidden.returncode == ExitCode.UNKNOWN_TOOL
    expected = [("bob", "cli", "crm_read", "ok"), ("bob", "cli", "crm_delete", "unknown_tool")]

    def rows() -> list[tuple[str, str, str, str]]:  # the server commits its batch shortly
        with AuditLog(config.parent / "audit.db") as log:
            return [(e.principal, e.surface, e.tool, e.outcome) for e in log.tail(2)]

    assert wait_until(lambda: rows() == expected, timeout=10)


def test_a_forwarded_call_that_fails_closed_says_how_calls_get_approved(
    tmp_path: Path, toolcards_cli: InProcessCli
) -> None:
    """An approval-required call forwarded to the server fails closed (nobody is asked): it
    printed only ``approval required: ...``; now the line the same call run here prints."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("default_effect: allow\n", encoding="utf-8")
    notes = tmp_path / "notes.txt"
    config = write_config(
        tmp_path, local=BOB, store="team.db", tools=["approval_tools:TOOLS"], policy=policy
    )
    srv = HttpServer(config, env={"NOTES_FILE": str(notes)})
    try:
        assert find_server(config) is not None
        done = toolcards_cli("call", "send_note", "to=ops", "body=forwarded", "-c", config)
    finally:
        srv.stop()
    assert done.returncode == ExitCode.APPROVAL, done.stderr
    assert "approval required: send_note" in done.stderr
    assert "a caller cannot approve its own call" in done.stderr
    assert "principals.terminal_approver" in done.stderr
    assert not notes.exists()


def test_team_status_is_forwarded_while_the_server_holds_the_store(
    server: HttpServer, config: Path
) -> None:
    done = toolcards(config, "team", "status")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["team_id"] == "surfaces"


def test_describe_of_a_hidden_tool_looks_unknown(server: HttpServer, config: Path) -> None:
    done = toolcards(config, "describe", "crm_delete")
    assert done.returncode == ExitCode.UNKNOWN_TOOL
    assert done.stderr.strip() == "unknown tool: crm_delete"


def test_record_is_removed_when_the_server_stops(config: Path, tmp_path: Path) -> None:
    other = write_config(tmp_path, local=BOB, store="team.db", cards=[{"type": "PlanningTool"}])
    srv = HttpServer(other)
    assert find_server(other) is not None
    srv.stop()
    assert not endpoint_path(other).exists()
    assert find_server(other) is None


def test_a_stale_record_is_ignored(tmp_path: Path) -> None:
    import json as jsonlib
    import os

    other = write_config(tmp_path, local=BOB, tools=["extra_tools:TOOLS"])
    record = endpoint_path(other)
    record.write_text(jsonlib.dumps({"pid": os.getpid(), "socket": str(tmp_path / "gone.sock")}))
    assert find_server(other) is None
    done = toolcards(other, "call", "pick", "index=1")  # ran here: no server to forward to
    assert done.returncode in (ExitCode.OK, ExitCode.DENIED, ExitCode.UNKNOWN_TOOL), done.stderr
    assert "forward" not in done.stderr


def test_a_client_that_hangs_up_does_not_stop_the_endpoint(
    server: HttpServer, config: Path
) -> None:
    import socket

    found = find_server(config)
    assert found is not None
    for _ in range(3):  # connect and leave, without a request or reading the answer
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(found.socket))
            sock.sendall(
                json.dumps({"op": "list", "config": os.path.realpath(config)}).encode() + b"\n"
            )
    assert toolcards(config, "list").returncode == 0
    assert server.proc.poll() is None


def test_a_config_whose_store_changed_after_a_lookup_is_looked_up_again(tmp_path: Path) -> None:
    def record_of(config: Path) -> Path:  # as find_server looks it up
        file = read_host_file(config)
        return control._cached_record(file.path, file.text)

    config = tmp_path / "toolcards.yaml"
    config.write_text("team_id: t\nstore: first.db\n", encoding="utf-8")
    assert record_of(config) == tmp_path / "first.db.endpoint"
    assert record_of(config) == tmp_path / "first.db.endpoint"  # from the cache
    config.write_text("team_id: t\nstore: second.db\n", encoding="utf-8")
    assert record_of(config) == endpoint_path(config) == tmp_path / "second.db.endpoint"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_two_servers_started_at_once_on_one_config_leave_one_control_endpoint(
    tmp_path: Path,
) -> None:
    """They used to race (unlink, then bind): the second crashed on "Address already in use"
    or unlinked the first one's socket. Now one holds the endpoint; the other serves on and
    says in one line that it has none. (Both are forked by the fork server, so they reach
    their endpoints at once; the record names the holder's own process, which ends with it.)"""
    config = write_config(
        tmp_path,
        local=BOB,
        store=":memory:",
        cards=[{"type": "PlanningTool", "vector_store": False}],
    )
    servers: list[HttpServer] = []

    def start() -> None:
        servers.append(HttpServer(config))

    starts = [threading.Thread(target=start) for _ in "ab"]
    for start in starts:
        start.start()
    for start in starts:
        start.join()
    try:
        assert len(servers) == 2  # both listen on HTTP
        found = find_server(config)
        assert found is not None
        holder = next(s for s in servers if s.url == found.http)
        other = next(s for s in servers if s is not holder)
        done = toolcards(config, "list")
        assert done.returncode == 0, done.stderr
        assert holder.proc.poll() is None and other.proc.poll() is None
        assert wait_until(lambda: "answers forwarded CLI commands" in other.output(), timeout=30)
        assert "answers forwarded CLI commands" not in holder.output()
        assert _alive(found.pid)
        holder.stop()
        assert wait_until(lambda: not _alive(found.pid), timeout=30)
        assert other.proc.poll() is None
    finally:
        for srv in servers:
            srv.stop()


def test_a_planted_record_naming_a_socket_in_a_shared_folder_is_not_followed(
    tmp_path: Path,
) -> None:
    """The record lies beside the store, so whoever may write that folder may plant one: a
    socket outside a folder only this user may change is not taken for a server, and the
    command runs on the config itself instead of printing what that socket says."""
    import socket as sockets

    config = write_config(
        tmp_path,
        local=BOB,
        store="team.db",
        cards=[{"type": "PlanningTool", "vector_store": False}],
    )
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    planted = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    planted.bind(str(shared / "s.sock"))
    planted.listen(8)
    lie = json.dumps({"data": [{"name": "planted_tool", "hints": [], "callable": True,
                                "description": "not ours"}]}) + "\n"  # fmt: skip

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = planted.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(lie.encode())

    threading.Thread(target=answer, daemon=True).start()
    record = endpoint_path(config)
    record.write_text(json.dumps({"pid": os.getpid(), "socket": str(shared / "s.sock")}))
    try:
        assert find_server(config) is None
        done = toolcards(config, "list")
        assert done.returncode == 0, done.stderr
        names = {row["name"] for row in json.loads(done.stdout)}
        assert "planted_tool" not in names and "crm_read" in names
    finally:
        planted.close()


def test_a_runtime_folder_another_user_made_first_leaves_the_server_without_an_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another local user made ``toolcards-<uid>`` first (open to all): the server runs on
    without a control endpoint, saying so in one line (it exited with a traceback)."""
    import anyio

    from toolcards.surfaces.cli.endpoint import control_endpoint

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    planted = tmp_path / f"toolcards-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    config = write_config(tmp_path, local=BOB, store="team.db")

    async def open_endpoint() -> object:
        async with control_endpoint(None, config) as path:  # type: ignore[arg-type]
            return path

    assert anyio.run(open_endpoint) is None
    assert "no control endpoint" in caplog.text and "mode 0700" in caplog.text
    assert list(planted.iterdir()) == []


def test_a_record_that_is_not_a_regular_file_is_never_read(
    server: HttpServer, config: Path, tmp_path: Path
) -> None:
    """Whoever may write the store's folder may put a FIFO in the record's place (every
    command waited on it for ever) or a link to ``/dev/zero`` (read until memory ran out):
    neither is read, there is no server to forward to. The FIFO here answers a reader with a
    record of the running server, so a read would show."""
    other = write_config(tmp_path, local=BOB, store="team.db")
    record = endpoint_path(other)
    found = find_server(config)
    assert found is not None
    real = json.dumps({"pid": found.pid, "socket": str(found.socket)})
    with feeding_fifo(record, real):
        assert find_server(other) is None
    record.unlink()
    record.symlink_to("/dev/zero")
    assert find_server(other) is None


def test_a_server_leaves_a_planted_record_it_did_not_write_unread(tmp_path: Path) -> None:
    """A FIFO put in the record's place while the server runs: stopping, the server neither
    waits on it nor reads it (here the FIFO would answer that the record is this server's)."""
    import anyio

    from toolcards.surfaces.cli.endpoint import control_endpoint

    config = write_config(tmp_path, local=BOB, store="team.db")
    record = endpoint_path(config)

    async def serve_while_planted(planted: contextlib.ExitStack) -> None:
        async with control_endpoint(None, config) as path:  # type: ignore[arg-type]
            assert path is not None and record.is_file()
            planted.enter_context(feeding_fifo(record, json.dumps({"pid": os.getpid()})))

    with contextlib.ExitStack() as planted:
        anyio.run(serve_while_planted, planted)
    assert record.is_fifo()  # not read as its own record, so not removed


def test_the_record_is_never_written_through_a_planted_link(tmp_path: Path) -> None:
    """Links planted at the temporary names the record was written through
    (``<record>.<pid>.tmp``): the server wrote its JSON into the file they point at."""
    import anyio

    from toolcards.surfaces.cli.endpoint import control_endpoint

    config = write_config(tmp_path, local=BOB, store="team.db")
    record = endpoint_path(config)
    victim = tmp_path / "victim"
    victim.write_text("Host prod\n", encoding="utf-8")
    link = record.with_name(f"{record.name}.{os.getpid()}.tmp")
    link.symlink_to(victim)

    async def serve() -> dict[str, object]:
        async with control_endpoint(None, config) as path:  # type: ignore[arg-type]
            assert path is not None
            return dict(json.loads(record.read_text(encoding="utf-8")))

    assert anyio.run(serve)["pid"] == os.getpid()
    assert victim.read_text(encoding="utf-8") == "Host prod\n"
    assert link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir() if ".endpoint" in p.name) == [link.name]


def test_a_forwarded_call_whose_client_leaves_is_cancelled(tmp_path: Path) -> None:
    """Ctrl-C on a forwarded ``toolcards call`` closes its socket: the server cancels the
    call and audits it ``cancelled`` once, as the command run without a server does (the
    tool ran on to its end, audited ``ok``)."""
    import socket

    import ending_tools

    policy = tmp_path / "policy.yaml"
    policy.write_text(ending_tools.POLICY, encoding="utf-8")
    config = write_config(
        tmp_path, local=BOB, store="team.db", tools=["ending_tools:TOOLS"], policy=policy
    )
    marks = tmp_path / "marks"
    marks.mkdir()

    def outcomes() -> list[tuple[str, str, str, str]]:
        with AuditLog(tmp_path / "audit.db") as log:
            return [(e.principal, e.surface, e.tool, e.outcome) for e in log.tail(10)]

    srv = HttpServer(config, env={"ENDINGS_DIR": str(marks)})
    try:
        found = find_server(config)
        assert found is not None
        request = {
            "op": "call",
            "tool": "hold",
            "args": {"tag": "left"},
            "config": os.path.realpath(config),
        }
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(found.socket))
            client.sendall(json.dumps(request).encode() + b"\n")
            assert wait_until((marks / "left").exists, timeout=30)  # the tool runs
        cancelled = [("bob", "cli", "hold", "cancelled")]
        assert wait_until(lambda: outcomes() == cancelled, timeout=30), outcomes()
    finally:
        srv.stop()
    assert outcomes() == cancelled


def _agents_config(tmp_path: Path, store: str = ":memory:") -> Path:
    """A config an agent wrote in its workspace (a marked workspaces root, as the workspace
    tools leave it): principal eve, no tools, a deny-all policy beside it."""
    workspace = tmp_path / "workspaces" / "crm"
    workspace.mkdir(parents=True)
    (tmp_path / "workspaces" / ROOTS_MARKER).touch()
    policy = workspace / "deny.yaml"
    policy.write_text("default_effect: deny\n", encoding="utf-8")
    return write_config(workspace, local=EVE, tools=[], policy=policy, store=store)


def test_a_config_in_a_workspace_naming_the_served_store_is_refused_as_without_a_server(
    server: HttpServer, config: Path, tmp_path: Path
) -> None:
    """An agent's config (``local: eve``) naming the operator's store by absolute path: its
    commands ran on the operator's server as the operator's principal. Now it is never
    forwarded, and refused as data as it is without a server."""
    evil = _agents_config(tmp_path, store=str(config.parent / "team.db"))
    assert find_server(evil) is None
    done = toolcards(evil, "list")
    assert done.returncode == ExitCode.USAGE
    assert "crm_read" not in done.stdout
    assert "(in a workspaces root, where agents write): store:" in done.stderr


def test_a_record_planted_beside_a_config_in_a_workspace_is_not_followed(
    server: HttpServer, config: Path, tmp_path: Path
) -> None:
    """An agent's config with ``store: ':memory:'`` keeps its record beside it, in the
    workspace: a record there naming the operator's (private, live) control socket ran its
    commands on the operator's server. Now the config runs here, as eve."""
    found = find_server(config)
    assert found is not None
    evil = _agents_config(tmp_path)
    endpoint_path(evil).write_text(json.dumps({"pid": found.pid, "socket": str(found.socket)}))
    assert find_server(evil) is None
    done = toolcards(evil, "list")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []  # eve's (no tools), not bob's on the server


def test_the_config_forwarded_is_the_config_judged(
    server: HttpServer, config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link re-pointed from the served config to an agent's after the data check: the real
    path sent was resolved again, the agent's. Now the one real path judged is the one sent."""
    evil = _agents_config(tmp_path)
    link = tmp_path / "toolcards.yaml"
    link.symlink_to(config)
    read = control.read_record

    def read_then_flip(record: Path) -> dict[str, Any] | None:
        link.unlink()
        link.symlink_to(evil)
        return read(record)

    monkeypatch.setattr(control, "read_record", read_then_flip)
    found = find_server(link)
    assert found is not None and found.config == os.path.realpath(config)


def test_the_server_answers_only_for_its_own_config_file(
    server: HttpServer, config: Path, tmp_path: Path
) -> None:
    """Another config file (``local: eve``) naming the served store finds its record and
    socket: the server answered it as its own principal. Now it refuses, naming its config."""
    other = write_config(tmp_path, local=EVE, store=str(config.parent / "team.db"))
    assert find_server(other) is not None
    done = toolcards(other, "list")
    assert done.returncode == ExitCode.FAILED
    assert f"it serves {os.path.realpath(config)}, not this config file" in done.stderr
    assert "crm_read" not in done.stdout


@pytest.mark.parametrize(
    "planted",
    [
        {"pid": 10**30, "socket": "/x"},
        {"pid": 1, "socket": "/tmp/a\0b"},
    ],
    ids=["pid-past-c-long", "socket-with-nul"],
)
def test_a_record_of_wrong_types_means_no_server(
    planted: dict[str, object], tmp_path: Path
) -> None:
    """A planted record whose pid overflowed ``os.kill`` or whose socket path held a NUL made
    every forwarding command end in a traceback; now it is no server, as an unreadable one."""
    other = write_config(tmp_path, local=BOB, store="team.db")
    endpoint_path(other).write_text(json.dumps(planted))
    assert find_server(other) is None
    done = toolcards(other, "list")
    assert done.returncode == 0, done.stderr
    assert "crm_read" in done.stdout
