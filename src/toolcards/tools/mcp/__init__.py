"""MCPTool: an MCP server's tools, with reconnection, failure isolation and OAuth."""

from toolcards._lazy import renamed_names
from toolcards.core.trust import CommandRule, HostTrust, UntrustedField
from toolcards.tools.mcp.card import MCPTool
from toolcards.tools.mcp.settings import MCPAuth, MCPOAuth, MCPSampling

__all__ = [
    "CommandRule",
    "HostTrust",
    "MCPAuth",
    "MCPOAuth",
    "MCPSampling",
    "MCPTool",
    "UntrustedField",
]
__getattr__ = renamed_names(
    __name__, {"MCPTrust": "HostTrust", "UntrustedCommand": "UntrustedField"}
)
