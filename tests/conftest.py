"""Session-wide fixtures: real servers started once per test session."""

from __future__ import annotations

import gc
import itertools
import os
import tempfile

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before anything imports ray
# faiss's OpenMP threads otherwise spin at full CPU between the many one-query searches a
# calibration runs (about 40% of the vector tests' CPU); set before anything loads faiss
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# audit rows kept while a trail is down go to this session's own folder, not the home folder
os.environ.setdefault("TOOLCARDS_AUDIT_SPILL", tempfile.mkdtemp(prefix="toolcards-spill-"))
from collections.abc import Iterator

import pytest

from support.cli import InProcessCli
from support.launch import start_fork_server
from support.servers import PostgresServer, RayCluster, running_postgres

_databases = itertools.count(1)


def _uses_ray(item: pytest.Item) -> bool:
    """The test needs the Ray cluster: by fixture, or by a ``ray`` parameter whose fixture asks
    for the cluster at run time (``make_team[ray]``, ``system='ray'``), or by its mark (a test
    that starts a Ray cluster of its own runs in the group too)."""
    if "ray_cluster" in getattr(item, "fixturenames", ()):
        return True
    if any(mark.args == ("ray",) for mark in item.iter_markers("xdist_group")):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(v == "ray" for v in callspec.params.values())


def _uses_module_fixture(item: pytest.Item) -> bool:
    """The test shares a module-scoped fixture (a server, a browser) with its neighbours."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {})
    return any(d and d[-1].scope == "module" for d in defs.values())


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``xdist_group`` marks for ``pytest -n N --dist loadgroup``: every Ray test in one group
    (one cluster), a module sharing a module-scoped server or browser in one group. xdist 3.8
    writes the group into the node id, which pytest 9.2 no longer lets it do (hence pytest
    below 9.2). Without xdist they change nothing."""
    for item in items:
        if _uses_ray(item):
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Refuse to run grouped tests ungrouped: were the groups lost (a pytest that xdist cannot
    suffix), every worker would start its own Ray cluster and the machine would thrash.

    Then the objects collection made (every imported module, the test items) are moved out of
    the garbage collector's sight (``gc.freeze``): they live to the end of the run, and each
    full collection during the tests would walk all of them again (the four workers'
    collections cost about 20 s of CPU in all in a 4-worker run)."""
    if session.config.getoption("loadgroup", default=False):
        for item in session.items:
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
                raise pytest.UsageError(
                    f"--dist loadgroup lost the group of {item.nodeid}: pytest-xdist cannot"
                    " group on this pytest version (see the pytest bound in pyproject.toml)"
                )
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def fork_server() -> Iterator[None]:
    """This worker's fork server for the ``toolcards`` processes tests start
    (:mod:`support.launch`); ``TOOLCARDS_TEST_FORK=0`` starts each one from nothing."""
    server = start_fork_server()
    try:
        yield
    finally:
        if server is not None:
            server.stop()


@pytest.fixture
def toolcards_cli(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> InProcessCli:
    """``toolcards`` command lines run in this process (:mod:`support.cli`)."""
    return InProcessCli(monkeypatch, capsys, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL 15 cluster on 127.0.0.1 (skipped when it cannot start here)."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database (one per test)."""
    return postgres_server.fresh_database(f"t{next(_databases)}")


class _RayHolder:
    """The worker's Ray cluster, started by the first test that asks for it. Under xdist every
    Ray test of the run is in one group, run one after another on one worker, so the cluster
    stops after the group's last test instead of idling until the worker ends (its processes
    cost about 0.04 of a core while idle); run without xdist, it lives until the session ends."""

    cluster: RayCluster | None = None

    @classmethod
    def get(cls) -> RayCluster:
        if cls.cluster is None:
            cluster = RayCluster()
            try:
                cluster.start()
            except Exception as exc:
                cluster.stop()
                pytest.skip(f"a Ray cluster cannot start here: {exc}")
            cls.cluster = cluster
        return cls.cluster

    @classmethod
    def stop(cls) -> None:
        cluster, cls.cluster = cls.cluster, None
        if cluster is not None:
            cluster.stop()


@pytest.fixture
def ray_cluster() -> RayCluster:
    """A two-node Ray cluster on 127.0.0.1, started once for the tests in a row that use it
    (skipped without the ray extra)."""
    pytest.importorskip("ray")
    return _RayHolder.get()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the test's own teardown: the last of the Ray group on an xdist worker stops the
    cluster."""
    try:
        return (yield)
    finally:
        last = nextitem is None or not _uses_ray(nextitem)
        if last and _RayHolder.cluster is not None and os.environ.get("PYTEST_XDIST_WORKER"):
            _RayHolder.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _RayHolder.stop()
