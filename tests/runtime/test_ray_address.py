"""A process holds one Ray connection: a ``RayActorSystem`` naming another cluster's address
is refused in one line (it used to join the connected one silently), while the connected
cluster under another spelling of its address is joined."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from toolcards.runtime import RayActorSystem
from toolcards.runtime.system import ActorSystemUnavailable


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_address_of_another_cluster_is_refused_once_ray_is_connected(
    ray_cluster: Any,
) -> None:
    RayActorSystem(address=ray_cluster.address, namespace="addr-one").connect()
    other = RayActorSystem(address=f"127.0.0.1:{_closed_port()}", namespace="addr-two")
    with pytest.raises(ActorSystemUnavailable, match="already connected to the Ray cluster at"):
        other.connect()


def test_the_connected_cluster_under_another_spelling_is_joined(ray_cluster: Any) -> None:
    RayActorSystem(address=ray_cluster.address, namespace="addr-one").connect()
    port = ray_cluster.address.rsplit(":", 1)[1]
    same = RayActorSystem(address=f"localhost:{port}", namespace="addr-three")
    assert same.connect().is_initialized()
    assert same.cluster() == RayActorSystem(address=ray_cluster.address).cluster()
