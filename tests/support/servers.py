"""Real servers for the test session: a throwaway PostgreSQL cluster and a local Ray cluster.

Each starts once per session (``tests/conftest.py``), listens on 127.0.0.1 only, and is
stopped at the end. When a server cannot start here, the tests that need it are skipped with
the reason (CI installs everything, so there they run).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from support.processes import free_port


def _pg_bindir() -> Path | None:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    for version in ("17", "16", "15", "14"):
        candidate = Path(f"/usr/lib/postgresql/{version}/bin")
        if (candidate / "initdb").exists():
            return candidate
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _memory_folder() -> str | None:
    """``/dev/shm`` when it is a memory file system with room (4 GiB free) this process may
    write, else None. A test cluster's files there cost the kernel a sixth of what they cost
    on a disk's file system: each ``CREATE DATABASE`` writes some 300 files (about 12 ms of
    the server's CPU there, 85 ms in ``/tmp`` on ext4)."""
    folder = "/dev/shm"
    try:
        room = os.statvfs(folder)
    except OSError:
        return None
    if not os.access(folder, os.W_OK) or room.f_bavail * room.f_frsize < 4 << 30:
        return None
    with open("/proc/mounts", encoding="utf-8") as mounts:
        if not any(line.split()[1:3] == [folder, "tmpfs"] for line in mounts):
            return None
    return folder


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster for a fixture: skipped when it cannot start here,
    removed afterwards."""
    import pytest

    try:
        server = PostgresServer().start()
    except Exception as exc:  # no server binaries, or not startable on this machine
        pytest.skip(f"PostgreSQL is not available: {exc}")
    try:
        yield server
    finally:
        server.remove()


class PostgresServer:
    """``initdb`` into a temp dir, ``postgres`` on 127.0.0.1:<free port>; ``url`` to connect.

    As root, the cluster runs as the ``postgres`` user (the server refuses root). Tests run it
    with ``fsync=off`` and its files in memory where they can (speed); benchmarks pass
    ``fsync=True``, the server's default, and keep its files on disk.
    """

    def __init__(self, *, fsync: bool = False) -> None:
        self.fsync = fsync
        self.bindir = _pg_bindir()
        if self.bindir is None:
            raise RuntimeError("PostgreSQL server binaries (initdb) are not installed")
        where = None if fsync else _memory_folder()
        self.dir = Path(tempfile.mkdtemp(prefix="toolcards-pg-", dir=where))
        self.data = self.dir / "data"
        self.port = free_port()
        self.user = "toolcards"
        self.password = "s3cret-pw"
        self.process: subprocess.Popen[bytes] | None = None
        self._run_as: list[str] = []
        self._frozen: list[int] = []
        if os.geteuid() == 0:
            pwd.getpwnam("postgres")
            shutil.chown(self.dir, "postgres", "postgres")
            self._run_as = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/toolcards"

    def start(self) -> PostgresServer:
        """Create the cluster on first use, then run the server (again, after :meth:`stop`)."""
        first = not self.data.exists()
        if first:
            self._initdb()
        self._launch()
        if first:
            self._createdb()
        return self

    def _initdb(self) -> None:
        assert self.bindir is not None
        pwfile = self.dir / "pw"
        pwfile.write_text(self.password)
        if self._run_as:
            shutil.chown(pwfile, "postgres", "postgres")
        subprocess.run(
            [
                *self._run_as,
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                self.user,
                "--pwfile",
                str(pwfile),
                "-A",
                "scram-sha-256",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
        )

    def _launch(self) -> None:
        assert self.bindir is not None
        self.process = subprocess.Popen(
            [
                *self._run_as,
                str(self.bindir / "postgres"),
                "-D",
                str(self.data),
                "-k",
                str(self.dir),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"fsync={'on' if self.fsync else 'off'}",
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "log", "ab"),  # noqa: SIM115 - closed with the process
        )
        self._wait_ready()

    def _createdb(self) -> None:
        assert self.bindir is not None
        subprocess.run(
            [
                str(self.bindir / "createdb")
                if (self.bindir / "createdb").exists()
                else "createdb",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                self.user,
                "toolcards",
            ],
            check=True,
            capture_output=True,
            env={**os.environ, "PGPASSWORD": self.password},
        )

    def _wait_ready(self, timeout: float = 30.0) -> None:
        """Until the server accepts sessions (after a crash it listens before it has
        recovered)."""
        import psycopg

        deadline = time.monotonic() + timeout
        admin = self.url.rsplit("/", 1)[0] + "/postgres"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError((self.dir / "log").read_text()[-2000:])
            with contextlib.suppress(OSError, psycopg.Error):
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                psycopg.connect(admin, connect_timeout=2).close()
                return
            time.sleep(0.1)
        raise RuntimeError("PostgreSQL did not start in time")

    def fresh_database(self, name: str) -> str:
        """A new empty database on this server; its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl stop -m mode``: smart, fast or immediate); the data stays
        for :meth:`start`."""
        if self.process is not None and self.process.poll() is None:
            assert self.bindir is not None
            self.thaw()  # a frozen server cannot stop
            subprocess.run(  # signals to runuser would not reach the server: ask pg_ctl
                [*self._run_as, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m",
                 mode, "-w", "-t", "20", "stop"],
                capture_output=True, check=False, timeout=60,
            )  # fmt: skip
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def restart(self, mode: str = "immediate") -> None:
        """Stop the server in ``mode`` (immediate: as a crash would) and start it again."""
        self.stop(mode)
        self.start()

    def _server_pids(self) -> list[int]:
        """The postmaster and every process it forked (backends, background workers)."""
        pidfile = self.data / "postmaster.pid"
        if not pidfile.exists():
            return []
        master = int(pidfile.read_text().split()[0])
        found = [master]
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == master:
                    found.append(int(entry.name))
        return found

    def freeze(self) -> None:
        """SIGSTOP the server and its backends: connections stay open, nothing answers."""
        self._frozen = self._server_pids()
        for pid in self._frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT what :meth:`freeze` stopped (and ``runuser``, which stops with its child)."""
        frozen, self._frozen = self._frozen, []
        if frozen and self.process is not None:
            frozen.append(self.process.pid)
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def refuse(self, url: str) -> None:
        """The server runs and refuses every new session to the database of ``url``; its
        open sessions are ended (the next statement of each finds its connection lost, and
        reconnecting is refused) until :meth:`admit`."""
        import psycopg

        database = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            )

    def admit(self, url: str) -> None:
        """Undo :meth:`refuse`."""
        import psycopg

        database = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')

    def remove(self) -> None:
        """Stop the server and delete its cluster (the end of the session)."""
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


