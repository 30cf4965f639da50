"""WorkspaceTool: a team's shared filesystem as eleven contained, model-robust file tools."""

from toolcards.tools.workspace.access import AccessRefused, list_files, read_bytes

__all__ = ["AccessRefused", "list_files", "read_bytes"]
