from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from runtime.conftest import TeamMaker
from runtime.stateful_cards import COUNTER, CounterActor, CounterCard, CounterConfig
from toolcards.runtime import ACTOR_TYPES, StoreLockedError, Team, ToolActor

TESTS_DIR = Path(__file__).resolve().parents[1]

WRITER = textwrap.dedent(
    """
    import sys
    from runtime.stateful_cards import COUNTER, CounterActor, CounterConfig
    from toolcards.runtime import Team

    team = Team("durable", store=sys.argv[1])
    counter = team.tool_actor(COUNTER, CounterActor, CounterConfig())
    print("ready", flush=True)
    if sys.argv[2] == "hold":
        sys.stdin.readline()
    else:
        i = 0
        while True:
            i += 1
            total = counter.ask(CounterActor.add, f"item-{i}")
            print(total, flush=True)
    """
)


def _spawn(store: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), *sys.path])}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_sigkill_mid_writes_then_resume_keeps_the_last_committed_state(tmp_path: Path) -> None:
    store = tmp_path / "team.db"
    proc = _spawn(store, "write")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    acknowledged = 0
    while acknowledged < 300:
        acknowledged = int(proc.stdout.readline())
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL

    with sqlite3.connect(store) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Team.resume("durable", store) as team:
        counter = team.actor(COUNTER)
        assert counter is not None  # restarted from the roster, with its config
        total = counter.ask(CounterActor.value)
        items = counter.ask(CounterActor.items)
        assert total >= acknowledged
        assert len(items) == total  # each add committed its item and the total together
        assert items[-1] == (f"item:{total:08d}", f"item-{total}")
        seqs = [e.seq for e in team.events() if e.tool_id == COUNTER]
        assert seqs == list(range(1, total + 1))
        assert counter.ask(CounterActor.add, "after") == total + 1


def test_a_second_writer_process_gets_a_clear_error(tmp_path: Path) -> None:
    store = tmp_path / "team.db"
    proc = _spawn(store, "hold")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(StoreLockedError, match=f"pid {proc.pid}"):
            Team("durable", store=store)
    finally:
        proc.kill()
        proc.wait(30)
    with Team.resume("durable", store) as team:  # the lock died with its holder
        assert team.actor(COUNTER) is not None


def test_resume_restores_state_of_a_cleanly_stopped_team(make_team: TeamMaker) -> None:
    team = make_team("clean")
    factory = team.bind([CounterCard(step=3)], member="alice")
    add = {t.__name__: t for t in factory.get_tools()}["counter_add"]
    add("a")
    add("b")
    team.stop(everywhere=True)
    with make_team.resume("clean") as team:
        assert team.actor(COUNTER) is not None  # restarted from the store, before any card
        factory = team.bind([CounterCard(step=3)], member="alice")
        value = {t.__name__: t for t in factory.get_tools()}["counter_value"]
        assert value() == 6


def test_resume_of_an_unknown_team_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="nobody"):
        Team.resume("nobody", tmp_path / "empty.db")


def test_resumed_actor_keeps_its_recorded_config(make_team: TeamMaker) -> None:
    make_team("cfg").tool_actor(COUNTER, CounterActor, CounterConfig(step=2))
    make_team.close()
    with make_team.resume("cfg") as team, pytest.raises(ValueError, match="already exists"):
        team.tool_actor(COUNTER, CounterActor, CounterConfig(step=7))


class Stuck(ToolActor):
    release = threading.Event()

    def block(self) -> None:
        self.release.wait(60)


def test_stop_with_a_stuck_actor_returns_and_reports_it() -> None:
    team = Team("stuck")
    try:
        stuck = team.tool_actor("#Stuck", Stuck)
        team.tool_actor(COUNTER, CounterActor)
        stuck.tell(Stuck.block)
        report = team.stop(timeout=2.0)
        assert report.abandoned == ["#Stuck"]
        assert COUNTER in report.stopped
        assert not report.clean
        assert team.stop() is report
    finally:
        Stuck.release.set()


def test_stop_tears_down_members_before_tool_actors() -> None:
    order: list[str] = []

    class Recorder:
        def __init__(self, name: str) -> None:
            self.name = name

        def on_stop(self) -> None:
            order.append(self.name)

    team = Team("phases")
    team.spawn("#Tool", lambda: Recorder("#Tool"))
    team.spawn("@member", lambda: Recorder("@member"))
    report = team.stop(timeout=5)
    assert order == ["@member", "#Tool"]
    assert report.stopped == ["@member", "#Tool"]


def test_store_rows_are_per_key(tmp_path: Path) -> None:
    store = tmp_path / "team.db"
    with Team("rows", store=store) as team:
        counter = team.tool_actor(COUNTER, CounterActor)
        for i in range(5):
            counter.ask(CounterActor.add, f"x{i}")
    with sqlite3.connect(store) as conn:
        rows = conn.execute(
            "SELECT key FROM state WHERE team_id='rows' AND actor=? ORDER BY key", (COUNTER,)
        ).fetchall()
    assert [r[0] for r in rows] == [f"item:{i:08d}" for i in range(1, 6)] + ["total"]


def test_actor_whose_tag_is_unknown_comes_back_when_asked_for(tmp_path: Path) -> None:
    class Local(ToolActor):
        def on_start(self) -> None:
            self.n = self.state.get("n") or 0

        def bump(self) -> int:
            self.n += 1
            self.state.put("n", self.n)
            return self.n

    store = tmp_path / "team.db"
    with Team("lazy", store=store) as team:
        team.tool_actor("#Local", Local).ask(Local.bump)
    ACTOR_TYPES.forget(Local.actor_tag)  # as in a process that never defined the class
    with Team.resume("lazy", store) as team:
        assert team.actor("#Local") is None
        deferred = [e.payload for e in team.events() if e.payload.get("name") == "#Local"]
        assert deferred[-1]["event"] == "actor_restore_deferred"
        assert "no tool actor class is registered" in deferred[-1]["reason"]
        assert team.tool_actor("#Local", Local).ask(Local.bump) == 2


def _plant_actor_row(store: Path, team_id: str, tag: str) -> None:
    with Team(team_id, store=store):
        pass
    with sqlite3.connect(store) as conn:
        conn.execute("INSERT INTO actors VALUES (?, '#Planted', ?, NULL, NULL, 0)", (team_id, tag))


def test_resume_never_imports_a_module_named_in_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "planted_module.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\nclass Thing: pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "team.db"
    _plant_actor_row(store, "planted", "planted_module:Thing")
    with Team.resume("planted", store) as team:
        reasons = [e.payload.get("reason", "") for e in team.events()]
    assert not marker.exists()
    assert "planted_module" not in sys.modules
    assert any(
        "no tool actor class is registered under 'planted_module:Thing'" in r for r in reasons
    )


def test_resume_never_calls_a_builtin_named_in_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "team.db"
    _plant_actor_row(store, "builtin", "builtins:print")
    with Team.resume("builtin", store) as team:
        assert team.actor("#Planted") is None
        events = [e.payload.get("event") for e in team.events()]
    assert "actor_restore_deferred" in events
    assert capsys.readouterr().out == ""
