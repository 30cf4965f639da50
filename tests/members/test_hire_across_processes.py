"""Hires from several processes of one team on a shared store (real PostgreSQL, real
processes): the team's cap and the members' names hold across them, and the claim of a name
being hired neither outlives a failed start nor, left by a process that died, blocks the name
for ever."""

from __future__ import annotations

import subprocess
import textwrap
import time

import pytest

from support.launch import PYTHON
from toolcards.runtime import RoleProfile, Team
from toolcards.runtime.member_restore import ROSTER
from toolcards.runtime.relay import STALE_AFTER

HIRER = textwrap.dedent(
    """
    import sys
    from toolcards.runtime import RoleProfile, Team
    from toolcards.runtime.profiles import check_model

    check_model("test")  # the model's modules imported: the hires race, not the imports

    profiles = [RoleProfile(role="r", model="test")]
    team = Team("race", store=sys.argv[1], profiles=profiles, max_members=2)
    print("ready", flush=True)
    for line in sys.stdin:  # a name to hire ("-": the role's next default name), or "stop"
        wanted = line.strip()
        if wanted == "stop":
            break
        try:
            print("hired", team.hire("r", None if wanted == "-" else wanted), flush=True)
        except ValueError as exc:
            print("refused", exc, flush=True)
    print("running", *(n for n in team.actor_names() if n.startswith("@")), flush=True)
    team.stop()
    """
)


def _profiles() -> list[RoleProfile]:
    return [RoleProfile(role="r", model="test")]


@pytest.mark.timeout(120)
def test_processes_hiring_at_once_keep_the_teams_cap_and_distinct_names(postgres_url: str) -> None:
    """Each process checked the cap and picked the name against the roster rows, which a
    process wrote only once its member had started: three processes hiring at once all passed
    both, and ran three members named ``@alice`` (then three ``@r-1``) in a team of 2."""
    procs = [
        subprocess.Popen(
            [PYTHON, "-c", HIRER, postgres_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]

    def at_once(line: str) -> list[str]:
        """What every process answered to ``line``, given to all of them together."""
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{line}\n")
            proc.stdin.flush()
        return sorted(proc.stdout.readline().strip() for proc in procs if proc.stdout)

    try:
        assert [proc.stdout.readline().strip() for proc in procs if proc.stdout] == ["ready"] * 3
        taken = "refused the name @alice is already taken in team race"
        assert at_once("alice") == ["hired @alice", taken, taken]
        full = "refused team race is limited to 2 members; fire one first"
        assert at_once("-") == ["hired @r-1", full, full]
        running = [name for line in at_once("stop") for name in line.split()[1:]]
        assert sorted(running) == ["@alice", "@r-1"]
        assert all(proc.wait(60) == 0 for proc in procs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


def test_a_claim_left_by_a_process_that_died_holds_its_name_only_while_it_may_be_alive(
    postgres_url: str,
) -> None:
    """The claim row of a process that died starting a member stays: it takes the name while
    it is fresh or its holder still beats, and is dropped by the next hire after that."""
    with Team("t", store=postgres_url, profiles=_profiles()) as team:
        roster = team.state_of(ROSTER)
        old = time.time() - STALE_AFTER
        roster.put("claim:@alice", {"role": "r", "holder": "gone", "at": time.time()})
        with pytest.raises(ValueError, match="the name @alice is already taken"):
            team.hire("r", "alice")
        roster.put("holder:beating", time.time())
        roster.put("claim:@alice", {"role": "r", "holder": "beating", "at": old})
        with pytest.raises(ValueError, match="the name @alice is already taken"):
            team.hire("r", "alice")
        roster.put("claim:@alice", {"role": "r", "holder": "gone", "at": old})
        assert team.hire("r", "alice") == "@alice"
        assert list(roster.items("claim:")) == []


def test_a_hire_whose_member_fails_to_start_leaves_no_claim(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Team("t", store=postgres_url, profiles=_profiles(), max_members=1) as team:

        def no_start(name: str, factory: object) -> None:
            raise RuntimeError("no thread to start")

        monkeypatch.setattr(team, "spawn", no_start)
        with pytest.raises(RuntimeError, match="no thread to start"):
            team.hire("r", "alice")
        assert list(team.state_of(ROSTER).items("claim:")) == []
        monkeypatch.undo()
        assert team.hire("r", "alice") == "@alice"


def test_a_first_hire_beats_while_its_member_starts(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's heartbeat row was written once its first member had started: while that
    member started (a Ray actor waiting for a node), its claim was live only by its age, and
    past :data:`STALE_AFTER` another process took the claim for stale and hired the name too."""
    with Team("t", store=postgres_url, profiles=_profiles()) as team:
        roster = team.state_of(ROSTER)
        spawn = team.spawn
        beats: list[object] = []

        def starting(name: str, factory: object) -> object:
            [(_, claim)] = roster.items("claim:")  # what another process reads meanwhile
            beats.append(roster.get(f"holder:{claim['holder']}"))
            return spawn(name, factory)  # type: ignore[arg-type]

        monkeypatch.setattr(team, "spawn", starting)
        assert team.hire("r", "alice") == "@alice"
        [beat] = beats
        assert isinstance(beat, float) and time.time() - beat < STALE_AFTER
