"""Surfaces: the governed tools as an MCP server and a command line, from one config.

``toolcards serve`` / ``toolcards call`` read a YAML config (:mod:`.config`); code-built
registries use :func:`serve_mcp` and :func:`run_cli`. Names are imported on first use.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing is not imported at start-up (see toolcards._lazy)
if TYPE_CHECKING:
    from typing import Any

_NAMES = {
    "serve_mcp": "toolcards.surfaces.api",
    "run_cli": "toolcards.surfaces.api",
    "SurfaceConfig": "toolcards.surfaces.config",
    "ConfigError": "toolcards.surfaces.config",
    "load_config": "toolcards.surfaces.config",
    "hash_token": "toolcards.surfaces.config",
    "SurfaceRuntime": "toolcards.surfaces.runtime",
    "TokenTable": "toolcards.surfaces.http.tokens",
    "ExitCode": "toolcards.surfaces.outcomes",
    "classify": "toolcards.surfaces.outcomes",
    "GovernedMCPServer": "toolcards.surfaces.mcp_server.server",
    "MCPOptions": "toolcards.surfaces.mcp_server.options",
    "mcp_with_dashboard": "toolcards.surfaces.combined",
    "run_mcp_with_dashboard": "toolcards.surfaces.combined",
}

if TYPE_CHECKING:
    from toolcards.surfaces.api import run_cli, serve_mcp
    from toolcards.surfaces.combined import mcp_with_dashboard, run_mcp_with_dashboard
    from toolcards.surfaces.config import ConfigError, SurfaceConfig, hash_token, load_config
    from toolcards.surfaces.http.tokens import TokenTable
    from toolcards.surfaces.mcp_server.options import MCPOptions
    from toolcards.surfaces.mcp_server.server import GovernedMCPServer
    from toolcards.surfaces.outcomes import ExitCode, classify
    from toolcards.surfaces.runtime import SurfaceRuntime

__all__ = [
    "ConfigError",
    "ExitCode",
    "GovernedMCPServer",
    "MCPOptions",
    "SurfaceConfig",
    "SurfaceRuntime",
    "TokenTable",
    "classify",
    "hash_token",
    "load_config",
    "mcp_with_dashboard",
    "run_cli",
    "run_mcp_with_dashboard",
    "serve_mcp",
]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'toolcards.surfaces' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
