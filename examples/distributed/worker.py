"""An agent worker of team t1: binds the team's planning board and writes to it."""

import sys

from toolcards import PlanningTool
from toolcards.runtime import Team

with Team("t1", store="postgresql://toolcards@127.0.0.1:5432/toolcards", system="ray") as team:
    bound = team.bind([PlanningTool(vector_store=False)], member=sys.argv[1])
    tools = {t.__name__: t for t in bound.get_tools()}
    print(tools["update_planning"](create=[{"description": f"from {sys.argv[1]}"}]))
    print(tools["search_planning"]())  # every process's tasks: one board for the team
