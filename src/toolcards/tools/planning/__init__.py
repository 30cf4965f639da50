"""PlanningTool: a team-shared task board with optimistic concurrency."""
