"""Request bodies of `toolcards serve --transport http` are bounded: a body announced over
the cap is refused before it is read, a chunked one once the cap is passed, and the server's
memory stays flat under a 64 MiB body, as under a body of too many values (a real server
process, raw sockets)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from raw_http import (
    MiB,
    PeakMemory,
    ServeWith,
    connect,
    head,
    send_in_background,
    status,
    until_closed,
)

from surfaces.surface_support import HEADERS, INIT, HttpServer, write_config
from toolcards.governance import Identity
from toolcards.surfaces.config import SurfaceConfig
from toolcards.surfaces.http.limits import MAX_BODY, HttpLimits

pytestmark = pytest.mark.timeout(180)

JSON = ("Content-Type: application/json", "Accept: application/json, text/event-stream")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    srv = HttpServer(write_config(tmp_path_factory.mktemp("body")))
    yield srv
    srv.stop()


def test_a_64_mib_body_announced_by_content_length_is_refused_unread(server: HttpServer) -> None:
    memory = PeakMemory(server.proc.pid).reset()
    with connect(server.port) as sock:
        sock.sendall(head(server.port, *JSON, f"Content-Length: {64 * MiB}"))
        sender = send_in_background(sock, 64, b"x" * MiB)
        response = until_closed(sock)
        sender.join(60)
    assert status(response) == 413
    assert b"max_body" in response
    assert memory.growth() < 32 * MiB


def test_a_64_mib_chunked_body_is_refused_at_the_cap_with_flat_memory(server: HttpServer) -> None:
    memory = PeakMemory(server.proc.pid).reset()
    chunk = f"{MiB:x}\r\n".encode() + b"x" * MiB + b"\r\n"
    with connect(server.port) as sock:
        sock.sendall(head(server.port, *JSON, "Transfer-Encoding: chunked"))
        sender = send_in_background(sock, 64, chunk)
        response = until_closed(sock)
        sender.join(60)
    assert status(response) == 413
    assert memory.growth() < 32 * MiB


def test_a_body_under_the_cap_still_reaches_mcp(server: HttpServer) -> None:
    """2 MiB (not of an initialize, which is bounded lower: see ``test_mcp_http.py``), of
    commas and brackets that are not values: they are in a string."""
    opened = httpx.post(server.url, json=INIT, headers=HEADERS, timeout=30)
    session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
    pad = ",[{" * (MAX_BODY // 6)
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": {"pad": pad}}}
    response = httpx.post(server.url, json=ping, headers=session, timeout=30)
    assert response.status_code == 200
    assert '"result"' in response.text


def test_a_body_of_too_many_values_is_refused_unparsed_and_opens_no_session(
    server: HttpServer,
) -> None:
    """An anonymous initialize of 1.4 M empty objects under the 4 MiB cap: parsed, it held the
    server's event loop for seconds and its session kept 108 MiB for 900 s."""
    objects = ",".join(["{}"] * ((MAX_BODY - 200) // 3))
    params = '{"protocolVersion":"2025-06-18","capabilities":{},"x":[' + objects + "]}"
    body = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":' + params + "}"
    memory = PeakMemory(server.proc.pid).reset()
    response = httpx.post(server.url, content=body, headers=HEADERS, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32600,
        "message": "Invalid Request: more than 100,000 values",
    }
    assert "mcp-session-id" not in response.headers
    assert memory.growth() < 32 * MiB


def test_an_unparsable_content_length_is_refused(server: HttpServer) -> None:
    with connect(server.port) as sock:
        sock.sendall(head(server.port, *JSON, "Content-Length: 99999999999999999999999"))
        response = until_closed(sock)
    assert status(response) in (400, 413)


def test_max_body_on_the_command_line_overrides_the_config(tmp_path: Path) -> None:
    srv = ServeWith(write_config(tmp_path), "--max-body", "4096")
    try:
        big = {**INIT, "params": {**INIT["params"], "pad": "x" * 8192}}
        refused = httpx.post(srv.url, json=big, headers=HEADERS, timeout=30)
        served = httpx.post(srv.url, json=INIT, headers=HEADERS, timeout=30)
    finally:
        srv.stop()
    assert refused.status_code == 413
    assert served.status_code == 200


def test_the_config_names_the_body_cap_under_http() -> None:
    config = SurfaceConfig.model_validate({"policy": "p.yaml", "http": {"max_body": 65536}})
    assert config.http.max_body == 65536
    assert SurfaceConfig.model_validate({"policy": "p.yaml"}).http.max_body == 4 * MiB
    with pytest.raises(ValueError, match="max_body"):
        HttpLimits(max_body=10)


def test_a_request_without_a_credential_is_refused_before_its_body_is_read(
    tmp_path: Path,
) -> None:
    """A client with no valid token made the server read (and hold) a body of up to
    ``max_body`` for up to ``body_timeout`` before its 401: 4 MiB a connection, 64
    connections an address. Now the 401 comes with the body never sent, and the connection
    closes (the rest of a body is never read as a next request)."""
    config = write_config(tmp_path, tokens=[Identity("alice")], http={"body_timeout": 600})
    srv = HttpServer(config)
    try:
        with connect(srv.port) as sock:
            lines = (*JSON, "Authorization: Bearer wrong", f"Content-Length: {MAX_BODY - 1}")
            sock.sendall(head(srv.port, *lines))  # the body is never sent
            response = until_closed(sock, timeout=120)
    finally:
        srv.stop()
    assert status(response) == 401
    assert b"connection: close" in response.lower()
