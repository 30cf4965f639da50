"""Slow clients of `toolcards serve --transport http` are dropped: half-sent headers after
``http.header_timeout``, a trickled body after ``http.body_timeout``; one address holds at
most ``http.per_client`` connections; SIGTERM stops the server while slow clients hang on
(a real server process, raw sockets)."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from raw_http import connect, head, status, until_closed

from surfaces.surface_support import HttpServer, write_config
from toolcards.surfaces.http.limits import HttpLimits

pytestmark = pytest.mark.timeout(180)

SHORT = {"header_timeout": 1, "body_timeout": 1.5}
JSON = ("Content-Type: application/json", "Accept: application/json, text/event-stream")


def serve(directory: Path, **http: float) -> HttpServer:
    return HttpServer(write_config(directory, http=http))


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    srv = serve(tmp_path_factory.mktemp("short"), **SHORT)
    yield srv
    srv.stop()


def half_sent_headers(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = connect(port, source)
    sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Ty".encode())
    return sock


def half_sent_body(port: int) -> socket.socket:
    sock = connect(port)
    sock.sendall(head(port, *JSON, "Content-Length: 100") + b'{"jsonrpc": "2.0", ')
    return sock


def test_half_sent_headers_are_dropped_after_the_header_timeout(short: HttpServer) -> None:
    with half_sent_headers(short.port) as sock:
        response = until_closed(sock, timeout=30)
    assert status(response) == 408


def test_headers_trickled_byte_by_byte_are_dropped_at_the_same_deadline(
    short: HttpServer,
) -> None:
    request = head(short.port, *JSON, "Content-Length: 2") + b"{}"
    with connect(short.port) as sock:
        for byte in request:  # one byte per 50 ms, unless the server speaks first
            if select.select([sock], [], [], 0.05)[0]:
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
        response = until_closed(sock, timeout=30)
    assert status(response) == 408


def test_a_body_trickled_slowly_is_dropped_after_the_body_timeout(short: HttpServer) -> None:
    with half_sent_body(short.port) as sock:
        response = until_closed(sock, timeout=30)
    assert status(response) == 408
    assert b"request body took longer" in response


def test_a_prompt_request_on_the_same_server_is_served(short: HttpServer) -> None:
    with connect(short.port) as sock:
        sock.sendall(head(short.port, *JSON, "Content-Length: 2", "Connection: close") + b"{}")
        response = until_closed(sock, timeout=30)
    assert status(response) == 400  # answered by the JSON-RPC edge: not JSON-RPC


@pytest.mark.slow
def test_with_the_defaults_a_half_sent_request_is_dropped_within_30_s(tmp_path: Path) -> None:
    defaults = HttpLimits()
    assert defaults.header_timeout + defaults.body_timeout <= 30
    srv = HttpServer(write_config(tmp_path))
    try:
        with half_sent_body(srv.port) as sock:
            response = until_closed(sock, timeout=30)
    finally:
        srv.stop()
    assert status(response) == 408


def answer_and_end(sock: socket.socket) -> tuple[bytes, bool]:
    """What the server sends until the end of its stream, and whether the stream ended in a
    reset instead (``until_closed`` takes a reset for an end)."""
    sock.settimeout(75)
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received, True
        if not chunk:
            return received, False
        received += chunk


def reset_after_sending(sock: socket.socket) -> bool:
    """Whether a connection whose server closed its side resets what is sent to it (the server
    closed it whole), or takes it (the server still reads). Sockets are asked in the order of
    their connections: a reset comes at once (loopback), so by the time a later one resets an
    earlier one would have too."""
    try:
        sock.sendall(b"more")
        readable, _, _ = select.select([sock], [], [], 0.5)
        if readable:
            sock.recv(1)  # an end (already read) or a reset
        sock.sendall(b"more")
    except (BrokenPipeError, ConnectionResetError):
        return True
    return False


def test_one_address_holds_at_most_per_client_connections(tmp_path: Path) -> None:
    srv = serve(tmp_path, per_client=3, header_timeout=120)
    # not from 127.0.0.1: the start-up check's connection from there may be counted a moment
    held = [half_sent_headers(srv.port, "127.0.0.3") for _ in range(3)]
    try:
        with connect(srv.port, "127.0.0.3") as extra:  # bounds, not measurements (a loaded
            refused = until_closed(extra, timeout=75)  # machine is slow)
        with connect(srv.port, "127.0.0.3") as late:  # its request sent after the answer came
            select.select([late], [], [], 75)
            late.sendall(head(srv.port, *JSON, "Content-Length: 2", "Connection: close") + b"{}")
            late_answer, reset = answer_and_end(late)
            late.sendall(b"more")  # the server still reads what a refused client sends
        # as clients send: each its whole request at once, then it reads; several at once,
        # so that requests arrive before the server has taken their connections
        eager = [connect(srv.port, "127.0.0.3") for _ in range(20)]
        for sock in eager:
            sock.sendall(head(srv.port, *JSON, "Content-Length: 2", "Connection: close") + b"{}")
        answers = [status(until_closed(sock, timeout=75)) for sock in eager]
        for sock in eager:
            sock.close()
        with connect(srv.port, source="127.0.0.2") as other:
            other.sendall(head(srv.port, *JSON, "Content-Length: 2", "Connection: close") + b"{}")
            served = until_closed(other, timeout=75)
        # refused connections still read are bounded too: per_client of an address, the next
        # ones closed at once (another address: the ones above may still be closing)
        held += [half_sent_headers(srv.port, "127.0.0.4") for _ in range(3)]
        kept = [connect(srv.port, "127.0.0.4") for _ in range(5)]
        held += kept
        ends = [answer_and_end(sock) for sock in kept]
        resets = [reset_after_sending(sock) for sock in kept]
    finally:
        for sock in held:
            sock.close()
        srv.stop()
    assert [status(answer) for answer, _ in ends] == [429] * 5
    assert resets == [False] * 3 + [True] * 2
    assert status(refused) == 429
    assert answers == [429] * 20  # the answer, never a reset that loses it
    # answered, then the end of the stream: no reset (which may lose the answer) though the
    # request came after the answer
    assert status(late_answer) == 429 and not reset
    assert status(served) == 400  # reached the JSON-RPC edge


def test_closed_connections_free_their_addresss_slots(tmp_path: Path) -> None:
    srv = serve(tmp_path, per_client=2, header_timeout=120)
    try:
        for _ in range(5):  # far more connections than slots, one after the other
            with connect(srv.port) as sock:
                sock.sendall(
                    head(srv.port, *JSON, "Content-Length: 2", "Connection: close") + b"{}"
                )
                assert status(until_closed(sock, timeout=30)) == 400
    finally:
        srv.stop()


def test_websocket_upgrades_free_their_addresss_slots(tmp_path: Path) -> None:
    """An upgrade to WebSocket (no surface speaks it) is answered like any request that is
    not one; it handed the connection to a WebSocket protocol that never gave back its slot,
    so per_client upgrades locked the address out until a restart."""
    srv = serve(tmp_path, per_client=2, header_timeout=120)
    upgrade = (
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
    )
    try:
        for _ in range(5):
            with connect(srv.port) as sock:  # answered, then closed by the client
                sock.sendall(head(srv.port, *upgrade, method="GET"))
                sock.settimeout(30)
                assert status(sock.recv(4096)) not in (101, 429)
        with connect(srv.port) as sock:
            sock.sendall(head(srv.port, *JSON, "Content-Length: 2", "Connection: close") + b"{}")
            assert status(until_closed(sock, timeout=30)) == 400
    finally:
        srv.stop()


def stopped_before_any_wait_ran_out(srv: HttpServer, clients: list[socket.socket]) -> bool:
    """SIGTERM ``srv`` while ``clients`` hang on; whether it exited within 45 s: before its
    60 s shutdown deadline and its 300 s read timeouts could end, so it did not wait for them
    (it measures about 4 s here; the bound leaves room for a loaded machine)."""
    try:
        srv.proc.send_signal(signal.SIGTERM)
        try:
            srv.proc.wait(timeout=45)
        except subprocess.TimeoutExpired:
            return False
        return True
    finally:
        for sock in clients:
            sock.close()
        srv.stop()


def test_sigterm_stops_the_server_while_slow_clients_hang_on(tmp_path: Path) -> None:
    """Requests still arriving are dropped at once: not even a long shutdown deadline waits."""
    srv = serve(tmp_path, header_timeout=300, body_timeout=300, shutdown_timeout=60)
    slow = [half_sent_headers(srv.port) for _ in range(10)]
    slow += [half_sent_body(srv.port) for _ in range(10)]
    assert stopped_before_any_wait_ran_out(srv, slow)
