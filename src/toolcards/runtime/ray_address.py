"""Ray cluster addresses: bounded checks before Ray's long retries (something listens, and
the cluster admits this process's token), and the refusal to join a second cluster from a
process already connected to one."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from toolcards.runtime.system import ActorSystemUnavailable

__all__ = ["check_admitted", "check_reachable", "check_same_cluster"]

_PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"
"""The first call a Ray driver makes to the cluster's GCS (an empty request)."""


def _host_port(address: str) -> tuple[str, str] | None:
    """``(ip, port)`` of a ``host:port`` address (the host resolved), None when it is not one."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    try:
        return socket.gethostbyname(host.strip("[]")), port
    except OSError:
        return None


def check_same_cluster(ray: Any, address: str | None) -> None:
    """Ray is already initialised in this process: an ``address`` naming another cluster is
    refused (a process holds one Ray connection; joining the one it has would split a team
    across clusters). A Ray client address (``ray://``) or ``auto`` is not compared."""
    if not address or address in ("auto", "local") or address.startswith("ray://"):
        return
    try:
        current = str(ray.get_runtime_context().gcs_address)
    except Exception:  # a Ray client connection does not see the GCS address
        return
    wanted, have = _host_port(address), _host_port(current)
    if wanted is not None and have is not None and wanted != have:
        raise ActorSystemUnavailable(
            f"this process is already connected to the Ray cluster at {current}; it cannot "
            f"also join {address} (one Ray cluster per process: give that address or none)"
        )


def check_reachable(address: str, timeout: float) -> None:
    """A bounded TCP check of ``host:port`` (``ray://`` too) before Ray's long retries."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return
    except OSError as exc:
        raise ActorSystemUnavailable(
            f"cannot reach the Ray cluster at {address} ({exc}); start it with "
            "`ray start --head` (or give another address)"
        ) from None


def _auth_token() -> str | None:
    """The token Ray sends from this process: with ``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``,
    else the file ``RAY_AUTH_TOKEN_PATH`` names, else ``~/.ray/auth_token`` (Ray's documented
    order); without that mode, none. A file is read up to 4096 bytes. A token a gRPC header
    cannot carry (not printable ASCII: a Ray token is hex) is refused in one line."""
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return None
    token, source = os.environ.get("RAY_AUTH_TOKEN", "").strip(), "RAY_AUTH_TOKEN"
    if not token:
        source = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
        try:
            with open(source, "rb") as file:
                token = file.read(4096).decode("ascii", "replace").strip()
        except OSError:
            return None
    if not (token.isascii() and token.isprintable()):
        raise ActorSystemUnavailable(
            f"the Ray token in {source} is not printable ASCII text (a Ray token is hex): "
            "export RAY_AUTH_TOKEN=<the token the cluster was started with>"
        )
    return token or None


def check_admitted(address: str, timeout: float) -> None:
    """The cluster at ``address`` (a GCS ``host:port``) answers this process's first call
    with its token, as Ray would send it; a refusal is one line naming ``RAY_AUTH_TOKEN``
    (Ray itself retries a refused call for about 20 s, printing a line per try). Anything
    but a refusal is left to Ray."""
    if address.startswith("ray://") or address in ("auto", "local"):
        return
    try:
        import grpc  # type: ignore[import-untyped]  # lazy: the ray extra brings it
    except ImportError:
        return
    token = _auth_token()
    metadata = [("authorization", f"Bearer {token}")] if token else None
    with grpc.insecure_channel(address) as channel:
        probe = channel.unary_unary(_PROBE)
        try:
            probe(b"", timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAUTHENTICATED:
                return
            if token is None:
                raise ActorSystemUnavailable(
                    f"the Ray cluster at {address} needs its token: export RAY_AUTH_MODE=token "
                    "and RAY_AUTH_TOKEN=<the token the cluster was started with>"
                ) from None
            raise ActorSystemUnavailable(
                f"the Ray cluster at {address} refused this process's token: export "
                "RAY_AUTH_TOKEN=<the token the cluster was started with> (RAY_AUTH_MODE=token)"
            ) from None
