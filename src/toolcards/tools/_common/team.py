"""The one path from a card to its team: the observer the card is bound to.

A card bound inside a team holds that team's observer (an ``ActorToolObserver``); an unbound
card, or one owned by something that is not a team member (a plain agent), uses the process's
implicit in-memory team, :meth:`Team.implicit() <toolcards.runtime.Team.implicit>`.
"""

from __future__ import annotations

from toolcards.core.card import ToolCard
from toolcards.core.errors import ToolObserverGone
from toolcards.core.observer import ActorToolObserver, ToolObserver
from toolcards.runtime.host import TeamHost
from toolcards.runtime.host_events import HostObserved
from toolcards.runtime.observer import TeamObserver


def team_observer(card: ToolCard) -> ActorToolObserver:
    """The observer through which ``card`` reaches its team's actors.

    A card whose owner is gone raises ``ToolObserverGone`` (falling back to another team would
    silently split its state); a stopped team raises ``TeamStopped`` on its first actor call.
    """
    observer = card.observer_or_none()
    if isinstance(observer, ActorToolObserver):
        return observer
    if observer is None and card.observer_attached:
        raise ToolObserverGone(f"the owner of {type(card).__name__} is gone")
    # lazy: the runtime, ~3x python -c pass; a card imports without it
    from toolcards.runtime.team import Team

    implicit = Team.implicit().observer_for("user")
    if isinstance(observer, ToolObserver):  # a host observer hears the events of its calls
        return HostObserved(implicit, observer)
    return implicit


def team_of(card: ToolCard) -> TeamHost:
    """The team of a card that reads or manages the team itself (roster, roles, events): its
    team observer's team, else the implicit team."""
    observer = team_observer(card)
    if isinstance(observer, TeamObserver):
        return observer.team
    # lazy: the runtime, ~3x python -c pass; a card imports without it
    from toolcards.runtime.team import Team

    return Team.implicit()
