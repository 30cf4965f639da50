"""MCPTool: an MCP server's tools, with reconnection, failure isolation and OAuth."""

from toolcards.tools.mcp.card import MCPOAuth, MCPTool
from toolcards.tools.mcp.trust import CommandRule, MCPTrust, UntrustedCommand

__all__ = ["CommandRule", "MCPOAuth", "MCPTool", "MCPTrust", "UntrustedCommand"]
