"""TeamTool: hire and fire members, roster and roles as context, and team activity."""

from toolcards.tools.team.card import TeamTool
from toolcards.tools.team.params import (
    ActivitySummarizer,
    FireMember,
    FireMembers,
    HireMember,
    HireMembers,
    TeamActivity,
    TeamMembersView,
    TeamRolesView,
)

__all__ = [
    "ActivitySummarizer",
    "FireMember",
    "FireMembers",
    "HireMember",
    "HireMembers",
    "TeamActivity",
    "TeamMembersView",
    "TeamRolesView",
    "TeamTool",
]
