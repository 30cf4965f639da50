"""MCPTool: an MCP server's tools, with reconnection, failure isolation and OAuth."""

from toolcards.tools.mcp.card import MCPOAuth, MCPTool

__all__ = ["MCPOAuth", "MCPTool"]
