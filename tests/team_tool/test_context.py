"""Roster and roles as per-turn context: a full block, then "joined" / "left" deltas."""

from __future__ import annotations

from toolcards import TeamTool
from toolcards.runtime import Team
from toolcards.tools.team.params import TeamMembersView


def test_first_block_lists_roster_and_roles(team: Team) -> None:
    lead = team.hire("lead")
    block = team.bind([TeamTool()], member=lead).context_updater().next_block()
    assert block is not None
    assert "## Team members\n- @lead-1 (lead) - you" in block
    assert "- worker: Does the work" in block


def test_a_hire_shows_as_joined(team: Team) -> None:
    lead = team.hire("lead")
    updater = team.bind([TeamTool()], member=lead).context_updater()
    updater.next_block()
    team.hire("worker")
    assert (
        updater.next_block() == "Context update 2\n\n## Team members\n+ joined: @worker-1 (worker)"
    )


def test_a_fire_shows_as_left(team: Team) -> None:
    lead = team.hire("lead")
    worker = team.hire("worker")
    updater = team.bind([TeamTool()], member=lead).context_updater()
    updater.next_block()
    team.fire(worker)
    block = updater.next_block()
    assert block == "Context update 2\n\n## Team members\n- left: @worker-1 (worker)"


def test_an_unchanged_team_adds_no_block(team: Team) -> None:
    lead = team.hire("lead")
    updater = team.bind([TeamTool()], member=lead).context_updater()
    updater.next_block()
    assert updater.next_block() is None


def test_roster_context_can_be_switched_off(team: Team) -> None:
    lead = team.hire("lead")
    card = TeamTool(team_members=TeamMembersView(expose=set()), team_roles=False)
    assert team.bind([card], member=lead).context_updater().next_block() is None
