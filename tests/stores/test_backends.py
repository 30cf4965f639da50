"""Store backends by scheme: a distribution installed on ``sys.path`` (a real dist-info with a
``toolcards.stores`` entry point) adds ``memtest://``, served by the pure-Python double, and a
team runs on it end to end. The scheme names an entry point the host installed and nothing
else: a dotted path in a location is never imported, an entry point cannot take over a
built-in kind, and one that is not a StoreBackend is one clear error."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolcards.runtime import StateNamespace, Team
from toolcards.stores import (
    MemoryStore,
    StoreError,
    StoreLocation,
    UnknownStoreScheme,
    open_audit_table,
    open_team_store,
)
from toolcards.stores.location import ENTRY_POINT_GROUP
from toolcards.surfaces.config import parse_config
from toolcards.tools.planning.actor import ACTOR_NAME
from toolcards.tools.planning.card import PlanningTool

PLUGIN = "toolcards_test_store_plugin"
NEVER = "toolcardsteststorenever"
"""A module beside the plugin that no entry point names (a location naming it must not load it)."""

BACKEND = textwrap.dedent(
    """
    from toolcards.stores import MemoryStore, StoreBackend

    OPENED: dict[str, MemoryStore] = {}
    IMPORTED = True


    class MemoryBackend(StoreBackend):
        def team_store(self, where, *, durable, connect_timeout):
            OPENED[where.target] = store = MemoryStore(where.target)
            return store


    class SharedBackend(MemoryBackend):
        shared = True


    NotABackend = 42
    """
)

ENTRIES = {
    "memtest": "MemoryBackend",
    "memshared": "SharedBackend",
    "membroken": "NotABackend",
    "postgresql": "SharedBackend",  # a built-in scheme and kinds: never taken over
    "postgres": "SharedBackend",
    "sqlite": "SharedBackend",
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The distribution, installed for this module's tests: its module and its dist-info."""
    root = tmp_path_factory.mktemp("site")
    (root / f"{PLUGIN}.py").write_text(BACKEND)
    (root / f"{NEVER}.py").write_text(BACKEND)
    info = root / f"{PLUGIN}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PLUGIN}\nVersion: 1.0\n")
    lines = [f"{name} = {PLUGIN}:{target}" for name, target in ENTRIES.items()]
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n" + "\n".join(lines) + "\n")
    sys.path.insert(0, str(root))
    try:
        yield
    finally:
        sys.path.remove(str(root))
        sys.modules.pop(PLUGIN, None)
        sys.modules.pop(NEVER, None)


def test_an_installed_scheme_parses_and_is_named_among_the_accepted(installed: object) -> None:
    where = StoreLocation.parse("MEMTEST://team-a")
    assert (where.kind, where.target, where.path) == ("memtest", "MEMTEST://team-a", None)
    with pytest.raises(UnknownStoreScheme) as caught:
        StoreLocation.parse("mysql://u:pw@h/x")
    assert "memtest://" in str(caught.value) and "memshared://" in str(caught.value)
    assert "pw" not in str(caught.value)


def test_the_backend_says_whether_a_location_is_shared(installed: object) -> None:
    assert not StoreLocation.parse("memtest://a").shared
    assert StoreLocation.parse("memshared://a").shared
    assert StoreLocation.parse("postgresql://u@127.0.0.1/db").shared
    assert not StoreLocation.parse("team.db").shared


def test_a_config_on_a_shared_installed_scheme_keeps_its_stores_there(
    installed: object, tmp_path: Path
) -> None:
    data = {"store": "memshared://cfg", "system": "ray", "policy": "policy.yaml", "team_id": "t"}
    config = parse_config(data, base_dir=tmp_path, host_written=True)
    assert config.shared_store
    assert config.approvals_location == "memshared://cfg"
    assert config.rate_limits_location == "memshared://cfg"


def test_a_team_runs_on_an_installed_backend(installed: object) -> None:
    with Team("t1", store="memtest://board") as team:
        factory = team.bind([PlanningTool(vector_store=False)], member="ann")
        tools = {f.__name__: f for f in factory.get_tools()}
        tools["update_planning"](create=[{"description": "one"}, {"description": "two"}])
        assert "two" in tools["get_planning_task"](id=2)
        store = sys.modules[PLUGIN].OPENED["memtest://board"]
        assert isinstance(store, MemoryStore)
        assert StateNamespace(store, "t1", ACTOR_NAME).count("task:") == 2
        assert [r.tool_id for r in store.read_events("t1", 0)].count(ACTOR_NAME) >= 1
        assert store.recorded_actors("t1")[0][0] == ACTOR_NAME
    assert store.closed  # the team's stop closed the store it opened


def test_a_store_the_backend_does_not_keep_is_one_clear_error(installed: object) -> None:
    with pytest.raises(StoreError, match="the store at memtest://a keeps no audit trail"):
        open_audit_table("memtest://a", "t1", sync=False)


def test_an_entry_point_that_is_not_a_backend_is_refused(installed: object) -> None:
    with pytest.raises(StoreError, match="'membroken' in toolcards.stores is not a StoreBackend"):
        open_team_store("membroken://a")


def test_an_entry_point_never_takes_over_a_built_in_kind(installed: object, tmp_path: Path) -> None:
    assert type(open_team_store(tmp_path / "t.db")).__name__ == "TeamStore"
    assert StoreLocation.parse("postgres://u@127.0.0.1/db").kind == "postgres"
    with pytest.raises(UnknownStoreScheme):
        StoreLocation.parse("sqlite:///x.db")


def test_a_dotted_path_in_a_location_is_never_imported(installed: object) -> None:
    for text in (f"{NEVER}://x", f"{NEVER}.MemoryBackend://x"):
        with pytest.raises(UnknownStoreScheme):
            open_team_store(text)
    assert StoreLocation.parse(f"{NEVER}:MemoryBackend").kind == "sqlite"  # a file name
    assert NEVER not in sys.modules