HEALTH_CHECKS = {
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 3000,
    "health_check_failure_threshold": 4,
}
"""The test cluster declares a node whose raylet stopped answering dead after about 4-7 s
(Ray's defaults: 3 s, 10 s and 5, about 15-25 s): the fault tests that kill a raylet wait
that long for what follows (the actor placed again), which is the same either way."""


class RayCluster:
    """A real two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``): a head
    and one more node, one CPU and 100 MB of object store each, on 127.0.0.1."""

    def __init__(self, nodes: int = 2) -> None:
        self.nodes = nodes
        self.cluster: object = None
        self.address = ""

    def start(self) -> RayCluster:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        tests = str(Path(__file__).resolve().parents[1])
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if tests not in paths:  # workers import the tests' actor classes by module name
            os.environ["PYTHONPATH"] = os.pathsep.join([tests, *paths])
        with contextlib.suppress(PermissionError):  # where allowed (root): the cluster's
            os.nice(-5)  # processes go first: a Ray test waits on many of their hops in turn
        import ray
        from ray.cluster_utils import Cluster

        node = {
            "num_cpus": 1,
            "object_store_memory": 100 * 1024 * 1024,
            "include_log_monitor": False,  # no driver here prints its workers' output
        }
        # no autoscaler monitor: the cluster has the nodes it starts with (1.4 s of CPU saved)
        head = {
            **node,
            "include_dashboard": False,
            "no_monitor": True,
            "_system_config": HEALTH_CHECKS,
        }
        cluster = Cluster(initialize_head=True, head_node_args=head)
        for _ in range(self.nodes - 1):
            cluster.add_node(**node)
        self.cluster = cluster
        self.address = str(cluster.address)
        ray.init(address=self.address, include_dashboard=False, log_to_driver=False)
        return self

    def stop(self) -> None:
        import ray

        with contextlib.suppress(Exception):
            ray.shutdown()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.shutdown()  # type: ignore[attr-defined]
