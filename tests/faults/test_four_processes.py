"""The fault suite under load (issue #32): four processes of one team write tasks through
governed calls on a real PostgreSQL (Pykka copies of the planning actor in each), while the
server is crash-restarted (`pg_ctl restart -m immediate`), stopped until every process has
retried a call three times through the outage, frozen (SIGSTOP), and a TCP proxy in front of
it cuts a COMMIT (its answer lost, or the COMMIT itself). A process retries a call that
answered "retry" under the same call id, as an agent's durable run does. After recovery the
store, every process's actor and the audit trails hold exactly the acknowledged writes: no
phantom, no loss, no duplicate; and a subscriber of the team's events, in the test's own
process, received every event once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from faults.writers import Writer, check_events_once, check_exactly_acknowledged, progress
from support.pg_proxy import CommitCuttingProxy
from support.scripted import wait_until
from support.servers import PostgresServer
from toolcards.runtime import Team

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

PROCESSES = 4
TEAM = "fault-team"


def _cut_commits(proxy: CommitCuttingProxy, writers: list[Writer]) -> None:
    """Cut a COMMIT of a coming write of two writers: its answer lost (it committed), then
    the COMMIT itself (it did not); neither writer can tell which happened to it."""
    for writer, mode in ((writers[0], "answer"), (writers[1], "commit")):
        cuts = proxy.cuts
        proxy.arm(f'"{writer.me}-{len(writer.acked) + 2}"', mode)  # its description, quoted
        assert wait_until(lambda cuts=cuts: proxy.cuts > cuts, 60)


def test_four_processes_through_restart_stop_and_freeze_hold_exactly_the_acknowledged(
    pg: PostgresServer, pg_url: str, tmp_path: Path
) -> None:
    events: list[tuple[str, int]] = []
    watcher = Team(TEAM, store=pg_url)
    subscription = watcher.subscribe(lambda e: events.append((e.tool_id, e.seq)))
    proxy = CommitCuttingProxy(pg_url)  # the writers reach the server through it
    writers = [Writer(proxy.url, f"w{n}", tmp_path, TEAM) for n in range(PROCESSES)]
    try:
        progress(writers, 5)
        pg.restart("immediate")  # a crash restart mid-run
        progress(writers, 5)
        pg.stop("fast")  # down until every writer has retried three calls through it
        progress(writers, 3, 60, count=lambda w: w.retries)
        pg.start()
        progress(writers, 5)
        pg.freeze()  # SIGSTOP: a hung server, not a refused connection
        time.sleep(3)
        pg.thaw()
        progress(writers, 5)
        _cut_commits(proxy, writers)
        progress(writers, 5)
    finally:
        (tmp_path / "stop").touch()
        pg.thaw()
        if pg.process is None or pg.process.poll() is not None:
            pg.start()  # the writers finish their last call and read the board
        errors = [w.finish() for w in writers]
        proxy.close()
    try:
        check_events_once(pg_url, TEAM, events, subscription)
    finally:
        watcher.stop()
    stored = check_exactly_acknowledged(pg_url, TEAM, writers)
    retries = sum(w.retries for w in writers)
    print(f"{len(stored)} acknowledged and stored, {retries} retries, "
          f"{len(events)} events received once")  # fmt: skip
    assert retries > 0, errors  # the faults did reach the writers
