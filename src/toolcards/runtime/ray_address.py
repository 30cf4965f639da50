"""Ray cluster addresses: a bounded reachability check before Ray's long retries, and the
refusal to join a second cluster from a process already connected to one."""

from __future__ import annotations

import socket
from typing import Any

from toolcards.runtime.system import ActorSystemUnavailable

__all__ = ["check_reachable", "check_same_cluster"]


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
