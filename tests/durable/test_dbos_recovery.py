"""A governed agent under pydantic-ai's DBOS integration on a real PostgreSQL: its process is
SIGKILLed in the middle of a run, started again, and the run resumes.

Killed after the governed tool call (a line appended to a file): the recovered run replays the
call from its recorded result, so the line is written once and audited once. Killed while the
tool ran: the call is not repeated (the tool is not idempotent), the model is told, and the
call has one ``interrupted`` audit row."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.launch import PYTHON
from support.servers import PostgresServer
from toolcards.governance import AuditLog

pytest.importorskip("dbos")
pytestmark = pytest.mark.slow  # two agent processes, each importing pydantic-ai and DBOS

AGENT = Path(__file__).with_name("writer_agent.py")
TIMEOUT = 180.0


def _start(base: Path, dbs: tuple[str, str], pause: str) -> subprocess.Popen[bytes]:
    """The agent, forked by the worker's fork server (:mod:`support.launch`); its stdout is a
    pipe whose end tells the test the process itself is gone (it outlives its killed
    launcher by a moment)."""
    with (base / "agent.log").open("ab") as err:
        argv = [PYTHON, str(AGENT), *dbs, str(base), pause]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)


def _log(base: Path) -> str:
    return (base / "agent.log").read_text()


def _await_ready(base: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not (base / "ready").exists():
        if proc.poll() is not None:
            raise AssertionError(f"the agent exited ({proc.returncode}): {_log(base)[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the agent never paused: {_log(base)[-3000:]}")
        time.sleep(0.05)


def _kill_and_recover(server: PostgresServer, base: Path, pause: str) -> Path:
    """The run, SIGKILLed where ``pause`` says it waits, then started again to its end."""
    dbs = (server.fresh_database(f"sys_{pause}"), server.fresh_database(f"results_{pause}"))
    (base / "workspace").mkdir()
    first = _start(base, dbs, pause)
    try:
        _await_ready(base, first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)  # to the end of its stdout: the process is gone
    assert first.returncode == -signal.SIGKILL
    assert not (base / "output").exists()
    (base / "gate").write_text("open")
    second = _start(base, dbs, pause)
    try:
        second.communicate(timeout=TIMEOUT)
        assert second.returncode == 0, _log(base)[-3000:]
    finally:
        if second.poll() is None:
            second.kill()
            second.wait(timeout=30)
    return base


def _rows(base: Path) -> list[tuple[str, str]]:
    with AuditLog(base / "audit.db") as audit:
        return [(row.principal, row.outcome) for row in audit.query(tool="append_line")]


def _lines(base: Path) -> list[str]:
    return (base / "workspace" / "notes.txt").read_text().splitlines()


@pytest.fixture(scope="module")
def killed_after_the_call(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return _kill_and_recover(postgres_server, tmp_path_factory.mktemp("after"), "after")


@pytest.fixture(scope="module")
def killed_during_the_call(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return _kill_and_recover(postgres_server, tmp_path_factory.mktemp("during"), "during")


def test_a_recovered_run_completes(killed_after_the_call: Path) -> None:
    assert (killed_after_the_call / "output").read_text() == "done: appended 'first note'"


def test_the_side_effect_of_a_replayed_call_happens_once(killed_after_the_call: Path) -> None:
    assert _lines(killed_after_the_call) == ["first note"]


def test_a_replayed_call_has_a_row_of_its_own(killed_after_the_call: Path) -> None:
    assert _rows(killed_after_the_call) == [("agent.writer", "ok"), ("agent.writer", "replayed")]


def test_a_replayed_call_is_answered_from_its_record(killed_after_the_call: Path) -> None:
    assert _log(killed_after_the_call).count("replayed append_line") == 1


def test_a_call_its_process_died_in_is_not_run_again(killed_during_the_call: Path) -> None:
    assert _lines(killed_during_the_call) == ["first note"]


def test_the_model_is_told_the_interrupted_call_was_not_repeated(
    killed_during_the_call: Path,
) -> None:
    output = (killed_during_the_call / "output").read_text()
    assert output.startswith("done: error: append_line was interrupted")
    assert "it is not run again" in output


def test_an_interrupted_call_has_one_audit_row(killed_during_the_call: Path) -> None:
    assert _rows(killed_during_the_call) == [("agent.writer", "interrupted")]
