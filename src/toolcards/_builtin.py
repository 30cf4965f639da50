"""The built-in card types: tag -> (module, class). Imported only when a card is used."""

from __future__ import annotations

BUILTIN_CARDS: dict[str, tuple[str, str]] = {
    "SkillTool": ("toolcards.tools.skills.card", "SkillTool"),
    "WorkspaceTool": ("toolcards.tools.workspace.card", "WorkspaceTool"),
    "PlanningTool": ("toolcards.tools.planning.card", "PlanningTool"),
    "KnowledgeGraphTool": ("toolcards.tools.knowledge_graph.card", "KnowledgeGraphTool"),
    "VectorStoreTool": ("toolcards.tools.vector_store.card", "VectorStoreTool"),
    "SearchTool": ("toolcards.tools.search.card", "SearchTool"),
    "TeamTool": ("toolcards.tools.team.card", "TeamTool"),
    "NotificationTool": ("toolcards.tools.notification.card", "NotificationTool"),
    "MCPTool": ("toolcards.tools.mcp.card", "MCPTool"),
    "ExecTool": ("toolcards.tools.exec.card", "ExecTool"),
}
