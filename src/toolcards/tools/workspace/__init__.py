"""WorkspaceTool: a team's shared filesystem as eleven contained, model-robust file tools."""
