"""A one-node Ray head with token authentication, for the token tests: run with
``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN`` in its own environment, it prints the head's GCS
address on a line and shuts the cluster down when its standard input closes (the test ended,
or the test process died). No CPUs (no workers start) and a small object store."""

from __future__ import annotations

import sys

from ray.cluster_utils import Cluster


def main() -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "object_store_memory": 75 * 1024 * 1024,
            "include_dashboard": False,
            "include_log_monitor": False,
        },
    )
    try:
        print(cluster.address, flush=True)
        for _ in sys.stdin:  # until the test closes it
            pass
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
