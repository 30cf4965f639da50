"""Outgoing HTTP clients share one TLS context per library, and it still verifies servers."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest

from toolcards.core.tls import default_verify
from toolcards.tools.mcp.wire import bounded_client
from toolcards.tools.mcp.wire_json import WireBounds


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


@pytest.fixture
def tls_server(self_signed: tuple[Path, Path]) -> Iterator[str]:
    """An HTTPS server on loopback with a self-signed certificate, answering 200 ``ok``."""
    cert, key = self_signed
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                plain, _ = listener.accept()
            except TimeoutError:
                continue
            with plain:
                plain.settimeout(5)
                try:
                    with context.wrap_socket(plain, server_side=True) as conn:
                        conn.recv(65536)
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                except (ssl.SSLError, OSError):
                    pass  # the client refused the certificate

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}/"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


@pytest.mark.parametrize("library", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_every_client_of_a_library_shares_one_verifying_context(library: object) -> None:
    first = default_verify(library, trust_env=True)  # type: ignore[arg-type]
    assert isinstance(first, ssl.SSLContext)
    assert first is default_verify(library)  # type: ignore[arg-type]
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    untrusting = default_verify(library, trust_env=False)  # type: ignore[arg-type]
    assert untrusting is not first and untrusting.verify_mode == ssl.CERT_REQUIRED


@pytest.mark.anyio
async def test_the_mcp_client_with_the_shared_context_refuses_a_self_signed_server(
    tls_server: str, self_signed: tuple[Path, Path]
) -> None:
    make = bounded_client(WireBounds(), tls_server)
    async with make() as client:
        with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(tls_server)
    # a caller's own verify= is kept: trusting this certificate, the same server answers
    trusting = ssl.create_default_context(cafile=str(self_signed[0]))
    async with make(verify=trusting) as client:
        assert (await client.get(tls_server)).text == "ok"
